"""Replay scripts from a trace (docs/replay.md, "What is replayed" and "Script").

Per traced process (MPI ranks in rank order, else the trace's order), the calls on the application's files that
the replayer makes (`--list-ops`), in time order, each with the fields its call needs, its gap from the previous
call and the calls of other processes it follows (on files several processes use). Two levels for an MPI trace:
"posix" replays MPI-IO calls through their POSIX requests (their children in the trace), which the MPI library made
and the file system saw; "mpiio" replays the MPI-IO calls themselves (`ioloom-replay-<mpi>`) and leaves their POSIX
requests to the MPI library, the POSIX and stdio calls outside MPI-IO being replayed as before. A call on a
descriptor or file the process did not open in the trace (inherited, duplicated) cannot be replayed and is counted
as left out, as are calls the replayer does not make.
"""
from __future__ import annotations

import functools
import json
import os
import re
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ioloom import paths
from ioloom.predict.source import OPENS
from ioloom.replay.order import CLOSES, waits
from ioloom.trace.ops import direction

VERSION = 2
LAYERS = ("posix", "stdio")
LEVELS = ("posix", "mpiio")  # what an MPI trace's replay makes again: the POSIX requests, or the MPI-IO calls
COLUMNS = ["t_start", "t_end", "layer", "op", "file_id", "handle", "offset", "req_bytes", "ret_bytes", "aux",
           "call_id", "parent", "coll_seq"]
MPI_OPEN, MPI_CLOSE = "MPI_File_open", "MPI_File_close"
# MPI-IO calls that start a request a completion ends (non-blocking initiations, split begins): their script line's
# AUX is their call id, which the completion's AUX names.
INITIATIONS = re.compile(r"^MPI_File_i(read|write)|_begin$")
# Calls that complete such a request (each part of a non-blocking or split collective's completion).
COMPLETIONS = re.compile(r"^MPI_(Wait|Test)|_end$")
LOW = (1 << 32) - 1  # coll_seq's low half: the collective's number on its file handle
# Calls named by a path, not a descriptor (the others need a descriptor the process opened).
BY_PATH = OPENS | {"stat", "stat64", "lstat", "lstat64", "access"}
O_CREAT = 0o100
MPI_MODE_CREATE = 1  # ROMIO's ADIO_CREATE, the value in MPICH's and Open MPI's mpi.h
SCRIPTS = ".ioloom-replay"  # inside the replay directory: scripts, manifest, progress counters


@functools.cache
def replayed_calls(mpi: str | None = None) -> frozenset[str]:
    """The calls `ioloom-replay` (or, given an MPI, `ioloom-replay-<mpi>`, which also makes MPI-IO calls) makes: its
    own list, the one source of that fact."""
    binary = paths.native_bin(f"ioloom-replay-{mpi}" if mpi else "ioloom-replay")
    out = subprocess.run([str(binary), "--list-ops"], capture_output=True, text=True, check=True, timeout=30)
    return frozenset(out.stdout.split())


@dataclass
class Call:
    op: str
    t_start: int
    t_end: int
    file_id: int
    handle: int
    offset: int
    req: int
    ret: int
    aux: int
    layer: str = "posix"
    coll_seq: int = -1  # an MPI-IO collective's number on its file (docs/trace-format.md), else -1


@dataclass
class Process:
    label: str
    calls: list[Call] = field(default_factory=list)
    left_out: Counter = field(default_factory=Counter)  # op -> calls not replayed


def application_files(trace) -> dict[int, str]:
    """file_id -> path of the files that are the application's (not system or MPI-runtime ones)."""
    from ioloom.analysis.partition import Options

    system = Options().is_system
    ids, names = trace.files.column("file_id").to_pylist(), trace.files.column("path").to_pylist()
    return {file_id: path for file_id, path in zip(ids, names) if path.startswith("/") and not system(path)}


def ordered_streams(trace) -> list:
    """The streams to replay: MPI ranks in rank order when the trace has ranks, else every stream in order."""
    ranked = sorted((s for s in trace.streams if s.rank >= 0), key=lambda s: s.rank)
    return ranked or list(trace.streams)


def rows(stream):
    """A stream's events as tuples of COLUMNS, in time order."""
    for table in stream.ranges(COLUMNS):
        yield from zip(*(table.column(name).to_pylist() for name in COLUMNS))


def replays(layer: str, parent: int, level: str) -> bool:
    """Whether an event of this layer and parent is one a replay of this level makes again (if it can): POSIX and
    stdio calls at the posix level; at the mpiio level the MPI-IO calls and the POSIX and stdio calls made outside
    them (parent -1: only an MPI-IO call opens the window that gives its calls a parent, docs/trace-format.md,
    "Cross-layer link"; a completion test that completed nothing has no event but is a parent all the same)."""
    if level == "posix":
        return layer in LAYERS
    return layer == "mpiio" or (layer in LAYERS and parent < 0)


def process_calls(stream, files: dict[int, str], replayed: frozenset[str], level: str = "posix") -> Process:
    """One stream's replayable calls at a level, in time order, and what was left out."""
    process = Process(f"rank {stream.rank}" if stream.rank >= 0 else f"pid {stream.pid}")
    live: set[tuple[bool, int]] = set()  # descriptors (stdio streams by theirs) and MPI file handles it opened
    for row in rows(stream):
        t_start, t_end, layer, op, file_id, handle, offset, req, ret, aux, call_id, parent, coll_seq = row
        if file_id not in files or not replays(layer, parent, level):
            continue
        mpiio = layer == "mpiio"
        if op not in replayed or (op not in BY_PATH and op != MPI_OPEN and (mpiio, handle) not in live):
            process.left_out[op] += 1
            continue
        if (op in OPENS or op == MPI_OPEN) and ret >= 0:
            live.add((mpiio, handle if mpiio else ret))
        elif op in CLOSES or op == MPI_CLOSE:
            live.discard((mpiio, handle))
        if mpiio and INITIATIONS.search(op):
            aux = call_id
        process.calls.append(Call(op, t_start, t_end, file_id, handle, offset, req, ret, aux, layer, coll_seq))
    return process


def kind(c: Call) -> str:
    """A collective call's kind: its name, or "end" for a completion (whichever call completed it)."""
    return "end" if COMPLETIONS.search(c.op) else c.op


def collective_sequences(process: Process) -> dict[int, tuple]:
    """By the call index of each MPI_File_open of a process: the collectives it made on that file from the open to
    its close, each as its number on the handle (coll_seq's low half) and its kind."""
    live: dict[int, int] = {}  # handle -> call index of its open
    out: dict[int, list] = {}
    for i, c in enumerate(process.calls):
        if c.layer != "mpiio" or c.coll_seq < 0:
            continue
        if c.op == MPI_OPEN:
            live[c.handle] = i
            out[i] = []
        if c.handle in live:
            out[live[c.handle]].append((c.coll_seq & LOW, kind(c)))
        if c.op == MPI_CLOSE:
            live.pop(c.handle, None)
    return {i: tuple(seq) for i, seq in out.items()}


def together(processes: list[Process], sequences: list[dict[int, tuple]], ats: list[tuple[int, int]]) -> bool:
    """Whether opens (process index, call index) that share a key can be one collective open: each one started
    before every other one ended (a collective open's parts overlap in time), and every member made the same
    collective calls on it in the same order (else the replay's collectives over the group would not match)."""
    opens = [processes[p].calls[i] for p, i in ats]
    if max(c.t_start for c in opens) > min(c.t_end for c in opens):
        return False
    return len({sequences[p][i] for p, i in ats}) == 1


def crossed(processes: list[Process], part_of: dict[tuple[int, int], int], parts: list[list]) -> set[int]:
    """The parts (groups of opens) of more than one process whose collectives some processes made in an order that
    others did not (a cycle in the order the processes made them in): together, their replay could deadlock. The
    completions of non-blocking and split collectives are left out: they may end in any order."""
    from graphlib import CycleError, TopologicalSorter

    graph: TopologicalSorter = TopologicalSorter()
    for p, process in enumerate(processes):
        live: dict[int, int] = {}  # handle -> part of its open
        previous = None
        for i, c in enumerate(process.calls):
            if c.op == MPI_OPEN:
                live[c.handle] = part_of[(p, i)]
            part = live.get(c.handle) if c.layer == "mpiio" and c.coll_seq >= 0 else None
            if part is None or len(parts[part]) < 2 or COMPLETIONS.search(c.op):
                continue
            node = (part, c.coll_seq & LOW, c.op)
            graph.add(node, *([previous] if previous else []))
            previous = node
    try:
        graph.prepare()
    except CycleError as e:
        return {node[0] for node in e.args[1]}
    return set()


def open_groups(processes: list[Process], files: dict[int, str]) -> tuple[list[tuple[int, ...]], dict, int]:
    """The processes that opened a file together, one group per MPI_File_open: the opens of one path with one
    open number (coll_seq's high half, counted per communicator) and the same occurrence of that pair in each
    process, kept together when they can be one collective open (together) and their collectives cannot cross
    another group's (crossed); else each open is a group of its own (MPI_COMM_SELF in the replay), so that the
    replay's collectives always match. The groups (process indices), each open's group index by (process index,
    call index), and the number of opens made alone because their group was in doubt."""
    keyed: dict[tuple, list[tuple[int, int]]] = {}
    for p, process in enumerate(processes):
        seen: Counter = Counter()
        for i, c in enumerate(process.calls):
            if c.op == MPI_OPEN:
                pair = (files[c.file_id], c.coll_seq >> 32)
                keyed.setdefault((*pair, seen[pair]), []).append((p, i))
                seen[pair] += 1
    sequences = [collective_sequences(process) for process in processes]
    parts: list[list[tuple[int, int]]] = []
    for ats in keyed.values():
        parts += [ats] if len(ats) == 1 or together(processes, sequences, ats) else [[at] for at in ats]
    while True:
        part_of = {at: k for k, ats in enumerate(parts) for at in ats}
        doubtful = crossed(processes, part_of, parts)
        if not doubtful:
            break
        parts = [ats for k, ats in enumerate(parts) if k not in doubtful] + [
            [at] for k in doubtful for at in parts[k]]
    alone = sum(len(ats) for ats in keyed.values() if len(ats) > 1) - sum(len(ats) for ats in parts if len(ats) > 1)
    members = [tuple(p for p, _ in ats) for ats in parts]
    groups = list(dict.fromkeys(members))
    index = {m: g for g, m in enumerate(groups)}
    return groups, {at: index[m] for ats, m in zip(parts, members) for at in ats}, alone


def root_of(paths_used: list[str]) -> str:
    """The directory the replay's files are placed relative to: the deepest one holding them all."""
    return os.path.commonpath([os.path.dirname(p) for p in paths_used]) if paths_used else "/"


def initial_files(processes: list[Process], files: dict[int, str]) -> dict[int, int]:
    """file_id -> size for the files that existed before the run: the first call on them (over all processes)
    succeeded without creating them; the size is where the furthest read of them ended."""
    first: dict[int, Call] = {}
    for call in sorted((c for p in processes for c in p.calls), key=lambda c: c.t_start):
        first.setdefault(call.file_id, call)
    sizes = {}
    for file_id, call in first.items():
        created = (call.op in OPENS and (call.aux & O_CREAT or call.op.startswith("creat"))) or (
            call.op == MPI_OPEN and call.aux & MPI_MODE_CREATE)
        if call.ret >= 0 and not created:
            sizes[file_id] = 0
    for call in (c for p in processes for c in p.calls):
        if call.file_id in sizes and direction(call.op, call.aux) == "read" and call.offset >= 0 and call.ret > 0:
            sizes[call.file_id] = max(sizes[call.file_id], call.offset + call.ret)
    return sizes


def _line(call: Call, gap: int, file_index: int, wait: dict[int, int], group: int | None) -> str:
    after = "".join(f" {q}:{k}" for q, k in sorted(wait.items()))
    req = call.req if group is None else group  # an MPI_File_open's REQ: its group
    return f"call {call.op} {gap} {call.handle} {file_index} {call.offset} {req} {call.aux} {call.ret}{after}\n"


def script_text(index: int, count: int, process: Process, relative: dict[int, str],
                wait: list[dict[int, int]], groups: tuple[list[tuple[int, ...]], dict, int]) -> str:
    local = {file_id: i for i, file_id in enumerate(dict.fromkeys(c.file_id for c in process.calls))}
    lines = [f"ioloom-replay {VERSION} {index} {count}\n"]
    lines += [f"file {i} {relative[file_id]}\n" for file_id, i in local.items()]
    lines += [f"group {g} {' '.join(map(str, members))}\n" for g, members in enumerate(groups[0])]
    previous_end = 0  # the first gap: from the start of the trace (its epoch, the earliest process start)
    for i, (call, after) in enumerate(zip(process.calls, wait)):
        group = groups[1].get((index, i))
        lines.append(_line(call, max(call.t_start - previous_end, 0), local[call.file_id], after, group))
        previous_end = call.t_end
    return "".join(lines)


class LevelError(ValueError):
    """A trace that cannot be replayed at the level asked; the message says why."""


def build(trace_path: Path, level: str = "posix") -> tuple[dict, dict[str, str]]:
    """The replay of a trace at a level (LEVELS): its manifest, and its scripts by name."""
    from ioloom.stats_cli import load_or_exit

    assert level in LEVELS, level
    trace = load_or_exit(trace_path)
    files = application_files(trace)
    streams = ordered_streams(trace)
    mpi = mpi_of(trace, streams)
    if level == "mpiio" and mpi is None:
        raise LevelError(f"{trace_path}: not a trace of MPI ranks (with its MPI named): its MPI-IO calls cannot be "
                         "replayed as MPI-IO; replay it without --mpiio")
    processes = [process_calls(s, files, replayed_calls(mpi if level == "mpiio" else None), level)
                 for s in streams]
    used = {c.file_id for p in processes for c in p.calls}
    root = root_of(sorted(files[f] for f in used))
    relative = {f: os.path.relpath(files[f], root) for f in used}
    users = Counter(f for p in processes for f in {c.file_id for c in p.calls})
    shared = {f for f, n in users.items() if n > 1}
    initial = initial_files(processes, files)
    groups = open_groups(processes, files)
    scripts = {f"{index}.ops": script_text(index, len(processes), process, relative, wait, groups)
               for index, (process, wait) in enumerate(zip(processes, waits(processes, shared, initial)))}
    manifest = {
        "version": VERSION, "trace": str(trace_path.resolve()), "root": root, "level": level,
        "mpi": mpi,
        "processes": [{"label": p.label, "script": name, "calls": len(p.calls)} for p, name in zip(processes, scripts)],
        "files": sorted(relative.values()),
        "initial_sizes": {relative[f]: size for f, size in initial.items()},
        "shared_files": sorted(relative[f] for f in shared),
        "opens_alone": groups[2],
        "left_out": dict(sum((p.left_out for p in processes), Counter()).most_common()),
        "span_ns": max((p.calls[-1].t_end - p.calls[0].t_start for p in processes if p.calls), default=0),
    }
    return manifest, scripts


def place(directory: Path, manifest: dict, scripts: dict[str, str]) -> None:
    """Writes a replay's scripts and manifest into `directory` (new or empty)."""
    folder = directory / SCRIPTS
    folder.mkdir(parents=True)
    for name, text in scripts.items():
        (folder / name).write_text(text)
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))


def write(trace_path: Path, directory: Path, level: str = "posix") -> dict:
    """Writes the replay of a trace at a level into `directory` (new or empty): its scripts and manifest; the
    manifest."""
    manifest, scripts = build(trace_path, level)
    place(directory, manifest, scripts)
    return manifest


def mpi_of(trace, streams) -> str | None:
    """The MPI the traced run used (its note), when its processes were ranks."""
    if not streams or streams[0].rank < 0:
        return None
    return streams[0].info.get("note.mpi.impl")  # None: replayed as plain processes
