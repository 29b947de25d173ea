"""The preloaded client's log, coord.jsonl in an `ioloom run --coord` trace directory (native/coord/preload.c's
log_line writes it; docs/coord.md, "What the predictor gives"): a line per process, its counters and, per phase
(its first 64), its announcement as an object. The readers of the log (`ioloom run`'s summary, the benchmarks) read
it here, by the names the C writes."""
from __future__ import annotations

import json
from pathlib import Path

VERSION = 2  # the newest log_line writes ("version"); a line without one is version 1
# Version 1 wrote each announcement as a list: these fields, in this order (version 2 names them so).
V1_ANNOUNCED = ("bytes", "bytes_from", "seconds", "seconds_from", "revised_seconds", "revised_from", "bytes_written",
                "active_seconds")


class LogError(ValueError):
    """A coord.jsonl this ioloom cannot read: what and where, in one line."""


def read(path: Path) -> list[dict]:
    """Each process's line, its announcements {name: value} whatever the version it was written in; [] when there
    is no log (no process wrote to a regular file)."""
    if not path.exists():
        return []
    return [_process(line, f"{path}:{n}") for n, line in enumerate(path.read_text().splitlines(), 1)]


def _process(line: str, where: str) -> dict:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as e:
        raise LogError(f"{where}: not a line of JSON ({e.msg}; cut short by a full disk or a killed process?): "
                       "the other lines are intact, remove this one to read them") from None
    version = row.get("version", 1)
    if version not in (1, VERSION):
        raise LogError(f"{where}: version {version} of the coordination log, which this ioloom does not read "
                       f"(versions 1 and {VERSION}): read it with the ioloom that wrote it")
    if version == 1:
        row["announced"] = [dict(zip(V1_ANNOUNCED, fields, strict=True)) for fields in row.get("announced", [])]
    return row
