"""The predictor inside the tracer (IOLOOM_STACKS, IOLOOM_PREDICT; docs/predict.md, "In the tracer"): call-stack
symbols stable across runs, the C model's predictions equal to the Python model's on the same symbols, the grammar
cap reported, the event stream unchanged, and a damaged side stream said, never a traceback."""
from __future__ import annotations

import json
import platform
from pathlib import Path

import pytest

from ioloom import paths
from ioloom.predict.side import read_side, side_path
from ioloom.trace import open_trace

STEPS = 12


def _traced(ioloom_cli, tmp_path: Path, name: str, env: dict[str, str], *args: str,
            program: str = "ioloom-predict-loop", steps: int = STEPS) -> Path:
    """Runs ioloom-predict-loop (or its build with frame pointers) under `ioloom run` with `env`; the trace's
    directory."""
    out, trace = tmp_path / f"{name}-out", tmp_path / name
    out.mkdir()
    ioloom_cli("run", "-o", trace, "--", paths.native_bin(program), out, str(steps), *args, env=env)
    return trace


def _side(trace: Path):
    streams = sorted(trace.glob("*.ioloom"))
    assert len(streams) == 1
    return read_side(side_path(streams[0]))


def test_stack_symbols_are_the_same_in_two_runs(ioloom_cli, tmp_path):
    if Path("/proc/sys/kernel/randomize_va_space").read_text().strip() == "0":
        pytest.skip("ASLR is off on this machine: two runs would load every module at the same address")
    env = {"IOLOOM_STACKS": "3"}
    first, second = (_side(_traced(ioloom_cli, tmp_path, name, env)) for name in ("first", "second"))
    assert first.symbols == second.symbols and first.calls == second.calls
    loop = str(paths.native_bin("ioloom-predict-loop").resolve())
    writes = [s for s in first.symbols.values() if s.op == "fwrite"]
    # write_block's one fwrite, called from fields() and particles(): their call sites tell the writes apart
    assert len({s.frames[0] for s in writes}) == 1 and len(writes) >= 2
    assert all(f.module == loop and f.offset > 0 for s in writes for f in s.frames[:2])
    assert first.info["predict"] == "0" and first.npredicted == [0] * len(first.calls)
    # one frame: the call site only, one fwrite symbol
    one = _side(_traced(ioloom_cli, tmp_path, "one", {"IOLOOM_STACKS": "1"}))
    assert len([s for s in one.symbols.values() if s.op == "fwrite"]) == 1


def _call_operations(trace: Path, side) -> list[tuple[str, int, int, int]]:
    from ioloom.predict.source import COLUMNS, call_operations

    stream = open_trace(trace).streams[0]
    rows = [row for table in stream.ranges(COLUMNS) for row in zip(*(table.column(c).to_pylist() for c in COLUMNS))]
    return call_operations(rows, side)


def test_the_tracers_predictions_are_the_python_models(ioloom_cli, tmp_path):
    """The tracer's symbols, sizes, offsets and gaps are the Python models' at every call (docs/predict.md, "The
    side stream", version 2), and on the loop's last steps the sizes and offsets of its calls are predicted."""
    from ioloom.predict.model import Sequence
    from ioloom.predict.online import model_symbols, python_run

    trace = _traced(ioloom_cli, tmp_path, "trace", {"IOLOOM_PREDICT": "1", "IOLOOM_STACKS": "2"})
    side = _side(trace)
    # per step: fopen, fprintf, 7 fwrite, fclose, open, pwrite, close
    assert len(side.calls) == STEPS * 13 and side.info["predict"] == "1" and side.major == 2
    sequence = Sequence(65536, local_cap=int(side.info["local_cap"]))
    calls, predicted, _ = model_symbols(side)
    for symbol, kept, count in zip(calls, predicted, side.npredicted):
        mine = sorted(sequence.predicted())
        assert (tuple(mine[:8]), len(mine)) == (kept, count)
        sequence.input(symbol)
    assert int(side.info["grammar_size"]) == sequence.grammar.size
    operations = _call_operations(trace, side)
    runs = list(python_run(side, operations))
    assert all(same for _, same in runs) and [mine for mine, _ in runs] == [
        tuple(sorted(symbols)) for symbols, _ in python_run(side, None)]  # the process model's symbols: its sequence's
    # the last step: its header and blocks, sizes and offsets; log.dat's pwrite at step x 512 after an open, its
    # size (an offset that grows by 512 from one open to the next is not a change from the file's start)
    last = range(len(side.calls) - 13, len(side.calls))
    data = [i for i in last if operations[i][0] in ("read", "write")]
    exact = [any((c.symbol, c.key, c.offset, c.size) == (side.calls[i], side.call_keys[i], *operations[i][1:3])
                 for c in side.predicted[i]) for i in data]
    assert len(data) == 9 and exact == [True] * 8 + [False]
    assert [c.size for c in side.predicted[data[-1]]] == [512]
    assert sorted(Path(k).name for k in side.keys.values()) == ["log.dat", "step_#.dat"]


def test_a_read_ends_where_its_bytes_moved_end(ioloom_cli, tmp_path):
    """fgets asks for its buffer and moves a line: the next read is counted from the end of the line, in the tracer
    as in the Python model (docs/predict.md, version 1.4), so a file read once line by line, each line of a new
    length, has its offsets predicted from the second read on (counted from the bytes asked, none of the reads': 49.9%
    of all offsets)."""
    from ioloom.predict.cli import analyse
    from ioloom.predict.model import Options
    from test_trace_native import compile_program

    lines = 200
    ioloom_cli("run", "-o", tmp_path / "trace", "--", compile_program("predict_lines.c"), tmp_path / "input.txt",
               str(lines), env={"IOLOOM_PREDICT": "1", "IOLOOM_STACKS": "1"})
    [process] = analyse(tmp_path / "trace", Options())
    reads = lines + 1  # the last, at the end of the file, moves nothing
    assert process["operations"] == 1 + lines + 1 + 1 + reads + 1  # fopen, fprintf, fclose, fopen, fgets, fclose
    assert process["online"]["same_candidates_pct"] == 100
    assert process["offset_accuracy_pct"] >= 100 * (1 - 3 / (lines + reads)), process["offset_accuracy_pct"]


def _shape(side) -> list[tuple]:
    """Each symbol as its operation and, per frame, the module's name without the build's suffix and whether the
    frame is in the program (the offsets differ between two builds of one program)."""
    return [(s.op, [(Path(f.module).name.removesuffix("-fp"), f.offset > 0) for f in s.frames])
            for _, s in sorted(side.symbols.items())]


def test_frame_pointers_give_backtraces_stacks_once_checked(ioloom_cli, tmp_path):
    """ioloom-predict-loop built with frame pointers: every call's stack is walked, and each distinct stack is
    checked once against backtrace(); built without, every stack is backtrace()'s. Both give the same symbols
    (the same frames, in their own build) and calls."""
    env = {"IOLOOM_PREDICT": "1", "IOLOOM_STACKS": "3"}
    plain = _side(_traced(ioloom_cli, tmp_path, "plain", env))
    walked = _side(_traced(ioloom_cli, tmp_path, "walked", env, program="ioloom-predict-loop-fp"))
    assert _shape(plain) == _shape(walked)
    def symbols(side):
        return [tuple((c.symbol, c.key) for c in kept) for kept in side.predicted]

    assert plain.calls == walked.calls and symbols(plain) == symbols(walked)
    distinct = len(walked.symbols)  # here one raw stack per symbol
    assert walked.count("stacks_backtraced") == distinct
    assert walked.count("stacks_walked") == len(walked.calls) - distinct
    assert plain.count("stacks_walked") + plain.count("stacks_backtraced") == len(plain.calls)
    writes = [s for s in walked.symbols.values() if s.op == "fwrite"]
    assert len(writes) == 4 and len({s.frames[1] for s in writes}) == 4  # fields' loop, particles' loop, ...
    again = _side(_traced(ioloom_cli, tmp_path, "again", env, program="ioloom-predict-loop-fp"))
    assert again.symbols == walked.symbols  # (module, offset) frames: the same whatever ASLR did


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the lying frame pointers are set in x86-64 assembly")
def test_lying_frame_pointers_change_nothing(ioloom_cli, tmp_path):
    """ioloom-predict-frames calls pwrite with a frame pointer that is null, unmapped, misaligned, a loop, past
    the stack's end, pointing out of it, and a made-up chain: the program runs as untraced, its file is whole, and
    the stacks are backtrace()'s. x86-64's walk steps frames by their DWARF rules (unwind_rules.c), which read rbp
    only where a frame's rule says it holds the CFA or was saved: the helper has no unwind table, so the walk ends
    at its site as backtrace() does, whatever the register holds, and each stack is checked once."""
    rounds, lies = 5, 7
    out, trace = tmp_path / "frames.dat", tmp_path / "trace"
    env = {"IOLOOM_PREDICT": "1", "IOLOOM_STACKS": "3"}
    ioloom_cli("run", "-o", trace, "--", paths.native_bin("ioloom-predict-frames"), out, str(rounds), env=env)
    data = out.read_bytes()
    assert data == b"".join(bytes([ord("a") + i % 26]) * 64 for i in range(rounds * lies))
    side = _side(trace)
    assert [s.op for s in side.symbols.values()] == ["open", "pwrite", "close"]
    assert len(side.symbols[1].frames) == 1  # backtrace() stops at the assembly helper, which has no unwind table
    assert side.count("stacks_backtraced") == 3  # the open, the pwrite and the close, once each
    assert side.count("stacks_walked") == len(side.calls) - side.count("stacks_backtraced")


def test_a_side_stream_written_in_several_pieces_reads_whole(ioloom_cli, tmp_path):
    """Past 64 KiB the side stream is written out in pieces: each piece's checksums chain on from the last one's
    (the second piece's used to start from 0 again, and was skipped by the reader)."""
    trace = _traced(ioloom_cli, tmp_path, "trace", {"IOLOOM_PREDICT": "1", "IOLOOM_STACKS": "2"}, "7", steps=100)
    side = _side(trace)
    assert next(trace.glob("*.predict")).stat().st_size > 2 * 65536
    assert side.problems == [] and len(side.calls) == int(side.info["calls"]) == 100 * 70
    # cut in two (a process killed): `ioloom predict` says the side stream ends before the events, and where
    path = next(trace.glob("*.predict"))
    path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])
    cut = _side(trace)
    process = json.loads(ioloom_cli("predict", trace, "--json").stdout)["processes"][0]
    assert 0 < len(cut.calls) < 100 * 70 and process["context"] == "operation+file"
    assert process["stacks_unused"].startswith(f"the side stream ends before the events (thread {cut.tids[0]}: "
                                               f"{len(cut.calls)} calls, then ")


def test_the_tracers_grammar_cap_is_reported(ioloom_cli, tmp_path):
    trace = _traced(ioloom_cli, tmp_path, "trace", {"IOLOOM_PREDICT": "1", "IOLOOM_PREDICT_CAP": "32"}, "7")
    side = _side(trace)
    assert int(side.info["grammar_past_cap"]) > 0 and int(side.info["grammar_size"]) <= 32
    report = ioloom_cli("predict", trace).stdout
    assert "tracer's grammar cap reached" in report and "IOLOOM_PREDICT_CAP" in report
    online = json.loads(ioloom_cli("predict", trace, "--json").stdout)["processes"][0]["online"]
    assert online["same_predictions_pct"] == 100 and online["grammar_past_cap"] == int(side.info["grammar_past_cap"])
    assert online["same_candidates_pct"] == 100


def test_the_tracers_memory_cap_is_reported_and_changes_no_event(ioloom_cli, tmp_path):
    """IOLOOM_PREDICT_MEMORY=1 (MiB): random call sites make local models past it; they are refused, counted and
    reported, the program runs as ever and its events are those of a run without the model."""
    env = {"IOLOOM_PREDICT": "1", "IOLOOM_STACKS": "2", "IOLOOM_PREDICT_MEMORY": "1"}
    capped = _traced(ioloom_cli, tmp_path, "capped", env, "7")
    side = _side(capped)
    assert int(side.info["memory_cap"]) == 1 << 20 and int(side.info["memory_refused"]) > 0
    assert 0 < int(side.info["memory_peak"]) <= 1 << 20 and len(side.calls) == int(side.info["calls"]) == STEPS * 70
    report = ioloom_cli("predict", capped).stdout
    assert "tracer's memory cap reached" in report and "IOLOOM_PREDICT_MEMORY" in report
    online = json.loads(ioloom_cli("predict", capped, "--json").stdout)["processes"][0]["online"]
    assert online["memory_refused"] == int(side.info["memory_refused"])
    from ioloom.predict.cli import analyse_trace
    from ioloom.predict.model import Options
    from ioloom.report.prediction import section

    processes = analyse_trace(open_trace(capped), Options(), limit=2000)
    assert "tracer&#x27;s memory cap reached" in section(processes, 2000, len(processes))[0]  # the HTML report's
    assert _events(capped) == _events(_traced(ioloom_cli, tmp_path, "plain", {}, "7"))
    roomy = _side(_traced(ioloom_cli, tmp_path, "roomy", {**env, "IOLOOM_PREDICT_MEMORY": "64"}, "7"))
    assert int(roomy.info["memory_refused"]) == 0 and int(roomy.info["memory_peak"]) > 1 << 20


def test_predict_uses_the_stacks_and_reports_the_tracers_model(ioloom_cli, tmp_path):
    with_stacks = _traced(ioloom_cli, tmp_path, "stacks", {"IOLOOM_PREDICT": "1", "IOLOOM_STACKS": "3"})
    without = _traced(ioloom_cli, tmp_path, "plain", {})
    process = json.loads(ioloom_cli("predict", with_stacks, "--json").stdout)["processes"][0]
    plain = json.loads(ioloom_cli("predict", without, "--json").stdout)["processes"][0]
    assert process["context"] == "call stack+file" and plain["context"] == "operation+file"
    assert process["symbols"] > plain["symbols"]  # fields' and particles' writes are two symbols, not one
    online = process["online"]
    assert online["calls"] == STEPS * 13 and online["same_predictions_pct"] == 100
    assert online["symbol_accuracy_pct"] == online["python_symbol_accuracy_pct"] > 80
    assert "(operation+file: the trace records no call stacks)" in ioloom_cli("predict", without).stdout
    assert "in the tracer (online)" in ioloom_cli("predict", with_stacks).stdout


def _events(trace: Path) -> list[tuple]:
    opened = open_trace(trace)
    table = opened.events(["op", "layer", "file_id", "offset", "req_bytes", "ret_bytes", "aux", "errno", "handle"])
    files = dict(zip(*(opened.files.column(c).to_pylist() for c in ("file_id", "path"))))
    rows = zip(*(table.column(c).to_pylist() for c in table.column_names))
    return [(op, layer, Path(files[f]).name if f >= 0 else None, *rest) for op, layer, f, *rest in rows
            if layer != "process"]  # process events hold the pids


def test_symbols_leave_the_event_stream_as_it_was(ioloom_cli, tmp_path):
    plain = _traced(ioloom_cli, tmp_path, "plain", {})
    predicted = _traced(ioloom_cli, tmp_path, "predicted", {"IOLOOM_PREDICT": "1", "IOLOOM_STACKS": "4"})
    assert not list(plain.glob("*.predict")) and len(list(predicted.glob("*.predict"))) == 1
    assert _events(plain) == _events(predicted)


def test_a_damaged_side_stream_is_said(ioloom_cli, tmp_path):
    trace = _traced(ioloom_cli, tmp_path, "trace", {"IOLOOM_PREDICT": "1"})
    path = next(trace.glob("*.predict"))
    data = bytearray(path.read_bytes())
    data[40] ^= 0xFF  # inside the first chunk
    path.write_bytes(bytes(data))
    out = ioloom_cli("predict", trace)
    assert "side stream:" in out.stdout and "fails its checksum" in out.stdout and "Traceback" not in out.stderr
    path.write_bytes(b"not a side stream at all")
    bad = ioloom_cli("predict", trace, check=False)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "not a side stream" in bad.stderr


THREADS_AND_FORK = """
import os, sys, threading
out = sys.argv[1]
def work(n):
    for i in range(50):
        fd = os.open(f"{out}/t{n}_{i}.dat", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        for j in range(5):
            os.write(fd, b"x" * 4096)
        os.close(fd)
threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
[t.start() for t in threads]
[t.join() for t in threads]
pid = os.fork()
if pid == 0:
    work(9)
    os._exit(0)
os.waitpid(pid, 0)
"""


@pytest.mark.parametrize("frames", ["1", "3"])
def test_threads_and_a_forked_child(ioloom_cli, tmp_path, frames):
    """Four threads' calls make one stream of symbols, joined to the events thread by thread; a forked child
    writes a side stream of its own, with its own symbols. With 3 frames, each thread walks its own stack."""
    import sys

    script, out = tmp_path / "threads.py", tmp_path / "out"
    script.write_text(THREADS_AND_FORK)
    out.mkdir()
    ioloom_cli("run", "-o", tmp_path / "trace", "--", sys.executable, script, out,
               env={"IOLOOM_PREDICT": "1", "IOLOOM_STACKS": frames})
    assert len(list((tmp_path / "trace").glob("*.predict"))) == 2
    processes = json.loads(ioloom_cli("predict", tmp_path / "trace", "--json").stdout)["processes"]
    assert [p["context"] for p in processes] == ["call stack+file"] * 2
    parent, child = sorted(processes, key=lambda p: -p["operations"])
    threads = sorted(len(set(read_side(side_path(s)).tids)) for s in (tmp_path / "trace").glob("*.ioloom"))
    assert threads[0] == 1 and threads[1] >= 4  # the child's one thread; the parent's four writers
    assert parent["operations"] > 4 * 50 * 7 and child["operations"] == 50 * 7
    assert parent["online"]["same_predictions_pct"] == child["online"]["same_predictions_pct"] == 100
    assert parent["online"]["same_candidates_pct"] == child["online"]["same_candidates_pct"] == 100
    if frames == "3" and platform.machine() == "x86_64":  # the child walks with the rules its parent learnt
        small, large = sorted((read_side(side_path(s)) for s in (tmp_path / "trace").glob("*.ioloom")),
                              key=lambda side: len(side.calls))
        assert small.count("unwind_rules") < large.count("unwind_rules")  # the child's INFO counts its own rules


def test_call_sites_under_the_coordination_client(ioloom_cli, tmp_path):
    """Under `ioloom run --coord` the coordination client's write wrapper calls the tracer's: its frames are skipped
    as the tracer's own are, so a program writing from two sites gets two write symbols with one frame, the same
    sites as without the client (here no coordinator answers: the client writes anyway, through its wrapper). The
    client keeps frame pointers, so the walk steps over its frame: backtrace() checks each site once, not each
    write."""
    from test_trace_native import compile_program

    exe = compile_program("coord_two_sites.c")
    sites = {}
    for name, coord in (("plain", []), ("coord", ["--coord", str(tmp_path / "nobody.sock")])):
        ioloom_cli("run", *coord, "-o", tmp_path / name, "--", exe, tmp_path / f"{name}.dat", "20",
                   env={"IOLOOM_STACKS": "1"})
        side = _side(tmp_path / name)
        writes = [s for s in side.symbols.values() if s.op == "write"]
        assert all(len(s.frames) == 1 and s.frames[0].module == str(exe.resolve()) for s in writes), writes
        sites[name] = sorted(s.frames[0].offset for s in writes)
        assert side.count("stacks_backtraced") == (2 if coord else 0)  # the two write sites, checked once each
    assert len(sites["plain"]) == 2 and sites["coord"] == sites["plain"]


def test_a_call_in_a_later_destructor_has_its_record(ioloom_cli, tmp_path):
    """A Fortran program leaves a unit open, as GTC leaves history.out: libgfortran's destructor closes it after the
    tracer's final flush. That close is an event and has its call record, so the side stream joins the events
    call for call and `ioloom predict` uses the stacks (it used to lose the record and fall back to operation+file
    symbols for the whole process)."""
    from ioloom.predict.source import COLUMNS, _learnt
    from test_trace_native import compile_program

    trace, history = tmp_path / "trace", tmp_path / "history.out"
    ioloom_cli("run", "-o", trace, "--", compile_program("predict_exit_close.f90"), history, "20",
               env={"IOLOOM_PREDICT": "1", "IOLOOM_STACKS": "3"})
    stream = open_trace(trace).streams[0]
    rows = [row for table in stream.ranges(COLUMNS) for row in zip(*(table.column(c).to_pylist() for c in COLUMNS))]
    op = COLUMNS.index("op")
    exit_at = [row[op] for row in rows].index("process_exit")
    # the condition: a call the model takes after the final flush (which records the process's exit)
    assert [row[op] for row in rows[exit_at + 1:] if _learnt(row)] == ["close"]
    side = _side(trace)
    learnt = [row[op] for row in rows if _learnt(row)]
    assert [side.symbols[s].op for s in side.calls] == learnt and learnt[-1] == "close"
    assert side.count("calls") == len(side.calls) and not side.problems
    assert "libgfortran" in side.symbols[side.calls[-1]].frames[0].module
    process = json.loads(ioloom_cli("predict", trace, "--json").stdout)["processes"][0]
    assert process["context"] == "call stack+file" and process["stacks_unused"] is None
    assert process["online"]["same_candidates_pct"] == 100
