"""The operations the predictor learns, per process, from a trace (docs/predict.md, "Context symbols").

Omnisc'IO's context symbol is the call stack of the call. The events of a trace hold no call stacks; a process traced
with IOLOOM_STACKS or IOLOOM_PREDICT has them in its side stream (side.py), and a symbol is then the call's stack
symbol (its operation and (module, offset) frames) and its file key. Otherwise a symbol is the operation and its
file: the call's name and the file key, the file's path with every run of digits replaced by '#' (out_0003.h5 and
out_0004.h5 are one file key, so a file per iteration repeats). Only the lowest layer the
program's calls reach is read, as Omnisc'IO hooks atomic requests: POSIX and stdio opens, closes, reads and writes
(the POSIX calls an MPI-IO call makes are its atomic requests; the MPI-IO events themselves are left out), on
the application's files: those of the system and of the MPI runtime (the analysis's list, docs/analysis.md:
libraries, configuration, shared-memory segments, session directories) are left out.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ioloom.predict.model import Operation
from ioloom.predict.side import SideStream, read_side, side_path
from ioloom.trace.ops import direction

CONTEXT = "operation+file"  # what a symbol stands for in traces without call stacks
STACK_CONTEXT = "call stack+file"  # with the side stream's stack symbols
OPENS = {"open", "open64", "openat", "openat64", "creat", "creat64", "__open_2", "__open64_2", "__openat_2",
         "__openat64_2", "fopen", "fopen64", "fdopen", "freopen", "freopen64"}
CLOSES = {"close", "fclose"}
COLUMNS = ["t_start", "t_end", "layer", "op", "file_id", "offset", "req_bytes", "aux", "tid", "ret_bytes"]
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
    ids: dict[tuple[str, str, int | None], int] = field(default_factory=dict)  # (op, file key, stack symbol)
    names: list[str] = field(default_factory=list)
    kinds: dict[int, str] = field(default_factory=dict)
    places: dict[int, str] = field(default_factory=dict)

    def of(self, op: str, kind: str, place: str, stack: int | None = None) -> int:
        """The symbol of operation `op` on file key `place` (from the stack symbol `stack` when there is one)."""
        key = (op, place, stack)
        if key not in self.ids:
            symbol = self.ids[key] = len(self.names)
            self.names.append(f"{op} {place.rsplit('/', 1)[-1]}" + ("" if stack is None else f" @{stack}"))
            self.kinds[symbol], self.places[symbol] = kind, place
        return self.ids[key]


@dataclass
class ProcessOperations:
    """One process's operations in time order, and its symbols. `side`: the process's side stream (None: none);
    `context`: what a symbol stands for; `stacks_unused`: why the side stream's stacks were not used, if so;
    `calls`: per call of a side stream of version 2, the (kind, offset, size) the tracer's model took (None: not
    read, or they do not join)."""
    label: str
    operations: list[Operation]
    symbols: Symbols
    side: SideStream | None = None
    context: str = CONTEXT
    stacks_unused: str | None = None
    calls: list[tuple[str, int, int, int]] | None = None


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
        side = read_side(side_path(stream.info["path"])) if stream.info.get("path") else None
        # with a limit and no application file there is no operation to learn: nothing is decoded (_rows would
        # read the whole stream looking for `limit` of them)
        rows = _rows(stream, paths, limit) if paths or limit is None else []
        stacks, unused = _stacks(rows, side, whole=limit is None)
        symbols = Symbols()
        operations = [op for row, stack in zip(rows, stacks) if (op := _operation(symbols, paths, row, stack))]
        del operations[len(operations) if limit is None else limit:]
        out.append(ProcessOperations(label, operations, symbols, side, CONTEXT if unused else STACK_CONTEXT,
                                     None if side is None else unused,
                                     call_operations(rows, side) if limit is None else None))
    return out


def _rows(stream, paths: dict, limit: int | None) -> list[tuple]:
    """The stream's events as rows of COLUMNS in time order; with a limit, only the first ranges that hold `limit`
    operations the predictor learns (ranges of a few times it: the first ones are read without decoding the
    stream)."""
    rows: list[tuple] = []
    learnt = 0
    for table in stream.ranges(COLUMNS, *([] if limit is None else [max(4 * limit, 4096)])):
        batch = list(zip(*(table.column(name).to_pylist() for name in COLUMNS)))
        rows += batch
        if limit is not None:
            learnt += sum(1 for row in batch if row[4] in paths and _learnt(row))
            if learnt >= limit:
                break
    return rows


def _learnt(row: tuple) -> bool:
    """Whether the tracer's model took this event (native/trace/predict.c: a POSIX or stdio open, close, read or
    write on a file)."""
    _, _, layer, op, file_id, _, _, aux, _, _ = row
    return layer in ("posix", "stdio") and file_id >= 0 and kind_of(op, aux) is not None


def _stacks(rows: list[tuple], side: SideStream | None, whole: bool) -> tuple[list[int | None], str | None]:
    """Per event, its stack symbol from the side stream (None for events the tracer's model did not take), and
    None; or all None and why the side stream cannot be used. The side stream holds the calls in the order the
    model took them, each thread's in its order: the k-th call of a thread is its k-th event the model takes.
    `whole`: the rows are all the stream's events (else its first ones), so every call must have its event."""
    nothing: list[int | None] = [None] * len(rows)
    if side is None or not side.calls:
        return nothing, "no call stacks in the trace"
    per_thread: dict[int, list[int]] = {}
    for tid, symbol in zip(side.tids, side.calls):
        per_thread.setdefault(tid, []).append(symbol)
    taken = dict.fromkeys(per_thread, 0)
    stacks: list[int | None] = []
    for row in rows:
        if not _learnt(row):
            stacks.append(None)
            continue
        tid, op = row[8], row[3]
        at = taken.get(tid, 0)
        calls = per_thread.get(tid, [])
        if at == len(calls):
            return nothing, (f"the side stream ends before the events (thread {tid}: {at} calls, then {op} in the "
                             "events): its last calls were not written (the process killed, or calls after the "
                             "final flush, which tracers before 2026-11-28 lost)")
        if side.symbols[calls[at]].op not in (op, ""):
            return nothing, (f"the side stream does not match the events (thread {tid}, its call {at + 1}: "
                             f"{op} in the events)")
        taken[tid] = at + 1
        stacks.append(calls[at])
    if whole and taken != {tid: len(calls) for tid, calls in per_thread.items()}:
        return nothing, "the side stream holds calls the events do not (events dropped?)"
    return stacks, None


def call_operations(rows: list[tuple], side: SideStream | None) -> list[tuple[str, int, int, int]] | None:
    """Per call of a side stream of version 2 (in its order), its event's kind, offset, size and bytes moved as
    the tracer's model took them (offset and moved -1 but for reads and writes, size the bytes they asked, else 0);
    None without such a side stream or when a thread's calls outnumber its events. `rows`: all the stream's events,
    in time order."""
    if side is None or side.major < 2 or not side.calls:
        return None
    per_thread: dict[int, list[tuple]] = {}
    for row in rows:
        if _learnt(row):
            per_thread.setdefault(row[8], []).append(row)
    taken: dict[int, int] = {}
    out: list[tuple[str, int, int, int]] = []
    for tid in side.tids:
        at = taken.get(tid, 0)
        events = per_thread.get(tid, [])
        if at == len(events):
            return None
        taken[tid] = at + 1
        _, _, _, op, _, offset, req_bytes, aux, _, ret_bytes = events[at]
        kind = kind_of(op, aux)
        assert kind is not None  # _learnt took only opens, closes, reads and writes
        data = kind in ("read", "write")
        out.append((kind, offset if data else -1, max(req_bytes, 0) if data else 0, moved(data, ret_bytes)))
    return out


def _operation(symbols: Symbols, paths: dict, row: tuple, stack: int | None) -> Operation | None:
    t_start, t_end, layer, op, file_id, offset, req_bytes, aux, _, ret_bytes = row
    kind = kind_of(op, aux)
    if layer not in ("posix", "stdio") or kind is None or file_id < 0 or file_id not in paths:
        return None
    place = file_key(paths[file_id])
    data = kind in ("read", "write")
    return Operation(symbols.of(op, kind, place, stack), kind, place, file_id, offset if data else -1,
                     max(req_bytes, 0) if data else 0, t_start, t_end, moved(data, ret_bytes))


def moved(data: bool, ret_bytes: int) -> int:
    """The bytes a read or write moved (its event's ret_bytes), -1 when unknown (an error) or not a read or
    write (model.Operation's `moved`, native/trace/predict.c's)."""
    return ret_bytes if data and ret_bytes >= 0 else -1
