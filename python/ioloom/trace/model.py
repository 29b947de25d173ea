"""The in-memory shape of a trace: what `ioloom.open_trace()` returns and what the analysis consumes.

A trace is a set of streams, one per traced process (an MPI rank, or any process of a non-MPI run), plus one
file table and metadata. Streams are read lazily and column by column, so an analysis can map over them
without holding the whole trace in memory.

Event columns (one row per intercepted call; -1 where a value does not apply or is unknown):

| column    | type  | meaning |
|-----------|-------|---------|
| t_start   | int64 | ns since the trace epoch, on rank 0's clock (offsets and drift corrected) |
| t_end     | int64 | ns, as t_start |
| rank      | int32 | MPI rank, -1 outside MPI |
| pid       | int32 | process id |
| tid       | int32 | thread id (kernel tid) |
| layer     | dictionary<string> | "posix", "stdio", "mpiio", "process", "async" |
| op        | dictionary<string> | call name: "pwrite", "fwrite", "MPI_File_write_at_all", ... |
| file_id   | int32 | key into `Trace.files`, -1 none |
| handle    | int64 | descriptor, stream or MPI file handle number |
| offset    | int64 | file offset of the access (record locks: start of the range) |
| req_bytes | int64 | bytes requested (record locks: length of the range, 0 = to end of file) |
| ret_bytes | int64 | bytes moved or return value; -1 on error |
| errno     | int32 | errno when the call failed, else 0 |
| aux       | int64 | op-specific detail, documented per op in docs/trace-format.md (lock type, whence, ...) |
| call_id   | int64 | on MPI-IO events: the call's number, unique within its process; else -1 |
| parent    | int64 | call_id of the MPI-IO call this event ran inside (same pid), -1 if none |
| coll_seq  | int64 | collective calls: per-communicator sequence number, equal on every rank for one collective |
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

LAYERS = ("posix", "stdio", "mpiio", "process", "async")

EVENT_SCHEMA = pa.schema([
    ("t_start", pa.int64()), ("t_end", pa.int64()),
    ("rank", pa.int32()), ("pid", pa.int32()), ("tid", pa.int32()),
    ("layer", pa.dictionary(pa.int8(), pa.string())), ("op", pa.dictionary(pa.int16(), pa.string())),
    ("file_id", pa.int32()), ("handle", pa.int64()), ("offset", pa.int64()),
    ("req_bytes", pa.int64()), ("ret_bytes", pa.int64()), ("errno", pa.int32()), ("aux", pa.int64()),
    ("call_id", pa.int64()), ("parent", pa.int64()), ("coll_seq", pa.int64()),
])

class TraceDamaged(ValueError):
    """A stream's events cannot be decoded although its chunk index found them well formed (the file changed
    while it was read). The index itself never raises for damage: it skips the chunk and says so in problems."""


RANGE_ROWS = 3 << 17  # events per table of Stream.ranges: a map step holds about 450 bytes for each

FILE_SCHEMA = pa.schema([("file_id", pa.int32()), ("path", pa.string()), ("dev", pa.uint64()), ("ino", pa.uint64())])


def time_order(t: np.ndarray) -> np.ndarray | None:
    """The stable order of t, or None when t is already ascending. Streams are nearly sorted (an MPI-IO call is
    written after the POSIX calls it issued, which started later): numpy's stable sort finds the sorted runs
    and merges them, about as fast as one pass."""
    if len(t) < 2 or (t[1:] >= t[:-1]).all():
        return None
    return np.argsort(t, kind="stable")


def _columns_of(table: pa.Table, columns: Sequence[str] | None) -> pa.Table:
    """Some columns of a table held in memory (all of them when columns is None or empty)."""
    return table.select(columns) if columns else table


@dataclass
class Stream:
    """The events of one traced process. `read()` decodes on demand; `info` holds what the process reported
    about itself (host, command, dropped events, clock offset and its error, excluded paths)."""
    pid: int
    rank: int
    info: dict
    _read: Callable[[Sequence[str] | None], pa.Table] = field(repr=False)
    _ranges: Callable[[Sequence[str] | None, int], Iterator[pa.Table]] | None = field(default=None, repr=False)

    def read(self, columns: Sequence[str] | None = None) -> pa.Table:
        return self._read(columns)

    def ranges(self, columns: Sequence[str] | None = None, rows: int = RANGE_ROWS) -> Iterator[pa.Table]:
        """read(columns) as consecutive tables of about `rows` rows (at least one table), ordered by t_start
        within and across tables: what lets an analysis hold a range of a stream instead of all of it."""
        if self._ranges is not None:
            yield from self._ranges(columns, rows)
            return
        table = self.read(columns)
        order = time_order((table if "t_start" in table.column_names else self.read(["t_start"]))
                           .column("t_start").to_numpy())
        if order is not None:
            table = table.take(order)
        for start in range(0, max(table.num_rows, 1), rows):
            yield table.slice(start, rows)


@dataclass
class Trace:
    """A trace: its streams, the merged file table, job-wide metadata and the problems met while reading
    (a truncated stream, an unknown chunk type skipped); an analysis reports `problems` to the user."""
    streams: list[Stream]
    files: pa.Table
    meta: dict
    problems: list[str] = field(default_factory=list)

    def __iter__(self) -> Iterator[Stream]:
        return iter(self.streams)

    def events(self, columns: Sequence[str] | None = None) -> pa.Table:
        """All events of all streams in one table, ordered by t_start."""
        tables = [s.read(columns) for s in self.streams]
        if not tables:
            schema = EVENT_SCHEMA if columns is None else pa.schema([EVENT_SCHEMA.field(c) for c in columns])
            return schema.empty_table()
        table = pa.concat_tables(tables, promote_options="permissive").unify_dictionaries()
        if "t_start" in table.column_names:
            order = time_order(table.column("t_start").to_numpy())  # each stream is ascending: runs merged
            if order is not None:
                table = table.take(order)
        return table

    def ops_named(self) -> pd.DataFrame:
        """All events as a pandas frame with `op` and `layer` as plain strings (what the models read)."""
        frame = self.events().to_pandas()
        return frame.astype({"op": str, "layer": str})

    @classmethod
    def from_tables(cls, events: pa.Table, files: pa.Table, meta: dict | None = None) -> Trace:
        """A trace held in memory, split into one stream per pid (for tests and converters)."""
        events = events.cast(EVENT_SCHEMA) if events.schema != EVENT_SCHEMA else events
        streams = []
        for pid in sorted(set(events.column("pid").to_pylist())):
            part = events.filter(pc.equal(events.column("pid"), pid))
            rank = part.column("rank")[0].as_py() if part.num_rows else -1
            streams.append(Stream(pid, rank, {}, functools.partial(_columns_of, part)))
        return cls(streams, files, meta or {})
