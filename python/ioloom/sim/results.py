"""What a simulation measured, as the figures `ioloom bench io` prints (docs/bench.md, "Timing and figures" and
"JSON output (version 2)": the same document, so the report and sweep code read both) and per-target time series.

Per phase and rank: open, data, sync and close time are the summed durations of those calls (a logfs index
write counts as close); total is from the rank's first call to its last (barriers excluded at the ends);
data_begin, data_end and end are seconds from the phase's start (its earliest call). span = the latest close
minus the earliest open; effective bandwidth = bytes / (span - the least wait of any rank), raw = bytes / max
data time, access = bytes / (end of the last data call - start of the first).
"""
from __future__ import annotations

import numpy as np

from ioloom.sim.engine import Outcome
from ioloom.sim.workload import KINDS, BenchArgs

FIELDS = ("open", "data", "sync", "close", "wait", "prep", "total", "data_begin", "data_end")  # ioloom-bench's
BANDWIDTHS = ("effective_bw", "raw_bw", "access_bw")


def _stats(values: np.ndarray) -> dict[str, float]:
    return {"min": float(values.min()), "mean": float(values.mean()), "max": float(values.max())}


def _rank_times(o: Outcome, sel: np.ndarray, nranks: int) -> dict[str, np.ndarray]:
    ops, times = o.workload.ops[sel], o.times[sel]
    took = times[:, 1] - times[:, 0]
    rank = ops["rank"]
    index = np.isin(ops["file"], list(o.workload.index_files)) & (ops["kind"] == KINDS["write"])
    data = np.isin(ops["kind"], [KINDS["write"], KINDS["read"]]) & ~index
    # a collective's exchange and waits are part of its data call's time (workload.two_phase)
    moving = data | (ops["kind"] == KINDS["send"]) | ((ops["kind"] == KINDS["barrier"]) & (ops["offset"] == 1))
    out: dict[str, np.ndarray] = {name: np.bincount(rank, weights=took * mask, minlength=nranks) for name, mask in (
        ("open", ops["kind"] == KINDS["open"]), ("data", moving), ("sync", ops["kind"] == KINDS["sync"]),
        ("close", (ops["kind"] == KINDS["close"]) | index))}
    out["wait"] = np.bincount(rank, weights=ops["gap"] * moving, minlength=nranks)
    out["prep"] = np.zeros(nranks)
    calls = ops["kind"] != KINDS["barrier"]
    origin = float((times[calls, 0] - ops["gap"][calls]).min())

    def extreme(mask: np.ndarray, column: np.ndarray, reduce, fill: float) -> np.ndarray:
        out = np.full(nranks, fill)
        reduce.at(out, rank[mask], column[mask])
        return out

    first = extreme(calls, times[:, 0] - ops["gap"], np.minimum, np.inf)
    out["end"] = extreme(calls, times[:, 1], np.maximum, -np.inf) - origin
    out["total"] = out["end"] + origin - first
    out["data_begin"] = extreme(moving, times[:, 0], np.minimum, np.inf) - origin
    out["data_end"] = extreme(moving, times[:, 1], np.maximum, -np.inf) - origin
    out["bytes"] = np.bincount(rank, weights=ops["length"] * data, minlength=nranks)
    out["calls"] = np.bincount(rank, weights=data, minlength=nranks)
    return out


def phase_document(o: Outcome, phase: int) -> dict:
    job, op, rep = o.workload.phases[phase]
    nranks = o.workload.jobs[job][1]
    t = _rank_times(o, o.workload.phase == phase, nranks)
    total_bytes = float(t["bytes"].sum())
    span = float(t["end"].max())
    access = float(t["data_end"].max() - t["data_begin"].min())
    return {"op": op, "rep": rep, "bytes": total_bytes, "calls": float(t["calls"].sum()), "errors": 0, "span": span,
            "effective_bw": total_bytes / (span - float((t["wait"] + t["prep"]).min())),
            "raw_bw": total_bytes / float(t["data"].max()) if t["data"].max() > 0 else 0.0,
            "access_bw": total_bytes / access if access > 0 else 0.0,
            "time": {name: _stats(t[name]) for name in FIELDS},
            "ranks": [{"rank": r, **{name: float(t[name][r]) for name in (*FIELDS, "end")},
                       "bytes": float(t["bytes"][r]), "calls": float(t["calls"][r]), "errors": 0}
                      for r in range(nranks)]}


def _params(a: BenchArgs, nodes: int) -> dict:
    return {"api": a.api, "pattern": a.pattern, "kernel": "none", "collective": a.collective, "block_size": a.block,
            "transfer_size": a.transfer, "segment_count": a.segments, "fsync": a.fsync, "random": a.random,
            "reorder": False, "shift": 0, "repetitions": a.repetitions, "wait_ms": a.wait_ms, "delay_s": 0.0,
            "verify": False,
            "path": "(simulated)", "hints_requested": {}, "emulated_nodes": nodes}


def job_document(o: Outcome, job: int) -> dict:
    """Job `job` as the JSON document ioloom-bench prints, plus a "simulator" member."""
    start, nranks, rpn, _ = o.workload.jobs[job]
    phases = [phase_document(o, i) for i, (j, _, _) in enumerate(o.workload.phases) if j == job]
    summary = []
    for op in dict.fromkeys(p["op"] for p in phases):
        mine = [p for p in phases if p["op"] == op]
        bandwidths = {kind: np.array([p[kind] for p in mine]) for kind in BANDWIDTHS}
        summary.append({"op": op, "reps": len(mine),
                        **{kind: {**_stats(v), "median": float(np.median(v))} for kind, v in bandwidths.items()},
                        "time": {f: _stats(np.array([p["time"][f]["max"] for p in mine])) for f in FIELDS}})
    return {"ioloom_bench": 2, "mpi": "simulated", "nranks": nranks, "ranks_per_node": rpn,
            "node": {"ranks": rpn, "cpus": rpn}, "oversubscribed": False,
            "params": _params(o.workload.args[job], -(-nranks // rpn)), "hints": {}, "phases": phases,
            "summary": summary, "verify": {"enabled": False, "errors": 0},
            "simulator": {"start": start, "simulated_time": o.simulated_time, "wall_seconds": o.wall_seconds,
                          "cpu_seconds": o.cpu_seconds, "peak_rss": o.peak_rss,
                          "operations": int(o.workload.ops.size), "transfers": int(o.pieces.size),
                          "log_structured": bool(np.isin(o.workload.ops["file"][o.workload.ops["job"] == job],
                                                         list(o.workload.index_files)).any())}}


def _spread(o: Outcome, start: np.ndarray, end: np.ndarray, moved: np.ndarray, key: np.ndarray, keys: int,
            bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Bytes per second of each key in each of `bins` equal time bins over the simulation: (bin edges, keys x
    bins); each transfer's bytes spread evenly over its duration."""
    edges = np.linspace(0.0, max(o.simulated_time, 1e-12), bins + 1)
    out = np.zeros((keys, bins))
    took = np.maximum(end - start, 1e-300)
    for b in range(bins):
        overlap = np.clip(np.minimum(end, edges[b + 1]) - np.maximum(start, edges[b]), 0, None)
        np.add.at(out[:, b], key, moved * np.where(end > start, overlap / took, 0.0))
    return edges, out / (edges[1] - edges[0])


def target_series(o: Outcome, bins: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Bytes per second each target moved in each of `bins` equal time bins: (bin edges, targets x bins)."""
    p = o.pieces
    return _spread(o, p["start"], p["end"], p["bytes"], p["target"], o.platform["targets.count"], bins)


def rank_series(o: Outcome, bins: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Bytes per second each rank's data calls moved per time bin: (bin edges, ranks x bins), the ranks of all
    jobs in job order."""
    ops = o.workload.ops
    first = np.cumsum([0] + [n for _, n, _, _ in o.workload.jobs])
    data = np.isin(ops["kind"], [KINDS["write"], KINDS["read"]])
    key = first[ops["job"][data]] + ops["rank"][data]
    return _spread(o, o.times[data, 0], o.times[data, 1], ops["length"][data].astype(float), key, int(first[-1]), bins)


def target_correlation(series: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pearson correlation between the throughput series of the targets that moved data: (targets, matrix)."""
    busy = np.flatnonzero(series.std(axis=1) > 0)
    return busy, np.corrcoef(series[busy]) if busy.size > 1 else np.ones((busy.size, busy.size))


def replay_document(o: Outcome) -> dict:
    """A replayed trace: the time it took as traced and as simulated (first call to last), and per kind of call
    the calls, bytes and summed durations, traced and simulated."""
    w = o.workload
    recorded = w.recorded
    assert recorded is not None, "only a replayed trace has traced times"  # workload.from_trace sets them
    names = {v: k for k, v in KINDS.items()}
    took, traced = o.times[:, 1] - o.times[:, 0], recorded[:, 1] - recorded[:, 0]
    calls = {names[int(k)]: {"calls": int((w.ops["kind"] == k).sum()),
                             "bytes": int(w.ops["length"][w.ops["kind"] == k].sum()),
                             "traced_s": float(traced[w.ops["kind"] == k].sum()),
                             "simulated_s": float(took[w.ops["kind"] == k].sum())}
             for k in np.unique(w.ops["kind"])}
    return {"ranks": w.jobs[0][1], "operations": int(w.ops.size), "files": len(w.layouts),
            "traced_time": float(recorded[:, 1].max()), "simulated_time": float(o.times[:, 1].max()),
            "calls": calls, "simulator": {"wall_seconds": o.wall_seconds, "cpu_seconds": o.cpu_seconds,
                                          "transfers": int(o.pieces.size)}}
