"""Findings: problems the trace shows, each with its evidence (ranks, files, time window, counts) and the
change that removes it. Every threshold is a field of `Thresholds` (one table, listed in docs/analysis.md);
every rule is a `Check` in CHECKS, which the report lists with its thresholds, so "no findings" says what was
looked for. The checks cover Drishti's triggers that a trace can answer (its ids in `Check.drishti`),
computed from every call rather than from Darshan's counters, and the cross-layer ones only a linked
trace shows.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields

import numpy as np
import pandas as pd

from ioloom.analysis.metrics import MPIIO, NS, POSIX, human_bytes, top_level
from ioloom.analysis.ops import LAYER_CODE, LAYERS, META, READ, SYNC, WRITE

STDIO = LAYER_CODE["stdio"]
DIRECTIONS = {"read": READ, "write": WRITE}


def _limit(value, meaning: str, unit: str):
    return field(default=value, metadata={"meaning": meaning, "unit": unit})


@dataclass(frozen=True)
class Thresholds:
    """When each check speaks. A finding fires at or above a minimum (never strictly above)."""
    small_writes_min: int = _limit(64, "independent small writes on one interleaved shared file", "calls")
    small_writes_share: float = _limit(0.5, "... and their share of that file's writes", "share")
    small_requests_min: int = _limit(1000, "small POSIX requests of one direction in the job (Drishti: 1000)",
                                     "calls")
    small_requests_share: float = _limit(0.1, "... and their share of that direction's POSIX requests "
                                         "(Drishti: 10 %)", "share")
    lock_wait_share: float = _limit(0.10, "lock wait / write-call time on a shared file", "share")
    lock_wait_critical: float = _limit(0.5, "... at which the finding is critical", "share")
    straggler_ratio: float = _limit(2.0, "slowest rank's I/O time / the median rank's", "ratio")
    straggler_min_s: float = _limit(0.05, "... and at least this much slower", "s")
    shared_imbalance_share: float = _limit(0.15, "(most - least) bytes or seconds of one rank / the file's total, "
                                           "on a file shared by ranks (Drishti: 15 %)", "share")
    shared_imbalance_min_bytes: int = _limit(1 << 20, "... and the file moved at least this much in that "
                                             "direction", "bytes")
    shared_imbalance_min_s: float = _limit(0.2, "... and, for a spread of time, at least this many seconds in "
                                           "the file system", "s")
    metadata_min_ops: int = _limit(500, "POSIX metadata calls in the job", "calls")
    metadata_share: float = _limit(0.2, "... and their share of POSIX call time (or more metadata than data "
                                   "calls)", "share")
    non_data_share: float = _limit(0.5, "time in metadata and sync calls / all file-call time at the "
                                   "application's layer", "share")
    non_data_min_s: float = _limit(0.1, "... and at least this long, summed over ranks", "s")
    metadata_rank_s: float = _limit(30.0, "metadata time of one rank that is reported whatever its share "
                                    "(Drishti: 30 s)", "s")
    redundant_min_bytes: int = _limit(1 << 20, "bytes read (or written) more than once on one file", "bytes")
    redundant_share: float = _limit(0.5, "... and their share of the bytes read (or written) there", "share")
    random_min: int = _limit(1000, "POSIX accesses of one direction that do not follow the previous one "
                             "(Drishti: 1000)", "calls")
    random_share: float = _limit(0.2, "... and their share of that direction's accesses (Drishti: 20 %)",
                                 "share")
    misaligned_min: int = _limit(16, "POSIX requests that cross more stripes than their size needs", "calls")
    misaligned_share: float = _limit(0.10, "... on files where they are this share of the requests "
                                     "(Drishti: 10 %)", "share")
    first_byte_min_s: float = _limit(0.25, "file-call time a rank spent before moving its first byte", "s")
    first_byte_share: float = _limit(0.5, "... and its share of that rank's file-call time", "share")
    stdio_share: float = _limit(0.1, "bytes moved through stdio / all bytes the application moved "
                                "(Drishti: 10 %)", "share")
    stdio_min_bytes: int = _limit(1 << 20, "... and at least this many bytes through stdio", "bytes")
    no_mpiio_min_bytes: int = _limit(1 << 20, "bytes several ranks moved on one shared file through POSIX or "
                                     "stdio in a job that never calls MPI-IO", "bytes")
    independent_min: int = _limit(1000, "independent MPI-IO data calls of one direction on a file several "
                                  "ranks open (Drishti: 1000)", "calls")
    independent_share: float = _limit(0.5, "... and their share of that file's MPI-IO calls of that direction "
                                      "(Drishti: 50 %)", "share")
    overlap_min_s: float = _limit(0.05, "time a rank could hide by overlapping its blocking MPI-IO with the "
                                  "work between calls: min(blocking data-call time, time between its calls)",
                                  "s")
    overlap_share: float = _limit(0.1, "... and its share of the rank's MPI-IO window (first call to last)",
                                  "share")
    amplification_ratio: float = _limit(1.5, "bytes the POSIX calls under MPI-IO moved on a file / the bytes those "
                                        "MPI-IO calls asked for", "ratio")
    amplification_min_bytes: int = _limit(1 << 20, "... and at least this many bytes more than asked", "bytes")
    amplification_critical: float = _limit(4.0, "... at which the finding is critical", "ratio")

    def table(self) -> list[dict]:
        """name, value, unit, meaning of every threshold (the docs' table and the report's list)."""
        return [{"name": f.name, "value": getattr(self, f.name), **f.metadata} for f in fields(self)]

    def shown(self, name: str) -> str:
        """A threshold as people read it: 10 %, 1.00 MiB, 0.05 s, 1,000 calls, 2x."""
        value, unit = getattr(self, name), self.__dataclass_fields__[name].metadata["unit"]
        text = {"share": f"{value:.0%}", "bytes": human_bytes(value), "s": f"{value:g} s", "ratio": f"{value:g}x",
                "calls": f"{value:,} calls"}[unit]
        return f"{name} = {text}"


T = Thresholds()


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


def _ranks(part: pd.DataFrame) -> list[int]:
    return sorted(int(r) for r in part["rank"].unique())


def _evidence(a, part: pd.DataFrame, counts: dict, files=None) -> dict:
    """ranks, files, window (from the groups in `part`) and counts."""
    ids = part["file_id"][part["file_id"] >= 0].unique() if files is None else files
    return {"ranks": _ranks(part), "files": _paths(a.paths, ids)[:20],
            "window_s": _window(part["t_first"].min(), part["t_last"].max()), "counts": counts}


def _data(groups: pd.DataFrame, kind: int | None = None) -> pd.DataFrame:
    return groups[groups["kind"] == kind] if kind is not None else groups[groups["kind"].isin([READ, WRITE])]


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
            {"ranks": _ranks(part), "files": _paths(a.paths, [file_id]),
             "window_s": _window(part["sieving_first"].min(), part["sieving_last"].max()),
             "counts": {"sieved_calls": calls, "posix_reads_under_writes": int(part["read_ops"].sum()),
                        "posix_locks_under_writes": int(part["lock_ops"].sum()),
                        "read_seconds": float(part["read_ns"].sum() / NS),
                        "lock_seconds": float((part["lock_ns"].sum() + part["unlock_ns"].sum()) / NS)}},
            "Set the MPI-IO hint romio_ds_write=disable (MPI_Info_set(info, \"romio_ds_write\", \"disable\")) or "
            "write collectively (MPI_File_write_all / _at_all) so collective buffering (romio_cb_write=enable) "
            "replaces the read-modify-write cycles."))
    return out


def io_amplification(a) -> list[Finding]:
    """MPI-IO moving more bytes at the POSIX layer than the program asked for: data sieving, or two-phase
    collective buffering reading and rewriting the holes between the ranks' pieces (read-modify-write)."""
    calls = a.splits[a.splits["kind"].isin([READ, WRITE]) & ~a.splits["file_id"].isin(a.options.excluded_files)]
    out = []
    for file_id, part in calls.groupby("file_id"):
        asked = int(part["bytes"].sum())
        moved = int(part["posix_read_bytes"].sum() + part["posix_write_bytes"].sum())
        if asked == 0 or moved < T.amplification_ratio * asked or moved - asked < T.amplification_min_bytes:
            continue
        writes, reads = part[part["kind"] == WRITE], part[part["kind"] == READ]
        rmw = int(writes["read_ops"].sum())
        collective = part[part["collective"]]
        path = _paths(a.paths, [file_id])[0]
        kept = a.calls[a.calls["file_id"] == file_id]
        out.append(Finding(
            "io-amplification", "critical" if moved >= T.amplification_critical * asked else "warning",
            f"MPI-IO moved {moved / asked:.1f}x the bytes the program asked for on {path}: {human_bytes(moved)} "
            f"at the POSIX layer for {human_bytes(asked)}"
            + (f", with {rmw} read-modify-write reads under its writes" if rmw else ""),
            {"ranks": _ranks(part), "files": [path],
             "window_s": _window(kept["t_start"].min(), kept["t_end"].max()) if len(kept) else [],
             "counts": {"mpi_bytes_written": int(writes["bytes"].sum()),
                        "posix_bytes_written": int(writes["posix_write_bytes"].sum()),
                        "mpi_bytes_read": int(reads["bytes"].sum()),
                        "posix_bytes_read": int(reads["posix_read_bytes"].sum()),
                        "read_modify_write_reads": rmw,
                        "read_modify_write_bytes": int(writes["posix_read_bytes"].sum()),
                        "read_modify_write_seconds": float(writes["read_ns"].sum() / NS),
                        "collective_posix_bytes": int(collective["posix_read_bytes"].sum()
                                                      + collective["posix_write_bytes"].sum()),
                        "sieved_calls": int(part["sieving"].sum())}},
            "The MPI-IO layer reads and rewrites whole extents where the ranks' pieces leave holes. Make each "
            "collective call cover a contiguous range (transfers that tile the block, a file view whose pieces "
            "abut), let ROMIO skip two-phase where accesses do not interleave (romio_cb_write=automatic, "
            "romio_cb_read=automatic rather than enable), and turn off data sieving for independent access "
            "(romio_ds_write=disable, romio_ds_read=disable)."))
    return out


def small_strided_writes(a) -> list[Finding]:
    out = []
    writes = _data(top_level(a.app_groups), WRITE)
    independent = a.splits[(a.splits["kind"] == WRITE) & ~a.splits["collective"]]
    for pattern in a.patterns:
        file_id = pattern["file_id"]
        part = writes[writes["file_id"] == file_id]
        if not pattern["interleaved"] or part.empty:
            continue
        through_mpi = (part["layer"] == MPIIO).any()
        mine = independent[independent["file_id"] == file_id]
        count = int(mine["calls"].sum()) if through_mpi else int(part["ops"].sum())
        small = int(part["small"].sum())
        if count < T.small_writes_min or small < T.small_writes_share * part["ops"].sum() or small < T.small_writes_min:
            continue
        out.append(Finding(
            "small-strided-writes", "warning",
            f"{small} small writes (< {a.options.small_request} bytes) from {pattern['processes']} ranks "
            f"interleave on the shared file {_paths(a.paths, [file_id])[0]}",
            _evidence(a, part, {"independent_writes": count, "small_writes": small, "stride": pattern["stride"]}),
            "Write collectively (MPI_File_write_all with a file view) so collective buffering turns the pieces "
            "into large contiguous writes by a few aggregators, or run through ioloom's log layer "
            "(ioloom run --logfs) which turns N-1 strided writes into per-writer logs."))
    return out


def small_requests(a) -> list[Finding]:
    """Many small POSIX requests, whatever layer issued them (what reaches the file system)."""
    posix = a.app_groups[a.app_groups["layer"] == POSIX]
    out = []
    for name, kind in DIRECTIONS.items():
        part = _data(posix, kind)
        ops, small = int(part["ops"].sum()), int(part["small"].sum())
        if small < T.small_requests_min or small < T.small_requests_share * ops:
            continue
        per_file = part.groupby("file_id")["small"].sum().sort_values(ascending=False)
        out.append(Finding(
            f"small-{name}s", "warning",
            f"{small:,} of {ops:,} POSIX {name}s ({small / ops:.0%}) moved fewer than "
            f"{human_bytes(a.options.small_request)} each, {human_bytes(part['bytes'].sum())} in all",
            _evidence(a, part, {"small_requests": small, "requests": ops, "bytes": int(part["bytes"].sum()),
                                "small_by_file": {a.paths.get(int(f), str(f)): int(n)
                                                  for f, n in per_file.head(10).items() if n}},
                      files=per_file[per_file > 0].index),
            f"Gather data in memory and {name} it in larger pieces (MiBs), use collective MPI-IO so aggregators "
            "combine the pieces, or a library that buffers (HDF5 with chunk caching, ADIOS2)."))
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
    write_time = _data(top_level(a.app_groups), WRITE).groupby("file_id")["time_ns"].sum()
    for entry in a.lock_summary:
        file_id = entry["file_id"]
        spent = float(write_time.get(file_id, 0)) / NS
        if entry["ranks"] < 2 or spent <= 0 or entry["wait_s"] < T.lock_wait_share * spent:
            continue
        part = a.locks[a.locks["file_id"] == file_id]
        out.append(Finding(
            "lock-serialised-writes", "critical" if entry["wait_s"] >= T.lock_wait_critical * spent else "warning",
            f"{entry['ranks']} ranks waited {entry['wait_s']:.3g} s for record locks on "
            f"{_paths(a.paths, [file_id])[0]}, against {spent:.3g} s spent writing it",
            {"ranks": _ranks(part), "files": _paths(a.paths, [file_id]),
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
    if slowest < T.straggler_ratio * median or slowest - median < T.straggler_min_s:
        return []
    stragglers = per_rank[per_rank >= T.straggler_ratio * median].sort_values(ascending=False)
    mine = own[own["rank"].isin(stragglers.index)]
    return [Finding(
        "rank-imbalance", "warning",
        f"rank {int(stragglers.index[0])} spent {slowest:.3g} s in I/O, {slowest / max(median, 1e-12):.1f}x the "
        f"median rank ({median:.3g} s); {len(stragglers)} straggler(s)",
        _evidence(a, mine, {"slowest_seconds": slowest, "median_seconds": median,
                            "stragglers": {int(r): float(t) for r, t in stragglers.items()},
                            "bytes_by_rank": {int(r): int(b) for r, b in own.groupby("rank")["bytes"].sum().items()}}),
        "Give every rank a similar share of the data, or let collective I/O spread it over aggregators; if the "
        "data is balanced, look at the slow rank's node and storage target.")]


def shared_file_imbalance(a) -> list[Finding]:
    """On each file several ranks read or wrote at the application's layer, per direction: the spread of
    bytes (asked by the application) and of seconds (in the file system: the POSIX calls on the file, which
    leave out the time a rank waits in a collective MPI-IO call for the others) between the ranks."""
    out = []
    posix = _data(a.app_groups[a.app_groups["layer"] == POSIX])
    for (file_id, kind), part in _data(top_level(a.app_groups)).groupby(["file_id", "kind"]):
        per_rank = part.groupby("rank")["bytes"].sum()
        total_bytes = int(per_rank.sum())
        if len(per_rank) < 2 or total_bytes < T.shared_imbalance_min_bytes:
            continue
        timed = posix[(posix["file_id"] == file_id) & (posix["kind"] == kind)]
        seconds = (timed if len(timed) else part).groupby("rank")["time_ns"].sum() / NS
        spread_bytes = int(per_rank.max() - per_rank.min())
        spread_s = float(seconds.max() - seconds.min()) if len(seconds) > 1 else 0.0
        by_bytes = spread_bytes >= T.shared_imbalance_share * total_bytes
        by_time = spread_s >= T.shared_imbalance_share * seconds.sum() and spread_s >= T.shared_imbalance_min_s
        if not (by_bytes or by_time):
            continue
        name, path = "write" if kind == WRITE else "read", _paths(a.paths, [file_id])[0]
        what = (f"{spread_bytes / total_bytes:.0%} of its bytes ({human_bytes(spread_bytes)})" if by_bytes
                else f"{spread_s / seconds.sum():.0%} of its {name} time in the file system ({spread_s:.3g} s)")
        out.append(Finding(
            "shared-file-imbalance", "warning",
            f"{len(per_rank)} ranks {name} the shared file {path} unevenly: the busiest rank and the least busy "
            f"differ by {what}",
            _evidence(a, part, {"direction": name, "bytes_by_rank": {int(r): int(b) for r, b in per_rank.items()},
                                "file_system_seconds_by_rank": {int(r): float(t) for r, t in seconds.items()},
                                "byte_spread_share": spread_bytes / total_bytes,
                                "time_spread_share": spread_s / seconds.sum() if seconds.sum() else 0.0}),
            "Split the file's data evenly over the ranks (or over collective-buffering aggregators with "
            "MPI_File_write_all / read_all); if the bytes are even but the time is not, look at the slow rank's "
            "node and at contention on the storage targets it hits."))
    return out


def metadata_storm(a) -> list[Finding]:
    posix = a.app_groups[(a.app_groups["layer"] == POSIX)]
    meta, data = posix[posix["kind"] == META], _data(posix)
    ops, meta_s, all_s = int(meta["ops"].sum()), meta["time_ns"].sum() / NS, posix["time_ns"].sum() / NS
    if ops < T.metadata_min_ops or (meta_s < T.metadata_share * all_s and ops < data["ops"].sum()):
        return []
    return [Finding(
        "metadata-storm", "warning",
        f"{ops} POSIX metadata calls (open, stat, seek, close...) from {meta['rank'].nunique()} ranks took "
        f"{meta_s:.3g} s, {meta_s / max(all_s, 1e-12):.0%} of POSIX time",
        _evidence(a, meta, {"metadata_calls": ops, "data_calls": int(data["ops"].sum()),
                            "metadata_seconds": float(meta_s), "files": int(meta["file_id"].nunique())}),
        "Open each file once and keep it open, stat less (cache sizes), let one rank do the metadata and "
        "broadcast it, and prefer fewer, larger files.")]


NON_DATA_ADVICE = {
    "metadata": "Opening, closing and setting views touch the file system's metadata server on every rank: open "
                "each file once and keep it open across steps, use fewer (larger) files, and let MPI_File_open "
                "run on a communicator no wider than the ranks that use the file.",
    "sync": "Each MPI_File_sync / fsync waits until the data is on stable storage: sync only where the data must "
            "survive a crash (after a checkpoint), not after every write, and let the file system's own flush "
            "do the rest.",
}


def _non_data_costs(a, own: pd.DataFrame) -> dict:
    """Seconds per costly call that moved no data: MPI-IO operations by name, POSIX and stdio calls by kind."""
    costs = {op: float(t / NS) for op, t in
             a.splits[a.splits["kind"].isin([META, SYNC])].groupby("op")["time_ns"].sum().items()}
    other = own[own["kind"].isin([META, SYNC]) & (own["layer"] != MPIIO)]
    for (layer, kind), t in other.groupby(["layer", "kind"])["time_ns"].sum().items():
        costs[f"{LAYERS[layer]} {'sync' if kind == SYNC else 'metadata'} calls"] = float(t / NS)
    return dict(sorted(costs.items(), key=lambda kv: -kv[1]))


def non_data_time(a) -> list[Finding]:
    """File calls that move no data (open, close, set_view, stat, sync) taking most of the I/O time; for
    MPI-IO, how much of it the file system's own calls took (the rest is communication and waiting)."""
    own = top_level(a.app_groups)
    total = own["time_ns"].sum() / NS
    meta, sync = own[own["kind"] == META], own[own["kind"] == SYNC]
    spent = {"metadata": meta["time_ns"].sum() / NS, "sync": sync["time_ns"].sum() / NS}
    per_rank_meta = meta.groupby("rank")["time_ns"].sum() / NS
    slow_ranks = per_rank_meta[per_rank_meta >= T.metadata_rank_s]
    non_data = sum(spent.values())
    if (non_data < T.non_data_min_s or non_data < T.non_data_share * total) and slow_ranks.empty:
        return []
    costs = _non_data_costs(a, own)
    posix = a.app_groups[(a.app_groups["layer"] == POSIX) & a.app_groups["kind"].isin([META, SYNC])]
    in_fs = posix["time_ns"].sum() / NS
    mpi_part = own[(own["layer"] == MPIIO) & own["kind"].isin([META, SYNC])]["time_ns"].sum() / NS
    where = (f"; the file system's own metadata and sync calls took {in_fs:.3g} s, the rest of the MPI-IO "
             "calls' time was communication and waiting for other ranks" if mpi_part > 0 else "")
    top = ", ".join(f"{name} {seconds:.3g} s" for name, seconds in list(costs.items())[:3])
    return [Finding(
        "non-data-time", "info",
        f"{non_data / max(total, 1e-12):.0%} of the time in file calls ({non_data:.3g} of {total:.3g} s, summed "
        f"over ranks) moved no data: {top}{where}",
        _evidence(a, own[own["kind"].isin([META, SYNC])],
                  {"seconds_by_call": costs, "metadata_seconds": float(spent["metadata"]),
                   "sync_seconds": float(spent["sync"]), "file_call_seconds": float(total),
                   "file_system_seconds": {"metadata": float(posix[posix["kind"] == META]["time_ns"].sum() / NS),
                                           "sync": float(posix[posix["kind"] == SYNC]["time_ns"].sum() / NS)},
                   "ranks_over_metadata_limit": {int(r): float(t) for r, t in slow_ranks.items()}}),
        " ".join(NON_DATA_ADVICE[k] for k, v in sorted(spent.items(), key=lambda kv: -kv[1]) if v > 0)
        + (" Collective opens, closes and syncs wait for every rank of the communicator." if mpi_part > 0 else ""))]


def _known_offsets(part: pd.DataFrame) -> pd.DataFrame:
    """Groups whose accesses had known offsets (stdio after some calls may not)."""
    return part[part["end_max"] > part["off_min"]]


def _where_bytes_land(a, kind: int) -> pd.DataFrame:
    """Per file, the calls whose offsets say which bytes they touched: the application's own, or for a file
    it used through MPI-IO the POSIX calls under MPI-IO (an MPI-IO call through a file view with holes
    touches more than [offset, offset + size)); files where ROMIO sieved are left to `data-sieving`."""
    own = _data(top_level(a.app_groups), kind)
    through_mpi = own[own["layer"] == MPIIO]["file_id"].unique()
    sieved = a.splits[a.splits["sieving"] > 0]["file_id"].unique()
    under = a.app_groups[(a.app_groups["layer"] == POSIX) & (a.app_groups["nested"] == 1)
                         & a.app_groups["file_id"].isin(through_mpi) & (a.app_groups["kind"] == kind)]
    groups = pd.concat([own[~own["file_id"].isin(through_mpi)], under])
    return _known_offsets(groups[~groups["file_id"].isin(sieved)])


def redundant_reads(a) -> list[Finding]:
    """Bytes read more than once from one file, by the same rank (exact: bytes - distinct bytes) or by several
    (at least bytes - the span they read), where the bytes land (_where_bytes_land)."""
    reads = _where_bytes_land(a, READ)
    rows = []
    for file_id, part in reads.groupby("file_id"):
        total, distinct = int(part["bytes"].sum()), int(part["unique_bytes"].sum())
        span = int(part["end_max"].max() - part["off_min"].min())
        again = total - min(span, distinct)
        if again >= T.redundant_min_bytes and again >= T.redundant_share * total:
            rows.append((file_id, part, total, again, total - distinct))
    if not rows:
        return []
    total, again, same_rank = (sum(r[i] for r in rows) for i in (2, 3, 4))
    part = pd.concat([r[1] for r in rows])
    return [Finding(
        "redundant-reads", "warning",
        f"{human_bytes(again)} of the {human_bytes(total)} read from {len(rows)} file(s) were read more than "
        f"once ({again / total:.0%}), by {part['rank'].nunique()} rank(s)",
        _evidence(a, part, {"bytes_read": total, "bytes_read_again": again, "read_again_by_the_same_rank": same_rank,
                            "by_file": {a.paths.get(int(r[0]), str(r[0])): {"bytes_read": r[2], "read_again": r[3]}
                                        for r in rows}}),
        "Read the data once and keep it in memory; when every rank needs the same input, read it on one rank "
        "and broadcast it (MPI_Bcast), or read it collectively (MPI_File_read_all), which reads each byte once.")]


def redundant_writes(a) -> list[Finding]:
    """Bytes written over bytes already written in the same file (at least bytes - the span written)."""
    writes = _where_bytes_land(a, WRITE)
    rows = []
    for file_id, part in writes.groupby("file_id"):
        total, span = int(part["bytes"].sum()), int(part["end_max"].max() - part["off_min"].min())
        again = total - span
        if again >= T.redundant_min_bytes and again >= T.redundant_share * total:
            rows.append((file_id, part, total, again))
    if not rows:
        return []
    total, again = sum(r[2] for r in rows), sum(r[3] for r in rows)
    part = pd.concat([r[1] for r in rows])
    return [Finding(
        "redundant-writes", "info",
        f"{human_bytes(again)} of the {human_bytes(total)} written to {len(rows)} file(s) overwrote bytes "
        f"written before in the same run ({again / total:.0%})",
        _evidence(a, part, {"bytes_written": total, "bytes_overwritten_at_least": again,
                            "by_file": {a.paths.get(int(r[0]), str(r[0])): {"bytes_written": r[2], "overwritten": r[3]}
                                        for r in rows}}),
        "If the same data is written again, write it once; if a checkpoint is rewritten in place on purpose, "
        "keep the last one only or alternate two files, so that a crash during the write leaves a good copy.")]


def random_access(a) -> list[Finding]:
    """POSIX accesses that do not start at or after the end of the process's previous one (Darshan's
    non-sequential), per direction."""
    posix = _known_offsets(a.app_groups[a.app_groups["layer"] == POSIX])
    out = []
    for name, kind in DIRECTIONS.items():
        part = _data(posix, kind)
        ops = int(part["ops"].sum())
        random = int((part["ops"] - 1 - part["sequential"]).clip(lower=0).sum())
        if random < T.random_min or random < T.random_share * ops:
            continue
        out.append(Finding(
            f"random-{name}s", "warning",
            f"{random:,} of {ops:,} POSIX {name}s ({random / ops:.0%}) jumped back or elsewhere instead of "
            "continuing after the previous access",
            _evidence(a, part, {"random": random, "requests": ops, "sequential": int(part["sequential"].sum()),
                                "consecutive": int(part["consecutive"].sum())}),
            f"Sort the accesses by offset before issuing them, {name} whole regions and pick the pieces in "
            "memory, or use collective MPI-IO, which sorts and merges the ranks' requests."))
    return out


def stripe_misalignment(a) -> list[Finding]:
    hit = [p for p in a.patterns if p["misaligned_requests"] >= T.misaligned_share * max(p["posix_requests"], 1)
           and p["misaligned_requests"] > 0]
    count, total = sum(p["misaligned_requests"] for p in hit), sum(p["posix_requests"] for p in hit)
    if count < T.misaligned_min:
        return []
    ids = [p["file_id"] for p in hit]
    part = _data(a.app_groups[a.app_groups["file_id"].isin(ids) & (a.app_groups["layer"] == POSIX)])
    return [Finding(
        "stripe-misalignment", "warning",
        f"{count} of {total} POSIX requests on {len(ids)} file(s) straddle a {a.options.stripe_size}-byte stripe "
        "boundary they need not cross",
        _evidence(a, part, {"misaligned_requests": count, "requests": total, "stripe_size": a.options.stripe_size},
                  files=ids),
        "Align requests to the stripe: pad headers to a stripe boundary, make the block size a multiple of "
        "the stripe, or set striping_unit / cb_buffer_size hints to match it (check it with lfs getstripe).")]


def time_before_first_byte(a) -> list[Finding]:
    procs = a.processes
    procs = procs[procs["t_first_byte"].notna() & (procs["io_ns"] > 0)]
    lost = procs["io_before_first_byte_ns"] / NS
    share = procs["io_before_first_byte_ns"] >= T.first_byte_share * procs["io_ns"]
    hit = procs[(lost >= T.first_byte_min_s) & share]
    if hit.empty or (lost.median() < T.first_byte_min_s and len(hit) <= len(procs) // 2):
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


def stdio_heavy(a) -> list[Finding]:
    data = _data(top_level(a.app_groups))
    by_layer = data.groupby("layer")["bytes"].sum()
    total, stdio = int(by_layer.sum()), int(by_layer.get(STDIO, 0))
    if stdio < T.stdio_min_bytes or stdio < T.stdio_share * total:
        return []
    part = data[data["layer"] == STDIO]
    per_file = part.groupby("file_id")["bytes"].sum().sort_values(ascending=False)
    calls = int(part["ops"].sum())
    return [Finding(
        "stdio-heavy", "warning",
        f"{stdio / total:.0%} of the application's data ({human_bytes(stdio)} of {human_bytes(total)}) went "
        f"through stdio (fwrite, fprintf, fread...), in {calls:,} calls on {len(per_file)} file(s)",
        _evidence(a, part, {"stdio_bytes": stdio, "bytes": total, "stdio_calls": calls,
                            "bytes_by_layer": {LAYERS[int(k)]: int(v) for k, v in by_layer.items()},
                            "stdio_bytes_by_file": {a.paths.get(int(f), str(f)): int(b)
                                                    for f, b in per_file.head(10).items()}},
                  files=per_file.index),
        "stdio copies every byte through a small per-stream buffer (4-8 KiB by default, so the file system sees "
        "4-8 KiB writes) and cannot coordinate ranks: write large data with write/pwrite or MPI-IO (or HDF5, "
        "NetCDF on MPI-IO); where stdio stays, give big streams a large buffer "
        "(setvbuf(f, NULL, _IOFBF, 1 << 20)) and write binary rather than formatted text.")]


def no_mpiio(a) -> list[Finding]:
    """An MPI job that shares files between ranks through POSIX or stdio and never calls MPI-IO."""
    if (a.app_groups["layer"] == MPIIO).any() or a.processes["rank"].nunique() < 2:
        return []
    data = _data(top_level(a.app_groups))
    ranks = data.groupby("file_id")["rank"].nunique()
    moved = data.groupby("file_id")["bytes"].sum()
    shared = ranks[(ranks >= 2) & (moved.reindex(ranks.index) >= T.no_mpiio_min_bytes)].index
    if shared.empty:
        return []
    part = data[data["file_id"].isin(shared)]
    return [Finding(
        "no-mpiio", "info",
        f"{part['rank'].nunique()} ranks shared {len(shared)} file(s) ({human_bytes(part['bytes'].sum())}) through "
        "POSIX or stdio; the job never called MPI-IO",
        _evidence(a, part, {"shared_files": len(shared), "bytes": int(part["bytes"].sum())}),
        "Use MPI-IO (or HDF5 / NetCDF / ADIOS2 over it) for files the ranks share: collective calls let the "
        "library merge the ranks' requests, pick aggregators and apply the file system's hints.")]


def independent_mpiio(a) -> list[Finding]:
    """Files several ranks open with MPI-IO and access mostly with independent calls."""
    data = a.splits[a.splits["kind"].isin([READ, WRITE])]
    out = []
    for (file_id, kind), part in data.groupby(["file_id", "kind"]):
        independent = part[~part["collective"]]
        count, all_calls = int(independent["calls"].sum()), int(part["calls"].sum())
        if part["rank"].nunique() < 2 or count < T.independent_min or count < T.independent_share * all_calls:
            continue
        name = "write" if kind == WRITE else "read"
        ops = independent.groupby("op")["calls"].sum()
        out.append(Finding(
            f"independent-{name}s", "warning",
            f"{count:,} of {all_calls:,} MPI-IO {name}s by {part['rank'].nunique()} ranks on "
            f"{_paths(a.paths, [file_id])[0]} were independent ({', '.join(f'{o} ×{n:,}' for o, n in ops.items())})",
            {"ranks": _ranks(part), "files": _paths(a.paths, [file_id]), "window_s": [],
             "counts": {"independent_calls": count, "calls": all_calls,
                        "bytes": int(independent["bytes"].sum()), "seconds": float(independent["time_ns"].sum() / NS)}},
            f"Use the collective {name}s (MPI_File_{name}_all / _at_all, with a file view for strided data): "
            "the ranks' requests are merged into large contiguous ones by a few aggregators (collective "
            "buffering), which also keeps the file system's lock traffic down."))
    return out


def _is_async(op: str) -> bool:
    return op.startswith("MPI_File_i") or op.endswith(("_begin", "_end"))


def blocking_mpiio(a) -> list[Finding]:
    """Ranks that block in MPI-IO data calls and do other work between them: overlapping the two (non-blocking
    or split collective calls) could hide up to min(blocking time, time between calls) per rank."""
    mpi = a.app_groups[(a.app_groups["layer"] == MPIIO) & (a.app_groups["nested"] == 0)]
    if mpi.empty:
        return []
    splits = a.splits[a.splits["file_id"].isin(mpi["file_id"].unique())]
    async_ranks = splits[splits["op"].map(_is_async)]["rank"].unique()
    data = splits[splits["kind"].isin([READ, WRITE]) & ~splits["rank"].isin(async_ranks)]
    window = (mpi.groupby("rank")["t_last"].max() - mpi.groupby("rank")["t_first"].min()) / NS
    inside = mpi.groupby("rank")["time_ns"].sum() / NS
    blocking = (data.groupby("rank")["time_ns"].sum() / NS).reindex(window.index, fill_value=0.0)
    hidden = np.minimum(blocking, (window - inside).clip(lower=0))
    hit = hidden[(hidden >= T.overlap_min_s) & (hidden >= T.overlap_share * window)]
    if len(hit) <= len(window) // 2:  # most ranks (the median rank) must gain
        return []
    part = mpi[mpi["rank"].isin(hit.index)]
    return [Finding(
        "blocking-mpiio", "info",
        f"{len(hit)} rank(s) waited in blocking MPI-IO data calls ({blocking[hit.index].median():.3g} s median) and "
        f"spent {(window - inside)[hit.index].median():.3g} s (median) between calls: overlapping the two could "
        f"save up to {hit.median():.3g} s per rank",
        _evidence(a, part, {"blocking_seconds": {int(r): float(blocking[r]) for r in hit.index},
                            "between_calls_seconds": {int(r): float(window[r] - inside[r]) for r in hit.index},
                            "could_hide_seconds": {int(r): float(v) for r, v in hit.items()}}),
        "Start the I/O and compute while it runs: MPI_File_iwrite_at_all / iread_at_all (MPI 3.1) or the split "
        "collectives (MPI_File_write_all_begin / _end), completing with MPI_Wait before the buffer is reused; "
        "with HDF5, the asynchronous VOL connector.")]


@dataclass(frozen=True)
class Check:
    """One rule: its finding code(s), what it looks for, the thresholds it uses, the Drishti triggers it covers."""
    codes: tuple[str, ...]
    looks_for: str
    thresholds: tuple[str, ...]
    drishti: tuple[str, ...]
    rule: Callable = field(repr=False, compare=False)


CHECKS = (
    Check(("data-sieving",), "independent MPI-IO writes done by read-modify-write (cross-layer)", (), (), data_sieving),
    Check(("io-amplification",), "MPI-IO moving more bytes at the POSIX layer than asked for (cross-layer)",
          ("amplification_ratio", "amplification_min_bytes", "amplification_critical"), (), io_amplification),
    Check(("lock-serialised-writes",), "ranks waiting for record locks on a shared file",
          ("lock_wait_share", "lock_wait_critical"), (), lock_serialised),
    Check(("small-strided-writes",), "small independent writes interleaved on a shared file",
          ("small_writes_min", "small_writes_share"), ("P16",), small_strided_writes),
    Check(("small-reads", "small-writes"), "many small POSIX requests",
          ("small_requests_min", "small_requests_share"), ("P05", "P06", "P15"), small_requests),
    Check(("stripe-misalignment",), "requests crossing more stripes than their size needs",
          ("misaligned_min", "misaligned_share"), ("P08",), stripe_misalignment),
    Check(("random-reads", "random-writes"), "POSIX accesses that are not sequential",
          ("random_min", "random_share"), ("P11", "P13"), random_access),
    Check(("redundant-reads",), "bytes read more than once, by one rank or several",
          ("redundant_min_bytes", "redundant_share"), ("P09",), redundant_reads),
    Check(("redundant-writes",), "bytes written over bytes written before",
          ("redundant_min_bytes", "redundant_share"), ("P10",), redundant_writes),
    Check(("rank-imbalance",), "a rank much slower in I/O than the median rank",
          ("straggler_ratio", "straggler_min_s"), ("P19",), rank_imbalance),
    Check(("shared-file-imbalance",), "uneven bytes or time of the ranks on a shared file",
          ("shared_imbalance_share", "shared_imbalance_min_bytes", "shared_imbalance_min_s"),
          ("P18", "P19", "P21", "P22"), shared_file_imbalance),
    Check(("metadata-storm",), "many POSIX metadata calls", ("metadata_min_ops", "metadata_share"), (),
          metadata_storm),
    Check(("non-data-time",), "file calls that move no data (open, close, set_view, stat, sync) taking the time",
          ("non_data_share", "non_data_min_s", "metadata_rank_s"), ("P17",), non_data_time),
    Check(("time-before-first-byte",), "file-call time before a rank's first byte (cross-layer)",
          ("first_byte_min_s", "first_byte_share"), (), time_before_first_byte),
    Check(("stdio-heavy",), "data moved through stdio", ("stdio_share", "stdio_min_bytes"), ("S01",), stdio_heavy),
    Check(("no-mpiio",), "files shared by ranks of an MPI job without MPI-IO", ("no_mpiio_min_bytes",), ("M01",),
          no_mpiio),
    Check(("independent-reads", "independent-writes"), "independent MPI-IO calls where collective ones would serve",
          ("independent_min", "independent_share"), ("M02", "M03"), independent_mpiio),
    Check(("blocking-mpiio",), "blocking MPI-IO calls with work between them that could overlap",
          ("overlap_min_s", "overlap_share"), ("M06", "M07"), blocking_mpiio),
)


# Drishti's triggers (drishti-io 0.8) that no check covers, and why; every other trigger is in a Check.drishti.
DRISHTI_UNCHECKED = {
    "P01": "write-intensive by operations: describes the run, no problem (the per-layer table shows it)",
    "P02": "read-intensive by operations: describes the run (the per-layer table)",
    "P03": "write-intensive by bytes: describes the run (the per-layer table)",
    "P04": "read-intensive by bytes: describes the run (the per-layer table)",
    "P07": "buffers misaligned in memory: the trace does not record buffer addresses",
    "P12": "sequential reads: a good note, no problem",
    "P14": "sequential writes: a good note, no problem",
    "M04": "collective reads used: a good note, no problem",
    "M05": "collective writes used: a good note, no problem",
    "M08": "aggregators per compute node: needs the batch system's node count (the collectives table names the "
           "aggregators of every collective)",
    "M09": "aggregators per compute node: needs the batch system's node count (as M08)",
    "M10": "one aggregator per node: a good note, needs the node count (as M08)",
}

# Drishti's triggers of one direction: they map to the finding of that direction where a check has one per
# direction (small-reads / small-writes...).
DRISHTI_DIRECTION = {"P05": "read", "P06": "write", "P11": "read", "P13": "write", "P15": "read", "P16": "write",
                     "P21": "write", "P22": "read", "M02": "read", "M03": "write", "M06": "read", "M07": "write"}


def drishti_map() -> dict[str, tuple[str, ...]]:
    """Every Drishti trigger, in Drishti's order (S, P, M), to the finding codes of the checks that cover it;
    () for those in DRISHTI_UNCHECKED."""
    covered: dict[str, tuple[str, ...]] = {}
    for check in CHECKS:
        for trigger in check.drishti:
            other = {"read": "-writes", "write": "-reads"}.get(DRISHTI_DIRECTION.get(trigger, ""), "?")
            covered[trigger] = covered.get(trigger, ()) + tuple(c for c in check.codes if not c.endswith(other))
    assert not set(covered) & set(DRISHTI_UNCHECKED), "a trigger is either covered or explained, not both"
    triggers = sorted({*covered, *DRISHTI_UNCHECKED}, key=lambda t: ("SPM".index(t[0]), int(t[1:])))
    return {t: covered.get(t, ()) for t in triggers}


def checked(found: list[Finding]) -> list[dict]:
    """Every check with its thresholds and the findings it made: what "no findings" means."""
    fired = {f.code for f in found}
    return [{"codes": list(c.codes), "looks_for": c.looks_for, "drishti": list(c.drishti),
             "thresholds": {name: getattr(T, name) for name in c.thresholds},
             "thresholds_shown": [T.shown(name) for name in c.thresholds],
             "fired": sorted(fired & set(c.codes))} for c in CHECKS]


def find(analysis) -> list[Finding]:
    """Every check's findings, most severe first."""
    order = {"critical": 0, "warning": 1, "info": 2}
    found = [f for check in CHECKS for f in check.rule(analysis)]
    return sorted(found, key=lambda f: order[f.severity])
