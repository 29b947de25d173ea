"""`ioloom sim coord`: ioloom coord's policies deciding, per I/O phase, between simulated jobs (Dorier Ch. 6 at
a scale one machine cannot reach). The engine (native/sim/coord.cpp) announces each job's write phase at its first
write, releases it write by write and ends it with its last byte, asking the driver's coordinator over a pipe; the
coordinator here is ioloom coord's own State and Policy (python/ioloom/coord), on simulated time, so the choice
checked is the one `ioloom coord serve` makes. The scenario is bench coord's: job A starts at 0 and B at dt,
dt sweeping [-T_B, T_A]; each uncoordinated and under each policy; I = T / T_alone of each and f = N_A T_A +
N_B T_B against the uncoordinated run at the same dt (N: a job's ranks). The simulator is deterministic: one
run per point."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import typer

from ioloom import outputs
from ioloom.coord import COORDINATED, MIN_GAIN, offsets
from ioloom.coord.policy import Policy
from ioloom.coord.state import State
from ioloom.sim import engine, results, workload
from ioloom.sim.platform import Platform, PlatformError, from_dict, load


@dataclass
class PhaseCoordinator:
    """The driver's end of the engine's coordination pipe: answers `INFORM <job> <phase> <bytes> <now>`,
    `RELEASE <job> <bytes> <now>` and `DONE <job> <now>` with `WAITING <job>...`. A job announces with its ranks
    as cores, its phase's bytes and its time alone from `t_alone` ({job: seconds}; else bytes / `bandwidth`), or
    the bytes and seconds `announced` gives its phase ({(job, phase): (bytes, seconds)}; seconds 0: none).
    `decisions` records each announcement: who, when, what it said and what the policy made of it."""
    policy: Policy
    cores: list[int]
    t_alone: dict[int, float]
    bandwidth: float = 1e9
    announced: dict[tuple[int, int], tuple[int, float]] = field(default_factory=dict)
    decisions: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.state = State(self.policy, lease=float("inf"), bandwidth=self.bandwidth)

    def __call__(self, line: str) -> str:
        verb, *args = line.split()
        now, job = float(args[-1]), int(args[0])
        if verb == "INFORM":
            phase = int(args[1])
            size, seconds = self.announced.get((job, phase), (int(args[2]), self.t_alone.get(job, 0.0)))
            before = dict(self.state.counts)
            self.state.inform(job, f"job{job}", self.cores[job], size, seconds, now)
            kind = next((k for k in ("interrupts", "queued", "shared") if self.state.counts[k] > before[k]), "alone")
            self.decisions.append({"job": job, "phase": phase, "at": now, "bytes": size, "seconds": seconds,
                                   "decision": kind, "order": [p.name for p in self.state.order],
                                   "writing": self.state.writing})
        elif verb == "RELEASE":
            self.state.release(job, int(args[1]), now)
        elif verb == "DONE":
            self.state.finish(job)
        else:
            raise ValueError(f"unknown request from the engine: {line.strip()!r}")
        waiting = [p.name.removeprefix("job") for p in self.state.order if not self.state.writes(p)]
        return " ".join(["WAITING", *waiting])


@dataclass(frozen=True)
class Scenario:
    """Two jobs of `ranks` ranks each running ioloom bench io options `bench`, on nodes of their own, every file
    striped over all the platform's targets (so the jobs share the storage)."""
    platform: Platform
    ranks: tuple[int, int]
    bench: tuple[str, str]
    ranks_per_node: int = 16

    def job(self, i: int) -> workload.Workload:
        first_node = 0 if i == 0 else -(-self.ranks[0] // self.ranks_per_node)
        return workload.bench_job(self.platform, workload.parse_bench_args(self.bench[i]), self.ranks[i],
                                  self.ranks_per_node, first_node=first_node, first_file=1_000_000 * i,
                                  stripe_count=-1)

    def phase_time(self, outcome: engine.Outcome, job: int) -> float:
        return results.job_document(outcome, job)["phases"][0]["time"]["total"]["max"]

    def alone(self) -> tuple[float, float]:
        return self.phase_time(engine.run(self.platform, self.job(0)), 0), \
            self.phase_time(engine.run(self.platform, self.job(1)), 0)

    def pair(self, dt: float, policy: Policy | None, t_alone: tuple[float, float]) -> tuple[float, float, list]:
        """A at max(0, -dt), B at max(0, dt): each one's phase time and the coordinator's decisions."""
        both = workload.combine([self.job(0), self.job(1)], [max(0.0, -dt), max(0.0, dt)])
        coordinator = PhaseCoordinator(policy, list(self.ranks), dict(enumerate(t_alone))) if policy else None
        outcome = engine.run(self.platform, both, coordinator=coordinator)
        return self.phase_time(outcome, 0), self.phase_time(outcome, 1), coordinator.decisions if coordinator else []


def sweep(s: Scenario, points: int, metric: str = "core-seconds", min_gain: float = MIN_GAIN) -> dict:
    """The Δ-graph rows of `s`: per dt and policy, I_A, I_B, f / f_none and B's announcement's decision."""
    t_a, t_b = s.alone()
    rows = []
    for dt in offsets(t_a, t_b, points):
        none = None
        for name in ("none", *COORDINATED):
            policy = None if name == "none" else Policy(name, metric, min_gain)
            a, b, decisions = s.pair(dt, policy, (t_a, t_b))
            f = s.ranks[0] * a + s.ranks[1] * b
            none = none or f
            second = decisions[-1]["decision"] if len(decisions) > 1 else "-"
            rows.append({"dt": dt, "policy": name, "t_a": a, "t_b": b, "i_a": a / t_a, "i_b": b / t_b,
                         "f_ratio": f / none, "second": second})
    return {"ranks": list(s.ranks), "bench": list(s.bench), "t_alone": [t_a, t_b], "metric": metric,
            "min_gain": min_gain, "rows": rows}


def plot(report: dict, path: Path) -> None:
    """The Δ-graphs on bench coord's page."""
    plot_rows([{**r, "pair": f"{report['ranks'][0]} + {report['ranks'][1]} ranks"} for r in report["rows"]], path)


def plot_rows(rows: list[dict], path: Path) -> None:
    """Rows of simulated runs (pair: the panel, dt, policy, i_a, i_b) as Δ-graphs on bench coord's page (one run
    per point: each median is that run)."""
    from ioloom.bench.coord import plot_html
    runs = [{"pair": r["pair"], "dt": r["dt"], "policy": r["policy"], "dt_reached": {"median": r["dt"]},
             "i_a": {"median": r["i_a"]}, "i_b": {"median": r["i_b"]}} for r in rows]
    plot_html({"rows": runs, "options": {"program": "ioloom sim", "storage": "simulated"}}, path)


def publish(report: dict, output: Path | None, plot_page: Callable[[dict, Path], None], as_json: bool) -> bool:
    """coord.json and the Δ-graphs page (`plot_page`) into `output` when given, and the report printed as JSON when
    asked: True when it was (the caller prints nothing else)."""
    if output:
        outputs.save_json(report, output / "coord.json")
        plot_page(report, output / "coord.html")
    if as_json:
        print(json.dumps(report, indent=1))
    return as_json


def scenario_platform(path: str | None, targets: int, nodes: int) -> Platform:
    """The platform file's (default: `nodes` client nodes, one server of `targets` targets of 100 MB/s), written
    through (a write returns when its data is on the targets, so a phase's writes are its storage time)."""
    p = load(path) if path else from_dict({"clients": {"nodes": nodes}, "servers": {"count": 1},
                                           "targets": {"count": targets, "write_bandwidth": 1e8}})
    p.values["cache.dirty_limit"] = 0
    return p


def main(ranks_a: int, ranks_b: int, bench_a: str, bench_b: str, points: int, metric: str, min_gain: float,
         targets: int, platform: str | None, ranks_per_node: int, output: Path | None, as_json: bool,
         traces: tuple[Path, Path] | None = None) -> None:
    """`ioloom sim coord` (its options: python/ioloom/sim/cli.py); with `traces`, two replayed traces
    (ioloom.sim.announce). Bad input is named before -o is made and anything runs, the first of: the platform,
    the jobs' ranks (without traces), the metric and least gain, the jobs' bench options (without traces); the
    traces when they are read."""
    try:
        nodes = 2 if traces else -(-ranks_a // ranks_per_node) + -(-ranks_b // ranks_per_node)
        p = scenario_platform(platform, targets, nodes)
        s = None if traces else Scenario(p, (ranks_a, ranks_b), (bench_a, bench_b), ranks_per_node)
        Policy("dynamic", metric, min_gain)
        for bench in s.bench if s else ():
            workload.parse_bench_args(bench)
    except (PlatformError, workload.WorkloadError, ValueError) as err:
        raise typer.BadParameter(str(err)) from None
    if output:
        output.mkdir(parents=True, exist_ok=True)  # a bad -o is refused before the runs, not after them
    if traces:
        from ioloom.sim import announce
        try:
            announce.main(traces, points, metric, min_gain, p, ranks_per_node, output, as_json)
        except (PlatformError, workload.WorkloadError, engine.SimError, ValueError) as err:
            raise typer.BadParameter(str(err)) from None
        return
    assert s is not None  # made above when there are no traces
    try:
        report = sweep(s, points, metric, min_gain)
    except engine.SimError as err:
        raise typer.BadParameter(str(err)) from None
    if publish(report, output, plot, as_json):
        return
    t_a, t_b = report["t_alone"]
    print(f"A: {ranks_a} ranks, {bench_a}: {t_a:.3f} s alone; B: {ranks_b} ranks, {bench_b}: {t_b:.3f} s alone")
    print(f"{'dt (s)':>8} {'policy':>9} {'I_A':>6} {'I_B':>6} {'f/f_none':>8}  the later announcement")
    for r in report["rows"]:
        print(f"{r['dt']:+8.3f} {r['policy']:>9} {r['i_a']:6.2f} {r['i_b']:6.2f} {r['f_ratio']:8.3f}  {r['second']}")
