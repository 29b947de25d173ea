"""What a replay is held to (docs/replay.md, "Checking a replay"): per file, relative to the directory holding
the run's files, the bytes read and written; per layer and call the number of calls, over the calls on the
application's files that a replay of its level makes again (posix: the POSIX and stdio calls; mpiio: the MPI-IO
calls and the POSIX and stdio calls made outside them); and per process (MPI rank, else process), the calls a replay
makes, in order, each with its file, offset, requested and returned bytes. A replay matches its original when all
three are equal. The calls a replay does not make (at the posix level the MPI-IO calls, made through their POSIX
requests; the calls left out) are counted beside, not compared; at the mpiio level the POSIX requests inside the
MPI-IO calls are the MPI library's, and their differences are reported, not held."""
from __future__ import annotations

import os
from collections import Counter
from collections.abc import Container
from dataclasses import dataclass, field

from ioloom.predict.source import OPENS
from ioloom.replay import script
from ioloom.replay.order import COMPLETIONS
from ioloom.replay.script import LAYERS, MPI_OPEN, application_files, replays, root_of
from ioloom.trace.ops import direction

MATCHES = "the replay matches: bytes per file, calls per operation and each process's calls in order are equal"
# A call as a replay must make it again: name, file (relative), offset, requested bytes, result (an open's: whether
# it succeeded, its descriptor being the process's own).
Key = tuple[str, str, int, int, int]


@dataclass
class Footprint:
    bytes: dict[str, dict[str, int]] = field(default_factory=dict)  # relative path -> {"read": n, "written": n}
    calls: Counter = field(default_factory=Counter)  # "layer op" -> calls
    processes: int = 0
    sequences: dict[str, list[Key]] | None = None  # process label -> the calls a replay makes, in order
    not_reproduced: Counter = field(default_factory=Counter)  # "layer op" -> calls a replay does not make
    library: Footprint | None = None  # mpiio level: the POSIX requests inside the MPI-IO calls (reported only)


def key(op: str, path: str, offset: int, req: int, ret: int) -> Key:
    return (op, path, offset, req, int(ret >= 0) if op in OPENS else ret)


def _label(rank_label: str, index: int, taken: Container[str]) -> str:
    """A process's label in the comparison: "rank N" when it is a rank whose label no process before it took (a
    child can inherit its rank's environment), else its place: "process INDEX", paired by its calls."""
    return rank_label if rank_label.startswith("rank ") and rank_label not in taken else f"process {index}"


def sequences(trace, files: dict[int, str], level: str = "posix") -> tuple[dict[str, list[Key]], Counter]:
    """Per process the calls a replay of this level makes (script.process_calls), in order, files relative to the
    deepest directory holding them; and the calls left out, by name. Processes without such calls are not
    listed."""
    streams = script.ordered_streams(trace)
    mpi = script.mpi_of(trace, streams) if level == "mpiio" else None
    processes = [script.process_calls(s, files, script.replayed_calls(mpi), level) for s in streams]
    root = root_of(sorted({files[c.file_id] for p in processes for c in p.calls}))
    out: dict[str, list[Key]] = {}
    for index, process in enumerate(processes):
        if process.calls:
            out[_label(process.label, index, out)] = [
                key(c.op, os.path.relpath(files[c.file_id], root), c.offset, c.req, c.ret) for c in process.calls]
    return out, sum((p.left_out for p in processes), Counter())


def _way(layer: str, op: str, aux: int, call_id: int, started: dict[int, str]) -> str | None:
    """The direction of an event's bytes: by its name, or for an MPI-IO completion (whose aux is the call id of
    the call that started it) by that call's name (`started`: the stream's initiations so far)."""
    if layer == "mpiio" and script.INITIATIONS.search(op):
        started[call_id] = op
    if layer == "mpiio" and COMPLETIONS.search(op):
        return direction(started.get(aux, ""))
    return direction(op, aux)


def _bytes(moved: dict[int, Counter], files: dict[int, str]) -> dict[str, dict[str, int]]:
    root = root_of(sorted(files[f] for f in moved) or sorted(files.values()))
    return {os.path.relpath(files[f], root): {"read": c["read"], "written": c["write"]}
            for f, c in sorted(moved.items(), key=lambda item: files[item[0]])}


def footprint(trace, level: str = "posix") -> Footprint:
    """A trace's bytes per file, calls per layer and name and calls per process in order, on the application's
    files, over the calls a replay of this level makes again (script.replays); the calls a replay does not make;
    at the mpiio level the POSIX requests inside MPI-IO calls apart (`library`)."""
    files = application_files(trace)
    out = Footprint(processes=len(trace.streams))
    library = Footprint(processes=len(trace.streams))
    moved: dict[int, Counter] = {}
    inside: dict[int, Counter] = {}
    for stream in trace.streams:
        started: dict[int, str] = {}
        for row in script.rows(stream):
            layer, op, file_id, ret, aux, call_id, parent = row[2:5] + row[8:12]
            if file_id not in files:
                continue
            kept = replays(layer, parent, level)
            if not kept and layer == "mpiio":
                out.not_reproduced[f"mpiio {op}"] += 1
            if not kept and layer not in LAYERS:
                continue
            (out if kept else library).calls[f"{layer} {op}"] += 1
            way = _way(layer, op, aux, call_id, started)
            if way is not None:
                (moved if kept else inside).setdefault(file_id, Counter())[way] += max(ret, 0)
    out.bytes = _bytes(moved, files)
    out.sequences, left_out = sequences(trace, files, level)
    out.not_reproduced.update({f"left out {op}": n for op, n in left_out.items()})
    if level == "mpiio":
        library.bytes = _bytes(inside, files)
        out.library = library
    return out


def script_sequences(manifest: dict, scripts: dict[str, str]) -> dict[str, list[Key]]:
    """The calls per process a replay's scripts make (docs/replay.md, "Script"), as footprint's sequences: what a
    bench configuration holds a replay to without the original trace."""
    out: dict[str, list[Key]] = {}
    for index, process in enumerate(manifest["processes"]):
        paths, calls = {}, []
        for line in scripts[process["script"]].splitlines():
            word = line.split()
            if word[0] == "file":
                paths[word[1]] = line.split(" ", 2)[2]
            elif word[0] == "call":
                op, _, _, file_index, offset, req, _, ret = word[1:9]
                req = "-1" if op == MPI_OPEN else req  # an MPI_File_open's REQ is its group; it records none
                calls.append(key(op, paths[file_index], int(offset), int(req), int(ret)))
        if calls:
            out[_label(process["label"], index, out)] = calls
    return out


def _pairs(original: dict[str, list[Key]], replay: dict[str, list[Key]]) -> list[tuple[str, str]]:
    """The processes compared: ranks by rank; other processes (whose pids and order differ from run to run) each
    with the replay's process of the same calls, else of the most calls in the same places, else unpaired ("")."""
    if all(label.startswith("rank ") for label in [*original, *replay]):
        return [(label, label if label in replay else "") for label in original] + \
            [("", label) for label in replay if label not in original]
    left, pairs = list(replay), []
    for label in sorted(original, key=lambda name: original[name] not in replay.values()):
        score = {other: (replay[other] == original[label], sum(a == b for a, b in zip(replay[other], original[label])))
                 for other in left}
        best = max(left, key=lambda other: score[other], default="")
        pairs.append((label, best))
        if best:
            left.remove(best)
    return pairs + [("", label) for label in left]


def _call(k: Key | None) -> str:
    return "none" if k is None else f"{k[0]} {k[1]} offset {k[2]:,} requested {k[3]:,} returned {k[4]:,}"


def order_differences(original: dict[str, list[Key]], replay: dict[str, list[Key]]) -> list[str]:
    """Per process, its first call that differs (name, file, offset, bytes or place in the order) and how many do."""
    lines = []
    for a, b in _pairs(original, replay):
        mine, theirs = original.get(a, []), replay.get(b, [])
        if mine == theirs:
            continue
        differ = sum(x != y for x, y in zip(mine, theirs)) + abs(len(mine) - len(theirs))
        first = next((i for i, (x, y) in enumerate(zip(mine, theirs)) if x != y), min(len(mine), len(theirs)))
        lines.append(f"{a or 'no process'} (replay: {b or 'none'}): {differ:,} of {max(len(mine), len(theirs)):,} "
                     f"calls differ; the first, call {first + 1:,}: original "
                     f"{_call(mine[first] if first < len(mine) else None)}, replay "
                     f"{_call(theirs[first] if first < len(theirs) else None)}")
    return lines


def differences(original: Footprint, replay: Footprint) -> list[str]:
    """One line per difference; empty when the replay matches."""
    lines = []
    for path in sorted(set(original.bytes) | set(replay.bytes)):
        a, b = original.bytes.get(path), replay.bytes.get(path)
        if a != b:
            lines.append(f"{path}: original {a or 'untouched'}, replay {b or 'untouched'}")
    for call in sorted(set(original.calls) | set(replay.calls)):
        if original.calls[call] != replay.calls[call]:
            lines.append(f"{call}: {original.calls[call]:,} calls in the original, "
                         f"{replay.calls[call]:,} in the replay")
    if original.sequences is not None and replay.sequences is not None:
        lines += order_differences(original.sequences, replay.sequences)
    return lines


def library_differences(original: Footprint, replay: Footprint) -> list[str]:
    """At the mpiio level: how the POSIX requests inside the MPI-IO calls differ (bytes per file, calls per
    operation). They are the MPI library's answer to the calls made again, not the original's requests replayed:
    reported, not held to."""
    if original.library is None or replay.library is None:
        return []
    return differences(original.library, replay.library)


def not_reproduced(original: Footprint) -> str:
    """The calls of the original a replay does not make, counted; empty when there are none."""
    if not original.not_reproduced:
        return ""
    return "not made again by a replay (docs/replay.md): " + ", ".join(
        f"{call} {n:,}" for call, n in sorted(original.not_reproduced.items()))
