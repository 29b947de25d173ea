"""The trace format: shared test vectors between the C writer and the Python reader, compactness, and damaged
streams (truncated, corrupt, unknown chunks) giving problems instead of crashes."""
from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from ioloom import paths
from ioloom.trace import open_trace
from ioloom.trace.stream_file import CHUNK_HEADER, EVENTS, EVENTS_PROBLEMS, MAJOR, read_stream_file, rechain
from ioloom.trace.varint import read_varint

VECTORS = Path(__file__).parent / "vectors" / "trace"
NAMES = ("strided", "mixed", "crafted", "folded")
DAMAGE_SAID = {"info": "is malformed (INFO ", "checksum": "fails its checksum", "repeat": "repeats the one at byte",
               "bad-value": "(a value outside its range)", "bad-column": "(a column does not hold the chunk's events)"}


@pytest.fixture(scope="module")
def fresh_vectors(tmp_path_factory) -> Path:
    """The vectors as the C encoder writes them now."""
    out = tmp_path_factory.mktemp("vectors")
    subprocess.run([str(paths.native_bin("ioloom-trace-vectors")), str(out)], check=True)
    return out


@pytest.mark.parametrize("name", NAMES)
def test_c_writer_output_equals_committed_vector(fresh_vectors, name):
    for suffix in (".ioloom", ".csv") + ((".damage",) if name == "crafted" else ()):
        assert (fresh_vectors / f"{name}{suffix}").read_bytes() == (VECTORS / f"{name}{suffix}").read_bytes(), \
            f"{name}{suffix}: the C encoder no longer writes the committed vector (format change: bump the version)"


@pytest.mark.parametrize("name", NAMES + ("v1/strided", "v2/mixed", "v3.1/folded"))
def test_python_reader_decodes_committed_vector(name):
    """Every vector, and streams of formats 1.0 and 2.0 (kept as written then; 2.0 stored req_bytes, aux,
    call_id, parent and coll_seq as they are, not as differences): exactly the CSV's events."""
    trace = open_trace(VECTORS / f"{name}.ioloom")
    expected = pd.read_csv(VECTORS / f"{name}.csv")
    got = trace.events().to_pandas()
    assert len(got) == len(expected)
    # the reader orders by time (stable): order the expectation the same way, and count from the epoch
    expected = expected.sort_values("t_start", kind="stable").reset_index(drop=True)
    epoch = expected["t_start"].min() if "start_monotonic_ns" not in trace.streams[0].info else None
    assert trace.meta["epoch_ns"] == epoch
    for column in ("t_start", "t_end"):
        assert (got[column].to_numpy() == expected[column].to_numpy() - epoch).all(), column
    for column in expected.columns.drop(["t_start", "t_end"]):
        assert list(got[column].astype(str if column in ("op", "layer") else "int64")) == list(expected[column]), column
    assert set(got["rank"]) == {3} and set(got["pid"]) == {4242}
    assert trace.files.to_pylist() == [
        {"file_id": 0, "path": "/data/shared.dat", "dev": 65024, "ino": 123456},
        {"file_id": 1, "path": "pipe:[77]", "dev": 0, "ino": 0}]


@pytest.mark.parametrize("native", [True, False], ids=["native index", "python index"])
def test_crafted_chunks_are_skipped_each_with_its_own_problem(monkeypatch, native):
    """Each chunk of the crafted vector that breaks a rule (an INFO value that is not a number, an op code or a
    layer outside its range, 2^30 events in a few bytes, a column short of its events, a flipped chunk type, a
    repeated EVENTS chunk) is skipped with one problem at its byte offset, and the good chunks around are read."""
    from ioloom.trace import varint

    if not native:
        monkeypatch.setattr(varint, "_native_library", lambda: None)
    trace = open_trace(VECTORS / "crafted.ioloom")
    expected = [line.split() for line in (VECTORS / "crafted.damage").read_text().splitlines()]
    said = []
    for problem in trace.problems:
        at = int(problem.split("at byte ")[1].split()[0])
        said.append([str(at), next(kind for kind, text in DAMAGE_SAID.items() if text in problem)])
    assert sorted(said) == sorted(expected)
    assert trace.meta["events"] == len(pd.read_csv(VECTORS / "crafted.csv"))
    assert trace.streams[0].info["pid"] == "4242" and "dropped_events" not in trace.streams[0].info


@pytest.mark.parametrize("name", ("strided", "mixed"))
def test_the_writers_checksums_are_the_documented_chain(name):
    """Each chunk's checksum covers its type, length and payload, going on from the previous chunk's: Python's
    rechain computes what the C writer wrote."""
    data = (VECTORS / f"{name}.ioloom").read_bytes()
    assert rechain(data) == data
    cut = _chunk_starts(data)[3]  # a chunk removed: the one after it is the only one that fails
    removed = data[:cut] + data[_chunk_starts(data)[4]:]
    assert rechain(removed) != removed


def test_a_stream_cut_after_its_clean_exit_record_says_so(tmp_path):
    """Events written after the final flush (another library's destructor) are followed by clean_exit again, so
    a stream that exited cleanly ends with that record: one cut at the chunk boundary before it is not intact."""
    data = (VECTORS / "strided.ioloom").read_bytes()
    starts = _chunk_starts(data)
    second_events, closing = starts[-2:]  # the strided vector ends: events, events, clean_exit
    late = data[:second_events] + data[closing:] + data[second_events:closing] + data[closing:]
    path = tmp_path / "late.ioloom"
    path.write_bytes(rechain(late))
    assert open_trace(path).problems == [] and open_trace(path).meta["events"] == 1000
    path.write_bytes(rechain(late[:len(late) - (len(data) - closing)]))
    trace = open_trace(path)
    assert trace.meta["events"] == 1000
    assert any("chunks follow its clean-exit record" in p for p in trace.problems), trace.problems


@pytest.mark.parametrize("native", [True, False], ids=["native index", "python index"])
@pytest.mark.parametrize("name, major", [("mixed", 2), ("v2/mixed", 3)])
def test_a_version_changed_in_the_header_fails_every_chunk(tmp_path, monkeypatch, native, name, major):
    """Versions 2 and 3 store req_bytes, aux, call_id, parent and coll_seq differently: from 3 on every chunk's
    checksum goes through the file header, so a stream whose version was changed (either way) reads no event as
    the other version would misread it; each chunk says so."""
    from ioloom.trace import varint

    if not native:
        monkeypatch.setattr(varint, "_native_library", lambda: None)
    data = bytearray((VECTORS / f"{name}.ioloom").read_bytes())
    data[8] = major
    path = tmp_path / "changed.ioloom"
    path.write_bytes(bytes(data))
    trace = open_trace(path)
    assert trace.meta["events"] == 0
    assert len(_chunk_starts(bytes(data))) == len([p for p in trace.problems if "fails its checksum" in p])


def test_a_repeated_events_chunk_of_a_version_1_stream_is_skipped(tmp_path):
    """Version 1 had no chain: a repeated EVENTS chunk is found by its bytes."""
    data = (VECTORS / "v1" / "strided.ioloom").read_bytes()
    first = next(s for s in _chunk_starts(data) if CHUNK_HEADER.unpack_from(data, s)[0] == EVENTS)
    end = first + CHUNK_HEADER.size + CHUNK_HEADER.unpack_from(data, first)[1]
    path = tmp_path / "repeated.ioloom"
    path.write_bytes(data[:end] + data[first:end] + data[end:])
    trace = open_trace(path)
    assert trace.meta["events"] == 1000
    assert trace.problems == [f"repeated.ioloom: events chunk at byte {end} repeats the one at byte {first}; skipped"]


def test_a_varint_over_64_bits_is_malformed():
    assert read_varint(b"\xff" * 9 + b"\x01", 0) == (2**64 - 1, 10)
    with pytest.raises(ValueError, match="over 64 bits"):
        read_varint(b"\xff" * 9 + b"\x02", 0)


def test_strided_loop_takes_at_most_4_bytes_per_event():
    trace = open_trace(VECTORS / "strided.ioloom")
    assert (VECTORS / "strided.ioloom").read_bytes()[8] == MAJOR  # the format version the tracer writes
    size = (VECTORS / "strided.ioloom").stat().st_size
    assert size / trace.meta["events"] <= 4.0, size / trace.meta["events"]
    assert trace.problems == []


def test_unknown_chunk_type_is_skipped_and_reported():
    trace = open_trace(VECTORS / "mixed.ioloom")
    assert len(trace.problems) == 1 and "unknown chunk type 99" in trace.problems[0]
    assert trace.meta["events"] == 358


def _chunk_starts(data: bytes) -> list[int]:
    starts, pos = [], 16
    while pos < len(data):
        starts.append(pos)
        pos += CHUNK_HEADER.size + CHUNK_HEADER.unpack_from(data, pos)[1]
    return starts


def test_truncated_stream_reads_every_complete_chunk(tmp_path):
    data = (VECTORS / "mixed.ioloom").read_bytes()
    starts = _chunk_starts(data)
    complete_events = 0
    for cut in [*range(0, len(data), 97), len(data)]:
        damaged = tmp_path / "cut.ioloom"
        damaged.write_bytes(data[:cut])
        trace = open_trace(damaged)
        events = trace.events().num_rows  # decodes: must not raise
        assert events >= complete_events or cut < 16
        complete_events = max(complete_events, events)
        if 16 <= cut < len(data) and cut not in starts:
            assert any("truncated at byte" in p for p in trace.problems), (cut, trace.problems)
    assert complete_events == 358


def test_corrupt_chunk_fails_its_checksum_and_the_rest_is_read(tmp_path):
    data = bytearray((VECTORS / "strided.ioloom").read_bytes())
    first_events = _chunk_starts(bytes(data))[-3]  # the first of the two events chunks
    data[first_events + 40] ^= 0xFF
    damaged = tmp_path / "corrupt.ioloom"
    damaged.write_bytes(bytes(data))
    trace = open_trace(damaged)
    assert trace.meta["events"] == 500
    assert any("fails its checksum" in p for p in trace.problems)


def test_not_a_trace_and_future_versions_are_explained(tmp_path):
    (tmp_path / "junk.ioloom").write_bytes(b"hello world, not a trace")
    future = bytearray((VECTORS / "strided.ioloom").read_bytes())
    future[8] = 9
    (tmp_path / "future.ioloom").write_bytes(bytes(future))
    trace = open_trace(tmp_path)
    assert trace.streams == []
    assert any("not an ioloom trace stream" in p for p in trace.problems)
    assert any("format version 9.2" in p for p in trace.problems)


def test_native_and_numpy_varint_decoders_agree():
    import numpy as np

    from ioloom.trace import varint

    assert varint._native_decoder() is not None, "libioloom-trace-decode.so is built with the tracer"
    rng = np.random.default_rng(3)
    values = rng.integers(0, 2**63, 50_000, dtype=np.uint64) >> rng.integers(0, 64, 50_000).astype(np.uint64)
    encoded = bytearray()
    for v in values.tolist():
        while v >= 0x80:
            encoded.append(v & 0x7F | 0x80)
            v >>= 7
        encoded.append(v)
    buf = np.frombuffer(bytes(encoded), np.uint8)
    assert (varint.decode_varints(buf) == values).all()
    assert (varint.decode_numpy(buf) == values).all()
    with pytest.raises(ValueError, match="runs past"):
        varint.decode_varints(np.concatenate((buf, np.array([0x80], np.uint8))))


def test_native_crc32_is_zlibs_at_every_length_and_alignment():
    """The C checksum (carry-less multiplication for 64 bytes and more where the CPU has it, tables otherwise)
    against zlib's crc32: lengths around the 16- and 64-byte steps, odd starts, going on from a previous value."""
    import ctypes
    import zlib

    lib = ctypes.CDLL(str(paths.native_lib("ioloom-trace-decode")))
    lib.ioloom_crc32_update.restype = ctypes.c_uint32
    lib.ioloom_crc32_update.argtypes = [ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t]
    rng = np.random.default_rng(11)
    data = rng.integers(0, 256, 70_000, dtype=np.uint8).tobytes()
    lengths = [*range(0, 300), *rng.integers(300, 65_536, 200).tolist()]
    for length in lengths:
        start, previous = length % 7, int(rng.integers(0, 2**32))
        piece = data[start:start + length]
        assert lib.ioloom_crc32_update(previous, piece, length) == zlib.crc32(piece, previous), (length, start)


def test_clock_correction_offset_and_drift():
    import numpy as np

    from ioloom.trace.reader import clock_correction

    t = np.array([1_000, 6_000, 11_000, 21_000], np.int64)
    assert clock_correction({}, t).tolist() == [0, 0, 0, 0]
    assert clock_correction({"clock_init": "1000 -500 30"}, t).tolist() == [-500] * 4
    # offset -500 at local 1000, -400 at local 11000: drift 0.01 ns per ns, extrapolated past finalize
    both = {"clock_init": "1000 -500 30", "clock_finalize": "11000 -400 40"}
    assert clock_correction(both, t).tolist() == [-500, -450, -400, -300]


def test_missing_trace_says_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="ioloom run -o"):
        open_trace(tmp_path)


def test_reading_without_the_native_decoder_gives_the_same_events(monkeypatch):
    """The numpy decoder (used when libioloom-trace-decode.so is not built) reads every column of the shared
    vectors (and the version 2.0 one), whole and range by range, as the native one does."""
    from ioloom.trace import varint

    for name in ("mixed", "strided", "folded", "v2/mixed"):
        path = VECTORS / f"{name}.ioloom"
        native = open_trace(path).streams[0]
        whole = native.read()
        monkeypatch.setattr(varint, "_native_library", lambda: None)
        plain = open_trace(path).streams[0]
        assert plain.read().equals(whole), name
        for rows in (1, 100):
            joined = pa.concat_tables(plain.ranges(None, rows)).unify_dictionaries().combine_chunks()
            for column in whole.column_names:
                assert joined.column(column).to_pylist() == whole.column(column).to_pylist(), (name, rows, column)
        monkeypatch.undo()


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))


def _with_payload(data: bytes, start: int, payload: bytes) -> bytes:
    """The stream with the chunk at `start` given another payload (length and checksums to match)."""
    kind, length, _ = CHUNK_HEADER.unpack_from(data, start)
    header = CHUNK_HEADER.pack(kind, len(payload), 0)
    return rechain(data[:start] + header + payload + data[start + CHUNK_HEADER.size + length:])


def _damaged_copies(data: bytes):
    """The stream cut everywhere; and its EVENTS chunks with bytes of their column directory changed, with no
    events, with a varint too long, and with no columns, their checksums made to match (so that the payload
    itself must be judged)."""
    yield from (data[:cut] for cut in range(0, len(data), 37))
    rng = np.random.default_rng(5)
    for start in _chunk_starts(data):
        kind, length, _ = CHUNK_HEADER.unpack_from(data, start)
        body = start + CHUNK_HEADER.size
        if kind != EVENTS:
            continue
        for _ in range(60):
            damaged = bytearray(data)
            damaged[body + int(rng.integers(0, min(length, 80)))] = int(rng.integers(0, 256))
            yield rechain(bytes(damaged))
        payload = memoryview(data)[body:body + length]
        tid, pos = read_varint(payload, 0)
        _, pos = read_varint(payload, pos)
        t_base, columns = read_varint(payload, pos)
        yield _with_payload(data, start, _varint(tid) + b"\0" + _varint(t_base) + payload[columns:])
        yield _with_payload(data, start, b"\x80" * 11 + payload[columns:])
        yield _with_payload(data, start, payload[:columns])


def test_native_and_python_chunk_index_agree_on_damaged_streams(tmp_path, monkeypatch):
    from ioloom.trace import varint

    path = tmp_path / "damaged.ioloom"
    said = set()
    for name in ("strided", "mixed"):
        for damaged in _damaged_copies((VECTORS / f"{name}.ioloom").read_bytes()):
            path.write_bytes(damaged)
            native = read_stream_file(path)
            monkeypatch.setattr(varint, "_native_library", lambda: None)
            plain = read_stream_file(path)
            monkeypatch.undo()
            assert native.problems == plain.problems
            assert np.array_equal(native.chunks, plain.chunks) and native.info == plain.info
            said.update(p.split("(")[-1] for p in native.problems if "is malformed" in p)
    assert len(said) == len(EVENTS_PROBLEMS), said  # every kind of malformed events chunk was met


@pytest.mark.parametrize(("entry", "said"), [
    (bytes([0, 0, 0, 3, 2]) + b"x\0", "keeps 3 + 2 bytes of a 0-byte path"),  # the first entry has no path before
    (bytes([0, 0, 0, 0, 0]) + b"/a\0" + bytes([0, 0, 0, 1, 2]) + b"b\0", "keeps 1 + 2 bytes of a 2-byte path"),
    (bytes([0, 0, 0, 0, 0]) + b"no NUL", "string without its terminating NUL"),
    (bytes([0x80, 0x80, 0x80, 0x10, 0, 0, 0, 0]) + b"/a\0", "is over 16777215"),
])
def test_a_malformed_file_deltas_chunk_is_skipped_whole(tmp_path, entry, said):
    """A FILE_DELTAS chunk (3.2) that keeps more of the path before than there is, a path without its NUL or a file
    id past the reader's table is skipped whole with a problem naming it; the rest of the stream is read."""
    from ioloom.trace.stream_file import FILE_DELTAS

    data = (VECTORS / "folded.ioloom").read_bytes()
    pos = 16
    while CHUNK_HEADER.unpack_from(data, pos)[0] != FILE_DELTAS:
        pos += CHUNK_HEADER.size + CHUNK_HEADER.unpack_from(data, pos)[1]
    end = pos + CHUNK_HEADER.size + CHUNK_HEADER.unpack_from(data, pos)[1]
    (tmp_path / "s.ioloom").write_bytes(rechain(data[:pos] + CHUNK_HEADER.pack(FILE_DELTAS, len(entry), 0) + entry +
                                                data[end:]))
    trace = open_trace(tmp_path)
    assert [p for p in trace.problems if f"chunk at byte {pos} (type 6) is malformed" in p and said in p]
    assert trace.files.num_rows == 0 and trace.meta["events"] == len(pd.read_csv(VECTORS / "folded.csv"))
