"""The prediction interface (docs/predict.md, "Prediction interface"): what comes next, how many operations remain
in the current I/O phase and when it ends, on call streams whose answers are known, and on a traced program."""
from __future__ import annotations

import sys

from ioloom import open_trace
from ioloom.predict.interface import Predictor
from ioloom.predict.source import process_operations

MIB = 1 << 20
MS = 1_000_000


class Clock:
    """Feeds calls to a predictor: each takes 10 us and follows the previous one after 20 us (one phase)."""

    def __init__(self, predictor: Predictor):
        self.p, self.t = predictor, 0

    def call(self, name: str, path: str, offset: int = -1, size: int = 0, after: int = 20_000) -> None:
        self.t += after
        assert self.p.observe(name, path, offset, size, self.t, self.t + 10_000)
        self.t += 10_000

    def step(self, i: int, writes: int, compute: int = 50 * MS) -> None:
        """One output step: open a file, `writes` writes of 1 MiB, close, after `compute` ns of computation."""
        path = f"/scratch/out_{i:04d}.dat"
        self.call("open64", path, after=compute)
        for j in range(writes):
            self.call("write", path, j * MIB, MIB)
        self.call("close", path)


def test_next_operation_and_phase_of_a_regular_loop():
    p = Predictor()
    assert p.next() == [] and p.phase().remaining is None  # nothing learnt yet
    clock = Clock(p)
    for i in range(6):
        clock.step(i, 24)
    clock.call("open64", "/scratch/out_0006.dat", after=50 * MS)
    for j in range(10):
        clock.call("write", "/scratch/out_0006.dat", j * MIB, MIB)
    [after] = p.next()
    assert (after.symbol, after.kind, after.size, after.offset, after.weight) == ("write out_#.dat", "write", MIB,
                                                                                   10 * MIB, 1.0)
    assert after.start_ns == clock.t + 20_000  # the immediate gap learnt
    phase = p.phase()
    assert (phase.done, phase.length, phase.remaining) == (11, 26, 15)  # open, 24 writes, close
    assert phase.end_ns == clock.t + 15 * 30_000  # 30 us from one call's end to the next's
    for j in range(10, 24):
        clock.call("write", "/scratch/out_0006.dat", j * MIB, MIB)
    [close] = p.next()
    assert close.symbol == "close out_#.dat" and p.phase().remaining == 1
    clock.call("close", "/scratch/out_0006.dat")
    assert p.phase().remaining == 0
    [next_open] = p.next()
    assert next_open.symbol == "open64 out_#.dat" and next_open.start_ns >= clock.t + 50 * MS * 0.99


def test_phase_asks_the_model_only_past_the_predicted_length():
    p = Predictor()
    clock = Clock(p)
    for i in range(4):
        clock.step(i, 24)
    asked = []
    predict = p.model.predict
    p.model.predict = lambda: asked.append(len(asked)) or predict()  # counts the model's predictions
    clock.call("open64", "/scratch/out_0004.dat", after=50 * MS)
    for j in range(24):
        clock.call("write", "/scratch/out_0004.dat", j * MIB, MIB)
        assert p.phase().remaining == 24 - j  # within the predicted length of 26: no prediction asked
    assert not asked
    clock.call("close", "/scratch/out_0004.dat")
    assert p.phase().remaining == 0 and len(asked) == 1  # at the predicted length: is the next call distant?


def test_phase_lengths_that_alternate_are_learnt():
    """Every third step also writes a restart (98 operations instead of 26): the length model learns it."""
    p = Predictor()
    clock = Clock(p)
    for i in range(12):
        clock.step(i, 96 if i % 3 == 2 else 24)
    clock.call("open64", "/scratch/out_0012.dat", after=50 * MS)
    assert p.phase().length == 26  # step 12: 12 % 3 == 0
    for j in range(24):
        clock.call("write", "/scratch/out_0012.dat", j * MIB, MIB)
    clock.call("close", "/scratch/out_0012.dat")
    clock.step(13, 24)
    clock.call("open64", "/scratch/out_0014.dat", after=50 * MS)
    assert p.phase().length == 98 and p.phase().remaining == 97


def test_calls_that_are_not_operations_are_refused():
    p = Predictor()
    assert not p.observe("lseek", "/scratch/a", 0, 0, 0, 10)
    assert not p.observe("fsync", "/scratch/a", -1, -1, 20, 30)
    assert p.next() == [] and p.phase().done == 0


def test_a_traced_program_through_the_interface(ioloom_cli, tmp_path):
    """The operations of a real trace fed in order: at the start of each step's file the phase length is known."""
    from test_predict_cli import LOOP

    script, out = tmp_path / "loop.py", tmp_path / "out"
    script.write_text(LOOP)
    out.mkdir()
    ioloom_cli("run", "-o", tmp_path / "trace", "--", sys.executable, script, out)
    [process] = process_operations(open_trace(tmp_path / "trace"))
    p, right, steps = Predictor(), 0, 0
    names = process.symbols.names
    for op in process.operations:
        call = names[op.symbol].split()[0]
        p.observe(call, op.place, op.offset, op.size, op.t_start, op.t_end)
        if call == "open64" and "step_" in op.place:
            steps += 1
            right += p.phase().length == 27  # open, 24 writes, the header's pwrite, close
    assert steps == 60 and right >= 55  # the first steps teach it (and start-up reads join the first phase)


def _process(steps: list[int]):
    """A ProcessOperations of output steps (open, n writes of 1 MiB, close; 50 ms apart): the Clock's calls."""
    from ioloom.predict.model import Operation
    from ioloom.predict.source import ProcessOperations, Symbols

    symbols, operations, t = Symbols(), [], 0
    for i, writes in enumerate(steps):
        t += 50 * MS
        calls = [("open64", "open", -1, 0), *(("write", "write", j * MIB, MIB) for j in range(writes)),
                 ("close", "close", -1, 0)]
        for call, kind, offset, size in calls:
            t += 20_000
            operations.append(Operation(symbols.of(call, kind, "/scratch/out_#.dat"), kind, "/scratch/out_#.dat", i,
                                        offset, size, t, t + 10_000))
            t += 10_000
    return ProcessOperations("pid 1", operations, symbols)


def test_phases_as_the_interface_foresaw_them():
    """Steps of 26 operations, every third of 98: each phase found, its length predicted once learnt, its end
    predicted within the time of a few operations."""
    from ioloom.predict.phases import phase_figures, predicted_phases

    steps = [96 if i % 3 == 2 else 24 for i in range(12)]
    phases = predicted_phases(_process(steps))
    assert [p.operations for p in phases] == [w + 2 for w in steps]
    assert phases[0].predicted_operations is None and phases[0].first == 0 and phases[1].first == 26
    assert all(p.predicted_operations == p.operations for p in phases[6:])  # the alternation learnt
    assert [p.written for p in phases] == [w * MIB for w in steps] and phases[0].predicted_written is None
    assert all(p.predicted_written == p.written for p in phases[6:])  # the bytes written too
    figures = phase_figures(phases)
    assert figures["phases"] == 12 and figures["lengths_predicted"] == 11 and figures["length_right_pct"] >= 50
    assert figures["written_right_pct"] == figures["length_right_pct"]  # a step's bytes follow its writes
    last = phases[-1]
    assert abs(last.predicted_end_ns - last.end_ns) <= 2 * 30_000  # 30 us from one call's end to the next's


def test_phases_learn_copies_and_aio_results_by_their_direction():
    """A process that starts with an aio read's result and copies both ways: each is learnt as the read or write
    it is (the trace's direction), so the phase holds all of them (it failed on the first call)."""
    from ioloom.predict.model import Operation
    from ioloom.predict.phases import predicted_phases
    from ioloom.predict.source import ProcessOperations, Symbols

    symbols, place, US = Symbols(), "/scratch/in.dat", 30_000
    calls = [("aio_return", "read"), ("copy_file_range", "read"), ("copy_file_range", "write"), ("pwrite", "write")]
    operations = [Operation(symbols.of(call, kind, place), kind, place, 0, i * MIB, MIB, i * US, i * US + 10_000)
                  for i, (call, kind) in enumerate(calls)]
    [phase] = predicted_phases(ProcessOperations("pid 1", operations, symbols))
    assert phase.operations == 4 and phase.end_ns == operations[-1].t_end


def test_predict_phases_option(ioloom_cli, tmp_path):
    """`ioloom predict --phases` on a traced program: its steps are phases, their lengths predicted."""
    import json

    from test_predict_cli import LOOP

    script, out = tmp_path / "loop.py", tmp_path / "out"
    script.write_text(LOOP)
    out.mkdir()
    ioloom_cli("run", "-o", tmp_path / "trace", "--", sys.executable, script, out)
    [process] = json.loads(ioloom_cli("predict", tmp_path / "trace", "--phases", "--json").stdout)["processes"]
    phases = process["phases"]
    assert phases["phases"] == len(phases["list"]) >= 60  # each step follows a 2 ms sleep: a phase of its own
    assert sum(p["operations"] for p in phases["list"]) == process["operations"]
    # open, 24 writes, the header's pwrite, close (a scheduling delay over 1 ms may split a few)
    assert sum(p["operations"] == p["predicted_operations"] == 27 for p in phases["list"]) >= 30
    assert "I/O phases (interface)" in ioloom_cli("predict", tmp_path / "trace", "--phases").stdout
