"""One stream file (one traced process) of the on-disk format, docs/trace-format.md: its chunk directory,
metadata, op table and file table, read eagerly (small); and its events, decoded on demand, column by column,
with vectorised numpy passes over all the chunks asked for at once.

The file is memory-mapped, not read: its pages belong to the page cache, and a reader hands back the ones it
has decoded (`forget_pages`), so a process holds the events it is working on, not the whole file."""
from __future__ import annotations

import mmap
import struct
import zlib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from ioloom.trace.varint import (CONST, RUNS, ClockLine, count_varints, decode_column, decode_times, decode_varints,
                                 index_chunks, read_varint, unzigzag)

MAGIC = b"IOLOOMTR"
MAJOR = 1
CHUNK_HEADER = struct.Struct("<III")
INFO, OPS, FILES, EVENTS = 1, 2, 3, 4
LAYER_CODES = ("posix", "stdio", "mpiio", "process")
FORGET_EVERY = 26  # log2 of the bytes of a stream file checked between handing its pages back (64 MiB)

# Stored columns of an EVENTS chunk, in order (trace_format.h, enum ioloom_column).
GAP, DURATION, OP, LAYER, FILE, HANDLE, OFFSET_DELTA, REQ, RET_MINUS_REQ, ERRNO, AUX, CALL_ID, PARENT, COLL_SEQ = range(14)
STORED_COLUMNS = 14
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
                   8: "a varint runs past its chunk or over 10 bytes"}
FEW_COLUMNS, UNKNOWN_MODE, BODY_OVERRUN, NO_EVENTS, BAD_VARINT = EVENTS_PROBLEMS


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
            raise ValueError(f"column {column} decodes to {len(out)} values for {self.events} events")
        return out

    def subset(self, chunks: np.ndarray) -> "StreamFile":
        """The same stream restricted to the events chunks `chunks` (indices, in the order given)."""
        return StreamFile(self.path, self.data, self.info, self.ops, self.files, self.chunks[chunks], self.problems)

    def forget_pages(self, end: int | None = None) -> None:
        """Hand the mapped pages (those before byte `end`, or all) back to the page cache: they are read again
        from it when touched."""
        mapped = getattr(self.data.base, "obj", None)  # np.frombuffer keeps a memoryview of the map
        length = len(mapped) if end is None or not isinstance(mapped, mmap.mmap) else end // mmap.PAGESIZE * mmap.PAGESIZE
        if isinstance(mapped, mmap.mmap) and length:
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


def _parse_info(stream: StreamFile, payload: bytes) -> None:
    pos = 0
    while pos < len(payload):
        key, pos = _cstrings(payload, pos)
        value, pos = _cstrings(payload, pos)
        stream.info[key] = value


def _parse_ops(stream: StreamFile, payload: bytes) -> None:
    pos = 0
    while pos < len(payload):
        code, pos = read_varint(payload, pos)
        layer = payload[pos]
        name, pos = _cstrings(payload, pos + 1)
        stream.ops[code] = (name, layer)


def _parse_files(stream: StreamFile, payload: bytes) -> None:
    pos = 0
    while pos < len(payload):
        file_id, pos = read_varint(payload, pos)
        dev, pos = read_varint(payload, pos)
        ino, pos = read_varint(payload, pos)
        path, pos = _cstrings(payload, pos)
        stream.files[file_id] = (path, dev, ino)  # a later entry (inode learnt) replaces an earlier one


PARSERS = {INFO: _parse_info, OPS: _parse_ops, FILES: _parse_files}


def _map(path: Path) -> mmap.mmap | bytes:
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        return mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) if size else b""


def _events_row(raw, row: list[int], body: int) -> int:
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
    return NO_EVENTS if count == 0 else OK


def _index_python(raw, first: int, limit: int, room: int) -> np.ndarray:
    """index.c's ioloom_index_chunks in Python, for when the native library is not built."""
    rows = []
    pos = first
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
        if zlib.crc32(memoryview(raw)[body:body + length]) != crc:
            row[ROW_STATUS] = CHECKSUM
        elif kind == EVENTS:
            row[ROW_STATUS] = _events_row(raw, row, body)
        pos = body + length
    return np.array(rows, np.int64).reshape(len(rows), ROW_FIELDS)


def _index(raw, data: np.ndarray, first: int, limit: int, room: int = 4096) -> np.ndarray:
    """Index rows of up to `room` chunks that start at byte `first` and before byte `limit`."""
    rows = index_chunks(data, first, limit, room, ROW_FIELDS)
    return rows if rows is not None else _index_python(raw, first, limit, room)


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
        return f"{name}: chunk at byte {pos} (type {kind}, {length} bytes) fails its checksum; skipped"
    if status != OK:
        return f"{name}: events chunk at byte {pos} is malformed ({EVENTS_PROBLEMS[status]}); skipped"
    if kind not in PARSERS:
        return f"{name}: unknown chunk type {kind} at byte {pos} skipped (written by a newer ioloom?)"
    return None


def read_stream_file(path: Path) -> StreamFile:
    """The chunk directory of one stream file; what cannot be read is said in its `problems`."""
    raw = _map(path)
    stream = StreamFile(path, np.frombuffer(raw, np.uint8))
    name = path.name
    if len(raw) < 16 or raw[:8] != MAGIC:
        stream.problems.append(f"{name}: not an ioloom trace stream (no IOLOOMTR header); skipped")
        return stream
    major, minor, header = struct.unpack_from("<HHI", raw, 8)
    if major != MAJOR:
        stream.problems.append(f"{name}: format version {major}.{minor}, this reader reads {MAJOR}.x; skipped "
                               f"(upgrade ioloom to read it)")
        return stream
    events = []
    pos = header
    while pos < len(raw):
        limit = (pos >> FORGET_EVERY) + 1 << FORGET_EVERY  # checked pages go back as the scan goes
        rows = _index(raw, stream.data, pos, limit)
        readable = (rows[:, ROW_TYPE] == EVENTS) & (rows[:, ROW_STATUS] == OK)
        events.append(rows[readable])
        for row in rows[~readable]:  # metadata and problems: a few rows, in file order
            problem = _problem(name, row, len(raw))
            if problem:
                stream.problems.append(problem)
            else:
                _parse_metadata(stream, raw, row)
        last = rows[-1]
        if last[ROW_STATUS] in (TRUNCATED_HEADER, TRUNCATED_BODY):
            break
        pos = int(last[ROW_OFFSET] + CHUNK_HEADER.size + last[ROW_LENGTH])
        stream.forget_pages(pos)
    stream.chunks = np.concatenate(events) if events else _no_rows()
    stream.forget_pages()
    return stream


def _parse_metadata(stream: StreamFile, raw, row: np.ndarray) -> None:
    pos, kind, length = int(row[ROW_OFFSET]), int(row[ROW_TYPE]), int(row[ROW_LENGTH])
    body = pos + CHUNK_HEADER.size
    try:
        PARSERS[kind](stream, bytes(raw[body:body + length]))  # one copy, then searches without copying
    except (ValueError, IndexError) as err:
        stream.problems.append(f"{stream.path.name}: chunk at byte {pos} (type {kind}) is malformed ({err}); skipped")
