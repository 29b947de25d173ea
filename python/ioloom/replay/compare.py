"""What a replay is held to (docs/replay.md, "Checking a replay"): per file, relative to the directory holding
the run's files, the bytes read and written, and per layer and call the number of calls, over the POSIX and
stdio calls on the application's files. A replay matches its original when both are equal."""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

from ioloom.replay.script import COLUMNS, LAYERS, application_files, root_of
from ioloom.trace.ops import direction


@dataclass
class Footprint:
    bytes: dict[str, dict[str, int]] = field(default_factory=dict)  # relative path -> {"read": n, "written": n}
    calls: Counter = field(default_factory=Counter)  # "layer op" -> calls
    processes: int = 0


def footprint(trace) -> Footprint:
    """A trace's bytes per file and calls per layer and name, on the application's files."""
    files = application_files(trace)
    moved: dict[int, Counter] = {}
    out = Footprint(processes=len(trace.streams))
    for stream in trace.streams:
        for table in stream.ranges(COLUMNS):
            for layer, op, file_id, ret, aux in zip(*(table.column(n).to_pylist() for n in
                                                     ("layer", "op", "file_id", "ret_bytes", "aux"))):
                if layer not in LAYERS or file_id not in files:
                    continue
                out.calls[f"{layer} {op}"] += 1
                way = direction(op, aux)
                if way is not None:
                    moved.setdefault(file_id, Counter())[way] += max(ret, 0)
    root = root_of(sorted(files[f] for f in moved) or sorted(files.values()))
    out.bytes = {os.path.relpath(files[f], root): {"read": c["read"], "written": c["write"]}
                 for f, c in sorted(moved.items(), key=lambda item: files[item[0]])}
    return out


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
    return lines
