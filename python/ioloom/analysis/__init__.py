"""Analysis of a trace: a map over its streams (one per process) and a reduce.

    import ioloom
    result = ioloom.analyse(ioloom.open_trace("trace"))
    result.to_json()["bandwidth"], result.findings

`analyse` also takes a path (a trace directory, or a Darshan log, see `ioloom.darshan_import`).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ioloom.analysis.partition import Options
from ioloom.analysis.result import Analysis
from ioloom.logfs.format import is_member
from ioloom.trace.model import Trace

__all__ = ["analyse", "Analysis", "Options", "load"]


def load(path: str | Path):
    """A Trace from a trace directory or a Darshan log (.darshan)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such trace; record one with `ioloom run -o {path} -- CMD`")
    if path.suffix == ".darshan":
        from ioloom.darshan_import import darshan_trace
        return darshan_trace(path)
    from ioloom import open_trace
    return open_trace(path)


def analyse(trace, options: Options | None = None, scheduler: str | None = None,
            workers: int | None = None, progress=None) -> Analysis:
    """Analyse a Trace (or a path to one). scheduler: a Dask scheduler address to run the map on;
    workers: local worker processes (default: one per CPU, at most one per stream); progress: called with
    each finished stream's number of events (ioloom.progress draws it)."""
    from ioloom.analysis.executor import map_streams, plan

    if isinstance(trace, (str, Path)):
        trace = load(trace)
    options = options or Options()
    paths = dict(zip(trace.files.column("file_id").to_pylist(), trace.files.column("path").to_pylist()))
    system = frozenset(i for i, p in paths.items() if options.is_system(p or ""))
    logical = set(paths.values())
    logfs = frozenset(i for i, p in paths.items() if i not in system and p and is_member(p, logical))
    options = replace(options, system_files=system, logfs_files=logfs)
    streams = plan(trace, remote=scheduler is not None)
    # What the reduce needs of the trace; when the workers re-read stream files, dropping the caller's
    # streams here lets an opened trace's bytes go before the workers decode theirs.
    header = Trace([], trace.files, trace.meta, trace.problems)
    del trace
    partials, where = map_streams(streams, options, scheduler, workers, progress)
    return Analysis.reduce(header, partials, options, where)
