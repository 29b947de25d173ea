"""`open_trace(path)`: a trace directory (or one stream file) as a `Trace` (model.py).

Streams are indexed when the trace is opened (metadata, file tables, chunk directory, checksums); events are
decoded when a stream's `read()` is called. Times are put on rank 0's clock (offset and drift measured at
MPI_Init and MPI_Finalize) and counted from the trace's epoch, the earliest process start."""
from __future__ import annotations

import errno
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from ioloom.trace.model import EVENT_SCHEMA, FILE_SCHEMA, LAYERS, RANGE_ROWS, Stream, Trace, time_order
from ioloom.trace.stream_file import DIRECT, OFFSET_DELTA, REQ, RET_MINUS_REQ, ROW_T_BASE, StreamFile, read_stream_file
from ioloom.trace.varint import ClockLine, empty, reorder

SUFFIX = ".ioloom"
LAYER_DICTIONARY = pa.array(LAYERS, pa.string())


class TraceNotFound(FileNotFoundError):
    """The path holds no trace stream."""


def _clock(info: dict) -> tuple[tuple[int, int, int] | None, tuple[int, int, int] | None]:
    def parse(key):
        parts = info.get(key, "").split()
        return tuple(int(p) for p in parts) if len(parts) == 3 else None
    return parse("clock_init"), parse("clock_finalize")


def clock_line(info: dict, epoch: int = 0) -> ClockLine:
    """The correction from a stream's local times to rank 0's clock counted from `epoch`: the offset measured at
    init, drifting linearly to the one measured at finalize (constant when only one was measured, zero when
    none)."""
    init, final = _clock(info)
    if init is None or final is None or final[0] == init[0]:
        known = init or final
        return ClockLine(0, known[1] if known else 0, 0.0, epoch)
    return ClockLine(init[0], init[1], (final[1] - init[1]) / (final[0] - init[0]), epoch)


def clock_correction(info: dict, t: np.ndarray) -> np.ndarray:
    """Nanoseconds to add to local times t to get rank 0's clock (see clock_line)."""
    return clock_line(info).shift(t)


def _stream_start(stream: StreamFile) -> int:
    first_chunk = int(stream.chunks[0, ROW_T_BASE]) if len(stream.chunks) else 0
    start = int(stream.info.get("start_monotonic_ns", 0)) or first_chunk
    return start + int(clock_correction(stream.info, np.array([start], np.int64))[0])


def _merge_files(streams: list[StreamFile]) -> tuple[pa.Table, list[np.ndarray]]:
    """One table for all streams: a file is the same across processes when its path and (device, inode) match;
    an entry whose inode was never learnt joins the entry of the same path. Returns the table and, per stream,
    the lookup local id -> merged id."""
    ids: dict[tuple, int] = {}
    by_path: dict[str, int] = {}
    rows: list[tuple[int, str, int, int]] = []
    lookups = []
    for stream in streams:
        lookup = np.full(max(stream.files, default=-1) + 1, -1, np.int32)
        for local, (path, dev, ino) in sorted(stream.files.items()):
            key = (path, dev, ino)
            if key not in ids:
                if dev == 0 and ino == 0 and path in by_path:
                    ids[key] = by_path[path]
                else:
                    ids[key] = len(rows)
                    rows.append((len(rows), path, dev, ino))
                    if dev or ino or path not in by_path:
                        by_path[path] = ids[key]
            lookup[local] = ids[key]
        lookups.append(lookup)
    columns: list[Sequence] = list(zip(*rows)) if rows else [[], [], [], []]
    return pa.table(columns, schema=FILE_SCHEMA), lookups


def _grouped(chunks: np.ndarray, earliest: np.ndarray, counts: np.ndarray, rows: int) -> list[tuple[np.ndarray, int]]:
    """`chunks` in the order of their earliest events (`earliest`, per chunk of the stream), in groups of about
    `rows` events (counts: events per chunk of the stream), each in file order with its earliest start."""
    by_start = chunks[np.argsort(earliest[chunks], kind="stable")]
    return [(np.sort(group), int(earliest[group[0]])) for group in _parts(by_start, counts[by_start], rows)]


def _bound(value: int | None, unbounded: int) -> int:
    return unbounded if value is None else value


def _within(columns: dict[str, np.ndarray], lo: int | None, hi: int | None) -> dict[str, np.ndarray]:
    """The events of `columns` (in start order) that start in [lo, hi)."""
    start = columns[_START]
    first = 0 if lo is None else int(np.searchsorted(start, lo, "left"))
    last = len(start) if hi is None else int(np.searchsorted(start, hi, "left"))
    return {name: values[first:last] for name, values in columns.items()}


def _parts(chunks: np.ndarray, counts: np.ndarray, rows: int) -> list[np.ndarray]:
    """`chunks` cut, in their order, into consecutive parts of about `rows` events (counts: events per chunk)."""
    part = (np.cumsum(counts) - 1) // rows
    return np.split(chunks, np.flatnonzero(np.diff(part)) + 1)


class StreamReader:
    """Decodes one stream's columns in t_start order on the trace's clock: the whole stream (`read`), or range
    after range (`ranges`), so that memory follows the range and not the stream.

    A stream's chunks are per thread and each is nearly in time order (an MPI-IO call is written after the
    POSIX calls it issued), so ranges are made by decoding chunks in the order of their earliest event, a group
    of about `rows` events at a time, and handing out the events that start before every event of the chunks
    not decoded yet; the others wait for the next group. The ranges joined are exactly `read()`."""

    def __init__(self, stream: StreamFile, file_lookup: np.ndarray, epoch: int, rank: int, pid: int):
        self.stream, self.epoch, self.rank, self.pid = stream, epoch, rank, pid
        # local id + 1 -> merged id; the first and last slots take the ids the table does not know (-1 and beyond)
        self.file_lookup = np.concatenate(([-1], file_lookup, [-1])).astype(np.int32)

    def _times(self, s: StreamFile) -> tuple[np.ndarray, np.ndarray]:
        return s.times(clock_line(s.info, self.epoch))

    def _values(self, s: StreamFile, name: str, times, positions: np.ndarray | None, rows: int,
                scratch: np.ndarray) -> np.ndarray:
        """Column `name` of the chunks of `s`, narrowed to the schema's type, in `rows` rows: value-by-value
        columns are decoded straight to rows `positions` when given (the other rows are left for the caller);
        the rest come in stored order. `scratch` (rows int64) takes what is narrowed or summed after decoding:
        memory already touched, where a fresh array would first be faulted in page by page."""
        dtype = _numpy_type(name)
        if name in ("t_start", "t_end"):
            values = times[1 if name == "t_end" else 0]
        elif name == "offset":
            values = s.stored(OFFSET_DELTA, positions, empty(rows), running=s.summed(OFFSET_DELTA))
        elif name == "tid":
            values = s.tids()
        elif name in ("rank", "pid"):
            values = empty(rows, np.int32)
            values.fill(self.rank if name == "rank" else self.pid)
        elif name == "ret_bytes":
            values = s.stored(RET_MINUS_REQ, positions, empty(rows))
            values += s.stored(REQ, positions, scratch, running=s.summed(REQ))
        elif name == "file_id":
            local = s.stored(DIRECT[name], positions, scratch.view(np.int32)[:rows])
            local += 1
            values = self.file_lookup.take(local, mode="clip", out=empty(len(local), np.int32))
        else:  # narrowed as decoded: less memory to write and to reorder
            values = s.stored(DIRECT[name], positions, empty(rows, dtype), running=s.summed(DIRECT[name]))
        return values.astype(dtype, copy=False)

    def _bounds(self, s: StreamFile) -> tuple[np.ndarray, np.ndarray]:
        """The start of each chunk's earliest and latest events."""
        start = self._times(s)[0]
        firsts = s.chunk_firsts()[1]
        bounds = np.minimum.reduceat(start, firsts), np.maximum.reduceat(start, firsts)
        s.forget_pages()
        return bounds

    def _groups(self, rows: int | None) -> list[tuple[np.ndarray, int | None]]:
        """Groups of chunks decoded together (in file order within a group), in the order of their chunks'
        earliest events, each with the earliest start of its chunks (None when one group holds them all)."""
        s = self.stream
        everything = np.arange(len(s.chunks))
        if rows is None or s.events <= rows:
            return [(everything, None)]
        earliest, _ = self._chunk_bounds(rows)
        return [(chunks, start) for chunks, start in _grouped(everything, earliest, s.chunk_firsts()[0], rows)]

    def _chunk_bounds(self, rows: int) -> tuple[np.ndarray, np.ndarray]:
        """The start of each chunk's earliest and latest events (read `rows` events at a time)."""
        s = self.stream
        bounds = [self._bounds(s.subset(part)) for part in _parts(np.arange(len(s.chunks)), s.chunk_firsts()[0], rows)]
        if not bounds:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate([b[0] for b in bounds]), np.concatenate([b[1] for b in bounds])

    def parts(self, rows: int, part_rows: int) -> list[tuple]:
        """The stream cut by start time into parts of about `part_rows` events or more, each read apart with
        `ranges(rows=rows, part=...)`: a part holds the events that start in [lo, hi) (None: unbounded). A
        chunk whose events straddle a cut (another thread's, or an MPI-IO call written after the POSIX calls
        it issued) is decoded by every part it reaches, each keeping its own events."""
        earliest, latest = self._chunk_bounds(rows)
        counts, _ = self.stream.chunk_firsts()
        order = np.argsort(earliest, kind="stable")
        cuts: list[int] = []
        held = 0
        for chunk in order:
            if held >= part_rows and earliest[chunk] > (cuts[-1] if cuts else -1):
                cuts.append(int(earliest[chunk]))
                held = 0
            held += int(counts[chunk])
        edges = [None, *cuts, None]
        return [(lo, hi, earliest, latest) for lo, hi in zip(edges[:-1], edges[1:])]

    def _part_groups(self, rows: int | None, part: tuple) -> list[tuple[np.ndarray, int | None]]:
        """The groups of chunks that hold the events of `part` (see parts), the first starting at its lo."""
        lo, hi, earliest, latest = part
        low, high = _bound(lo, -1), _bound(hi, np.iinfo(np.int64).max)
        reach = np.flatnonzero((earliest < high) & (latest >= low))
        groups = _grouped(reach, earliest, self.stream.chunk_firsts()[0], rows or self.stream.events + 1)
        return [(chunks, max(start, low)) for chunks, start in groups] or [(reach, low)]

    def ranges(self, columns: Sequence[str] | None = None, rows: int | None = RANGE_ROWS,
               part: tuple | None = None) -> Iterator[pa.Table]:
        """The stream's events as consecutive tables of about `rows` rows (all of them when rows is None),
        ordered by t_start within and across tables; with `part` (one of `parts(rows, ...)`), the events of
        that part only."""
        names = _column_names(columns)
        groups = self._groups(rows) if part is None else self._part_groups(rows, part)
        whole = part is None and len(groups) == 1
        waiting: dict[str, np.ndarray] = {}
        for i, (chunks, _) in enumerate(groups):
            subset = self.stream.subset(chunks)
            decoded = self._decode(subset, None if whole else chunks, names, waiting)
            subset.forget_pages()
            if part is not None:
                decoded = _within(decoded, part[0], part[1])
            # what starts before every event of the groups still to decode is in its final place
            later = groups[i + 1][1] if i + 1 < len(groups) else None
            ready = len(decoded[_START]) if later is None else int(np.searchsorted(decoded[_START], later, "left"))
            waiting = {name: values[ready:].copy() for name, values in decoded.items()} if later is not None else {}
            if ready or later is None:
                yield self._table(names, {name: values[:ready] for name, values in decoded.items()})

    def read(self, columns: Sequence[str] | None = None) -> pa.Table:
        return next(self.ranges(columns, rows=None))

    def _table(self, names: list[str], columns: dict[str, np.ndarray]) -> pa.Table:
        arrays = []
        for name in names:
            values = pa.array(columns[name])
            if name == "op":
                ops = self.stream.ops
                top = max(int(columns[name].max()) if len(values) else -1, max(ops, default=-1))
                dictionary = [ops.get(code, (f"op{code}", 0))[0] for code in range(top + 1)]
                values = pa.DictionaryArray.from_arrays(values, pa.array(dictionary, pa.string()))
            elif name == "layer":
                values = pa.DictionaryArray.from_arrays(values, LAYER_DICTIONARY)
            arrays.append(values)
        return pa.table(arrays, schema=pa.schema([EVENT_SCHEMA.field(c) for c in names]))

    def _decode(self, part: StreamFile, chunks: np.ndarray | None, names: list[str],
                waiting: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Columns `names` and _START of the waiting events followed by the events of `part`, in the order of
        start time, then of row in the stream file: the order of `read()`, whatever the ranges. With `chunks`
        (the stream's chunks `part` holds, in file order), also _ROW, each event's row, for the next range."""
        times = self._times(part)
        held = len(waiting.get(_START, ()))
        start = np.concatenate((waiting[_START], times[0])) if held else times[0]
        columns = {}
        if chunks is None:  # the whole stream: its rows ascend already, so a stable sort by start is the order
            order = time_order(start)
        else:
            counts, firsts = self.stream.chunk_firsts()
            row = np.repeat(firsts[chunks] - part.chunk_firsts()[1], counts[chunks]) + np.arange(part.events)
            row = np.concatenate((waiting[_ROW], row)) if held else row
            order = _start_then_row(start, row) if held else time_order(start)
            columns[_ROW] = row if order is None else row[order]
        positions = None
        if order is not None and len(order) < 2**31:  # 32-bit row numbers: half the memory to move
            order = order.astype(np.int32)
            positions = empty(len(order), np.int32)
            positions[order] = np.arange(len(order), dtype=np.int32)
        columns[_START] = start if order is None else reorder(start, order)
        scratch = empty(len(start)) if order is None else start  # the starts in stored order are spent
        for name in names:
            if name == "t_start":
                values = columns[_START]
            elif name in BY_VALUE and positions is not None:  # decoded and put in time order in one pass
                values = self._values(part, name, times, positions[held:], len(start), scratch)
                if held:
                    values[positions[:held]] = waiting[name]
            else:
                values = self._values(part, name, times, None, len(start), scratch)
                if held and name not in SAME_FOR_ALL:
                    values = np.concatenate((waiting[name], values))
                if order is not None and name not in SAME_FOR_ALL:
                    values = reorder(values, order)
            columns[name] = values
        return columns


_START = "_start"  # the start times, carried whether or not t_start is asked for (not an event column name)
_ROW = "_row"  # each event's row in the stream file, which orders events that start at the same time


def _start_then_row(start: np.ndarray, row: np.ndarray) -> np.ndarray | None:
    """The order by start time, then row; None when the events are in that order already."""
    if len(start) < 2:
        return None
    later = start[1:] > start[:-1]
    if (later | ((start[1:] == start[:-1]) & (row[1:] > row[:-1]))).all():
        return None
    return np.lexsort((row, start))


BY_VALUE = {*DIRECT, "ret_bytes", "offset"}  # columns decoded value by value (or summed within a chunk)
SAME_FOR_ALL = {"rank", "pid"}


def _numpy_type(name: str) -> np.dtype:
    """The numpy type of an event column (the index type for dictionary columns)."""
    field_type = EVENT_SCHEMA.field(name).type
    return np.dtype((field_type.index_type if name in ("op", "layer") else field_type).to_pandas_dtype())


def _column_names(columns: Sequence[str] | None) -> list[str]:
    names = list(columns) if columns is not None else EVENT_SCHEMA.names
    unknown = [c for c in names if c not in EVENT_SCHEMA.names]
    if unknown:
        raise KeyError(f"unknown event column(s) {unknown}; the columns are {EVENT_SCHEMA.names}")
    return names


def _stream_paths(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise TraceNotFound(f"{path} does not exist: give the directory `ioloom run -o DIR` wrote")
    found = sorted(path.glob(f"*{SUFFIX}"))
    if not found:
        raise TraceNotFound(f"{path} holds no trace streams (*{SUFFIX}): trace a program with "
                            f"`ioloom run -o {path} -- CMD`")
    return found


def stream_problems(stream: StreamFile) -> list[str]:
    """What the reader says of one stream file: its own problems, and an empty, unfinished or lossy stream."""
    problems = list(stream.problems)
    name = stream.path.name
    if not stream.info and not len(stream.chunks) and not problems:
        problems.append(f"{name}: nothing after its header (cut short, or its process was killed before its first "
                        "flush); skipped")
    if stream.info and stream.info.get("clean_exit") != "1" and stream.info.get("ended_by_exec") != "1":
        problems.append(f"{name}: the process did not finish normally (killed, or still running): its events are "
                        f"read up to its last flush")
    dropped = int(stream.info.get("dropped_events", 0))
    failed = min(int(stream.info.get("write_failed_events", 0)), dropped)
    if failed or "write_error" in stream.info:
        code = int(stream.info.get("write_error", errno.EIO))
        problems.append(f"{name}: {failed} events were lost: writing the stream failed with "
                        f"{errno.errorcode.get(code, code)} ({os.strerror(code)}); free space in the trace "
                        f"directory or trace to another (ioloom run -o DIR)")
    if dropped > failed:
        problems.append(f"{name}: {dropped - failed} events were dropped by the tracer (out of memory, or "
                        f"a fatal signal came while a buffer was being written)")
    return problems


def excluded(info: dict) -> dict[str, tuple[int, int]]:
    """Exclude rules of a stream and the calls and bytes they kept out of the trace."""
    out = {}
    for key, value in info.items():
        if key.startswith("exclude:"):
            calls, size = (int(v) for v in value.split())
            out[key[len("exclude:"):]] = (calls, size)
    return out


def open_trace(path: str | Path) -> Trace:
    """Open a trace directory written by `ioloom run` (or a single stream file), or a folded trace (folded.py)."""
    from ioloom.trace import folded

    folded_file = Path(path) / folded.NAME if Path(path).is_dir() else Path(path)
    if folded_file.name.endswith(folded.NAME) and folded_file.is_file():
        return folded.read(folded_file)
    files = [read_stream_file(p) for p in _stream_paths(Path(path))]
    streams = [s for s in files if s.info or len(s.chunks)]
    problems = [p for s in files for p in stream_problems(s)]
    file_table, lookups = _merge_files(streams)
    epoch = min((_stream_start(s) for s in streams), default=0)
    out = []
    for stream, lookup in zip(streams, lookups):
        pid = int(stream.info.get("pid", -1))
        rank = int(stream.info.get("rank", -1))
        info = dict(stream.info, path=str(stream.path), events=stream.events, excluded=excluded(stream.info),
                    layers_named=sorted({LAYERS[layer] for _, layer in stream.ops.values()}))
        reader = StreamReader(stream, lookup, epoch, rank, pid)
        out.append(Stream(pid, rank, info, reader.read, reader.ranges))
    out.sort(key=lambda s: (s.rank, s.pid, s.info["path"]))
    finals = [_clock(s.info)[1] for s in streams]
    errors = [final[2] for final in finals if final is not None]
    meta = {"path": str(path), "format_version": "1", "epoch_ns": epoch, "streams": len(out),
            "events": sum(s.events for s in streams), "dropped_events": sum(int(s.info.get("dropped_events", 0))
                                                                            for s in streams),
            "clock_max_error_ns": max(errors, default=None)}
    return Trace(out, file_table, meta, problems)
