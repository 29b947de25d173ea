"""The operations the predictor learns, per process, from a trace (docs/predict.md, "Context symbols").

Omnisc'IO's context symbol is the call stack of the call. ioloom's traces (format 2.0) record no call stacks, so a
symbol here is the operation and its file: the call's name and the file's path with every run of digits replaced
by '#' (out_0003.h5 and out_0004.h5 are one file key, so a file per iteration repeats). Only the lowest layer the
program's calls reach is read, as Omnisc'IO hooks atomic requests: POSIX and stdio opens, closes, reads and writes
(the POSIX calls an MPI-IO call makes are its atomic requests; the MPI-IO events themselves are left out), on
the application's files: those of the system and of the MPI runtime (the analysis's list, docs/analysis.md:
libraries, configuration, shared-memory segments, session directories) are left out.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ioloom.predict.model import Operation
from ioloom.trace.ops import direction

CONTEXT = "operation+file"  # what a symbol stands for in traces without call stacks
OPENS = {"open", "open64", "openat", "openat64", "creat", "creat64", "__open_2", "__open64_2", "__openat_2",
         "__openat64_2", "fopen", "fopen64", "fdopen", "freopen", "freopen64"}
CLOSES = {"close", "fclose"}
COLUMNS = ["t_start", "t_end", "layer", "op", "file_id", "offset", "req_bytes", "aux"]
DIGITS = re.compile(r"\d+")


def file_key(path: str) -> str:
    """The file a symbol names: its path with each run of digits replaced by '#'."""
    return DIGITS.sub("#", path)


def kind_of(op: str, aux: int) -> str | None:
    if op in OPENS:
        return "open"
    if op in CLOSES:
        return "close"
    return direction(op, aux)


@dataclass
class Symbols:
    """The context symbols of one process, numbered in order of first appearance."""
    ids: dict[tuple[str, str], int] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)
    kinds: dict[int, str] = field(default_factory=dict)
    places: dict[int, str] = field(default_factory=dict)

    def of(self, op: str, kind: str, place: str) -> int:
        key = (op, place)
        if key not in self.ids:
            symbol = self.ids[key] = len(self.names)
            self.names.append(f"{op} {place.rsplit('/', 1)[-1]}")
            self.kinds[symbol], self.places[symbol] = kind, place
        return self.ids[key]


@dataclass
class ProcessOperations:
    """One process's operations in time order, and its symbols."""
    label: str
    operations: list[Operation]
    symbols: Symbols


def process_operations(trace, limit: int | None = None) -> list[ProcessOperations]:
    """Per traced process (in the trace's order), the operations the predictor learns; the first `limit` of
    each when given."""
    from ioloom.analysis.partition import Options

    system = Options().is_system
    paths = {file_id: path for file_id, path in zip(trace.files.column("file_id").to_pylist(),
                                                     trace.files.column("path").to_pylist()) if not system(path)}
    out = []
    for stream in trace.streams:
        label = f"rank {stream.rank}" if stream.rank >= 0 else f"pid {stream.pid}"
        symbols = Symbols()
        operations = []
        # with a limit, ranges of a few times it: the first operations are read without decoding the stream
        for table in stream.ranges(COLUMNS, *([] if limit is None else [max(4 * limit, 4096)])):
            columns = [table.column(name).to_pylist() for name in COLUMNS]
            for t_start, t_end, layer, op, file_id, offset, req_bytes, aux in zip(*columns):
                operation = _operation(symbols, paths, layer, op, file_id, offset, req_bytes, aux, t_start, t_end)
                if operation is not None:
                    operations.append(operation)
            if limit is not None and len(operations) >= limit:
                del operations[limit:]
                break
        out.append(ProcessOperations(label, operations, symbols))
    return out


def _operation(symbols: Symbols, paths: dict, layer: str, op: str, file_id: int, offset: int, req_bytes: int,
               aux: int, t_start: int, t_end: int) -> Operation | None:
    kind = kind_of(op, aux)
    if layer not in ("posix", "stdio") or kind is None or file_id < 0 or file_id not in paths:
        return None
    place = file_key(paths[file_id])
    data = kind in ("read", "write")
    return Operation(symbols.of(op, kind, place), kind, place, file_id, offset if data else -1,
                     max(req_bytes, 0) if data else 0, t_start, t_end)
