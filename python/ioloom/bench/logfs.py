"""`ioloom bench logfs`: N-1 strided through logfs against N-1 strided direct and N-N direct, same bytes, one run.

For each shape (aligned: -b -t -s as given; ior-hard: IO500's 47,008-byte pieces, about the same bytes per rank) and
rank count (1, 2, 4, 8 by default): E = logfs N-1 / direct N-N (the goal is E >= 0.9), the speed-up of logfs over
direct N-1, and the layer's own cost: logfs N-1 against direct N-1 made the same way (with MPI-IO, each rank doing
its own I/O as the layer has it, so what MPI's shared-file open, close and collectives cost falls out of the ratio),
for the write and for the read-back; the cost the preloaded layer adds to files outside its roots (goal <= 2%); and
the time to open 1,024 writers' indexes. Every configuration runs once per round, `--reps` rounds (10 unless
--quick), the order changing from round to round (round_order), so that drifts of a shared machine and what a run
leaves to the next hit all alike. Each ratio is taken within a round (a configuration against the baseline run
beside it) and reported as the median with the smallest and largest round: a best-of figure swings either way with
one lucky run. Beside E's median goes a verdict on the goal (goal_verdict): met or missed only when the median's
distribution-free 95% interval lies wholly on one side of 0.9, else not resolved by the rounds taken. Reads come
from the device by default: each configuration writes (fsync before close) in one launch and reads in a second,
and in between the cached pages of every file under the run's directory (logfs's logs,
indexes and journals; the direct files) are evicted and checked gone (io.evict_page_cache), the same for every
configuration; `--read-from cache` reads in the writing launch, from the page cache, as before. `--goal-only` runs
only what E and the layer's own cost need (logfs N-1, direct N-N, direct N-1 taken the same path), and none of the
figures beside them, so that a campaign of 10 rounds fits a quiet window of a few minutes. `--phase read` writes
each configuration's files once per row and has every round read them alone (from the device), so that a window's
rounds go to the read cells.

`--creates N` measures N-N file creation instead: N files created (each written with --create-bytes and closed)
in one directory per run, direct and through the layer (no extra backend; one extra backend with the containers'
logs spread over shared directories; one extra backend with a directory per container), the order alternating per
round, as files per second and the ratio to direct in the same round. The load average is reported with every
figure: the machine may be shared.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

import typer
from rich.console import Console
from rich.table import Table

from ioloom import paths, units
from ioloom.bench import app, competitors
from ioloom.bench.io import (
    MIB,
    PHASE_FLAGS,
    EvictionFailed,
    available_memory,
    evict_page_cache,
    run_bench,
    run_restarted,
    summary,
    sync_file,
)
from ioloom.bench.overhead import callgrind_per_call, cpu_not_allowed, run_probe, valgrind_missing
from ioloom.bench.stats import PUBLISHED_ROUNDS, median_interval, per_round, rounds_allowed, spread
from ioloom.logfs import preload

CONFIGS = ("logfs_n1", "direct_n1", "direct_nn", "preloaded_n1")
# With MPI-IO, direct N-1 with each rank's own I/O (preload.own_log_collectives, as logfs runs): the same MPI path as
# logfs N-1, without the layer. With POSIX, direct_n1 is that path already.
OWN_N1 = "direct_n1_own"
IOR_HARD = 47008  # IO500's ior-hard: one shared file in 47,008-byte pieces, aligned to nothing
SHAPES = ("aligned", "ior-hard")
GOAL_E = 0.9  # the goal: logfs N-1 at least 0.9 of direct N-N's bandwidth
GOAL_CONFIDENCE = 0.95  # the coverage of the median's interval a verdict on the goal needs
TEMP_DIR = Path(tempfile.gettempdir())  # --dir's default
# Where the read phase's data comes from (--read-from): the device (the page cache evicted after the write) or the
# page cache (the read in the writing launch).
READ_FROM = ("device", "cache")
# Read phases per launch (ioloom-bench --reads) from the page cache, the launch's read bandwidth their median: such
# a read is short enough that one descheduled rank decides a single phase. From the device one phase is read (a
# second one would find the first one's pages cached).
READS = {"cache": 5, "device": 1}
# What each round runs (--phase): every configuration writes and reads, or (read) reads only, the files each
# configuration wrote once at the start of the row (kept), from the device after an eviction.
PHASES = ("both", "read")
# What ioloom-bench times apart in a phase, per rank (docs/bench.md, "Timing and figures"): the open, the data calls
# and the close (an MPI-IO phase's MPI_File_open, its read or write calls, MPI_File_close).
PARTS = ("open", "data", "close")
MAX_LOAD = 64  # --load's largest count of competitor processes
# The orders of the rounds of three configurations (--goal-only), in turn, as indices into configurations(): the six
# orders arranged so that, the row led in by an unmeasured run of the sixth order's last configuration (lead_in()),
# over six rounds every configuration runs right after every configuration, itself included, twice, and twice in
# each position. A read from the device depends on the configuration run just before it (docs/bench.md, "Reads from
# the device"): forward and reversed by turns, the middle one always followed the other two and never itself.
BALANCED_ORDERS = ((0, 1, 2), (2, 0, 1), (1, 0, 2), (2, 1, 0), (0, 2, 1), (1, 2, 0))


def shape_sizes(shape: str, block: str, transfer: str, segments: int) -> tuple[int, int, int]:
    """(block, transfer, segments) of a shape, each rank moving about the same bytes: the aligned shape as given,
    ior-hard in blocks and transfers of 47,008 bytes."""
    block_bytes, transfer_bytes = units.size(block, "-b"), units.size(transfer, "-t")
    if shape == "aligned":
        return block_bytes, transfer_bytes, segments
    return IOR_HARD, IOR_HARD, max(1, round(block_bytes * segments / IOR_HARD))


def _launch(config: str, base: list[str], work: Path) -> tuple[list[str], dict[str, str]]:
    """The ioloom-bench arguments and environment of a configuration's run under `work`."""
    mount, elsewhere = work / "mnt", work / "elsewhere"
    if config == "logfs_n1":
        args, env = ["--pattern", "strided", "-o", mount / "shared.dat"], preload.env({mount: []})
    elif config == OWN_N1:
        args, env = ["--pattern", "strided", "-o", work / f"{config}.dat"], preload.own_log_collectives()
    elif config == "preloaded_n1":
        # The layer loaded, its root elsewhere: the pass-through cost (MPI's collective buffering kept, as in the
        # direct N-1 run it is compared with).
        args, env = ["--pattern", "strided", "-o", work / "shared.dat"], preload.env({elsewhere: []}, two_phase=True)
    else:
        pattern = "strided" if config == "direct_n1" else "fpp"
        args, env = ["--pattern", pattern, "-o", work / f"{config}.dat"], {}
    return [*base, *map(str, args)], env


def _run_config(config: str, impl: str | None, nranks: int, base: list[str], work: Path,
                from_device: bool = False, written: bool = False) -> tuple[dict, dict | None, dict]:
    """One ioloom-bench run of a configuration, in one launch, or (from_device) the write and the read in two with
    every file under `work` evicted from the page cache in between, or (written: its files were written and kept
    before, _write_kept) the read alone after that eviction; returns ({op: effective bandwidth (B/s)}, the
    eviction's record or None, {op: slowest_parts()})."""
    argv, env = _launch(config, base, work)
    if written:
        evicted = evict_page_cache([work])
        result = run_bench(impl, nranks, [*_without_phases(argv), "-r", "-k"], env=env)
    elif from_device:
        result = run_restarted(impl, nranks, argv, env=env, evict=[work])
        evicted = result["restarted"]["evicted"]
    else:
        result, evicted = run_bench(impl, nranks, argv, env=env), None
    bandwidths = {op: summary(result, op)["effective_bw"]["median"] for op in ("write", "read") if op in phases(result)}
    return bandwidths, evicted, {op: slowest_parts(result, op) for op in bandwidths}


def slowest_parts(result: dict, op: str) -> dict[str, float]:
    """The slowest rank's time (s) in each of PARTS in the launch's `op` phases, the median over those phases (one
    from the device): what the open, the data calls and the close took, to tell MPI's collective open and close of
    a shared file (the N-N files open on MPI_COMM_SELF) from the reads (docs/bench.md, "The twelfth pass")."""
    ops = [p for p in result["phases"] if p["op"] == op]
    return {part: statistics.median(max(r[part] for r in p["ranks"]) for p in ops) for part in PARTS}


def _write_kept(config: str, impl: str | None, nranks: int, base: list[str], work: Path) -> float:
    """--phase read: a configuration's files written once and kept for the row's reads; the write's bandwidth
    (B/s, not a figure of the rounds)."""
    argv, env = _launch(config, base, work)
    return summary(run_bench(impl, nranks, [*_without_phases(argv), "-w", "-k"], env=env), "write")["effective_bw"][
        "median"]


def _without_phases(argv: list[str]) -> list[str]:
    return [a for a in argv if a not in PHASE_FLAGS]


def phases(result: dict) -> set[str]:
    return {entry["op"] for entry in result["summary"]}


def same_path_n1(base: list[str]) -> str:
    """The direct N-1 configuration that takes logfs N-1's path through MPI (OWN_N1 for MPI-IO), else direct_n1."""
    return OWN_N1 if base[base.index("-a") + 1] == "mpiio" else "direct_n1"


def configurations(base: list[str], goal_only: bool) -> tuple[str, ...]:
    """What a row runs: CONFIGS and the same-path N-1, or (goal_only) logfs N-1 and the two baselines its goal
    and its own cost are taken against."""
    same_path = same_path_n1(base)
    if goal_only:
        return "logfs_n1", "direct_nn", same_path
    return CONFIGS + ((same_path,) if same_path not in CONFIGS else ())


def _balanced(configs: tuple[str, ...]) -> bool:
    """Whether the rounds of `configs` take BALANCED_ORDERS (three configurations: --goal-only)."""
    return len(configs) == len(BALANCED_ORDERS[0])


def round_order(configs: tuple[str, ...], rep: int) -> tuple[str, ...]:
    """The order of round `rep`: for three configurations BALANCED_ORDERS in turn, else forward and reversed by
    turns."""
    if _balanced(configs):
        return tuple(configs[i] for i in BALANCED_ORDERS[rep % len(BALANCED_ORDERS)])
    return configs if rep % 2 == 0 else tuple(reversed(configs))


def lead_in(configs: tuple[str, ...]) -> str | None:
    """The configuration run unmeasured before a row's first round, so that its first run follows what it follows in
    the orders' cycle (BALANCED_ORDERS); None where the rounds are not balanced."""
    return round_order(configs, -1)[-1] if _balanced(configs) else None


def _ratios(runs: dict[str, dict[str, list[float]]], same_path: str) -> dict:
    """Per op: E, the layer's own cost and, when their baselines ran, the speed-up over direct N-1 and the cost
    outside the roots; each as spread() of the per-round ratios."""
    row = {}
    for op in runs["logfs_n1"]:
        logfs = runs["logfs_n1"][op]
        row[f"E_{op}"] = spread(per_round(logfs, runs["direct_nn"][op]))
        row[f"E_{op}_goal"] = goal_verdict(row[f"E_{op}"]["rounds"])
        row[f"layer_{op}"] = spread(per_round(logfs, runs[same_path][op]))
        if "direct_n1" in runs:
            row[f"speedup_{op}"] = spread(per_round(logfs, runs["direct_n1"][op]))
        if "preloaded_n1" in runs:
            row[f"outside_cost_{op}"] = spread([1 - r for r in per_round(runs["preloaded_n1"][op],
                                                                         runs["direct_n1"][op])])
    return row


def goal_verdict(ratios: list[float]) -> dict:
    """E's per-round ratios against GOAL_E: the median's distribution-free 95% interval (stats.median_interval) and
    its verdict, "met" when the whole interval is at or above the goal, "missed" when it is wholly below, else "not
    resolved" (the rounds hold the goal on both sides of the median's likely place: more rounds, or a steadier
    machine, are needed to tell; a read from this machine's disk moves 4x from one launch to the next). Fewer than
    6 rounds give no 95% interval (the widest, [min, max], covers less): never resolved."""
    interval = median_interval(ratios)
    resolvable = interval["confidence"] >= GOAL_CONFIDENCE
    met, missed = resolvable and interval["low"] >= GOAL_E, resolvable and interval["high"] < GOAL_E
    return {**interval, "verdict": "met" if met else "missed" if missed else "not resolved"}


def _evictions(records: list[dict]) -> dict:
    """The eviction records of a row's runs summed: how many, their files and bytes, cached before and after."""
    return {"count": len(records), **{key: sum(r[key] for r in records)
                                      for key in ("files", "bytes", "cached_before", "cached_after")}}


def compare(impl: str | None, nranks: int, base: list[str], reps: int, directory: Path,
            goal_only: bool = False, from_device: bool = False, phase: str = "both") -> dict:
    """One row: every configuration once per round for `reps` rounds in round_order(), after lead_in()'s run (not
    measured); bandwidths and the per-round ratios as spread() (median, min, max, every round), each round's order;
    from_device: each read after an eviction (_run_config), the evictions summed (_evictions); phase "read": every
    configuration's files written once before the lead-in (_write_kept; their bandwidths under "written_once"),
    then every round reads them alone, from the device; "parts": each launch's slowest_parts() as spread()."""
    reads_only = phase == "read"
    assert from_device or not reads_only  # kept files read again without an eviction would come from memory
    same_path = same_path_n1(base)
    configs = configurations(base, goal_only)
    runs: dict[str, dict[str, list[float]]] = {c: {op: [] for op in phase_ops(phase)} for c in configs}
    parts: dict[str, dict[str, dict[str, list[float]]]] = {
        c: {op: {part: [] for part in PARTS} for op in phase_ops(phase)} for c in configs}
    evictions = []
    orders, first = [round_order(configs, rep) for rep in range(reps)], lead_in(configs)
    with tempfile.TemporaryDirectory(dir=directory, prefix="ioloom-bench-logfs-") as tmp:
        work = Path(tmp)
        (work / "mnt").mkdir()
        (work / "elsewhere").mkdir()
        written = {c: _write_kept(c, impl, nranks, base, work) for c in configs} if reads_only else None
        if first:
            _run_config(first, impl, nranks, base, work, from_device, reads_only)
        for order in orders:
            for config in order:
                bandwidths, evicted, times = _run_config(config, impl, nranks, base, work, from_device, reads_only)
                for op, bw in bandwidths.items():
                    runs[config][op].append(bw)
                    for part, seconds in times[op].items():
                        parts[config][op][part].append(seconds)
                evictions += [evicted] if evicted else []
    return {"ranks": nranks, "same_path_n1": same_path, "lead_in": first, "orders": orders, "phase": phase,
            "written_once": written,
            "evicted": _evictions(evictions) if from_device else None,
            "bandwidth": {c: {op: spread(v) for op, v in ops.items()} for c, ops in runs.items()},
            "parts": {c: {op: {part: spread(v) for part, v in by_part.items()} for op, by_part in ops.items()}
                      for c, ops in parts.items()},
            **_ratios(runs, same_path)}


def measure(impl: str | None, ranks: list[int], api: str, block: str, transfer: str, segments: int, fsync: bool,
            reps: int, directory: Path, shapes: tuple[str, ...] = SHAPES, goal_only: bool = False,
            reads: int | None = None, read_from: str = "device", phase: str = "both") -> dict:
    """Every row (shape x rank count: compare()) and, unless goal_only, the figures beside them; `reads` read
    phases per launch (READS by `read_from` when None; from the device only one); `phase` (PHASES) what each
    round runs."""
    reads = reads or READS[read_from]
    assert read_from == "cache" or reads == 1  # a second read phase would find the first one's pages cached
    flags = (["-e"] if fsync else []) + (["-c"] if api == "mpiio" else [])
    common = ["-a", api, "-w", "-r", "--reads", str(reads), *flags]
    rows = []
    for shape in shapes:
        b, t, s = shape_sizes(shape, block, transfer, segments)
        base = [*common, "-b", str(b), "-t", str(t), "-s", str(s)]
        rows += [{"shape": shape, "block": b, "transfer": t, "segments": s,
                  **compare(impl, n, base, reps, directory, goal_only, read_from == "device", phase),
                  "bytes": n * s * b}
                 for n in ranks]
    largest, memory = max(r["bytes"] for r in rows), available_memory()
    result = {
        "api": api, "block": block, "transfer": transfer, "segments": segments, "fsync_before_close": fsync,
        "reps": reps, "reads": reads, "read_from": read_from, "directory": str(directory), "goal_only": goal_only,
        "phase": phase,
        "page_cache": {"largest_file_bytes": largest, "mem_available_bytes": memory, "fits": largest < memory},
        "rows": rows}
    if goal_only:
        return result
    b, t, s = shape_sizes("aligned", block, transfer, segments)
    write_only = ["-a", api, "-w", *flags, "-k", "-b", str(b), "-t", str(t), "-s", str(s)]
    return {**result, "open_1024_writers": open_many(directory),
            "passthrough_per_call": passthrough_cost(reps, directory),
            "flatten_vs_cp": flatten_vs_cp(impl, max(ranks), write_only, reps, directory)}


def flatten_vs_cp(impl: str | None, nranks: int, base: list[str], reps: int, directory: Path) -> dict:
    """`ioloom container flatten` of the logfs N-1 file against `cp` of the direct N-1 file (same bytes, both
    just written, so both read from the page cache), the copy fsynced as flatten syncs its file before renaming
    it into place: one of each per round, the ratio taken per round."""
    from ioloom.logfs.tools import flatten
    with tempfile.TemporaryDirectory(dir=directory, prefix="ioloom-bench-logfs-flat-") as tmp:
        work = Path(tmp)
        (work / "mnt").mkdir()
        _run_config("logfs_n1", impl, nranks, base, work)
        _run_config("direct_n1", impl, nranks, base, work)
        size = (work / "direct_n1.dat").stat().st_size
        bw: dict[str, list[float]] = {"cp": [], "flatten": []}
        for _ in range(reps):
            start = time.perf_counter()
            subprocess.run(["cp", str(work / "direct_n1.dat"), str(work / "copy")], check=True)
            sync_file(work / "copy")
            bw["cp"].append(size / (time.perf_counter() - start))
            start = time.perf_counter()
            flatten(work / "mnt" / "shared.dat", work / "flat")
            bw["flatten"].append(size / (time.perf_counter() - start))
            if (work / "flat").read_bytes() != (work / "copy").read_bytes():
                raise RuntimeError("flatten did not reproduce the direct file: run `ioloom container check`")
    return {"bytes": size, "cp_bw": spread(bw["cp"]), "flatten_bw": spread(bw["flatten"]),
            "ratio": spread(per_round(bw["flatten"], bw["cp"]))}


# The probe's calls that take a path, run again on a relative path from the probe file's directory (which holds the
# mount: a relative path's test compares it with the mounts below the working directory).
PATH_CALLS = ("open+close", "stat")
RELATIVE = " (relative)"


def _probe_runs(tmp: Path) -> dict[str, tuple[Path, tuple[str, ...]]]:
    """The probe's runs per round: every call on the absolute path, the path calls again on a relative one."""
    return {"absolute": (tmp / "probe.dat", ()), "relative": (Path("probe.dat"), PATH_CALLS)}


def _probe_envs(tmp: Path) -> dict[str, dict[str, str]]:
    (tmp / "mnt").mkdir()
    return {"plain": {**os.environ}, "preloaded": {**os.environ, **preload.env({tmp / "mnt": []})}}


def _call_name(run: str, call: str) -> str:
    return call + (RELATIVE if run == "relative" else "")


def passthrough_cost(reps: int, directory: Path, calls: int = 200_000, cpu: int | None = None) -> dict:
    """What the preloaded layer adds to each call on a file outside its roots: the tracer's probe (small pwrite,
    pread, fwrite on a cached file; open+close and stat on its absolute path and on a relative one) run plain and
    preloaded in each round, the order alternating, every run on CPU `cpu` when given; the added fraction is taken
    per round, its median given with a distribution-free 95% interval (stats.median_interval: the goal is met when
    the interval's top is at most 2%)."""
    probe = str(paths.native_bin("ioloom-overhead-probe"))
    ns: dict[str, dict[str, list[float]]] = {"plain": {}, "preloaded": {}}
    with tempfile.TemporaryDirectory(dir=directory, prefix="ioloom-bench-logfs-probe-") as tmp:
        envs, runs = _probe_envs(Path(tmp)), _probe_runs(Path(tmp))
        for rep in range(reps):
            for label in ("plain", "preloaded") if rep % 2 == 0 else ("preloaded", "plain"):
                for run, (target, kinds) in runs.items():
                    for call, value in run_probe([probe], target, calls, envs[label], kinds, cpu, Path(tmp)).items():
                        ns[label].setdefault(_call_name(run, call), []).append(value)
    added = {call: [r - 1 for r in per_round(ns["preloaded"][call], ns["plain"][call])] for call in ns["plain"]}
    return {call: {"plain_ns": spread(ns["plain"][call]), "preloaded_ns": spread(ns["preloaded"][call]),
                   "added": spread(added[call]), "added_median_interval": median_interval(added[call])}
            for call in ns["plain"]}


def passthrough_instructions(directory: Path, calls: int = 20_000) -> dict:
    """Instructions per call of the path calls (PATH_CALLS, absolute and relative), plain and preloaded, by
    callgrind (valgrind; overhead.callgrind_per_call, from the probe file's directory)."""
    probe = str(paths.native_bin("ioloom-overhead-probe"))
    counted: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(dir=directory, prefix="ioloom-bench-logfs-cg-") as tmp:
        envs = _probe_envs(Path(tmp))
        for run, (target, _) in _probe_runs(Path(tmp)).items():
            for call in PATH_CALLS:
                for label, env in envs.items():
                    per_call, _ = callgrind_per_call([probe, str(target)], [call], env, Path(tmp), calls, cwd=Path(tmp))
                    counted.setdefault(_call_name(run, call), {})[label] = round(per_call, 1)
    return {call: {**c, "added": round(c["preloaded"] - c["plain"], 1)} for call, c in counted.items()}


def open_many(directory: Path, writers: int = 1024) -> dict:
    """Time for a reader to open a container of `writers` writers' logs and indexes and resolve it."""
    tool = str(paths.native_bin("ioloom-logfs-tool"))
    with tempfile.TemporaryDirectory(dir=directory, prefix="ioloom-bench-logfs-open-") as tmp:
        subprocess.run([tool, "synth", f"{tmp}/c", str(writers), "4", "4096"], check=True, capture_output=True)
        out = subprocess.run([tool, "open-time", f"{tmp}/c"], check=True, capture_output=True, text=True)
    return {"writers": writers, **json.loads(out.stdout)}


CREATE_CONFIGS = ("direct", "logfs", "logfs_extra_spread", "logfs_extra_own_dirs")
CREATOR = r"""
import os, sys, time
where, files, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
data = b"x" * size
start = time.perf_counter()
for i in range(files):
    fd = os.open(f"{where}/f{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    if size:
        os.write(fd, data)
    os.close(fd)
print(files / (time.perf_counter() - start))
"""


def _create_env(config: str, mount: Path, extra: Path, fanout: int) -> dict[str, str]:
    if config == "direct":
        return {}
    extras: list[str | os.PathLike] = [] if config == "logfs" else [extra]
    return preload.env({mount: extras}, spread=str(fanout if config == "logfs_extra_spread" else 0))


def creates(files: int, size: int, fanout: int, reps: int, directory: Path) -> dict:
    """Files created per second in one directory, direct and through the layer (CREATE_CONFIGS), each config once
    per round in alternating order, in a fresh directory (removed outside the timing); ratios to direct per round."""
    rates: dict[str, list[float]] = {c: [] for c in CREATE_CONFIGS}
    for rep in range(reps):
        for config in CREATE_CONFIGS if rep % 2 == 0 else tuple(reversed(CREATE_CONFIGS)):
            with tempfile.TemporaryDirectory(dir=directory, prefix="ioloom-bench-creates-") as tmp:
                mount, extra = Path(tmp) / "mnt", Path(tmp) / "extra"
                mount.mkdir()
                extra.mkdir()
                out = subprocess.run([sys.executable, "-c", CREATOR, str(mount), str(files), str(size)], check=True,
                                     capture_output=True, text=True,
                                     env={**os.environ, **_create_env(config, mount, extra, fanout)})
                rates[config].append(float(out.stdout))
    return {"files": files, "bytes_per_file": size, "spread": fanout, "reps": reps, "directory": str(directory),
            "rate": {c: spread(v) for c, v in rates.items()},
            "ratio_to_direct": {c: spread(per_round(v, rates["direct"])) for c, v in rates.items()}}


def _creates_table(result: dict) -> Table:
    table = Table(title=f"N-N creates: {result['files']:,} files of {result['bytes_per_file']} bytes in one directory "
                        f"(median \\[min, max] over {result['reps']} interleaved rounds; ratios taken per round)")
    for column in ("configuration", "files/s", "ratio to direct"):
        table.add_column(column, justify="right", no_wrap=True)
    for config in CREATE_CONFIGS:
        table.add_row(config, _range(result["rate"][config], lambda v: f"{v:,.0f}"),
                      _range(result["ratio_to_direct"][config], lambda v: f"{v:.2f}"))
    return table


def _load(before, after) -> str:
    return f"load average (1, 5, 15 min) before {tuple(round(v, 2) for v in before)}, after " \
           f"{tuple(round(v, 2) for v in after)}"


def _range(figure: dict | None, fmt) -> str:
    """"median [min, max]" of a spread(); a dash for a figure not measured (--goal-only)."""
    if figure is None:
        return "-"
    return f"{fmt(figure['median'])} [{fmt(figure['min'])}, {fmt(figure['max'])}]"


def _table(result: dict) -> Table:
    reads = "read from the device, in a launch of its own after an eviction" if result["read_from"] == "device" \
        else f"a launch's read: the median of its {result['reads']} read phases from the page cache"
    if result["phase"] == "read":
        reads = f"reads only, of files each configuration wrote once per row; {reads}"
    table = Table(title=f"logfs vs direct ({result['api']}; median \\[min, max] over {result['reps']} interleaved "
                        f"rounds, ratios taken per round; {reads}; MiB/s)")
    for column in ("shape: block/transfer x segments", "ranks", "op", "logfs N-1", "direct N-1", "direct N-N",
                   "E (goal>=0.9)", "E's 95% interval: goal", "speed-up vs N-1", "vs N-1 same path",
                   "outside-roots cost (goal<=2%)"):
        table.add_column(column, justify="right", no_wrap=True)
    for row in result["rows"]:
        for op in phase_ops(result["phase"]):
            bw = row["bandwidth"]
            shape = f"{row['shape']}: {row['block']}/{row['transfer']} x {row['segments']}"
            table.add_row(shape, str(row["ranks"]), op,
                          *(_range(bw[c][op] if c in bw else None, lambda v: f"{v / MIB:,.0f}")
                            for c in CONFIGS[:3]),
                          _range(row[f"E_{op}"], lambda v: f"{v:.2f}"), _verdict(row[f"E_{op}_goal"]),
                          _range(row.get(f"speedup_{op}"), lambda v: f"{v:.2f}x"),
                          _range(row[f"layer_{op}"], lambda v: f"{v:.2f}"),
                          _range(row.get(f"outside_cost_{op}"), lambda v: f"{100 * v:+.1f}%"))
    return table


def _parts_table(result: dict) -> Table:
    """Each configuration's open, data calls and close (PARTS): the slowest rank's, median over the rounds, ms."""
    table = Table(title="Where a launch's time went: open / data calls / close, ms (the slowest rank's, median over "
                        "the rounds)")
    for column in ("shape", "ranks", "op", *(c.replace("_", " ") for c in CONFIGS + (OWN_N1,))):
        table.add_column(column, justify="right", no_wrap=True)
    for row in result["rows"]:
        for op in phase_ops(result["phase"]):
            cells = [" / ".join(f"{1e3 * row['parts'][c][op][part]['median']:,.1f}" for part in PARTS)
                     if c in row["parts"] else "" for c in CONFIGS + (OWN_N1,)]
            table.add_row(row["shape"], str(row["ranks"]), op, *cells)
    return table


def _verdict(goal: dict) -> str:
    """The interval and its verdict; the interval's coverage when it is below 95% (too few rounds for one)."""
    short = f" ({100 * goal['confidence']:.0f}%)" if goal["confidence"] < GOAL_CONFIDENCE else ""
    return f"[{goal['low']:.2f}, {goal['high']:.2f}]{short} {goal['verdict']}"


def phase_ops(phase: str) -> tuple[str, ...]:
    """The ops a round of `phase` (PHASES) times: write and read, or (--phase read) read."""
    return ("read",) if phase == "read" else ("write", "read")


def _goal_count(result: dict) -> str:
    """One line: in how many cells E's goal is met, missed and not resolved (goal_verdict), writes and reads apart."""
    parts = []
    for op in phase_ops(result["phase"]):
        verdicts = [row[f"E_{op}_goal"]["verdict"] for row in result["rows"]]
        parts.append(f"{op}s met in {verdicts.count('met')}, missed in {verdicts.count('missed')}, not resolved in "
                     f"{verdicts.count('not resolved')} of {len(verdicts)}")
    return (f"E against the goal ({GOAL_E}) by the median's 95% interval over the rounds: {'; '.join(parts)}")


def _rank_counts(text: str) -> list[int]:
    """--ranks as a list of counts >= 1, or refused with the option's name."""
    try:
        return units.numbers(text, "--ranks")
    except units.UnitError as err:
        raise typer.BadParameter(str(err)) from None


@app.command("logfs")
def logfs_command(
        mpi_name: str = typer.Option(None, "--mpi", help="openmpi or mpich (default: the first found)."),
        ranks: str = typer.Option("1,2,4,8", callback=_rank_counts,
                                  help="Rank counts to try, comma-separated."),
        api: str = typer.Option("posix", help="posix or mpiio (collective)."),
        block: str = typer.Option("1m", "-b", help="Block per rank per segment."),
        transfer: str = typer.Option("64k", "-t", help="Bytes per data call."),
        segments: int = typer.Option(64, "-s", min=1, help="Segments (strided: one block of every rank each)."),
        shape: list[str] = typer.Option(list(SHAPES), "--shape",
                                        help="aligned (-b -t -s as given) and/or ior-hard (47,008-byte blocks and "
                                             "transfers, about the same bytes per rank); repeatable."),
        fsync: bool = typer.Option(True, "--fsync/--no-fsync", help="fsync before close (-e)."),
        reps: int = typer.Option(PUBLISHED_ROUNDS, "--reps", min=1,
                                 help="Interleaved rounds: each configuration runs once per round; medians with "
                                      "min and max are reported (fewer than 10 only with --quick)."),
        quick: bool = typer.Option(False, "--quick", help="Allow fewer than 10 rounds, for a quick look."),
        directory: Path = typer.Option(TEMP_DIR, "--dir", help="Where the files go."),
        creates_n: int = typer.Option(0, "--creates", min=0,
                                      help="Measure N-N file creation instead: this many files per run, direct and "
                                           "through the layer (e.g. 10000)."),
        create_bytes: int = typer.Option(4096, "--create-bytes", min=0, help="Bytes written to each created file."),
        spread_dirs: int = typer.Option(32, "--spread", min=1, max=4096,
                                        help="Shared directories per extra backend (with --creates)."),
        reads: int | None = typer.Option(None, "--reads", min=1, max=1000, show_default=False,
                                         help="Read phases after each write, the launch's read bandwidth their median "
                                              "(a read from the page cache is short: one descheduled rank decides a "
                                              f"phase); {READS['cache']} with --read-from cache, {READS['device']} "
                                              "(the only choice) from the device."),
        read_from: str = typer.Option("device", "--read-from",
                                      help="device: write and read in two launches, every file the run wrote synced "
                                           "and evicted from the page cache in between (posix_fadvise, no root "
                                           "needed); cache: read in the writing launch, from the page cache."),
        phase: str = typer.Option("both", "--phase",
                                  help="both: every round writes and reads each configuration; read: each "
                                       "configuration's files are written once per row (fsync, kept, not timed) and "
                                       "every round only reads them, from the device after an eviction: about "
                                       "twice the rounds in the same time, for the read cells."),
        goal_only: bool = typer.Option(False, "--goal-only",
                                       help="Run only logfs N-1, direct N-N and direct N-1 taken the same path (E and "
                                            "the layer's own cost), none of the other figures: a campaign that fits "
                                            "a quiet window."),
        outside_only: bool = typer.Option(False, "--outside-only",
                                          help="Measure only what the layer adds to each call on a file outside its "
                                               "mounts (the pass-through probe, plain and preloaded every round)."),
        cpu: int | None = typer.Option(None, "--cpu", min=0,
                                       help="With --outside-only: run every probe on this CPU alone (runs that land "
                                            "on different CPUs differ by what each CPU is doing)."),
        instructions: bool = typer.Option(False, "--instructions",
                                          help="With --outside-only: also count the instructions open+close and stat "
                                               "take, plain and preloaded, with callgrind (needs valgrind)."),
        load: int = typer.Option(0, "--load", min=0, max=MAX_LOAD,
                                 help="Run this many CPU-bound competitor processes (at this command's niceness) "
                                      "from before the first run to after the last, the same for every "
                                      "configuration: figures under a stated, repeatable load."),
        json_out: bool = typer.Option(False, "--json", help="Print the figures as JSON.")) -> None:
    """N-1 strided through logfs vs N-1 strided and N-N direct: E, speed-up, read-back, pass-through cost."""
    too_few = rounds_allowed(reps, quick)
    if too_few:
        raise typer.BadParameter(too_few)
    if not directory.is_dir():
        raise typer.BadParameter(f"{directory} is not a directory; give --dir an existing, writable one")
    unknown = set(shape) - set(SHAPES)
    if unknown:
        raise typer.BadParameter(f"--shape {', '.join(sorted(unknown))}: expected aligned or ior-hard")
    if read_from not in READ_FROM:
        raise typer.BadParameter(f"--read-from {read_from}: expected {' or '.join(READ_FROM)}")
    if read_from == "device" and reads not in (None, READS["device"]):
        raise typer.BadParameter(f"--reads {reads}: from the device each launch has {READS['device']} read phase "
                                 "(another would find the first one's pages cached); use --read-from cache for more")
    if phase not in PHASES:
        raise typer.BadParameter(f"--phase {phase}: expected {' or '.join(PHASES)}")
    if phase == "read" and read_from != "device":
        raise typer.BadParameter("--phase read reads kept files from the device after an eviction; from the cache "
                                 "the reads would find the last round's pages: use --read-from device")
    if (instructions or cpu is not None) and not outside_only:
        raise typer.BadParameter("--instructions and --cpu go with --outside-only")
    refused = (cpu_not_allowed(cpu) if cpu is not None else None) or (valgrind_missing("--instructions")
                                                                        if instructions else None)
    if refused:
        raise typer.BadParameter(refused)
    if creates_n:
        _report(lambda: creates(creates_n, create_bytes, spread_dirs, reps, directory), load, json_out,
                lambda console, result: console.print(_creates_table(result)))
    elif outside_only:
        _report(lambda: _outside(reps, directory, instructions, cpu), load, json_out, _print_outside_only)
    else:
        counts = cast(list[int], ranks)  # _rank_counts, its callback, made the text a list
        try:
            _report(lambda: measure(mpi_name, counts, api, block, transfer, segments, fsync, reps, directory,
                                    tuple(shape), goal_only, reads, read_from, phase), load, json_out,
                    _print_goal)
        except EvictionFailed as err:
            typer.echo(f"{err}: give --dir a disk file system (tmpfs keeps its pages) or use --read-from cache",
                       err=True)
            raise typer.Exit(2) from None


def _report(run: Callable[[], dict], load: int, json_out: bool, show: Callable[[Console, dict], None]) -> None:
    """Load, measure under `load` competitors, load, print: the figures of run() with the load average before and
    after them and the competitors' record, as JSON or shown by show() followed by the load."""
    load_before = os.getloadavg()
    with competitors.competing(load) as competition:
        result = run()
    result["load_before"], result["load_after"] = load_before, os.getloadavg()
    result["competitors"] = competition
    if json_out:
        print(json.dumps(result, indent=1))
        return
    console = Console(width=270)  # the goal table's eleven columns, none cut at four-digit bandwidths
    show(console, result)
    console.print(_load(result["load_before"], result["load_after"]))
    console.print(competitors.describe(competition))


def _print_goal(console: Console, result: dict) -> None:
    """The table of E and the ratios beside it, where the data lay, and (unless --goal-only) the other figures."""
    console.print(_table(result))
    console.print(_goal_count(result))
    console.print(_parts_table(result))
    cache = result["page_cache"]
    console.print(f"largest file {cache['largest_file_bytes'] / MIB:,.0f} MiB, memory available "
                  f"{cache['mem_available_bytes'] / MIB:,.0f} MiB: the data "
                  f"{'fit' if cache['fits'] else 'did not fit'} in the page cache; fsync before close: "
                  f"{'yes' if result['fsync_before_close'] else 'no'}; {_where_reads_came_from(result)}")
    if not result["goal_only"]:
        _print_aside(console, result)


def _where_reads_came_from(result: dict) -> str:
    """One line: the reads came from the page cache, or from the device after evictions that left nothing cached."""
    if result["read_from"] == "cache":
        return "reads came from the PAGE CACHE (--read-from cache): each launch read back what it had just written"
    evicted = [row["evicted"] for row in result["rows"]]
    cached_before, cached_after = (sum(e[key] for e in evicted) for key in ("cached_before", "cached_after"))
    return (f"reads came from the DEVICE: before each of the {sum(e['count'] for e in evicted)} read launches every "
            f"file the run wrote was synced and evicted with posix_fadvise(DONTNEED) "
            f"({sum(e['files'] for e in evicted)} files in all, {cached_before / MIB:,.1f} MiB cached before, "
            f"{cached_after / MIB:,.1f} MiB after; directory and inode caches kept)" +
            ("; --phase read: each configuration's files written once per row, before its rounds, and read in every "
             "round" if result["phase"] == "read" else ""))


def _outside(reps: int, directory: Path, instructions: bool, cpu: int | None) -> dict:
    """--outside-only's figures: the pass-through cost per call (on CPU `cpu` when given), and with `instructions`
    callgrind's counts."""
    result: dict = {"passthrough_per_call": passthrough_cost(reps, directory, cpu=cpu), "cpu": cpu}
    if instructions:
        result["instructions_per_call"] = passthrough_instructions(directory)
    return result


def _print_outside_only(console: Console, result: dict) -> None:
    _print_outside(console, result["passthrough_per_call"])
    if result["cpu"] is not None:
        console.print(f"every probe run on CPU {result['cpu']} alone")
    if "instructions_per_call" in result:
        console.print("instructions per call (callgrind), plain -> preloaded: " + ", ".join(
            f"{call} {c['plain']:.0f} -> {c['preloaded']:.0f} (+{c['added']:.0f})"
            for call, c in result["instructions_per_call"].items()))


def _print_outside(console: Console, calls: dict) -> None:
    console.print("outside the roots, per call (median \\[min, max] of the rounds; the median's 95% interval): " +
                  ", ".join(f"{call} {c['plain_ns']['median']:.0f} -> {c['preloaded_ns']['median']:.0f} ns "
                            f"({_range(c['added'], lambda v: f'{100 * v:+.1f}%')}; {_interval(c)})"
                            for call, c in calls.items()) + " (goal <= 2%)")


def _interval(call: dict) -> str:
    interval = call["added_median_interval"]
    return f"\\[{100 * interval['low']:+.1f}, {100 * interval['high']:+.1f}] at {100 * interval['confidence']:.1f}%"


def _print_aside(console: Console, result: dict) -> None:
    """The figures beside the table: opening many writers' indexes, the cost outside the roots, flatten."""
    opened = result["open_1024_writers"]
    console.print(f"opening {opened['writers']} writers' indexes and resolving them: {opened['seconds']:.3f} s "
                  f"(goal < 1 s)")
    _print_outside(console, result["passthrough_per_call"])
    flat = result["flatten_vs_cp"]
    console.print(f"flatten {flat['flatten_bw']['median'] / MIB:,.0f} MiB/s vs cp {flat['cp_bw']['median'] / MIB:,.0f} "
                  f"MiB/s of the same {flat['bytes'] / MIB:,.0f} MiB, both synced to disk: "
                  f"{_range(flat['ratio'], lambda v: f'{100 * v:.0f}%')} (goal >= 80%)")
