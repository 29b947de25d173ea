"""Vectorised decoding of the trace format's integers: LEB128 varints, zigzag signs, and the column modes of an
EVENTS chunk, and the clock correction of times. Every function works on whole numpy arrays, never one value at a
time; the native decoder (native/trace/decode.c) does the same in one pass per column when it is built."""
from __future__ import annotations

import ctypes
import os
from functools import lru_cache

import numpy as np
import pyarrow as pa

from ioloom import paths
from ioloom.trace.model import TraceDamaged

CONST, VARINT, RUNS = 0, 1, 2


POOLED_BYTES = 32 << 20  # larger blocks the pool's allocator (mimalloc) gives back to the OS when freed


def empty(rows: int, dtype=np.int64) -> np.ndarray:
    """An uninitialised array for a decoded column. Up to POOLED_BYTES it comes from Arrow's memory pool, which
    hands freed memory out again (a table takes the array without a copy), where a fresh numpy array of a
    stream's size is faulted in page by page on every read. Larger ones are numpy's, which asks for huge pages:
    512 times fewer faults than the pool's pages straight from the OS."""
    dtype = np.dtype(dtype)
    if rows * dtype.itemsize > POOLED_BYTES:
        return np.empty(rows, dtype)
    return np.frombuffer(pa.allocate_buffer(rows * dtype.itemsize), dtype)


class ClockLine(ctypes.Structure):
    """The correction from a process's clock to the trace's: local time t becomes
    t + int64(offset + (t - origin) * drift) - epoch, or t + offset - epoch when drift is 0."""
    _fields_ = [("origin", ctypes.c_int64), ("offset", ctypes.c_int64), ("drift", ctypes.c_double),
                ("epoch", ctypes.c_int64)]

    def shift(self, t: np.ndarray) -> np.ndarray:
        """What to add to local times t (int64), as the native decoder computes it."""
        if self.drift == 0:
            return np.full_like(t, self.offset - self.epoch)
        return (self.offset + (t - self.origin) * self.drift).astype(np.int64) - self.epoch


STORED_COLUMNS = 14  # columns of an EVENTS chunk (trace_format.h, enum ioloom_column)


class IndexRules(ctypes.Structure):
    """What the chunk index checks (index.c, struct ioloom_index_rules): the stream's format version (from 2 on, a
    chunk's checksum covers its type and length and goes on from the previous chunk's), the checksum stored by the
    chunk before the first one indexed, the most events and the highest thread id of a chunk, and the range of
    each stored column's values."""
    _fields_ = [("major", ctypes.c_int64), ("previous", ctypes.c_int64), ("max_events", ctypes.c_int64),
                ("max_tid", ctypes.c_int64),
                ("low", ctypes.c_int64 * STORED_COLUMNS), ("high", ctypes.c_int64 * STORED_COLUMNS)]


@lru_cache(maxsize=1)
def _native_library():
    """libioloom-trace-decode.so when it is built, else None (numpy decodes)."""
    try:
        lib = ctypes.CDLL(str(paths.native_lib("ioloom-trace-decode")))
    except (paths.NativeMissing, OSError):
        return None
    buffer = [ctypes.c_void_p, ctypes.c_size_t]  # pointer and length
    lib.ioloom_decode_varints.argtypes = buffer * 2
    # data, directory, column, running, out and its element width, room, positions, threads
    lib.ioloom_decode_column.argtypes = buffer * 2 + [ctypes.c_int, ctypes.c_int] + buffer + [
        ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int]
    # data, directory, t_base, clock line, start, end, room, threads
    lib.ioloom_decode_times.argtypes = buffer * 2 + [ctypes.c_void_p, ctypes.POINTER(ClockLine), ctypes.c_void_p,
                                                     ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    # data, first, limit, rows, room, threads, rules
    lib.ioloom_index_chunks.argtypes = buffer + [ctypes.c_size_t] * 2 + [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                                                        ctypes.POINTER(IndexRules)]
    for decode in (lib.ioloom_decode_varints, lib.ioloom_decode_column, lib.ioloom_decode_times,
                   lib.ioloom_index_chunks):
        decode.restype = ctypes.c_int64
    # FOLDED chunks (fold.h): payload and length; then out and its room
    lib.ioloom_folded_events.argtypes = buffer
    lib.ioloom_folded_events.restype = ctypes.c_uint32
    lib.ioloom_unfold_events.argtypes = buffer * 2
    lib.ioloom_unfold_events.restype = ctypes.c_int64
    lib.ioloom_events_bound.argtypes = [ctypes.c_size_t]  # the room an EVENTS chunk of n events may take
    lib.ioloom_events_bound.restype = ctypes.c_size_t
    lib.ioloom_gather.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
    return lib


THREADS_VARIABLE = "IOLOOM_READER_THREADS"


def decode_threads() -> int:
    """Threads the native decoder may share a long column among: $IOLOOM_READER_THREADS, else the CPUs this
    process may run on (analysis workers set it to their share of the CPUs)."""
    try:
        return max(1, int(os.environ.get(THREADS_VARIABLE, "")))
    except ValueError:
        return len(os.sched_getaffinity(0))


def _native_decoder():
    lib = _native_library()
    return lib.ioloom_decode_varints if lib is not None else None


def index_chunks(data: np.ndarray, first: int, limit: int, room: int, fields: int,
                 rules: IndexRules) -> np.ndarray | None:
    """The chunk index rows (`fields` int64 each, stream_file.ROW_*) of up to `room` chunks of the stream file
    `data` that start at byte `first` and before byte `limit`, checksums and EVENTS chunks checked against
    `rules`; None when the native library is not built."""
    lib = _native_library()
    if lib is None:
        return None
    rows = np.empty((room, fields), np.int64)
    n = lib.ioloom_index_chunks(data.ctypes.data, len(data), first, limit, rows.ctypes.data, room, decode_threads(),
                                ctypes.byref(rules))
    return rows[:n]


def _check(got: int, chunks: int, total: int) -> None:
    """Raises for what the native decoder returned when it did not decode `total` values of `chunks` chunks."""
    if got == -chunks - 1:
        raise MemoryError("no memory to decode a chunk")
    if got < 0:
        raise TraceDamaged(f"column body of events chunk {-got - 1} does not decode to its event count")
    if got != total:
        raise TraceDamaged(f"column decodes to {got} values for {total} events")


def decode_column(data: np.ndarray, directory: np.ndarray, column: int, total: int,
                  positions: np.ndarray | None = None, out: np.ndarray | None = None,
                  running: bool = False) -> np.ndarray | None:
    """Stored column `column` of a stream, decoded natively in one call: `directory` holds per chunk and stored
    column (mode, body start, body end, events), int64; returns the `total` values (signs restored, runs
    expanded, summed within each chunk when `running`), stored value i at row positions[i] of `out` when
    `positions` (int32, distinct rows of out) is given, else in the first `total` rows of `out` when given (int8
    to int64: values are narrowed as they are stored), else as int64; or None when the native decoder is not
    built. Raises ValueError naming the first malformed chunk."""
    lib = _native_library()
    if lib is None:
        return None
    directory = np.ascontiguousarray(directory, np.int64)
    if positions is not None and (positions.dtype != np.int32 or len(positions) != total):
        raise ValueError("positions must be int32, one per event")
    out = empty(total) if out is None else out
    if (out.dtype.kind != "i" or not out.flags.c_contiguous or not out.flags.writeable
            or (positions is None and len(out) < total)):
        raise ValueError("out must be writeable contiguous signed integers with room for every value")
    got = lib.ioloom_decode_column(data.ctypes.data, data.size, directory.ctypes.data, len(directory), column,
                                   running, out.ctypes.data, out.itemsize, total,
                                   None if positions is None else positions.ctypes.data, decode_threads())
    _check(got, len(directory), total)
    return out if positions is not None else out[:total]


def decode_times(data: np.ndarray, directory: np.ndarray, t_base: np.ndarray, clock: ClockLine,
                 total: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The stream's (t_start, t_end) on the trace's clock, in stored order, decoded natively in one call from the
    gap and duration columns (directory as decode_column's, t_base each chunk's base); None when the native
    decoder is not built."""
    lib = _native_library()
    if lib is None:
        return None
    directory = np.ascontiguousarray(directory, np.int64)
    t_base = np.ascontiguousarray(t_base, np.int64)
    start, end = empty(total), empty(total)
    got = lib.ioloom_decode_times(data.ctypes.data, data.size, directory.ctypes.data, len(directory),
                                  t_base.ctypes.data, ctypes.byref(clock), start.ctypes.data, end.ctypes.data,
                                  total, decode_threads())
    _check(got, len(directory), total)
    return start, end


def decode_varints(buf: np.ndarray) -> np.ndarray:
    """All varints in `buf` (uint8, which must end on a complete varint) as uint64."""
    if buf.size == 0:
        return np.zeros(0, np.uint64)
    native = _native_decoder()
    if native is not None and buf.size > 4096:
        buf = np.ascontiguousarray(buf)
        out = np.empty(buf.size, np.uint64)
        count = native(buf.ctypes.data, buf.size, out.ctypes.data, out.size)
        if count < 0:
            raise TraceDamaged("a varint runs past the end of its column")
        return out[:count]
    return decode_numpy(buf)


def decode_numpy(buf: np.ndarray) -> np.ndarray:
    """decode_varints in numpy alone: a few passes, one per byte position."""
    last = buf < 0x80
    if last.all():
        return buf.astype(np.uint64)
    ends = np.flatnonzero(last)
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    lengths = ends - starts + 1
    out = (buf[starts] & 0x7F).astype(np.uint64)
    # byte k of every value that has one; each pass touches fewer values (most are 1-3 bytes)
    for k in range(1, int(lengths.max())):
        longer = np.flatnonzero(lengths > k)
        out[longer] |= (buf[starts[longer] + k] & 0x7F).astype(np.uint64) << np.uint64(7 * k)
    return out


def unzigzag(u: np.ndarray) -> np.ndarray:
    """Zigzag-coded uint64 back to int64: 0, 1, 2, 3 -> 0, -1, 1, -2."""
    return (u >> np.uint64(1)).view(np.int64) ^ -(u & np.uint64(1)).view(np.int64)


def count_varints(buf: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """How many varints each piece buf[starts[i]:starts[i+1]] holds (pieces cover buf)."""
    if buf.size == 0:
        return np.zeros(len(starts), np.int64)
    return np.add.reduceat((buf < 0x80).astype(np.int64), starts) if len(starts) else np.zeros(0, np.int64)


def read_varint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    """One varint at data[pos] (for chunk headers): its value and the position after it."""
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("varint runs past the end of its chunk")
        byte = data[pos]
        pos += 1
        if shift == 63 and byte > 1:
            raise ValueError("varint over 64 bits")
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def reorder(values: np.ndarray, order: np.ndarray) -> np.ndarray:
    """values[order] for an int32 `order` whose entries are all valid rows of values (natively when built)."""
    lib = _native_library()
    if lib is None or order.dtype != np.int32 or values.itemsize not in (1, 2, 4, 8):
        return values.take(order)
    values = np.ascontiguousarray(values)
    out = empty(len(order), values.dtype)
    lib.ioloom_gather(values.ctypes.data, order.ctypes.data, len(order), values.itemsize, out.ctypes.data)
    return out
