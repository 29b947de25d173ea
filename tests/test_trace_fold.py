"""FOLDED chunks written by the tracer (`ioloom run --fold`, native/trace/fold.c; docs/trace-format.md, "FOLDED
chunks"): a real program's events folded as they are written, read back identical by both readers (the shared
vector of test_trace_format holds the encoder to the committed bytes), at most a byte per event where the times are
rounded, the fallback to EVENTS chunks counted, and damaged chunks skipped alike by both readers."""
from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ioloom import paths, run
from ioloom.bench.predict_fold import stream_parts
from ioloom.trace import folded_chunk, open_trace, varint
from ioloom.trace.stream_file import CHUNK_HEADER, EVENTS, FILE_DELTAS, FILES, FOLDED, INFO, rechain

VECTORS = Path(__file__).parent / "vectors" / "trace"
STEPS = 300


def _run(tmp_path: Path, name: str, *options: str, env: dict | None = None, steps: int = STEPS) -> Path:
    """ioloom-predict-loop (a file per step: open, header, 7 blocks of 4 KiB, close; then 512 bytes appended to a
    log) traced into tmp_path/name."""
    work = tmp_path / f"{name}-files"
    work.mkdir()
    out = tmp_path / name
    done = subprocess.run([sys.executable, "-m", "ioloom", "run", *options, "-o", str(out), "--",
                           str(paths.native_bin("ioloom-predict-loop")), str(work), str(steps)],
                          capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=120)
    assert done.returncode == 0, done.stderr
    return out


def _chunks(stream: Path) -> list[tuple[int, int, int]]:
    """(offset, type, payload length) of every chunk of a stream file."""
    data, pos, found = stream.read_bytes(), 16, []
    while pos + CHUNK_HEADER.size <= len(data):
        kind, length, _ = CHUNK_HEADER.unpack_from(data, pos)
        found.append((pos, kind, length))
        pos += CHUNK_HEADER.size + length
    return found


def _columns(trace) -> dict[str, np.ndarray]:
    table = trace.events().to_pandas()
    return {column: table[column].astype(str if column in ("op", "layer") else "int64").to_numpy()
            for column in table.columns if column not in ("t_start", "t_end")}


def test_a_folded_run_reads_back_as_the_events_the_tracer_recorded(tmp_path, monkeypatch):
    """Each folded chunk unfolded again inside the tracer (IOLOOM_FOLD_CHECK) is the EVENTS chunk of its rows, byte
    for byte; the Python reader gives the same events as the native one; every field but the times is the same as
    in an unfolded run of the same program."""
    folded = _run(tmp_path, "folded", "--fold", env={"IOLOOM_FOLD_CHECK": "1"})
    plain = _run(tmp_path, "plain")
    trace = open_trace(folded)
    (stream,) = trace.streams
    events = trace.meta["events"]
    assert events == STEPS * 13 + 2 and trace.problems == []
    assert stream.info["folded_events"] == stream.info["fold_checked_events"] == str(events)
    assert stream.info["fold_check_failed_events"] == "0" and stream.info["fold_quantum_ns"] == "1"
    assert next(folded.glob("*.ioloom")).stat().st_size / events < 5.0  # exact times: 4.09 (docs/predict.md)
    parts = stream_parts(folded)  # the times' code takes more than their entropy, which is above a byte per event
    assert 8 < parts["times_entropy_bits"] < 8 * parts["times"]
    data = next(folded.glob("*.ioloom")).read_bytes()
    counts = [data[pos + CHUNK_HEADER.size:pos + CHUNK_HEADER.size + length]
              for pos, kind, length in _chunks(next(folded.glob("*.ioloom"))) if kind == INFO and b"fold_quantum_ns" in
              data[pos + CHUNK_HEADER.size:pos + CHUNK_HEADER.size + length]]
    assert len(counts) == 1 and counts[0].count(b"\0") == 2 * 4  # the fold counts: one chunk, at the end
    kinds = [kind for _, kind, _ in _chunks(next(folded.glob("*.ioloom")))]
    assert EVENTS not in kinds and FILES not in kinds and FILE_DELTAS in kinds  # the file table as deltas (3.2)
    plain_files = open_trace(plain).files.to_pylist()
    assert [f["path"].replace("/plain-files/", "/folded-files/") for f in plain_files] == \
        [f["path"] for f in trace.files.to_pylist()] and len(plain_files) == STEPS + 1  # a file per step, a log
    native = stream.read()
    for module in (varint, folded_chunk):  # folded_chunk holds its own name for it
        monkeypatch.setattr(module, "_native_library", lambda: None)
    assert open_trace(folded).streams[0].read().equals(native)
    monkeypatch.undo()
    got, expected = _columns(trace), _columns(open_trace(plain))
    io = got["layer"] != "process"  # a process event's aux is its pid
    for column in ("op", "layer", "file_id", "offset", "req_bytes", "ret_bytes", "errno", "aux", "call_id",
                   "parent", "coll_seq"):
        assert (got[column][io] == expected[column][io]).all(), column


def test_times_at_a_declared_resolution_take_under_a_byte_per_event(tmp_path):
    """At 1 ms the loop's events over 2,000 steps (folded chunks and INFO) take under half a byte per event and its
    file table (a new file every 13 events) under 10 bytes per file: together under a byte per event. Each folded
    chunk unfolds to exactly the EVENTS chunk an unfolded trace at the same resolution has of its rows
    (IOLOOM_FOLD_CHECK), and every time read is a multiple of the quantum on the process's clock. The parts are
    bounded apart, not the whole: the times' part moves with the machine's load (0.09 idle, 0.27 beside six busy
    loops: more steps straddle a millisecond), the file table with the file system's inode numbers."""
    out = _run(tmp_path, "ms", "--fold", "--fold-quantum-ns", "1000000", env={"IOLOOM_FOLD_CHECK": "1"}, steps=2000)
    trace = open_trace(out)
    (stream,) = trace.streams
    events = trace.meta["events"]
    assert stream.info["fold_checked_events"] == str(events) and stream.info["fold_check_failed_events"] == "0"
    parts = stream_parts(out)
    assert parts["structure"] + parts["times"] + parts["other"] < 0.5, parts  # 0.23-0.41 measured
    assert parts["files"] * events / len(trace.files) < 10, parts  # 7.3 bytes per file measured
    table = trace.events().to_pandas()
    for column in ("t_start", "t_end"):  # one process, no clock correction: local time = read time + the epoch
        assert ((table[column].to_numpy() + trace.meta["epoch_ns"]) % 1_000_000 == 0).all(), column


def test_a_grammar_without_memory_falls_back_to_events_chunks_counted(tmp_path):
    """With a grammar budget of 1 KiB no buffer folds: each is written as EVENTS chunks, counted by reason, and
    nothing is lost; their times are rounded to the stream's quantum as folded chunks' are."""
    out = _run(tmp_path, "starved", "--fold", "--fold-quantum-ns", "1000000",
               env={"IOLOOM_FOLD_GRAMMAR_BYTES": "1024"})
    trace = open_trace(out)
    info = trace.streams[0].info
    assert trace.meta["events"] == STEPS * 13 + 2 and trace.meta["dropped_events"] == 0
    assert int(info["fold_fallback:no_memory"]) == trace.meta["events"] and "folded_events" not in info
    assert info["fold_quantum_ns"] == "1000000"
    table = trace.events().to_pandas()
    for column in ("t_start", "t_end"):  # one process, no clock correction: local time = read time + the epoch
        assert ((table[column].to_numpy() + trace.meta["epoch_ns"]) % 1_000_000 == 0).all(), column


def _probe(tmp_path: Path, name: str, *options: str, env: dict | None = None) -> Path:
    """The overhead probe's lseek to ever new offsets and open+close (3,000 of each): events whose shapes barely
    repeat, traced into tmp_path/name."""
    out = tmp_path / name
    done = subprocess.run([sys.executable, "-m", "ioloom", "run", *options, "-o", str(out), "--",
                           str(paths.native_bin("ioloom-overhead-probe")), str(tmp_path / f"{name}.dat"), "3000",
                           "lseek,open+close"], capture_output=True, text=True, env={**os.environ, **(env or {})},
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return out


def test_events_that_do_not_repeat_are_written_plain_when_that_is_smaller(tmp_path):
    """Where a buffer's FOLDED chunk would be larger than its EVENTS chunks, the tracer writes those (counted as
    plain_smaller): the folded trace is no larger than the unfolded one, and reads back the same events. Where the
    grammar was skipped (its chunk's other parts already no smaller), IOLOOM_FOLD_CHECK folds the buffer in full
    again: never smaller than what was written."""
    folded = _probe(tmp_path, "folded", "--fold", env={"IOLOOM_FOLD_CHECK": "1"})
    plain = _probe(tmp_path, "plain")
    size = {out: sum(path.stat().st_size for path in out.glob("*.ioloom")) for out in (folded, plain)}
    trace = open_trace(folded)
    info = trace.streams[0].info
    assert trace.problems == [] and trace.meta["dropped_events"] == 0
    assert int(info["fold_fallback:plain_smaller"]) > 0
    assert int(info.get("folded_events", 0)) + int(info["fold_fallback:plain_smaller"]) == trace.meta["events"]
    assert info["fold_checked_events"] == str(trace.meta["events"]) and info["fold_check_failed_events"] == "0"
    assert {kind for _, kind, _ in _chunks(next(folded.glob("*.ioloom")))} >= {4}  # EVENTS chunks in the stream
    assert size[folded] <= size[plain], size
    got, expected = _columns(trace), _columns(open_trace(plain))
    assert len(got["op"]) == len(expected["op"])
    probed = np.isin(got["op"], ["lseek", "open", "close"])  # not the process events, nor the timings printed
    assert probed.sum() > 9000 and (probed == np.isin(expected["op"], ["lseek", "open", "close"])).all()
    for column in ("op", "layer", "file_id", "offset", "req_bytes", "ret_bytes", "errno", "aux"):
        assert (got[column][probed] == expected[column][probed]).all(), column


def test_a_flush_in_a_signal_handler_writes_events_chunks(tmp_path):
    """A process killed by SIGTERM is flushed in the handler, where folding (which allocates) is not done."""
    out = tmp_path / "killed"
    subprocess.run([sys.executable, "-m", "ioloom", "run", "--fold", "-o", str(out), "--", "sh", "-c",
                    f"echo x > {tmp_path}/f; cat {tmp_path}/f > /dev/null; kill -TERM $$"],
                   capture_output=True, timeout=60)
    streams = [s for s in open_trace(out).streams if "fold_fallback:in_signal" in s.info]
    assert streams and all(int(s.info["fold_fallback:in_signal"]) > 0 for s in streams)


def test_run_refuses_a_quantum_without_fold(tmp_path):
    done = subprocess.run([sys.executable, "-m", "ioloom", "run", "--fold-quantum-ns", "1000", "-o",
                           str(tmp_path / "t"), "--", "true"], capture_output=True, text=True)
    assert done.returncode == 2 and "--fold-quantum-ns needs --fold" in done.stderr
    assert "Traceback" not in done.stderr


def _folded_payloads(data: bytes):
    for pos, kind, length in _chunks_of(data):
        if kind == FOLDED:
            yield pos, length


def _chunks_of(data: bytes):
    pos = 16
    while pos + CHUNK_HEADER.size <= len(data):
        kind, length, _ = CHUNK_HEADER.unpack_from(data, pos)
        yield pos, kind, length
        pos += CHUNK_HEADER.size + length


def _readers(path: Path, monkeypatch) -> tuple[tuple, tuple]:
    """(events, problems) of the stream at path as the native and the Python reader give them."""
    def read():
        trace = open_trace(path)
        events = trace.events().to_pandas() if trace.streams else None
        return (None if events is None else events.to_numpy().tolist()), sorted(trace.problems)
    native = read()
    with monkeypatch.context() as m:
        for module in (varint, folded_chunk):
            m.setattr(module, "_native_library", lambda: None)
        return native, read()


@pytest.mark.parametrize("seed", range(3))
def test_damaged_folded_chunks_are_skipped_alike_by_both_readers(tmp_path, monkeypatch, seed):
    """Bytes of the folded vector's FOLDED payloads changed, the checksums made to match: the native and the Python
    unfolding give the same events and the same problems (a damaged chunk skipped with one line saying so)."""
    data = (VECTORS / "folded.ioloom").read_bytes()
    payloads = list(_folded_payloads(data))
    rng = np.random.default_rng(seed)
    skipped = 0
    for case in range(40):
        pos, length = payloads[int(rng.integers(len(payloads)))]
        damaged = bytearray(data)
        at = pos + CHUNK_HEADER.size + int(rng.integers(min(length, 200) if case % 2 else length))
        damaged[at] = int(rng.integers(256))
        path = tmp_path / f"case{case}.ioloom"
        path.write_bytes(rechain(bytes(damaged)))
        native, python = _readers(path, monkeypatch)
        assert native == python, (case, at)
        skipped += any("folded chunk at byte" in p for p in native[1])
    assert skipped > 0


def test_a_folded_chunk_with_a_rule_inside_itself_is_refused(tmp_path, monkeypatch):
    """A grammar whose rule 1 holds itself would expand for ever: both readers refuse the chunk."""
    from ioloom.trace.folded import encode_varints
    from ioloom.trace.folded_chunk import FoldedMalformed, unfold, unfold_python

    def varints(*values):
        return encode_varints(np.array(values, np.uint64))
    header = varints(1, 5, 4, 1, 100)
    absent = 62  # zigzag of 31: no file, offset, call id, parent or coll_seq
    shape = varints(2, 2, 0, 0, 0, absent, *([0] * 8), 4, 0, 0, 0, absent, *([0] * 8))  # ops 1 and 2
    tokens = varints(2, 0, 2, 1, 2)  # (shape 0, run 2), (shape 1, run 2)
    rules = varints(6, 2, 1, 3, 2, 3, 0)  # S = rule 1; rule 1 = rule 1, token 0
    times = bytes([0]) + varints(1, 0) + bytes([0]) + varints(1, 0)
    payload = header + shape + tokens + rules + times
    for unfolding in (unfold, unfold_python):
        with pytest.raises(FoldedMalformed, match="grammar"):
            unfolding(payload)
    good = header + shape + tokens + varints(4, 1, 2, 0, 2) + times
    chunk = unfold_python(good)
    assert struct.unpack_from("<I", chunk, 0)[0] == 4
    assert unfold(good)[12:14] == chunk[12:14]  # the same thread id and count


def _clean_exits(stream: Path) -> list[int]:
    """The places (in chunk order) of a stream's clean_exit INFO chunks, and its chunks' count last."""
    data, chunks = stream.read_bytes(), _chunks(stream)
    payloads = [data[pos + CHUNK_HEADER.size:pos + CHUNK_HEADER.size + length] for pos, _, length in chunks]
    return [k for k, ((_, kind, _), payload) in enumerate(zip(chunks, payloads))
            if kind == INFO and payload == b"clean_exit\0001\0"] + [len(chunks)]


def test_a_late_flush_is_followed_by_one_clean_exit_record(tmp_path):
    """MPICH's finalization does I/O after the tracer's final flush: that late flush's chunks (file table, operation
    names, events, fold counts) are followed by clean_exit once, not after each, so the stream ends with it; cut
    before that last record, the stream reads as cut."""
    from ioloom import mpi
    from ioloom.bench.predict import trace_kernel
    impl = next((impl for impl in mpi.implementations() if impl.name == "mpich"), None)
    if impl is None:
        pytest.skip("MPICH is not installed")
    trace = trace_kernel(impl, "gtc", 2, 2, 1, tmp_path, env={"IOLOOM_FOLD": "1"})
    for stream in trace.glob("*.ioloom"):
        *closing, count = _clean_exits(stream)
        assert len(closing) == 2 and closing[1] == count - 1 and closing[1] - closing[0] > 2, (stream, closing, count)
    assert open_trace(trace).problems == []
    cut = _chunks(stream)[-1][0]  # the last stream: cut before its final clean_exit
    stream.write_bytes(stream.read_bytes()[:cut])
    assert any("chunks follow its clean-exit record" in problem for problem in open_trace(trace).problems)


def test_run_refuses_the_quanta_the_tracer_refuses():
    """ioloom run's bound on --fold-quantum-ns and the Python reader's are the tracer's (native/trace/fold.h),
    written three times: checked here."""
    header = (paths.REPO_ROOT / "native" / "trace" / "fold.h").read_text()
    assert re.search(r"#define IOLOOM_FOLD_MAX_QUANTUM (\d+)u", header).group(1) == str(run.FOLD_MAX_QUANTUM)
    assert run.FOLD_MAX_QUANTUM == folded_chunk.MAX_QUANTUM
