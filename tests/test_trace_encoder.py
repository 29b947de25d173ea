"""The tracer's background encoder and the reader's fast paths: every event of a heavily loaded run arrives,
once, in order, whether halves are handed to the encoder thread (also in a forked child, which starts its own)
or written inline; alternating calls are written a chunk per operation and come back alternating; the native
column decoder agrees with the numpy one, on one thread or several; the nearly-sorted merge of late MPI-IO events
equals a stable sort."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest
from tests.test_trace_native import compile_program, traced_env

from ioloom import paths
from ioloom.trace import open_trace
from ioloom.trace.model import time_order
from ioloom.trace.stream_file import DURATION, OFFSET_DELTA, OP, ROW_T_BASE, STORED_COLUMNS, read_stream_file
from ioloom.trace.varint import THREADS_VARIABLE, ClockLine, decode_column

CALLS = 20_000


@pytest.fixture(scope="module")
def handoff_runs(tmp_path_factory):
    """The handoff program traced with a 1 MiB budget (about 600 events per half: ~200 handoffs), with the
    encoder thread and inline, in one module-wide pair of runs."""
    exe = compile_program("trace_handoff.c")
    runs = {}
    for mode in ("1", "0"):
        root = tmp_path_factory.mktemp(f"handoff-{mode}")
        (root / "w").mkdir()
        done = subprocess.run([str(exe), str(root / "w"), str(CALLS)], capture_output=True, text=True, timeout=120,
                              env=traced_env(root / "trace", IOLOOM_TRACE_BUFFER="1M",
                                             IOLOOM_BACKGROUND_ENCODE=mode))
        assert done.returncode == 0 and done.stdout == "0 failures, child exit 0\n", done.stderr
        runs[mode] = root / "trace"
    return runs


def _writes(trace) -> dict[tuple[int, str], np.ndarray]:
    """Per (process, file name): the offsets of its pwrite events in t_start order."""
    files = dict(zip(trace.files.column("file_id").to_pylist(), trace.files.column("path").to_pylist()))
    out = {}
    for stream in trace.streams:
        ev = stream.read(["op", "file_id", "offset", "ret_bytes", "t_start"]).to_pandas().astype({"op": str})
        assert ev["t_start"].is_monotonic_increasing
        ev = ev[ev["op"] == "pwrite"]
        assert (ev["ret_bytes"] == 8).all()
        for file_id, group in ev.groupby("file_id"):
            out[(stream.pid == min(s.pid for s in trace.streams), files[file_id].rsplit("/", 1)[1])] = \
                group["offset"].to_numpy()
    return out


@pytest.mark.parametrize("mode", ["1", "0"])
def test_every_event_arrives_once_in_order(handoff_runs, mode):
    trace = open_trace(handoff_runs[mode])
    assert trace.meta["dropped_events"] == 0 and not [p for p in trace.problems if "dropped" in p]
    assert len(trace.streams) == 2  # the forked child has its own stream
    writes = _writes(trace)
    parent_files = sorted(name for is_parent, name in writes if is_parent)
    child_files = sorted(name for is_parent, name in writes if not is_parent)
    assert parent_files == [f"t{k}.dat" for k in range(5)] and child_files == ["t10.dat", "t11.dat"]
    for offsets in writes.values():
        assert np.array_equal(offsets, np.arange(CALLS) * 8), "an event lost, repeated or out of order"


def test_background_and_inline_encoding_write_the_same_events(handoff_runs):
    columns = ["layer", "op", "offset", "req_bytes", "ret_bytes", "errno", "aux", "handle"]
    frames = [open_trace(handoff_runs[mode]).events(columns).to_pandas().astype({"op": str, "layer": str})
              for mode in "10"]
    rows = [sorted(f[f["layer"] != "process"].itertuples(index=False)) for f in frames]  # pids differ
    assert len(rows[0]) > 7 * CALLS and rows[0] == rows[1]


def _busiest_stream(trace_dir):
    return max((read_stream_file(p) for p in trace_dir.glob("*.ioloom")), key=lambda s: s.events)


def test_native_column_decoder_matches_numpy(handoff_runs):
    stream = _busiest_stream(handoff_runs["1"])
    assert len(stream.chunks) > 100
    for column in range(STORED_COLUMNS):
        assert np.array_equal(stream.stored(column), stream._stored_numpy(column)), column


def test_column_of_the_wrong_length_names_its_chunk(handoff_runs):
    stream = _busiest_stream(handoff_runs["1"])
    directory = stream.directory.copy()
    directory[3, :, 3] += 1  # chunk 3 claims one event more than its body holds
    with pytest.raises(ValueError, match="events chunk 3 "):
        decode_column(stream.data, directory, DURATION, stream.events + 1)


def chunk_sizes_by_op(trace, at_least):
    """The rows of each chunk of `trace`'s one stream that holds a single operation and at least `at_least` rows,
    by operation name."""
    [path] = trace.glob("*.ioloom")
    stream = read_stream_file(path)
    names = {code: name for code, (name, _) in stream.ops.items()}
    ops = np.split(stream.stored(OP), stream.chunk_firsts()[1][1:])
    return {names[int(chunk[0])]: len(chunk) for chunk in ops if len(chunk) >= at_least and (chunk == chunk[0]).all()}


def test_alternating_calls_are_written_a_chunk_per_operation(tmp_path):
    """The overhead probe's open+close loop: the opens and the closes are each a chunk of their own (so the columns
    where they differ are constant, not stored row by row), and read back they alternate, in time order."""
    probe, trace = paths.native_bin("ioloom-overhead-probe"), tmp_path / "trace"
    done = subprocess.run([str(probe), str(tmp_path / "f"), "1000", "open+close"], capture_output=True, text=True,
                          timeout=60, env=traced_env(trace))
    assert done.returncode == 0, done.stderr
    by_op = chunk_sizes_by_op(trace, at_least=1000)
    assert by_op.get("close", 0) >= 1000 and sum(n for name, n in by_op.items() if name.startswith("open")) >= 1000
    events = open_trace(trace).streams[0].read(["op", "t_start"]).to_pandas()
    assert events["t_start"].is_monotonic_increasing
    loop = [op for op in events["op"].astype(str) if op == "close" or op.startswith("open")][-2000:]
    assert loop[1::2] == ["close"] * 1000 and len(set(loop[::2])) == 1 and loop[0].startswith("open")


def test_three_operations_in_turn_are_written_a_chunk_per_operation(tmp_path):
    """open, write, close in turn (three operations: the rows are copied a chunk per operation, where two taking
    turns are encoded in place): each operation's rows are a chunk of their own, read back in their order."""
    import sys

    script = ("import os, sys\nfor i in range(1000):\n    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)\n"
              "    os.write(fd, b'x')\n    os.close(fd)\n")
    trace = tmp_path / "trace"
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "f")], capture_output=True, text=True,
                          timeout=60, env=traced_env(trace))
    assert done.returncode == 0, done.stderr
    by_op = chunk_sizes_by_op(trace, at_least=64)
    assert by_op.get("write", 0) >= 1000 and by_op.get("close", 0) >= 1000
    events = open_trace(trace).streams[0].read(["op", "t_start"]).to_pandas()
    assert events["t_start"].is_monotonic_increasing
    loop = [op for op in events["op"].astype(str) if op in ("write", "close") or op.startswith("open")][-3000:]
    assert loop[1::3] == ["write"] * 1000 and loop[2::3] == ["close"] * 1000 and len(set(loop[::3])) == 1


def test_time_order_is_the_stable_sort():
    rng = np.random.default_rng(7)
    for _ in range(500):
        t = list(np.sort(rng.integers(0, 20, rng.integers(0, 40))))
        for _ in range(rng.integers(0, 4)):  # events recorded late: moved after later-starting ones
            if len(t) > 1:
                i = int(rng.integers(0, len(t)))
                t.insert(int(rng.integers(i, len(t))), t.pop(i))
        t = np.array(t, np.int64)
        order = time_order(t)
        assert np.array_equal(np.arange(len(t)) if order is None else order, np.argsort(t, kind="stable"))


@pytest.fixture(scope="module")
def long_stream(tmp_path_factory):
    """A stream long enough for the native decoder to share its columns among threads (over 2 x 2^18 events)."""
    exe = compile_program("trace_handoff.c")
    root = tmp_path_factory.mktemp("long")
    (root / "w").mkdir()
    done = subprocess.run([str(exe), str(root / "w"), str(6 * CALLS)], capture_output=True, text=True, timeout=120,
                          env=traced_env(root / "trace"))
    assert done.returncode == 0, done.stderr
    return _busiest_stream(root / "trace").path


def _decoded(path, positions: np.ndarray) -> list[np.ndarray]:
    """Everything the reader decodes natively: times on a drifting clock, offsets (in stored order and scattered
    to `positions`), each stored column in stored order, and narrowed and scattered."""
    stream = read_stream_file(path)
    clock = ClockLine(int(stream.chunks[0, ROW_T_BASE]), -123_456_789, 3.7e-5, 10**9)
    out = [*stream.times(clock), stream.stored(OFFSET_DELTA, running=True),
           stream.stored(OFFSET_DELTA, positions, np.zeros(stream.events, np.int64), running=True)]
    for column in range(STORED_COLUMNS):
        out.append(stream.stored(column))
        out.append(stream.stored(column, positions, np.zeros(stream.events, np.int16)))
    return out


def test_threads_and_numpy_decode_the_same(long_stream, monkeypatch):
    from ioloom.trace import varint

    events = read_stream_file(long_stream).events
    assert events > 2 * 2**18
    positions = np.random.default_rng(3).permutation(events).astype(np.int32)
    monkeypatch.setenv(THREADS_VARIABLE, "1")
    one = _decoded(long_stream, positions)
    monkeypatch.setenv(THREADS_VARIABLE, "3")
    three = _decoded(long_stream, positions)
    monkeypatch.setattr(varint, "_native_library", lambda: None)
    plain = _decoded(long_stream, positions)
    for i, (a, b, c) in enumerate(zip(one, three, plain)):
        assert a.dtype == b.dtype == c.dtype and np.array_equal(a, b) and np.array_equal(a, c), i


def test_tick_times_encode_as_the_same_times_converted_first():
    """A chunk of rows holding TSC ticks, ns, or both (a process event among a thread's calls), encoded with a tick
    clock, is byte for byte the chunk of the same rows converted to ns beforehand: the encoder converts every row as
    row 0 says and passes again, testing each row, when a row differs."""
    native = paths.REPO_ROOT / "native"
    exe = compile_program("encode_ticks.c", f"-I{native / 'trace'}", f"-I{native / 'core'}")
    done = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.count(": same\n") == 10, done.stdout + done.stderr


def test_the_avx2_survey_and_time_quads_give_the_same_bytes_as_the_other_paths():
    """3,000 seeded random chunks (1 to 5,000 rows, strides 1 and 2, every column the same, counting, in runs or at
    random, tick and ns times) encode to the same bytes on the AVX2 paths (the AVX2 survey, time_quads' time columns
    four rows at a time) and on the paths for CPUs without AVX2 (the other survey, the times row by row). The times
    reach time_quads' edges: starts near the tick clocks' origin and just short of 2^51 ticks or ns after it, gaps and
    durations up to 2^30, a clock whose ticks are longer than a ns. The last row read ends at a PROT_NONE page, so a
    read past it fails the run. Skipped on a CPU without AVX2, which has only the one path."""
    native = paths.REPO_ROOT / "native"
    exe = compile_program("encode_paths.c", f"-I{native / 'trace'}", f"-I{native / 'core'}")
    done = subprocess.run([str(exe), "20261128", "3000"], capture_output=True, text=True, timeout=60)
    if done.returncode == 77:
        pytest.skip(done.stdout.strip())
    assert done.returncode == 0 and done.stdout.startswith("3000 chunks, "), done.stdout + done.stderr


def test_threads_encoding_at_once_do_not_race_on_the_encoders_tables():
    """Four threads that each checksum and encode for the first time at once, built with ThreadSanitizer: no data
    race on the CRC and varint packing tables, built once as the program loads. Ten runs: the race (tables built on
    first use, no lock) is seen only where the threads overlap, which they did in most runs."""
    native = paths.REPO_ROOT / "native"
    exe = compile_program("encode_tables.c", f"-I{native / 'trace'}", f"-I{native / 'core'}", "-fsanitize=thread", "-g")
    for _ in range(10):
        done = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stdout == "4 threads encoded at once\n", done.stdout + done.stderr
