"""One stream file (one traced process) of the on-disk format, docs/trace-format.md: its chunk directory,
metadata, op table and file table, read eagerly (small); and its events, decoded on demand, column by column,
with vectorised numpy passes over all the chunks asked for at once.

The file is memory-mapped, not read: its pages belong to the page cache, and a reader hands back the ones it
has decoded (`forget_pages`), so a process holds the events it is working on, not the whole file."""
from __future__ import annotations

import ctypes
import mmap
import os
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from ioloom.trace.folded_chunk import FoldedMalformed, unfold
from ioloom.trace.model import LAYERS, TraceDamaged
from ioloom.trace.varint import (
    CONST,
    RUNS,
    STORED_COLUMNS,
    ClockLine,
    IndexRules,
    count_varints,
    decode_column,
    decode_numpy,
    decode_times,
    decode_varints,
    index_chunks,
    read_varint,
    unzigzag,
)

MAGIC = b"IOLOOMTR"
MAJOR = 3  # the version the tracer writes (trace_format.h)
# the versions this reader reads: 1 had the checksum over the payload only, 2 stored req_bytes, aux, call_id,
# parent and coll_seq as they are (3: as differences)
MAJORS = (1, 2, 3)
CHUNK_HEADER = struct.Struct("<III")
ACCOUNTING_XATTR = "user.ioloom.info"  # the final accounting, when the stream could not hold it (writer.c)
INFO, OPS, FILES, EVENTS, FOLDED, FILE_DELTAS = 1, 2, 3, 4, 5, 6
LAYER_CODES = LAYERS  # a layer is stored as its index in this tuple
FORGET_EVERY = 26  # log2 of the bytes of a stream file checked between handing its pages back (64 MiB)

# Stored columns of an EVENTS chunk, in order (trace_format.h, enum ioloom_column).
GAP, DURATION, OP, LAYER, FILE, HANDLE, OFFSET_DELTA, REQ, RET_MINUS_REQ, ERRNO, AUX, CALL_ID, PARENT, COLL_SEQ = range(
    STORED_COLUMNS)
# Event columns that are one stored column as is.
DIRECT = {"op": OP, "layer": LAYER, "file_id": FILE, "handle": HANDLE, "req_bytes": REQ, "errno": ERRNO, "aux": AUX,
          "call_id": CALL_ID, "parent": PARENT, "coll_seq": COLL_SEQ}


# A row of the chunk index (native/trace/index.c): the chunk's byte offset, type, payload length and status;
# for an EVENTS chunk then its tid, event count, t_base and per stored column (mode, body start, body end, events).
ROW_OFFSET, ROW_TYPE, ROW_LENGTH, ROW_STATUS, ROW_TID, ROW_COUNT, ROW_T_BASE, ROW_DIRECTORY = range(8)
ROW_FIELDS = ROW_DIRECTORY + 4 * STORED_COLUMNS
# Row statuses (index.c, enum chunk_status) and what the reader says about them.
OK, CHECKSUM, TRUNCATED_HEADER, TRUNCATED_BODY = range(4)
EVENTS_PROBLEMS = {4: "fewer columns than the format has", 5: "a column mode this reader does not know",
                   6: "column body overruns its chunk", 7: "chunk with no events",
                   8: "a varint runs past its chunk or over 10 bytes", 9: "a column does not hold the chunk's events",
                   10: "a value outside its range"}
FEW_COLUMNS, UNKNOWN_MODE, BODY_OVERRUN, NO_EVENTS, BAD_VARINT, BAD_COLUMN, BAD_VALUE = EVENTS_PROBLEMS


def _no_rows() -> np.ndarray:
    return np.zeros((0, ROW_FIELDS), np.int64)


@dataclass
class StreamFile:
    """What one stream file holds, before its events are decoded."""
    path: Path
    data: np.ndarray  # the file's bytes (a read-only memory map)
    info: dict = field(default_factory=dict)
    ops: dict = field(default_factory=dict)  # code -> (name, layer code)
    files: dict = field(default_factory=dict)  # local id -> (path, dev, ino)
    chunks: np.ndarray = field(default_factory=_no_rows)  # the index rows of its readable EVENTS chunks
    problems: list[str] = field(default_factory=list)
    major: int = MAJOR  # its format version

    def summed(self, column: int) -> bool:
        """Whether stored column `column` holds differences, summed within each chunk to give the values: the
        offsets, and from version 3 on req_bytes, aux, call_id, parent and coll_seq."""
        return column == OFFSET_DELTA or (self.major >= 3 and column in (REQ, AUX, CALL_ID, PARENT, COLL_SEQ))

    @cached_property
    def events(self) -> int:
        """Events in all chunks (read once the chunk directory is complete)."""
        return int(self.chunks[:, ROW_COUNT].sum())

    @cached_property
    def directory(self) -> np.ndarray:
        """Per chunk and stored column: (mode, body start, body end, events), contiguous as the native decoder
        takes it (built once: each column decoded would copy it otherwise)."""
        return np.ascontiguousarray(self.chunks[:, ROW_DIRECTORY:]).reshape(len(self.chunks), STORED_COLUMNS, 4)

    # ---- decoding ----

    def stored(self, column: int, positions: np.ndarray | None = None, out: np.ndarray | None = None,
               running: bool = False) -> np.ndarray:
        """Stored column `column` of every chunk (zigzag undone; summed within each chunk when `running`), as int64
        or in the integer type of `out`: in chunk order (in the first rows of `out` when given), or with stored
        value i at row positions[i] of `out` (int32 positions, distinct rows of out; out has a row per event if
        not given)."""
        if positions is not None and out is None:
            out = np.empty(self.events, np.int64)
        if not len(self.chunks):
            return np.zeros(0, np.int64) if out is None else out
        native = decode_column(self.data, self.directory, column, self.events, positions, out, running)
        if native is not None:
            return native
        values = self._stored_numpy(column)
        if running:
            values = self._running(values, np.zeros(len(self.chunks), np.int64))
        if positions is not None:
            assert out is not None  # made above when positions are given without it
            out[positions] = values
            return out
        if out is not None:
            out[:len(values)] = values
            return out[:len(values)]
        return values

    def _stored_numpy(self, column: int) -> np.ndarray:
        """stored() without the native decoder: a few vectorised passes over all chunks."""
        modes, begins, ends, _ = self.directory[:, column].T
        bodies = [self.data[begin:end] for begin, end in zip(begins.tolist(), ends.tolist())]
        buf = np.concatenate(bodies)
        values = decode_varints(buf)
        starts = np.cumsum([0] + [len(b) for b in bodies[:-1]])
        first = np.concatenate(([0], np.cumsum(count_varints(buf, starts))[:-1]))
        # how many times each decoded varint appears in the column: 1 for plain values, n for a constant,
        # the run length for a run value, 0 for run counts and run lengths
        counts, _ = self.chunk_firsts()
        if (modes == CONST).all():
            signed = unzigzag(values)
            return np.full(self.events, signed[0]) if (signed == signed[0]).all() else np.repeat(signed, counts)
        repeat = np.ones(len(values), np.int64)
        constant = modes == CONST
        repeat[first[constant]] = counts[constant]
        for at in first[modes == RUNS].tolist():
            runs = int(values[at])
            repeat[at] = 0
            repeat[at + 1:at + 1 + runs] = values[at + 1 + runs:at + 1 + 2 * runs].view(np.int64)
            repeat[at + 1 + runs:at + 1 + 2 * runs] = 0
        signed = unzigzag(values)  # before repeating: a constant column is one value per chunk
        out = signed if len(signed) == self.events and (repeat == 1).all() else np.repeat(signed, repeat)
        if len(out) != self.events:
            raise TraceDamaged(f"column {column} decodes to {len(out)} values for {self.events} events")
        return out

    def subset(self, chunks: np.ndarray) -> StreamFile:
        """The same stream restricted to the events chunks `chunks` (indices, in the order given)."""
        return StreamFile(self.path, self.data, self.info, self.ops, self.files, self.chunks[chunks], self.problems,
                          self.major)

    def forget_pages(self, end: int | None = None) -> None:
        """Hand the mapped pages (those before byte `end`, or all) back to the page cache: they are read again
        from it when touched."""
        mapped = getattr(self.data.base, "obj", None)  # np.frombuffer keeps a memoryview of the map
        if not isinstance(mapped, mmap.mmap):  # an empty file has no map
            return
        length = len(mapped) if end is None else end // mmap.PAGESIZE * mmap.PAGESIZE
        if length:
            mapped.madvise(mmap.MADV_DONTNEED, 0, length)

    def chunk_firsts(self) -> tuple[np.ndarray, np.ndarray]:
        counts = self.chunks[:, ROW_COUNT]
        return counts, np.concatenate(([0], np.cumsum(counts)[:-1]))

    def _running(self, steps: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """One running sum over all chunks where each chunk's sum starts from starts[k]: the step at a chunk's
        first event is adjusted by what the previous chunks added, so a single cumsum does every chunk."""
        _, firsts = self.chunk_firsts()
        totals = np.add.reduceat(steps, firsts)
        ends = starts + totals  # where each chunk's sum ends
        steps[firsts] += starts - np.concatenate(([0], ends[:-1]))
        return np.cumsum(steps, out=steps)

    def times(self, clock: ClockLine) -> tuple[np.ndarray, np.ndarray]:
        """(t_start, t_end) on the trace's clock (`clock` corrects local monotonic ns): t_start[i] = t_base + gaps
        up to i + durations before i."""
        if not len(self.chunks):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        t_base = self.chunks[:, ROW_T_BASE]
        native = decode_times(self.data, self.directory, t_base, clock, self.events)
        if native is not None:
            return native
        duration = self.stored(DURATION)
        steps = self.stored(GAP)
        steps[1:] += duration[:-1]
        _, firsts = self.chunk_firsts()
        steps[firsts[1:]] -= duration[firsts[1:] - 1]  # a chunk's first gap counts from its own t_base
        start = self._running(steps, t_base)
        end = start + duration
        shift = clock.shift(start)
        start += shift
        end += shift
        return start, end

    def tids(self) -> np.ndarray:
        counts, _ = self.chunk_firsts()
        return np.repeat(self.chunks[:, ROW_TID].astype(np.int32), counts)


def _cstrings(payload: bytes, pos: int) -> tuple[str, int]:
    end = payload.find(b"\0", pos)
    if end < 0:
        raise ValueError("string without its terminating NUL")
    return payload[pos:end].decode("utf-8", "replace"), end + 1


INT32_MAX = (1 << 31) - 1
INT62 = 1 << 62  # times and clock offsets: room to add them without leaving int64
COUNT_MAX = (1 << 63) - 1
# The INFO keys whose values the reader uses (docs/trace-format.md, "INFO keys"): how many integers, their range,
# and what they are. A key ending in ":" stands for every key it begins. Other keys are text.
INFO_NUMBERS = {
    "pid": (1, 0, INT32_MAX, "a process id"), "ppid": (1, 0, INT32_MAX, "a process id"),
    "rank": (1, 0, INT32_MAX, "an MPI rank"), "nranks": (1, 1, INT32_MAX, "a number of MPI ranks"),
    "start_monotonic_ns": (1, 0, INT62, "a time in ns"), "start_realtime_ns": (1, 0, COUNT_MAX, "a time in ns"),
    "clock_init": (3, -INT62, INT62, "three integers: local ns, offset ns, error ns"),
    "clock_finalize": (3, -INT62, INT62, "three integers: local ns, offset ns, error ns"),
    "exclude:": (2, 0, COUNT_MAX, "two counts: calls and bytes"),
    "include:": (2, 0, COUNT_MAX, "two counts: calls and bytes"),
    "dropped_events": (1, 0, COUNT_MAX, "a count"), "write_failed_events": (1, 0, COUNT_MAX, "a count"),
    "write_error": (1, 1, 4095, "an errno number"),
    "shared_buffer_events": (1, 0, COUNT_MAX, "a count"), "shared_buffer_wait_ns": (1, 0, COUNT_MAX, "a count"),
    "clean_exit": (1, 1, 1, "1"), "ended_by_exec": (1, 1, 1, "1"),
    "folded_events": (1, 0, COUNT_MAX, "a count"), "fold_fallback:": (1, 0, COUNT_MAX, "a count"),
    "fold_quantum_ns": (1, 1, 10 ** 9, "a time in ns (1 to 10^9)"),
    "fold_checked_events": (1, 0, COUNT_MAX, "a count"), "fold_check_failed_events": (1, 0, COUNT_MAX, "a count"),
}
FILE_ID_MAX = (1 << 24) - 1  # the reader keeps a dense table of a stream's file ids
OP_CODE_MAX = (1 << 15) - 1  # an op code is an index of the int16 op dictionary (model.py EVENT_SCHEMA)


def _info_rule(key: str) -> tuple[int, int, int, str] | None:
    rule = INFO_NUMBERS.get(key)
    if rule is None and ":" in key:
        rule = INFO_NUMBERS.get(key[:key.index(":") + 1])
    return rule


def _check_info(key: str, value: str) -> None:
    """Raises ValueError when the value of a key the reader uses is not what the format says."""
    rule = _info_rule(key)
    if rule is None:
        return
    count, low, high, what = rule
    parts = value.split()
    if len(parts) != count or not all(p.lstrip("-").isdigit() and p.isascii() for p in parts) \
            or not all(low <= int(p) <= high for p in parts):
        raise ValueError(f"INFO {key} = {value[:40]!r} is not {what}")


def _parse_info(payload: bytes) -> list[tuple[str, str]]:
    pairs, pos = [], 0
    while pos < len(payload):
        key, pos = _cstrings(payload, pos)
        value, pos = _cstrings(payload, pos)
        _check_info(key, value)
        pairs.append((key, value))
    return pairs


def _parse_ops(payload: bytes) -> list[tuple[int, tuple[str, int]]]:
    entries, pos = [], 0
    while pos < len(payload):
        code, pos = read_varint(payload, pos)
        if pos >= len(payload):
            raise ValueError("operation entry without its layer")
        layer = payload[pos]
        name, pos = _cstrings(payload, pos + 1)
        if code > OP_CODE_MAX or layer >= len(LAYER_CODES):
            raise ValueError(f"operation {name[:40]!r} has code {code} or layer {layer} out of range")
        entries.append((code, (name, layer)))
    return entries


def _parse_files(payload: bytes) -> list[tuple[int, tuple[str, int, int]]]:
    entries, pos = [], 0
    while pos < len(payload):
        file_id, pos = read_varint(payload, pos)
        dev, pos = read_varint(payload, pos)
        ino, pos = read_varint(payload, pos)
        path, pos = _cstrings(payload, pos)
        if file_id > FILE_ID_MAX:
            raise ValueError(f"file id {file_id} of {path[:40]!r} is over {FILE_ID_MAX}")
        entries.append((file_id, (path, dev, ino)))  # a later entry (inode learnt) replaces an earlier one
    return entries


U64 = (1 << 64) - 1


def _zigzag_step(payload: bytes, pos: int, previous: int) -> tuple[int, int]:
    """A FILE_DELTAS field: previous plus the zigzag change at payload[pos], as 64 bits wrap."""
    change, pos = read_varint(payload, pos)
    return (previous + ((change >> 1) ^ -(change & 1))) & U64, pos


def _parse_file_deltas(payload: bytes) -> list[tuple[int, tuple[str, int, int]]]:
    """FILES entries, each as its changes from the one before (from 3.2; the first from id -1, dev 0, ino 0, path
    "")."""
    entries: list[tuple[int, tuple[str, int, int]]] = []
    pos, file_id, dev, ino, path = 0, U64, 0, 0, b""
    while pos < len(payload):
        file_id, pos = _zigzag_step(payload, pos, file_id + 1)
        dev, pos = _zigzag_step(payload, pos, dev)
        ino, pos = _zigzag_step(payload, pos, ino)
        head, pos = read_varint(payload, pos)
        tail, pos = read_varint(payload, pos)
        end = payload.find(b"\0", pos)
        if end < 0 or head + tail > len(path):
            raise ValueError(f"file entry {len(entries)} keeps {head} + {tail} bytes of a {len(path)}-byte path"
                             if end >= 0 else "string without its terminating NUL")
        path = path[:head] + payload[pos:end] + path[len(path) - tail:]
        pos = end + 1
        if file_id > FILE_ID_MAX:
            raise ValueError(f"file id {file_id} of {path[:40]!r} is over {FILE_ID_MAX}")
        entries.append((file_id, (path.decode("utf-8", "replace"), dev, ino)))
    return entries


# Each metadata chunk type: its parser (entries, or ValueError for the whole chunk) and the table it fills.
PARSERS: dict[int, tuple[Callable[[bytes], list], str]] = {
    INFO: (_parse_info, "info"), OPS: (_parse_ops, "ops"), FILES: (_parse_files, "files"),
    FILE_DELTAS: (_parse_file_deltas, "files")}


def _map(path: Path) -> mmap.mmap | bytes:
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        return mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) if size else b""


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
MAX_CHUNK_EVENTS = 1 << 20  # events in one EVENTS chunk, at most (the writer's buffers hold at most 16384)


def _column_ranges() -> tuple[list[int], list[int]]:
    """The values each stored column may hold: those of the reader's columns that are narrower than int64
    (model.py EVENT_SCHEMA); the others take any int64."""
    low, high = [INT64_MIN] * STORED_COLUMNS, [INT64_MAX] * STORED_COLUMNS
    int32 = np.iinfo(np.int32)
    low[OP], high[OP] = 0, OP_CODE_MAX
    low[LAYER], high[LAYER] = 0, len(LAYER_CODES) - 1
    low[FILE], high[FILE] = -1, FILE_ID_MAX
    low[ERRNO], high[ERRNO] = int(int32.min), int(int32.max)
    return low, high


def index_rules(major: int) -> IndexRules:
    low, high = _column_ranges()
    columns = ctypes.c_int64 * STORED_COLUMNS
    return IndexRules(major, 0, MAX_CHUNK_EVENTS, INT32_MAX, columns(*low), columns(*high))


def _column_status(body: np.ndarray, mode: int, count: int, low: int, high: int) -> int:
    """index.c's check_column: OK when a column body holds exactly `count` values in `mode`, each in [low, high]."""
    ends = np.flatnonzero(body < 0x80)
    lengths = np.diff(ends, prepend=-1)
    if (lengths > 10).any() or ((lengths == 10) & (body[ends] > 1)).any():
        return BAD_COLUMN
    varints = decode_numpy(body)
    if mode == RUNS:
        runs = int(varints[0])
        if runs > count or len(varints) != 1 + 2 * runs:
            return BAD_COLUMN
        run_lengths = varints[1 + runs:]
        if (run_lengths > count).any() or int(run_lengths.sum()) != count:
            return BAD_COLUMN
        values = varints[1:1 + runs]
    else:
        if len(varints) != (1 if mode == CONST else count):
            return BAD_COLUMN
        values = varints
    if low == INT64_MIN and high == INT64_MAX:
        return OK
    signed = unzigzag(values)
    return BAD_VALUE if ((signed < low) | (signed > high)).any() else OK


def _events_row(raw, row: list[int], body: int, rules: IndexRules) -> int:
    """Parses the payload of the EVENTS chunk at raw[body:] into its index row; returns the row's status."""
    end = body + row[ROW_LENGTH]
    chunk = memoryview(raw)[:end]  # varints must not run on into the next chunk
    try:
        tid, pos = read_varint(chunk, body)
        count, pos = read_varint(chunk, pos)
        t_base, pos = read_varint(chunk, pos)
    except ValueError:
        return BAD_VARINT
    row[ROW_TID:ROW_DIRECTORY] = tid, count, t_base
    for column in range(STORED_COLUMNS):
        if pos >= end:
            return FEW_COLUMNS
        mode = chunk[pos]
        if mode > RUNS:
            return UNKNOWN_MODE
        try:
            length, pos = read_varint(chunk, pos + 1)
        except ValueError:
            return BAD_VARINT
        if length == 0 or pos + length > end or chunk[pos + length - 1] >= 0x80:
            return BODY_OVERRUN
        at = ROW_DIRECTORY + 4 * column
        row[at:at + 4] = mode, pos, pos + length, count
        pos += length
    if count == 0:
        return NO_EVENTS
    if tid > rules.max_tid or count > rules.max_events or t_base > INT64_MAX:
        return BAD_VALUE
    data = np.frombuffer(chunk, np.uint8)
    for column in range(STORED_COLUMNS):
        mode, begin, end, _ = row[ROW_DIRECTORY + 4 * column:ROW_DIRECTORY + 4 * column + 4]
        status = _column_status(data[begin:end], mode, count, rules.low[column], rules.high[column])
        if status != OK:
            return status
    return OK


def _chain_start(raw, major: int, previous: int) -> int:
    """What a chunk's checksum goes on from: the one stored by the chunk before it, and from format 3 on the
    stream's file header after it (trace_format.h, ioloom_chain_stream_chunk)."""
    return zlib.crc32(memoryview(raw)[:16], previous) if major >= 3 else previous


def _checksum_holds(raw, pos: int, length: int, crc: int, major: int, previous: int) -> bool:
    """index.c's checksum_holds: from format 2 on the checksum covers the chunk's type and length, then its payload,
    going on from `previous`, the checksum stored by the chunk before it (through the file header from 3 on)."""
    body = memoryview(raw)[pos + CHUNK_HEADER.size:pos + CHUNK_HEADER.size + length]
    start = zlib.crc32(memoryview(raw)[pos:pos + 8], _chain_start(raw, major, previous)) if major >= 2 else 0
    return zlib.crc32(body, start) == crc


def rechain(data: bytes) -> bytes:
    """A stream of format 2 or 3 (its header's) with every whole chunk's checksum computed again, each going on from
    the one before: what a tool that crafts chunks (tests, `ioloom bench fuzz`) writes so that the reader judges
    their contents."""
    out = bytearray(data)
    pos, previous = struct.unpack_from("<I", data, 12)[0], 0
    major = struct.unpack_from("<H", data, 8)[0]
    while pos + CHUNK_HEADER.size <= len(out):
        length = CHUNK_HEADER.unpack_from(out, pos)[1]
        if pos + CHUNK_HEADER.size + length > len(out):
            break
        previous = zlib.crc32(memoryview(out)[pos + CHUNK_HEADER.size:pos + CHUNK_HEADER.size + length],
                              zlib.crc32(memoryview(out)[pos:pos + 8], _chain_start(out, major, previous)))
        struct.pack_into("<I", out, pos + 8, previous)
        pos += CHUNK_HEADER.size + length
    return bytes(out)


def _index_python(raw, first: int, limit: int, room: int, rules: IndexRules) -> np.ndarray:
    """index.c's ioloom_index_chunks in Python, for when the native library is not built."""
    rows: list[list[int]] = []
    pos, previous = first, rules.previous
    while len(rows) < room and pos < len(raw) and pos < limit:
        row = [pos, -1, -1, OK] + [0] * (ROW_FIELDS - 4)
        rows.append(row)
        if len(raw) - pos < CHUNK_HEADER.size:
            row[ROW_STATUS] = TRUNCATED_HEADER
            break
        kind, length, crc = CHUNK_HEADER.unpack_from(raw, pos)
        body = pos + CHUNK_HEADER.size
        row[ROW_TYPE:ROW_STATUS] = kind, length
        if length > len(raw) - body:
            row[ROW_STATUS] = TRUNCATED_BODY
            break
        if not _checksum_holds(raw, pos, length, crc, rules.major, previous):
            row[ROW_STATUS] = CHECKSUM
        elif kind == EVENTS:
            row[ROW_STATUS] = _events_row(raw, row, body, rules)
        pos, previous = body + length, crc
    return np.array(rows, np.int64).reshape(len(rows), ROW_FIELDS)


def _index(raw, data: np.ndarray, first: int, limit: int, rules: IndexRules, room: int = 4096) -> np.ndarray:
    """Index rows of up to `room` chunks that start at byte `first` and before byte `limit`."""
    rows = index_chunks(data, first, limit, room, ROW_FIELDS, rules)
    return rows if rows is not None else _index_python(raw, first, limit, room, rules)


def _problem(name: str, row: np.ndarray, size: int) -> str | None:
    """What the reader says about an index row that is not a readable EVENTS or metadata chunk (None if fine)."""
    pos, kind, length, status = (int(v) for v in row[:ROW_TID])
    if status == TRUNCATED_HEADER:
        return f"{name}: truncated at byte {pos} ({size - pos} bytes of an incomplete chunk header); events up to " \
               f"there are read"
    if status == TRUNCATED_BODY:
        return f"{name}: truncated at byte {pos} (a chunk of {length} bytes has only " \
               f"{size - pos - CHUNK_HEADER.size}); events up to there are read"
    if status == CHECKSUM:
        return f"{name}: chunk at byte {pos} (type {kind}, {length} bytes) fails its checksum (damaged, or a chunk " \
               f"before it was removed or this one moved); skipped"
    if status != OK:
        return f"{name}: events chunk at byte {pos} is malformed ({EVENTS_PROBLEMS[status]}); skipped"
    if kind not in PARSERS:
        return f"{name}: unknown chunk type {kind} at byte {pos} skipped (written by a newer ioloom?)"
    return None


def read_stream_file(path: Path) -> StreamFile:
    """The chunk directory of one stream file; what cannot be read is said in its `problems`."""
    stream = _read_chunks(path)
    read_accounting(stream)
    return stream


def _read_chunks(path: Path) -> StreamFile:
    raw = _map(path)
    stream = StreamFile(path, np.frombuffer(raw, np.uint8))
    name = path.name
    if not len(raw):
        stream.problems.append(f"{name}: empty: the tracer could not write its stream (disk full?); skipped")
        return stream
    if len(raw) < 16 or raw[:8] != MAGIC:
        stream.problems.append(f"{name}: not an ioloom trace stream (no IOLOOMTR header); skipped")
        return stream
    major, minor, header = struct.unpack_from("<HHI", raw, 8)
    if major not in MAJORS:
        stream.problems.append(f"{name}: format version {major}.{minor}, this reader reads {MAJORS[0]}.x to "
                               f"{MAJORS[-1]}.x; skipped (upgrade ioloom to read it)")
        return stream
    if header < 16 or header > len(raw):
        stream.problems.append(f"{name}: header size {header} is not 16 to the file's size; skipped")
        return stream
    stream.major = major
    rules = index_rules(major)
    events = []
    folded = []  # the offsets of the readable FOLDED chunks (from 3.1 on)
    pos = header
    closing = None  # the offset of the last chunk that says clean_exit
    while pos < len(raw):
        limit = (pos >> FORGET_EVERY) + 1 << FORGET_EVERY  # checked pages go back as the scan goes
        rows = _index(raw, stream.data, pos, limit, rules)
        readable = (rows[:, ROW_TYPE] == EVENTS) & (rows[:, ROW_STATUS] == OK)
        events.append(rows[readable])
        for row in rows[~readable]:  # metadata and problems: a few rows, in file order
            if row[ROW_TYPE] == FOLDED and row[ROW_STATUS] == OK and major >= 3:
                folded.append(int(row[ROW_OFFSET]))
                continue
            problem = _problem(name, row, len(raw))
            if problem:
                stream.problems.append(problem)
            else:
                entries = _parse_metadata(stream, raw, row)
                if row[ROW_TYPE] == INFO and any(key == "clean_exit" for key, _ in entries):
                    closing = int(row[ROW_OFFSET])
        last = rows[-1]
        if last[ROW_STATUS] in (TRUNCATED_HEADER, TRUNCATED_BODY):
            break
        pos = int(last[ROW_OFFSET] + CHUNK_HEADER.size + last[ROW_LENGTH])
        rules.previous = CHUNK_HEADER.unpack_from(raw, int(last[ROW_OFFSET]))[2]
        stream.forget_pages(pos)
    if major >= 2 and closing is not None and closing != int(last[ROW_OFFSET]) \
            and last[ROW_STATUS] not in (TRUNCATED_HEADER, TRUNCATED_BODY):
        # the tracer states clean_exit again after anything it writes later: its stream ends with it
        stream.problems.append(f"{name}: chunks follow its clean-exit record but not the record written after "
                               f"them: the stream was cut at byte {len(raw)}; events up to there are read")
    chunks = np.concatenate(events) if events else _no_rows()
    if folded:
        chunks = _with_unfolded(stream, raw, chunks, folded, rules)
    stream.chunks = _without_repeats(stream, chunks)
    stream.forget_pages()
    return stream


def _with_unfolded(stream: StreamFile, raw, chunks: np.ndarray, folded: list[int], rules: IndexRules) -> np.ndarray:
    """The EVENTS chunks' rows with those of the FOLDED chunks at `folded` (offsets) unfolded, in file order. The
    unfolded EVENTS chunks follow a copy of the file in stream.data (each chunk's checksum going on from the file
    header), so that their events decode as any others'; a chunk that does not unfold is a problem. `rules`: the
    stream's, whose chain is set to go on from the file header."""
    whole = bytearray(raw)  # the decoder reads one buffer: the file, then each unfolded chunk, held once
    starts, origins, chain = [], [], _chain_start(raw, stream.major, 0)
    for pos in folded:
        length = CHUNK_HEADER.unpack_from(raw, pos)[1]
        try:
            made = unfold(bytes(raw[pos + CHUNK_HEADER.size:pos + CHUNK_HEADER.size + length]))
        except FoldedMalformed as err:
            stream.problems.append(f"{stream.path.name}: folded chunk at byte {pos} is malformed ({err}); skipped")
            continue
        at = len(whole)
        whole += made
        with memoryview(whole) as view:  # released before the next chunk grows the buffer
            crc = zlib.crc32(view[at + CHUNK_HEADER.size:], zlib.crc32(view[at:at + 8], chain))
        struct.pack_into("<I", whole, at + 8, crc)
        starts.append(at)
        origins.append(pos)
    if not starts:
        return chunks
    stream.data = np.frombuffer(whole, np.uint8)
    rules.previous = 0  # each unfolded chunk's checksum goes on from the file header alone
    rows, kept = [chunks], []
    for at, pos in zip(starts, origins):
        row = _index(whole, stream.data, at, at + 1, rules, room=1)
        if row[0, ROW_STATUS] != OK:  # the unfolded chunk breaks a rule of EVENTS chunks (a value's range)
            stream.problems.append(f"{stream.path.name}: folded chunk at byte {pos} unfolds to a malformed events "
                                   f"chunk ({EVENTS_PROBLEMS.get(int(row[0, ROW_STATUS]), 'checksum')}); skipped")
            continue
        rows.append(row)
        kept.append(pos)
    together = np.concatenate(rows)
    origin = np.concatenate((chunks[:, ROW_OFFSET], np.array(kept, np.int64)))
    return together[np.argsort(origin, kind="stable")]


def _without_repeats(stream: StreamFile, chunks: np.ndarray) -> np.ndarray:
    """The EVENTS chunks less those that repeat an earlier one byte for byte (same thread, start, events, length
    and checksum: the writer never writes a chunk twice, so a copy is damage and would count its events twice)."""
    if len(chunks) < 2:
        return chunks
    offsets = chunks[:, ROW_OFFSET]
    checksum = np.zeros((len(chunks), 1), np.int64)  # read below, of the chunks that need it
    keys = np.hstack((chunks[:, [ROW_TID, ROW_T_BASE, ROW_COUNT, ROW_LENGTH]], checksum))
    order = np.lexsort(keys.T[::-1])  # stable: the earliest of equal chunks comes first
    same = _same_as_previous(keys[order])
    if not same.any():
        return chunks
    # Only chunks equal in the index's fields can be repeats: their checksums alone are read (the header of every
    # chunk would bring the whole file's pages back into memory after the scan handed them back).
    candidates = np.union1d(order[same], order[np.flatnonzero(same) - 1])
    keys[candidates, -1] = stream.data[offsets[candidates, None] + np.arange(8, 12)].astype(np.int64) \
        @ (1 << np.arange(0, 32, 8))
    stream.forget_pages()
    order = np.lexsort(keys.T[::-1])
    same = _same_as_previous(keys[order])
    if not same.any():
        return chunks
    first = order[np.maximum.accumulate(np.where(same, 0, np.arange(len(order))))]  # of each one's group
    repeats = np.sort(order[same])
    original = dict(zip(order[same].tolist(), first[same].tolist()))
    for k in repeats.tolist():
        stream.problems.append(f"{stream.path.name}: events chunk at byte {int(offsets[k])} repeats the one at byte "
                               f"{int(offsets[original[k]])}; skipped")
    return np.delete(chunks, repeats, axis=0)


def _same_as_previous(ordered: np.ndarray) -> np.ndarray:
    """Whether each row of sorted keys equals the row before it."""
    return np.concatenate(([False], (ordered[1:] == ordered[:-1]).all(axis=1)))


def read_accounting(stream: StreamFile) -> None:
    """Adds the accounting the tracer put in the stream file's extended attribute when the stream itself could not
    hold it (the disk was full): counts take the larger of the two, other keys fill what the stream lacks."""
    try:
        payload = os.getxattr(stream.path, ACCOUNTING_XATTR)
    except OSError:  # none (the usual case), or a file system without extended attributes
        return
    try:
        pairs = _parse_info(payload)
    except ValueError as err:
        stream.problems.append(f"{stream.path.name}: its {ACCOUNTING_XATTR} attribute is malformed ({err}); ignored")
        return
    for key, value in pairs:
        counted = key in ("dropped_events", "write_failed_events")
        if key not in stream.info or (counted and int(value) > int(stream.info[key])):
            stream.info[key] = value


def _parse_metadata(stream: StreamFile, raw, row: np.ndarray) -> list:
    """A metadata chunk into its table: all its entries, or none when one is malformed."""
    pos, kind, length = int(row[ROW_OFFSET]), int(row[ROW_TYPE]), int(row[ROW_LENGTH])
    body = pos + CHUNK_HEADER.size
    parse, table = PARSERS[kind]
    try:
        entries = parse(bytes(raw[body:body + length]))  # one copy, then searches without copying
    except ValueError as err:
        stream.problems.append(f"{stream.path.name}: chunk at byte {pos} (type {kind}) is malformed ({err}); skipped")
        return []
    getattr(stream, table).update(entries)
    return entries
