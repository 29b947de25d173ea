"""`open_trace(path)`: a trace directory (or one stream file) as a `Trace` (model.py).

Streams are indexed when the trace is opened (metadata, file tables, chunk directory, checksums); events are
decoded when a stream's `read()` is called. Times are put on rank 0's clock (offset and drift measured at
MPI_Init and MPI_Finalize) and counted from the trace's epoch, the earliest process start."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa

from ioloom.trace.model import EVENT_SCHEMA, FILE_SCHEMA, LAYERS, Stream, Trace
from ioloom.trace.stream_file import DIRECT, RET_MINUS_REQ, REQ, StreamFile, read_stream_file
from ioloom.trace.varint import reorder

SUFFIX = ".ioloom"
LAYER_DICTIONARY = pa.array(LAYERS, pa.string())


class TraceNotFound(FileNotFoundError):
    """The path holds no trace stream."""


def _clock(info: dict) -> tuple[tuple[int, int, int] | None, tuple[int, int, int] | None]:
    def parse(key):
        parts = info.get(key, "").split()
        return tuple(int(p) for p in parts) if len(parts) == 3 else None
    return parse("clock_init"), parse("clock_finalize")


def clock_correction(info: dict, t: np.ndarray) -> np.ndarray:
    """Nanoseconds to add to local times t to get rank 0's clock: the offset measured at init, drifting linearly
    to the one measured at finalize (constant when only one was measured, zero when none)."""
    init, final = _clock(info)
    if init is None and final is None:
        return np.zeros_like(t)
    if init is None or final is None or final[0] == init[0]:
        return np.full_like(t, (init or final)[1])
    drift = (final[1] - init[1]) / (final[0] - init[0])
    return (init[1] + (t - init[0]) * drift).astype(np.int64)


def _stream_start(stream: StreamFile) -> int:
    start = int(stream.info.get("start_monotonic_ns", 0)) or (stream.chunks[0].t_base if stream.chunks else 0)
    return start + int(clock_correction(stream.info, np.array([start], np.int64))[0])


def _merge_files(streams: list[StreamFile]) -> tuple[pa.Table, list[np.ndarray]]:
    """One table for all streams: a file is the same across processes when its path and (device, inode) match;
    an entry whose inode was never learnt joins the entry of the same path. Returns the table and, per stream,
    the lookup local id -> merged id."""
    ids: dict[tuple, int] = {}
    by_path: dict[str, int] = {}
    rows = []
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
    columns = list(zip(*rows)) if rows else [[], [], [], []]
    return pa.table(columns, schema=FILE_SCHEMA), lookups


def nearly_sorted_order(t: np.ndarray) -> np.ndarray | None:
    """The stable order of t, or None when t is already ascending. A stream is nearly sorted: only events
    written after others that started later (an MPI-IO call, recorded after its POSIX children) are out of place.
    Those are taken out (what remains is ascending), sorted among themselves and merged back in by position:
    linear in the stream rather than a full sort."""
    if len(t) < 2:
        return None
    high = np.maximum.accumulate(t)
    late = np.flatnonzero(t[1:] < high[:-1]) + 1
    if not len(late):
        return None
    kept = np.ones(len(t), bool)
    kept[late] = False
    in_order = np.flatnonzero(kept)
    late = late[np.argsort(t[late], kind="stable")]
    # an event kept after a late one started strictly later (it is not below the running maximum), so
    # side="right" puts a late event after every kept event of equal time: the stable order
    return np.insert(in_order, np.searchsorted(t[in_order], t[late], side="right"), late)


class StreamReader:
    """Decodes one stream's columns on demand, in t_start order, on the trace's clock."""

    def __init__(self, stream: StreamFile, file_lookup: np.ndarray, epoch: int, rank: int, pid: int):
        self.stream, self.file_lookup, self.epoch, self.rank, self.pid = stream, file_lookup, epoch, rank, pid
        self._order: np.ndarray | None = None
        self._positions: np.ndarray | None = None  # the inverse of _order: where each stored event goes
        self._ordered = False

    def _times(self) -> tuple[np.ndarray, np.ndarray]:
        start, end = self.stream.times()
        if _clock(self.stream.info) == (None, None):  # no MPI clock measurement: one shift, in place
            start -= self.epoch
            end -= self.epoch
            return start, end
        shift = clock_correction(self.stream.info, start) - self.epoch
        return start + shift, end + shift

    def _order_of(self, t_start: np.ndarray | None = None) -> np.ndarray | None:
        """Rows in t_start order (an MPI-IO event is written after the POSIX events it contains)."""
        if not self._ordered:
            t_start = self._times()[0] if t_start is None else t_start
            order = nearly_sorted_order(t_start)
            if order is not None and len(order) < 2**31:  # 32-bit row numbers: half the memory to read
                self._order = order.astype(np.int32)
                self._positions = np.empty_like(self._order)
                self._positions[self._order] = np.arange(len(order), dtype=np.int32)
            else:
                self._order = order
            self._ordered = True
        return self._order

    def column(self, name: str, times=None) -> pa.Array:
        s = self.stream
        n = s.events
        # Columns computed value by value are decoded straight into time order (positions); those built by
        # running sums over the stored order (times, offsets) or per chunk (tid) are reordered after.
        positions = self._positions
        in_order = True
        if name in ("t_start", "t_end"):
            values = times[0 if name == "t_start" else 1]
            in_order = False
        elif name == "offset":
            values, in_order = s.offsets(), False
        elif name == "ret_bytes":
            values = s.stored(RET_MINUS_REQ, positions)
            values += s.stored(REQ, positions)
        elif name == "tid":
            values, in_order = s.tids(), False
        elif name == "rank":
            values = np.full(n, self.rank, np.int32)
        elif name == "pid":
            values = np.full(n, self.pid, np.int32)
        elif name == "file_id":
            local = s.stored(DIRECT[name], positions)
            unknown = len(self.file_lookup)  # the sentinel slot, -1
            lookup = np.append(self.file_lookup, np.int32(-1))
            values = lookup[np.where((local >= 0) & (local < unknown), local, unknown)]
        else:
            values = s.stored(DIRECT[name], None if s.constant(DIRECT[name]) else positions)
        field_type = EVENT_SCHEMA.field(name).type
        values = values.astype((field_type.index_type if name in ("op", "layer") else field_type).to_pandas_dtype(),
                               copy=False)  # narrowed before reordering: less memory to move
        if self._order is not None and (positions is None or not in_order) and name not in ("rank", "pid"):
            values = reorder(values, self._order)
        if name == "op":
            names = [s.ops.get(code, (f"op{code}", 0))[0] for code in range(max(s.ops, default=-1) + 1)]
            top = int(values.max()) if len(values) else -1
            names += [f"op{code}" for code in range(len(names), top + 1)]
            return pa.DictionaryArray.from_arrays(pa.array(values), pa.array(names, pa.string()))
        if name == "layer":
            return pa.DictionaryArray.from_arrays(pa.array(values), LAYER_DICTIONARY)
        return pa.array(values)

    def read(self, columns: Sequence[str] | None = None) -> pa.Table:
        names = list(columns) if columns is not None else EVENT_SCHEMA.names
        unknown = [c for c in names if c not in EVENT_SCHEMA.names]
        if unknown:
            raise KeyError(f"unknown event column(s) {unknown}; the columns are {EVENT_SCHEMA.names}")
        times = self._times()
        self._order_of(times[0])
        schema = pa.schema([EVENT_SCHEMA.field(c) for c in names])
        return pa.table([self.column(c, times) for c in names], schema=schema)


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


def _stream_problems(stream: StreamFile) -> list[str]:
    problems = list(stream.problems)
    name = stream.path.name
    if stream.info and stream.info.get("clean_exit") != "1" and stream.info.get("ended_by_exec") != "1":
        problems.append(f"{name}: the process did not finish normally (killed, or still running): its events are "
                        f"read up to its last flush")
    dropped = int(stream.info.get("dropped_events", 0))
    if dropped:
        problems.append(f"{name}: {dropped} events were dropped by the tracer (buffer budget or disk full); "
                        f"raise IOLOOM_TRACE_BUFFER")
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
    """Open a trace directory written by `ioloom run` (or a single stream file)."""
    files = [read_stream_file(p) for p in _stream_paths(Path(path))]
    streams = [s for s in files if s.info or s.chunks]
    problems = [p for s in files for p in _stream_problems(s)]
    file_table, lookups = _merge_files(streams)
    epoch = min((_stream_start(s) for s in streams), default=0)
    out = []
    for stream, lookup in zip(streams, lookups):
        pid = int(stream.info.get("pid", -1))
        rank = int(stream.info.get("rank", -1))
        info = dict(stream.info, path=str(stream.path), events=stream.events, excluded=excluded(stream.info))
        reader = StreamReader(stream, lookup, epoch, rank, pid)
        out.append(Stream(pid, rank, info, reader.read))
    out.sort(key=lambda s: (s.rank, s.pid, s.info["path"]))
    errors = [_clock(s.info)[1][2] for s in streams if _clock(s.info)[1]]
    meta = {"path": str(path), "format_version": "1", "epoch_ns": epoch, "streams": len(out),
            "events": sum(s.events for s in streams), "dropped_events": sum(int(s.info.get("dropped_events", 0))
                                                                            for s in streams),
            "clock_max_error_ns": max(errors, default=None)}
    return Trace(out, file_table, meta, problems)
