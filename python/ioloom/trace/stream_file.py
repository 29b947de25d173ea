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
                                 read_varint, unzigzag)

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


@dataclass
class EventChunk:
    tid: int
    count: int
    t_base: int
    columns: list[tuple[int, int, int]]  # per stored column: (mode, start, end) of its body in the file


@dataclass
class StreamFile:
    """What one stream file holds, before its events are decoded."""
    path: Path
    data: np.ndarray  # the file's bytes (a read-only memory map)
    info: dict = field(default_factory=dict)
    ops: dict = field(default_factory=dict)  # code -> (name, layer code)
    files: dict = field(default_factory=dict)  # local id -> (path, dev, ino)
    chunks: list[EventChunk] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    _directory: np.ndarray | None = field(default=None, repr=False)

    @cached_property
    def events(self) -> int:
        """Events in all chunks (read once the chunk directory is complete)."""
        return sum(c.count for c in self.chunks)

    # ---- decoding ----

    def stored(self, column: int, positions: np.ndarray | None = None, out: np.ndarray | None = None,
               running: bool = False) -> np.ndarray:
        """Stored column `column` of every chunk (zigzag undone; summed within each chunk when `running`), as int64
        or in the integer type of `out`: in chunk order (in the first rows of `out` when given), or with stored
        value i at row positions[i] of `out` (int32 positions, distinct rows of out; out has a row per event if
        not given)."""
        if positions is not None and out is None:
            out = np.empty(self.events, np.int64)
        if not self.chunks:
            return np.zeros(0, np.int64) if out is None else out
        native = decode_column(self.data, self.directory(), column, self.events, positions, out, running)
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

    def directory(self) -> np.ndarray:
        """Per chunk and stored column: (mode, body start, body end, events), int64, built once."""
        if self._directory is None:
            rows = [[(*body, c.count) for body in c.columns] for c in self.chunks]
            self._directory = np.array(rows, np.int64).reshape(len(rows), STORED_COLUMNS, 4)
        return self._directory

    def _stored_numpy(self, column: int) -> np.ndarray:
        """stored() without the native decoder: a few vectorised passes over all chunks."""
        bodies = [self.data[c.columns[column][1]:c.columns[column][2]] for c in self.chunks]
        buf = np.concatenate(bodies)
        values = decode_varints(buf)
        starts = np.cumsum([0] + [len(b) for b in bodies[:-1]])
        first = np.concatenate(([0], np.cumsum(count_varints(buf, starts))[:-1]))
        # how many times each decoded varint appears in the column: 1 for plain values, n for a constant,
        # the run length for a run value, 0 for run counts and run lengths
        modes = np.array([c.columns[column][0] for c in self.chunks], np.uint8)
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
        part = StreamFile(self.path, self.data, self.info, self.ops, self.files, [self.chunks[k] for k in chunks],
                          self.problems)
        part._directory = self.directory()[chunks]
        return part

    def forget_pages(self, end: int | None = None) -> None:
        """Hand the mapped pages (those before byte `end`, or all) back to the page cache: they are read again
        from it when touched."""
        mapped = getattr(self.data.base, "obj", None)  # np.frombuffer keeps a memoryview of the map
        length = len(mapped) if end is None or not isinstance(mapped, mmap.mmap) else end // mmap.PAGESIZE * mmap.PAGESIZE
        if isinstance(mapped, mmap.mmap) and length:
            mapped.madvise(mmap.MADV_DONTNEED, 0, length)

    def chunk_firsts(self) -> tuple[np.ndarray, np.ndarray]:
        counts = np.array([c.count for c in self.chunks], np.int64)
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
        if not self.chunks:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        t_base = np.array([c.t_base for c in self.chunks], np.int64)
        native = decode_times(self.data, self.directory(), t_base, clock, self.events)
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
        return np.repeat(np.array([c.tid for c in self.chunks], np.int32), counts)


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


def _parse_events(stream: StreamFile, payload: memoryview, base: int) -> None:
    tid, pos = read_varint(payload, 0)
    count, pos = read_varint(payload, pos)
    t_base, pos = read_varint(payload, pos)
    columns = []
    for _ in range(STORED_COLUMNS):
        if pos >= len(payload):
            raise ValueError("fewer columns than the format has")
        mode = payload[pos]
        if mode > RUNS:
            raise ValueError(f"unknown column mode {mode}")
        length, pos = read_varint(payload, pos + 1)
        if pos + length > len(payload) or length == 0 or payload[pos + length - 1] >= 0x80:
            raise ValueError("column body overruns its chunk")
        columns.append((mode, base + pos, base + pos + length))
        pos += length
    if count == 0:
        raise ValueError("chunk with no events")
    stream.chunks.append(EventChunk(tid, count, t_base, columns))


PARSERS = {INFO: _parse_info, OPS: _parse_ops, FILES: _parse_files}


def _map(path: Path) -> mmap.mmap | bytes:
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        return mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) if size else b""


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
    view = memoryview(raw)
    pos = header
    while pos < len(raw):
        if pos + CHUNK_HEADER.size > len(raw):
            stream.problems.append(f"{name}: truncated at byte {pos} ({len(raw) - pos} bytes of an incomplete chunk "
                                   f"header); events up to there are read")
            break
        kind, length, crc = CHUNK_HEADER.unpack_from(raw, pos)
        body = pos + CHUNK_HEADER.size
        if body + length > len(raw):
            stream.problems.append(f"{name}: truncated at byte {pos} (a chunk of {length} bytes has only "
                                   f"{len(raw) - body}); events up to there are read")
            break
        payload = view[body:body + length]
        if zlib.crc32(payload) != crc:
            stream.problems.append(f"{name}: chunk at byte {pos} (type {kind}, {length} bytes) fails its checksum; "
                                   f"skipped")
        elif kind == EVENTS:
            try:
                _parse_events(stream, payload, body)
            except ValueError as err:
                stream.problems.append(f"{name}: events chunk at byte {pos} is malformed ({err}); skipped")
        elif kind in PARSERS:
            try:
                PARSERS[kind](stream, bytes(payload))  # metadata: one copy, then searches without copying
            except (ValueError, IndexError) as err:
                stream.problems.append(f"{name}: chunk at byte {pos} (type {kind}) is malformed ({err}); skipped")
        else:
            stream.problems.append(f"{name}: unknown chunk type {kind} at byte {pos} skipped (written by a newer "
                                   f"ioloom?)")
        pos = body + length
        if pos >> FORGET_EVERY != body >> FORGET_EVERY:  # checked pages go back as the scan goes
            stream.forget_pages(pos)
    stream.forget_pages()
    return stream
