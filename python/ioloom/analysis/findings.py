"""Findings: problems the trace shows, each with its evidence (ranks, files, time window, counts) and the
change that removes it. Thresholds are named constants here and listed in docs/analysis.md.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from ioloom.analysis.metrics import NS, POSIX, top_level
from ioloom.analysis.ops import LAYER_CODE, META, READ, WRITE

SMALL_WRITES_MIN = 64          # independent small writes on one interleaved shared file before we speak
SMALL_WRITES_SHARE = 0.5       # ... and their share of that file's writes
LOCK_WAIT_SHARE = 0.10         # lock wait / write-call time on a shared file
STRAGGLER_RATIO = 2.0          # slowest rank's I/O time / the median rank's
STRAGGLER_MIN_S = 0.05         # ... and at least this much slower (noise floor on tiny runs)
METADATA_MIN_OPS = 500         # POSIX metadata calls in the job
METADATA_SHARE = 0.2           # ... and their share of POSIX call time, or more metadata than data calls
REREAD_MIN_BYTES = 1 << 20     # bytes read again by one rank from one file
REREAD_SHARE = 0.5             # ... and their share of what it read there
MISALIGNED_SHARE = 0.10        # POSIX data requests touching more stripes than their size needs
MISALIGNED_MIN = 16
FIRST_BYTE_MIN_S = 0.25        # file-call time the median rank spent before moving its first byte
FIRST_BYTE_SHARE = 0.5         # ... and its share of that rank's file-call time


@dataclass
class Finding:
    code: str
    severity: str  # "info", "warning", "critical"
    message: str
    evidence: dict
    advice: str

    def to_json(self) -> dict:
        return asdict(self)


def _window(t0, t1) -> list[float]:
    return [float(t0) / NS, float(t1) / NS]


def _paths(files: dict, ids) -> list[str]:
    return [files.get(int(i), f"file {int(i)}") for i in sorted(set(ids))]


def data_sieving(a) -> list[Finding]:
    sieved = a.splits[a.splits["sieving"] > 0]
    out = []
    for file_id, part in sieved.groupby("file_id"):
        calls, writes = int(part["sieving"].sum()), a.splits[(a.splits["file_id"] == file_id)]
        independent_writes = int(writes[(writes["kind"] == WRITE) & ~writes["collective"]]["calls"].sum())
        out.append(Finding(
            "data-sieving", "warning",
            f"{calls} of {independent_writes} independent MPI-IO writes to {_paths(a.paths, [file_id])[0]} were "
            "done by data sieving: lock, read, write back, unlock",
            {"ranks": sorted(int(r) for r in part["rank"].unique()), "files": _paths(a.paths, [file_id]),
             "window_s": _window(part["sieving_first"].min(), part["sieving_last"].max()),
             "counts": {"sieved_calls": calls, "posix_reads_under_writes": int(part["read_ops"].sum()),
                        "posix_locks_under_writes": int(part["lock_ops"].sum()),
                        "read_seconds": float(part["read_ns"].sum() / NS),
                        "lock_seconds": float((part["lock_ns"].sum() + part["unlock_ns"].sum()) / NS)}},
            "Set the MPI-IO hint romio_ds_write=disable (MPI_Info_set(info, \"romio_ds_write\", \"disable\")) or "
            "write collectively (MPI_File_write_all / _at_all) so collective buffering (romio_cb_write=enable) "
            "replaces the read-modify-write cycles."))
    return out


def small_strided_writes(a) -> list[Finding]:
    out = []
    own = top_level(a.app_groups)
    writes = own[own["kind"] == WRITE]
    independent = a.splits[(a.splits["kind"] == WRITE) & ~a.splits["collective"]]
    for pattern in a.patterns:
        file_id = pattern["file_id"]
        part = writes[writes["file_id"] == file_id]
        if not pattern["interleaved"] or part.empty:
            continue
        through_mpi = (part["layer"] == LAYER_CODE["mpiio"]).any()
        count = int(independent[independent["file_id"] == file_id]["calls"].sum()) if through_mpi else int(part["ops"].sum())
        small = int(part["small"].sum())
        if count < SMALL_WRITES_MIN or small < SMALL_WRITES_SHARE * part["ops"].sum() or small < SMALL_WRITES_MIN:
            continue
        out.append(Finding(
            "small-strided-writes", "warning",
            f"{small} small writes (< {a.options.small_request} bytes) from {pattern['processes']} ranks "
            f"interleave on the shared file {_paths(a.paths, [file_id])[0]}",
            {"ranks": sorted(int(r) for r in part["rank"].unique()), "files": _paths(a.paths, [file_id]),
             "window_s": _window(part["t_first"].min(), part["t_last"].max()),
             "counts": {"independent_writes": count, "small_writes": small, "stride": pattern["stride"]}},
            "Write collectively (MPI_File_write_all with a file view) so collective buffering turns the pieces "
            "into large contiguous writes by a few aggregators, or run through ioloom's log layer "
            "(ioloom run --logfs) which turns N-1 strided writes into per-writer logs."))
    return out


def _max_concurrent(intervals: pd.DataFrame) -> int:
    """Most lock holders at one instant, from [t_acquired, t_release) intervals."""
    held = intervals.dropna(subset=["t_release"])
    if held.empty:
        return 0
    times = np.concatenate([held["t_acquired"].to_numpy(), held["t_release"].to_numpy()])
    steps = np.concatenate([np.ones(len(held)), -np.ones(len(held))])
    order = np.lexsort((steps, times))  # a release at the same instant as an acquire comes first
    return int(np.cumsum(steps[order]).max())


def lock_serialised(a) -> list[Finding]:
    out = []
    write_time = top_level(a.app_groups)
    write_time = write_time[write_time["kind"] == WRITE].groupby("file_id")["time_ns"].sum()
    for entry in a.lock_summary:
        file_id = entry["file_id"]
        spent = float(write_time.get(file_id, 0)) / NS
        if entry["ranks"] < 2 or spent <= 0 or entry["wait_s"] < LOCK_WAIT_SHARE * spent:
            continue
        part = a.locks[a.locks["file_id"] == file_id]
        out.append(Finding(
            "lock-serialised-writes", "critical" if entry["wait_s"] >= 0.5 * spent else "warning",
            f"{entry['ranks']} ranks waited {entry['wait_s']:.3g} s for record locks on "
            f"{_paths(a.paths, [file_id])[0]}, against {spent:.3g} s spent writing it",
            {"ranks": sorted(int(r) for r in part["rank"].unique()), "files": _paths(a.paths, [file_id]),
             "window_s": _window(part["t_request"].min(), part["t_release"].max()),
             "counts": {"locks": entry["locks"], "wait_seconds": entry["wait_s"], "held_seconds": entry["held_s"],
                        "write_seconds": spent, "max_concurrent_holders": _max_concurrent(part)}},
            "Avoid the locks: disable data sieving (romio_ds_write=disable), write collectively so only "
            "aggregators touch the file in disjoint stripe-aligned regions, or give each writer its own log "
            "(ioloom's log layer, the PLFS idea)."))
    return out


def rank_imbalance(a) -> list[Finding]:
    own = top_level(a.app_groups)
    per_rank = own.groupby("rank")["time_ns"].sum() / NS
    if len(per_rank) < 2:
        return []
    median, slowest = float(per_rank.median()), float(per_rank.max())
    if slowest < STRAGGLER_RATIO * median or slowest - median < STRAGGLER_MIN_S:
        return []
    stragglers = per_rank[per_rank >= STRAGGLER_RATIO * median].sort_values(ascending=False)
    mine = own[own["rank"].isin(stragglers.index)]
    return [Finding(
        "rank-imbalance", "warning",
        f"rank {int(stragglers.index[0])} spent {slowest:.3g} s in I/O, {slowest / max(median, 1e-12):.1f}x the "
        f"median rank ({median:.3g} s); {len(stragglers)} straggler(s)",
        {"ranks": [int(r) for r in stragglers.index], "files": _paths(a.paths, mine["file_id"].unique()),
         "window_s": _window(mine["t_first"].min(), mine["t_last"].max()),
         "counts": {"slowest_seconds": slowest, "median_seconds": median,
                    "stragglers": {int(r): float(t) for r, t in stragglers.items()},
                    "bytes_by_rank": {int(r): int(b) for r, b in own.groupby("rank")["bytes"].sum().items()}}},
        "Give every rank a similar share of the data, or let collective I/O spread it over aggregators; if the "
        "data is balanced, look at the slow rank's node and storage target.")]


def metadata_storm(a) -> list[Finding]:
    posix = a.app_groups[(a.app_groups["layer"] == POSIX)]
    meta = posix[posix["kind"] == META]
    data = posix[posix["kind"].isin([READ, WRITE])]
    ops, meta_s, all_s = int(meta["ops"].sum()), meta["time_ns"].sum() / NS, posix["time_ns"].sum() / NS
    if ops < METADATA_MIN_OPS or (meta_s < METADATA_SHARE * all_s and ops < data["ops"].sum()):
        return []
    return [Finding(
        "metadata-storm", "warning",
        f"{ops} POSIX metadata calls (open, stat, seek, close...) from {meta['rank'].nunique()} ranks took "
        f"{meta_s:.3g} s, {meta_s / max(all_s, 1e-12):.0%} of POSIX time",
        {"ranks": sorted(int(r) for r in meta["rank"].unique()),
         "files": _paths(a.paths, meta["file_id"][meta["file_id"] >= 0].unique())[:20],
         "window_s": _window(meta["t_first"].min(), meta["t_last"].max()),
         "counts": {"metadata_calls": ops, "data_calls": int(data["ops"].sum()), "metadata_seconds": float(meta_s),
                    "files": int(meta["file_id"].nunique())}},
        "Open each file once and keep it open, stat less (cache sizes), let one rank do the metadata and "
        "broadcast it, and prefer fewer, larger files.")]


def repeated_reads(a) -> list[Finding]:
    own = top_level(a.app_groups)
    reads = own[own["kind"] == READ].groupby(["rank", "file_id"])[["bytes", "unique_bytes", "t_first", "t_last"]]
    reads = reads.agg({"bytes": "sum", "unique_bytes": "sum", "t_first": "min", "t_last": "max"})
    reads["again"] = reads["bytes"] - reads["unique_bytes"]
    hit = reads[(reads["again"] >= REREAD_MIN_BYTES) & (reads["again"] >= REREAD_SHARE * reads["bytes"])]
    if hit.empty:
        return []
    ranks, files = hit.index.get_level_values(0), hit.index.get_level_values(1)
    return [Finding(
        "repeated-reads", "warning",
        f"{len(set(ranks))} rank(s) read {int(hit['again'].sum())} bytes they had already read "
        f"({int(hit['bytes'].sum())} read, {int(hit['unique_bytes'].sum())} distinct)",
        {"ranks": sorted(int(r) for r in set(ranks)), "files": _paths(a.paths, files),
         "window_s": _window(hit["t_first"].min(), hit["t_last"].max()),
         "counts": {"bytes_read": int(hit["bytes"].sum()), "distinct_bytes": int(hit["unique_bytes"].sum()),
                    "bytes_read_again": int(hit["again"].sum())}},
        "Read the data once and keep it in memory, or read it on one rank and broadcast it (MPI_Bcast).")]


def stripe_misalignment(a) -> list[Finding]:
    hit = [p for p in a.patterns if p["misaligned_requests"] >= MISALIGNED_SHARE * max(p["posix_requests"], 1)
           and p["misaligned_requests"] > 0]
    count, total = sum(p["misaligned_requests"] for p in hit), sum(p["posix_requests"] for p in hit)
    if count < MISALIGNED_MIN:
        return []
    ids = [p["file_id"] for p in hit]
    part = a.app_groups[a.app_groups["file_id"].isin(ids) & (a.app_groups["layer"] == POSIX)
                        & a.app_groups["kind"].isin([READ, WRITE])]
    return [Finding(
        "stripe-misalignment", "warning",
        f"{count} of {total} POSIX requests on {len(ids)} file(s) straddle a {a.options.stripe_size}-byte stripe "
        "boundary they need not cross",
        {"ranks": sorted(int(r) for r in part["rank"].unique()), "files": _paths(a.paths, ids),
         "window_s": _window(part["t_first"].min(), part["t_last"].max()),
         "counts": {"misaligned_requests": count, "requests": total, "stripe_size": a.options.stripe_size}},
        "Align requests to the stripe: pad headers to a stripe boundary, make the block size a multiple of "
        "the stripe, or set striping_unit / cb_buffer_size hints to match it (check it with lfs getstripe).")]


def time_before_first_byte(a) -> list[Finding]:
    procs = a.processes
    procs = procs[procs["t_first_byte"].notna() & (procs["io_ns"] > 0)]
    lost = procs["io_before_first_byte_ns"] / NS
    hit = procs[(lost >= FIRST_BYTE_MIN_S) & (procs["io_before_first_byte_ns"] >= FIRST_BYTE_SHARE * procs["io_ns"])]
    if hit.empty or (lost.median() < FIRST_BYTE_MIN_S and len(hit) <= len(procs) // 2):
        return []
    lost = hit["io_before_first_byte_ns"] / NS
    return [Finding(
        "time-before-first-byte", "warning",
        f"{len(hit)} rank(s) spent up to {lost.max():.3g} s in file calls before moving their first byte",
        {"ranks": sorted(int(r) for r in hit["rank"]), "files": [],
         "window_s": _window(hit["t_first"].min(), hit["t_first_byte"].max()),
         "counts": {"seconds_before_first_byte": {int(r): float(s) for r, s in zip(hit["rank"], lost)},
                    "file_call_seconds": {int(r): float(s) / NS for r, s in zip(hit["rank"], hit["io_ns"])}}},
        "Look at what runs before the first read or write (opens, stats, lock waits, MPI_File_open on a slow "
        "file system): open files once and collectively, and do not wait on locks held by other ranks.")]


RULES = (data_sieving, small_strided_writes, lock_serialised, rank_imbalance, metadata_storm, repeated_reads,
         stripe_misalignment, time_before_first_byte)


def find(analysis) -> list[Finding]:
    """Every rule's findings, most severe first."""
    order = {"critical": 0, "warning": 1, "info": 2}
    found = [f for rule in RULES for f in rule(analysis)]
    return sorted(found, key=lambda f: order[f.severity])
