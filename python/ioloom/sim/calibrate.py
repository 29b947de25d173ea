"""This machine's disk as a simulator platform (`ioloom sim calibrate`), and the check of the simulator against it
(`ioloom sim validate --calibration`): `ioloom bench io` on 1, 2 and 4 ranks, measured and predicted round by round.

The client is measured by one long write into the page cache, 1 MiB at a time (`measure_client`): the copy's
speed on a core (bytes / the writer's CPU time), and the burst it runs at full speed (the sleeper credit a waking
task gets under Linux's scheduler) before the machine's other load shares the cores with it. Then as many writers
as cores at once (`concurrent_copy`): their CPU time over their time is the cores the job gets, cores / (load + 1),
which gives the load (one writer cannot see a load below cores - 1), and their bytes against the model's, and
twice as many writers', the copies' efficiencies (docs/sim.md, "Calibration"). The disk is measured with
`ioloom bench io` itself, on one rank, writing a file with fsync (so the bytes reach the device, not only the page
cache) and reading the figures of its JSON document:
- the device: bytes / (the fsync's time minus one commit), the commit being the fsync of a 4 KiB file (the
  requests' own latencies are inside that bandwidth: the platform's per-request latency is 0);
- the metadata costs: that small file's open (a create) and close;
- the page cache's limits, the kernel's current dirty and background thresholds (/proc/vmstat), as the cache's
  dirty limit and flush threshold.
Reads are not calibrated: measuring the device's reads needs the page cache dropped, which acts on the whole
(shared) machine; the platform's read bandwidth is the write bandwidth, and says so.
"""
from __future__ import annotations

import os
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, fields, is_dataclass, replace
from pathlib import Path
from typing import Any

from ioloom import mpi, paths
from ioloom.sim import engine, results, workload
from ioloom.sim.platform import Platform, from_dict

CHECK_ARGS = "-F -b 64m -t 1m -e -w"  # the pattern predicted: a file per rank, fsync (the bytes reach the disk)
CHECK_RANKS = (1, 2, 4)
TOLERANCE = 0.2  # the issue's: predictions within 20% of the measurement
DEMO = "demo"  # the check's row of the demo program (scripts/demo.sh: 4 ranks under MPICH, 64 blocks of 4 KiB)
DEMO_ARGS = ("64", "4096")


def _bench(directory: Path, nranks: int, args: str, mpi_name: str | None) -> dict:
    from ioloom.bench.io import run_bench

    return run_bench(mpi_name, nranks, [*shlex.split(args), "--dir", str(directory)])


def page_cache_limits() -> tuple[int, int]:
    """(dirty limit, background threshold) in bytes: the kernel's own current values (/proc/vmstat's
    nr_dirty_threshold and nr_dirty_background_threshold, in pages), which it derives from vm.dirty_ratio and
    vm.dirty_background_ratio (or the _bytes settings) of the memory it may dirty."""
    pages = dict(line.split() for line in Path("/proc/vmstat").read_text().splitlines())
    size = os.sysconf("SC_PAGE_SIZE")
    return int(pages["nr_dirty_threshold"]) * size, int(pages["nr_dirty_background_threshold"]) * size


@dataclass
class Client:
    copy_bandwidth: float  # bytes/s a core copies into the page cache
    copy_burst: float      # bytes copied at a core's full speed before the other load shares it
    cpu_load: float        # other processes running, as they share the cores with the copy
    copy_efficiency: float = 1.0            # what `cores` writers at once move, of cores x copy_bandwidth
    oversubscribed_efficiency: float = 1.0  # the same with 2 x cores writers


def fit_copy(size: int, cpus: list[float], ends: list[float]) -> tuple[float, float]:
    """(copy speed, burst) from one write of `size` bytes in equal chunks, `cpus` and `ends` the writer's CPU time
    and the wall-clock time at each chunk's end: the copy's speed is size / its CPU time; past the burst the writer
    got a share of a core (its CPU time over the wall-clock time, over the second half); the burst is what makes the
    whole write shorter than at that share throughout: T = B / c + (size - B) / (c share). The share is CPU over
    wall, not the second half's rate over the whole's speed (a copy whose CPU cost per byte grows as the page cache
    fills would read as a smaller share). One writer sees no load below cores - 1 (it gets a whole core whatever):
    measure_client takes the load from as many writers as cores instead."""
    speed = size / cpus[-1]
    half = len(ends) // 2
    share = min(1.0, (cpus[-1] - cpus[half - 1]) / (ends[-1] - ends[half - 1]))
    if share >= 1.0:
        return speed, 0.0
    burst = (size / (speed * share) - ends[-1]) / (1 / (speed * share) - 1 / speed)
    return speed, min(max(burst, 0.0), float(size))


def measure_client(directory: Path, size: int = 256 << 20, chunk: int = 1 << 20) -> Client:
    """One write of `size` bytes into the page cache under `directory`, `chunk` bytes per call, timed call by call
    (the file is fsynced and removed); then writers at once (`concurrent_copy`) for the efficiencies."""
    data, path, cpus, ends = os.urandom(chunk), directory / "ioloom-copy-probe", [], []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        cpu, start = time.thread_time(), time.perf_counter()
        for _ in range(size // chunk):
            os.write(fd, data)
            ends.append(time.perf_counter() - start)
            cpus.append(time.thread_time() - cpu)
        os.fsync(fd)
    finally:
        os.close(fd)
        path.unlink()
    cores = mpi.cpus()
    rate, share = concurrent_copy(directory, cores)
    client = Client(*fit_copy(size // chunk * chunk, cpus, ends), cpu_load=max(0.0, cores / share - 1))
    over, _ = concurrent_copy(directory, 2 * cores)
    return replace(client, copy_efficiency=efficiency(rate, cores, client, cores),
                   oversubscribed_efficiency=efficiency(over, 2 * cores, client, cores))


def concurrent_copy(directory: Path, writers: int, size: int = 64 << 20,
                    chunk: int = 1 << 20) -> tuple[float, float]:
    """(bytes/s, cores) that `writers` processes move into the page cache and get together, each writing `size`
    bytes to a file of its own in `chunk`-byte calls, all released at once: their bytes, and their CPU time, over
    the last one's end - the first one's start (the release's wake-ups left out, as bench io's barrier leaves them
    out). Each then fsyncs and removes its file, outside the timing."""
    data, go_r, go_w, done_r, done_w = os.urandom(chunk), *os.pipe(), *os.pipe()
    pids = []
    for i in range(writers):
        if (pid := os.fork()) == 0:
            os.close(go_w)
            path = directory / f"ioloom-copy-probe-{i}"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.write(done_w, b"ready\n")
            os.read(go_r, 1)  # released when the parent closes the pipe
            start, cpu = time.perf_counter(), time.thread_time()
            for _ in range(size // chunk):
                os.write(fd, data)
            os.write(done_w, f"{start!r} {time.perf_counter()!r} {time.thread_time() - cpu!r}\n".encode())
            os.fsync(fd)
            os.close(fd)
            path.unlink()
            os._exit(0)
        pids.append(pid)
    os.close(go_r)
    os.close(done_w)
    with os.fdopen(done_r) as done:
        ready = sum(done.readline() == "ready\n" for _ in pids)
        os.close(go_w)
        spans = [tuple(map(float, line.split())) for line in done]
    for pid in pids:
        os.waitpid(pid, 0)
    if (ready, len(spans)) != (writers, writers):
        raise OSError(f"{writers - len(spans)} of {writers} copy probes failed under {directory}")
    took = max(end for _, end, _ in spans) - min(start for start, _, _ in spans)
    return writers * (size // chunk * chunk) / took, sum(cpu for _, _, cpu in spans) / took


def efficiency(rate: float, writers: int, client: Client, cores: int) -> float:
    """What `writers` copies moved at once (`rate`) over what the model gives them without contention: each at
    copy_bandwidth on one of the cores the job gets beside the other load (cores / (cpu_load + 1)); in (0, 1]."""
    expected = client.copy_bandwidth * min(writers, cores / (client.cpu_load + 1))
    return min(1.0, rate / expected)


@dataclass
class Disk:
    client: Client
    write_bandwidth: float  # bytes/s to the device
    commit: float           # seconds of an fsync of a small file
    create: float           # seconds of an open that creates
    close: float


def _measure_once(directory: Path, size: str, mpi_name: str | None) -> Disk | None:
    """One measurement, or None when the big file's fsync took no longer than the small one's (on a loaded machine
    the small file's commit can take longer than writing back what the kernel had not yet written)."""
    big = _bench(directory, 1, f"-F -b {size} -t 1m -e -w", mpi_name)["phases"][0]
    small = _bench(directory, 1, "-F -b 4k -t 4k -e -w", mpi_name)["phases"][0]
    commit = small["time"]["sync"]["max"]
    flush = big["time"]["sync"]["max"] - commit
    if flush <= 0 or big["time"]["data"]["max"] <= 0:
        return None
    return Disk(measure_client(directory, big["bytes"]), big["bytes"] / flush, commit, small["time"]["open"]["max"],
                small["time"]["close"]["max"])


def _median(values: list) -> Any:
    first = values[0]
    if is_dataclass(first) and not isinstance(first, type):  # figures in a dataclass: the median of each field
        return replace(first, **{f.name: _median([getattr(v, f.name) for v in values]) for f in fields(first)})
    return statistics.median(values)


def measure(directory: Path, size: str = "256m", mpi_name: str | None = None, repeats: int = 3) -> Disk:
    """The client and the disk under `directory` (see the module's docstring): each figure the median of `repeats`
    runs (a run whose fsync did not outlast the commit is repeated, up to 3 x `repeats` runs in all)."""
    runs: list[Disk] = []
    for _ in range(3 * repeats):
        if (disk := _measure_once(directory, size, mpi_name)) is not None:
            runs.append(disk)
        if len(runs) == repeats:
            return _median(runs)
    raise ValueError(f"the fsync of {size} took no longer than that of 4 KiB in {3 * repeats - len(runs)} of "
                     f"{3 * repeats} runs: the page cache was not written back (a file system in memory?): calibrate "
                     "on a disk-backed --dir, or with a larger --size")


def platform_doc(disk: Disk, ranks_per_node: int = max(CHECK_RANKS)) -> dict:
    """The platform of one node writing to its own disk: its cores (copies into the page cache share them), one
    target behind links too fast to matter, no extent locks (one node's ranks never revoke each other's), the page
    cache as the write-back cache."""
    dirty, background = page_cache_limits()
    fast = 1e12
    return {"clients": {"nodes": 1, "ranks_per_node": ranks_per_node, "cores": mpi.cpus(),
                        "cpu_load": disk.client.cpu_load, "copy_efficiency": disk.client.copy_efficiency,
                        "oversubscribed_efficiency": disk.client.oversubscribed_efficiency,
                        "nic_bandwidth": fast, "nic_latency": 0.0},
            "servers": {"count": 1, "bandwidth": fast, "latency": 0.0},
            "targets": {"count": 1, "write_bandwidth": disk.write_bandwidth, "read_bandwidth": disk.write_bandwidth,
                        "latency": 0.0, "commit_latency": disk.commit},
            "metadata": {"open": disk.create, "create": disk.create, "stat": disk.create, "close": disk.close},
            "locks": {"enabled": False},
            "cache": {"dirty_limit": dirty, "flush_threshold": min(background, dirty),
                      "copy_bandwidth": disk.client.copy_bandwidth, "copy_burst": int(disk.client.copy_burst)},
            "layout": {"stripe_count": 1}}


def to_toml(doc: dict, header: str) -> str:
    """The platform as a TOML file (sections of scalars), `header` as its leading comment lines."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    for section, values in doc.items():
        lines += ["", f"[{section}]"]
        lines += [f"{key} = {str(v).lower() if isinstance(v, bool) else repr(v)}" for key, v in values.items()]
    return "\n".join(lines) + "\n"


PHASE_TIMES = ("data", "sync")  # where a run's time goes, shown beside its bandwidth: the copies, the write-back


def _figures(doc: dict) -> dict[str, float]:
    """A bench document's effective bandwidth and its first phase's slowest data and sync times."""
    times = doc["phases"][0]["time"]
    return {"bandwidth": doc["summary"][0]["effective_bw"]["mean"], **{t: times[t]["max"] for t in PHASE_TIMES}}


def predict(p: Platform, nranks: int, args: str = CHECK_ARGS) -> dict[str, float]:
    """The simulated effective bandwidth of `ioloom bench io -n nranks -- args` on platform p (one node), and its
    slowest rank's data and sync seconds."""
    w = workload.bench_job(p, workload.parse_bench_args(args), nranks, nranks)
    return _figures(results.job_document(engine.run(p, w), 0))


def measured(directory: Path, nranks: int, mpi_name: str | None, args: str = CHECK_ARGS) -> dict[str, float]:
    return _figures(_bench(directory, nranks, args, mpi_name))


def demo_round(directory: Path, exe: Path, p: Platform, name: str) -> tuple[float, float]:
    """(traced, simulated) seconds of the demo run once under `ioloom run` and its trace replayed on p."""
    impl = mpi.by_name("mpich")
    trace = directory / f"trace-{name}"
    command = impl.launch(4, [str(exe), str(directory / "strided.dat"), *DEMO_ARGS])
    subprocess.run([sys.executable, "-m", "ioloom", "run", "-o", str(trace), "--", *command], check=True,
                   capture_output=True, env={**os.environ, **impl.base_env()}, timeout=600)
    doc = results.replay_document(engine.run(p, workload.from_trace(p, trace)))
    return doc["traced_time"], doc["simulated_time"]


def check(directory: Path, rounds: int, platform: Platform | None = None, mpi_name: str | None = None,
          size: str = "256m", repeats: int = 3, progress=None) -> dict:
    """Per rank count, per round: the measured and the predicted effective bandwidth of CHECK_ARGS, and (row DEMO)
    the demo's traced and replayed time. Without a platform each round calibrates first and predicts from its own
    platform (the disk of the minute, on a shared machine); the runs alternate their order between rounds.
    {nranks or DEMO: {"measured": [...], "predicted": [...]}}; a rank count's also {"measured data": [...],
    "predicted data": [...], and the same for sync} (seconds of the slowest rank: where the time went)."""
    sides = ("measured", "predicted")
    out: dict = {n: {side: [] for side in sides} for n in (*CHECK_RANKS, DEMO)}
    for count in CHECK_RANKS:
        out[count].update({f"{side} {t}": [] for side in sides for t in PHASE_TIMES})
    exe = mpi.by_name("mpich").build(paths.DEMO_SOURCE, directory)  # as scripts/demo.sh: MPICH's ROMIO sieves
    for r in range(rounds):
        p = platform or from_dict(platform_doc(measure(directory, size, mpi_name, repeats)))
        runs: tuple[int | str, ...] = (*CHECK_RANKS, DEMO) if r % 2 == 0 else (DEMO, *reversed(CHECK_RANKS))
        for n in runs:
            if isinstance(n, str):  # the demo
                for key, value in zip(("measured", "predicted"), demo_round(directory, exe, p, str(r))):
                    out[n][key].append(value)
            else:
                for side, figures in (("measured", measured(directory, n, mpi_name)), ("predicted", predict(p, n))):
                    out[n][side].append(figures["bandwidth"])
                    for t in PHASE_TIMES:
                        out[n][f"{side} {t}"].append(figures[t])
        if progress:
            progress(r)
    return out


def within(figures: dict[str, list[float]]) -> int:
    """Rounds whose prediction is within TOLERANCE of that round's measurement."""
    return sum(abs(p / m - 1) <= TOLERANCE for p, m in zip(figures["predicted"], figures["measured"]))


def median_ratio(figures: dict[str, list[float]]) -> float:
    return statistics.median(p / m for p, m in zip(figures["predicted"], figures["measured"]))
