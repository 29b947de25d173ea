"""The reduce: stream summaries in, one `Analysis` out (metrics, cross-layer view, patterns, findings), with
`to_json()` for `ioloom stats --json` and the tables the report plots."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ioloom.analysis import crosslayer, findings, metrics, patterns
from ioloom.analysis.partition import Options, Partial, summarise
from ioloom.analysis.range_tables import coarsen
from ioloom.trace.model import EVENT_SCHEMA, Stream

JSON_VERSION = 1  # of the `stats --json` document, described in docs/analysis.md
TABLES = ("groups", "sizes", "histogram", "strides", "timebins", "splits", "calls", "children", "locks", "samples")


def _empty_partial(options: Options) -> Partial:
    """The summary of a stream without events: gives every table its columns when a trace has no stream."""
    empty = Stream(-1, -1, {}, lambda columns: EVENT_SCHEMA.empty_table().select(columns or EVENT_SCHEMA.names))
    return summarise(empty, options)


def _concat(partials: list[Partial], name: str) -> pd.DataFrame:
    frames = [getattr(p, name) for p in partials if len(getattr(p, name))]
    return pd.concat(frames, ignore_index=True) if frames else getattr(partials[0], name).iloc[0:0]


PLOT_BINS = 256  # bandwidth-over-time bins over the run, at least (a power-of-two width in ns)


def _timebins(frame: pd.DataFrame, span_ns: int) -> tuple[pd.DataFrame, int]:
    """Per-stream power-of-two bins merged at one width, chosen from the run's length (`span_ns`) so the run
    gets PLOT_BINS to 2 PLOT_BINS bins (coarser only where a stream's own bins are); returns (layer, kind, t_ns,
    bytes), width."""
    if frame.empty:
        return pd.DataFrame(columns=["layer", "kind", "t_ns", "bytes"]), 0
    finest = int(frame["shift"].max())
    merged = coarsen(frame, max(finest, int(np.floor(np.log2(max(span_ns, 1) / PLOT_BINS)))))
    shift = int(merged.pop("shift").iat[0])
    merged["t_ns"] = merged.pop("bin").to_numpy(np.int64) << shift
    return merged, 1 << shift


@dataclass
class Analysis:
    """Everything `ioloom stats` prints and `ioloom report` draws. Times in the JSON are seconds since the
    trace epoch; tables keep nanoseconds."""
    options: Options
    meta: dict
    problems: list[str]
    paths: dict[int, str]
    processes: pd.DataFrame
    executor: str
    groups: pd.DataFrame = field(repr=False)
    sizes: pd.DataFrame = field(repr=False)
    histogram: pd.DataFrame = field(repr=False)
    strides: pd.DataFrame = field(repr=False)
    timebins: pd.DataFrame = field(repr=False)
    splits: pd.DataFrame = field(repr=False)
    calls: pd.DataFrame = field(repr=False)
    children: pd.DataFrame = field(repr=False)
    locks: pd.DataFrame = field(repr=False)
    samples: pd.DataFrame = field(repr=False)
    bin_width_ns: int = 0
    app_groups: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)  # groups on application files
    bandwidth: dict = field(default_factory=dict)
    amplification: dict = field(default_factory=dict)
    lock_summary: list = field(default_factory=list)
    patterns: list = field(default_factory=list)
    collectives: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    findings: list = field(default_factory=list)

    @classmethod
    def reduce(cls, trace, partials: list[Partial], options: Options, executor: str) -> Analysis:
        shapes = partials or [_empty_partial(options)]
        tables = {name: _concat(shapes, name) for name in TABLES}
        paths = dict(zip(trace.files.column("file_id").to_pylist(), trace.files.column("path").to_pylist()))
        processes = pd.DataFrame([p.process for p in shapes if p.process["events"]],
                                 columns=list(shapes[0].process))
        span = int(processes["t_last"].max() - processes["t_first"].min()) if len(processes) else 0
        timebins, width = _timebins(tables.pop("timebins"), span)
        a = cls(options, dict(trace.meta), list(trace.problems), paths, processes, executor, timebins=timebins,
                bin_width_ns=width, **tables)
        a.app_groups = metrics.application_files(a.groups, options.excluded_files)
        app_splits = a.splits[~a.splits["file_id"].isin(options.excluded_files)]
        aggregate = metrics.aggregate_bandwidths(a.app_groups)
        riot = metrics.bandwidths(a.app_groups, app_splits)
        a.bandwidth = {d: {**figures, **aggregate[d]} for d, figures in riot.items()}
        a.amplification = metrics.amplification(a.app_groups, app_splits)
        a.lock_summary = metrics.lock_summary(a.locks[~a.locks["file_id"].isin(options.excluded_files)])
        a.patterns = patterns.classify(a.app_groups, a.strides, options.stripe_size)
        a.collectives = crosslayer.collectives(a.calls)
        a.findings = findings.find(a)
        return a

    def summary(self) -> dict:
        procs = self.processes
        infos = list(procs["info"]) if "info" in procs else []
        # the trace's count covers streams with no event left to analyse too (all lost to a full disk)
        dropped = self.meta.get("dropped_events", sum(int(info.get("dropped_events", 0)) for info in infos))
        excluded = sum(calls for info in infos for calls, _ in info.get("excluded", {}).values())
        t0 = procs["t_first"].min() if len(procs) else 0
        t1 = procs["t_last"].max() if len(procs) else 0
        ranks = procs["rank"][procs["rank"] >= 0].nunique() if len(procs) else 0
        events = int(procs["events"].sum()) if len(procs) else 0
        out = {"processes": int(len(procs)), "ranks": int(ranks), "events": events,
               "files": int(self.groups["file_id"][self.groups["file_id"] >= 0].nunique()) if len(self.groups) else 0,
               "duration_s": float((t1 - t0) / metrics.NS) if len(procs) else 0.0,
               "dropped_events": dropped, "excluded_calls": excluded, "problems": self.problems,
               "executor": self.executor, "detail_limited": self._detail_limited()}
        if "darshan" in self.meta:
            out.update(self._darshan_summary(out))
        return out

    def _darshan_summary(self, events: dict) -> dict:
        """A Darshan log's job, not only its DXT events: processes and run time from the job record, files from
        the counters; whether the log has no DXT segments or fewer than its counters count."""
        darshan = self.meta["darshan"]
        nprocs = int(darshan["job"].get("nprocs") or 0)
        counters_only = events["events"] == 0
        partial = [c for c in darshan.get("dxt_coverage", []) if c["segments"] < c["operations"]]
        return {"processes": max(events["processes"], nprocs), "ranks": max(events["ranks"], nprocs),
                "files": max(events["files"], len({f["path"] for f in darshan["files"]})),
                "duration_s": float(darshan["job"].get("run_time") or 0) if counters_only else events["duration_s"],
                "darshan": {"nprocs": nprocs, "counters_only": counters_only, "dxt_partial": bool(partial),
                            "dxt_segments": sum(c["segments"] for c in darshan.get("dxt_coverage", [])),
                            "operations_counted": sum(c["operations"] for c in darshan.get("dxt_coverage", []))}}

    def _detail_limited(self) -> bool:
        total = int(self.splits["calls"].sum()) if len(self.splits) else 0
        return total > len(self.calls)

    def _layers(self, by: list[str]) -> list[dict]:
        frame = metrics.totals(self.groups, by) if len(self.groups) else pd.DataFrame()
        if "file_id" in frame:
            frame.insert(1, "path", frame["file_id"].map(lambda i: self.paths.get(int(i), "")))
        return frame.to_dict("records")

    def io(self) -> dict:
        """Bytes and seconds per layer on the application's files (`layers`), what the program itself moved
        over all its layers (`application`), per application file (`files`), and the files left out of all three:
        system and MPI-runtime files, logfs's own files (its logs and journals under the program's containers)."""
        layers = metrics.io_by_layer(self.app_groups) if len(self.app_groups) else []
        files = [{**f, "path": self.paths.get(f["file_id"], "")} for f in metrics.io_by_file(self.app_groups)]
        return {"layers": layers, "application": metrics.application_bytes(layers), "files": files,
                "system_files": self._moved_on(self.options.system_files),
                "logfs_files": self._moved_on(self.options.logfs_files)}

    def _moved_on(self, file_ids) -> dict:
        """How many of these files the trace touched, and the bytes read and written on them."""
        part = self.groups[self.groups["file_id"].isin(list(file_ids))]
        moved = part.groupby("kind")["bytes"].sum()
        return {"files": int(part["file_id"].nunique()), "read_bytes": int(moved.get(metrics.READ, 0)),
                "write_bytes": int(moved.get(metrics.WRITE, 0))}

    def to_json(self, calls: bool = True) -> dict:
        """The whole result as plain JSON types; `calls=False` leaves out the MPI-IO calls kept in detail (up to
        Options.detail_limit rows, which the report draws from the tables instead)."""
        out = {
            "format_version": JSON_VERSION,
            "summary": self.summary(),
            "options": {k: v for k, v in vars(self.options).items() if k not in ("system_files", "logfs_files")},
            "system_files": sorted(self.paths.get(i, str(i)) for i in self.options.system_files),
            "io": self.io(),
            "bandwidth": self.bandwidth,
            "layers": self._layers(["layer", "kind"]),
            "files": self._layers(["file_id", "layer", "kind"]),
            "ranks": self._layers(["rank", "layer", "kind"]),
            "darshan_counters": metrics.darshan_counters(self.app_groups, self.sizes, self.histogram, self.strides),
            "rank_spread": metrics.rank_spread(self.app_groups),
            "locks": self.lock_summary,
            "amplification": self.amplification,
            "crosslayer": crosslayer.by_operation(self.splits),
            "collectives": crosslayer.collectives_json(self.collectives),
            "mpiio_calls": crosslayer.calls_json(self.calls) if calls else [],
            "patterns": [{**p, "path": self.paths.get(p["file_id"], "")} for p in self.patterns],
            "findings": [f.to_json() for f in self.findings],
            "checks": findings.checked(self.findings),
        }
        if "darshan" in self.meta:
            out["darshan"] = self.meta["darshan"]
        return _plain(out)


def _plain(value):
    """numpy scalars and NaN made JSON-safe."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return float(value) if np.isfinite(value) else None
    if isinstance(value, np.bool_):
        return bool(value)
    return value
