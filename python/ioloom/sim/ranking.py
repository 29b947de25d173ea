"""`ioloom advise striping --simulate`: candidate layouts of one job ranked by the simulator (docs/sim.md,
"Advice"). Each candidate (stripe count x stripe size, and the job re-woven by the log layer) runs the same
workload, a replayed trace or the bench pattern of the advice's inputs, with fsync at the end so that the time
counts the data reaching the targets; the ranking is by simulated time, fastest first."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ioloom.sim import engine, platform, workload

MIB = 1 << 20
COUNTS = (1, 4, 16, 64, 160)
SIZES = (MIB, 4 * MIB, 64 * MIB)


@dataclass
class Candidate:
    stripe_count: int
    stripe_size: int
    logfs: bool
    seconds: float       # simulated, first call to the last end (fsync included)
    bandwidth: float     # bytes written / seconds


def pattern_args(writers: int, bytes_per_writer: int, request: int, shared: bool, contiguous: bool) -> str:
    """ioloom bench io's options for a models.striping.Pattern (write phase, fsync at the end)."""
    if not shared:
        return f"-F -b {bytes_per_writer} -t {request} -e -w"
    if contiguous:
        return f"--pattern contiguous -b {bytes_per_writer} -t {request} -e -w"
    return f"-b {request} -t {request} -s {max(1, bytes_per_writer // request)} -e -w"


def _platform(targets: int, nodes: int, platform_file: Path | None) -> platform.Platform:
    p = platform.load(platform_file)
    p.values["targets.count"] = targets
    p.values["servers.count"] = min(p["servers.count"], targets)
    p.values["clients.nodes"] = max(p["clients.nodes"], nodes)
    return p


def _simulate(p: platform.Platform, make, count: int, size: int, logfs: bool) -> Candidate:
    w = make(count, size)
    o = engine.run(p, workload.logfs(w, p) if logfs else w)
    written = float(w.ops["length"][w.ops["kind"] == workload.KINDS["write"]].sum())
    seconds = float(o.times[:, 1].max() - o.times[:, 0].min())
    return Candidate(count, size, logfs, seconds, written / seconds)


def rank(targets: int, advised: tuple[int, int], trace: Path | None = None, args: str | None = None,
         writers: int = 1, ranks_per_node: int = 16, platform_file: Path | None = None) -> list[Candidate]:
    """Every candidate layout simulated, fastest first: stripe counts of COUNTS and the advised one (those the
    targets allow) x sizes of SIZES and the advised one, plus the job re-woven by the log layer (its logs laid
    out as the platform's layout section says)."""
    p = _platform(targets, -(-writers // ranks_per_node), platform_file)
    bench = workload.parse_bench_args(args or "-w")

    def make(count: int, size: int) -> workload.Workload:
        if trace is not None:
            return workload.from_trace(p, trace, stripe_count=count, stripe_size=size)
        return workload.bench_job(p, bench, writers, ranks_per_node, stripe_count=count, stripe_size=size)
    counts = sorted({c for c in (*COUNTS, advised[0]) if c <= targets})
    sizes = sorted({*SIZES, advised[1]})
    out = [_simulate(p, make, c, s, False) for c in counts for s in sizes]
    out.append(_simulate(p, make, 1, MIB, True))
    return sorted(out, key=lambda c: c.seconds)
