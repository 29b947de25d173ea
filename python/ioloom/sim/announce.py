"""`ioloom sim coord --trace-a DIR --trace-b DIR`: two replayed traces coordinated phase by phase, each phase
announced as a coord client using the prediction interface would announce it (docs/coord.md, "Simulated at
scale"; docs/predict.md, "Prediction interface").

Each job is a trace `ioloom run` wrote, replayed by the engine (workload.from_trace). Its I/O phases are the
prediction interface's (ioloom.sim.phases: a gap of `distant_ns` between two calls of a rank starts one), the
same operations on every clock; the k-th phase of each rank is the job's k-th phase, announced at its first write.
Alone on the platform (the job simulated first), the predictor sees each call as it ends and says at a phase's
first operation its length, its end and its bytes written; the job announces that phase with those bytes (summed
over its ranks) and the time from its first write to the predicted end (the longest rank's) as its time alone,
which is what the coordinator asks for. Oracle announcements give the true bytes and time alone of the same
simulation instead. A phase the predictor could not foretell (the first, or one met before any ended) is
announced as the preload announces a phase met for the first time: its first write's bytes and no time (the
coordinator's guess, bytes / bandwidth). The rows compare the policies' outcome under both announcements: the
cost of the prediction's errors."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ioloom.coord import offsets
from ioloom.coord.policy import Policy
from ioloom.shown import shown
from ioloom.sim import engine, workload
from ioloom.sim.coord import COORDINATED, PhaseCoordinator, plot_rows, publish
from ioloom.sim.phases import rank_phases
from ioloom.sim.platform import Platform
from ioloom.sim.workload import FILES_PER_JOB, KINDS, Workload

MODES = ("oracle", "predicted")
ANY = "any"  # the announcement of a policy whose places do not depend on estimates (fcfs, interrupt): run once


@dataclass(frozen=True)
class Announcement:
    """One job's phase as announced: its true operations (summed over ranks), bytes written and time alone (from
    its first write to its end, the longest rank's), and what the predictor said of each at the phase's first
    operation (None: not foretold)."""
    job: int
    phase: int
    operations: int
    written: int
    t_alone: float
    predicted_operations: int | None
    predicted_written: int | None
    predicted_t_alone: float | None
    first_write: int  # bytes of each rank's first write, summed: what a phase not foretold announces

    def said(self, mode: str) -> tuple[int, float]:
        """(bytes, seconds alone) the job announces; seconds 0: none (the coordinator guesses)."""
        if mode == "oracle":
            return self.written, self.t_alone
        if self.predicted_written is None or self.predicted_t_alone is None:
            return self.first_write, 0.0
        return self.predicted_written, self.predicted_t_alone

    @property
    def verdict(self) -> str:
        """'not foretold', 'exact' (length and bytes right, time within 1%), or what was wrong."""
        if self.predicted_operations is None or self.predicted_t_alone is None:
            return "not foretold"
        wrong = [name for name, ok in (("length", self.predicted_operations == self.operations),
                                       ("bytes", self.predicted_written == self.written),
                                       ("time", abs(self.predicted_t_alone - self.t_alone) <= 0.01 * self.t_alone))
                 if not ok]
        return "exact" if not wrong else "mispredicted " + ", ".join(wrong)


def announcements(job: int, w: Workload, times: np.ndarray) -> tuple[np.ndarray, list[Announcement]]:
    """Job `job`'s phase of each operation (int32, -1 none) and its phases that write, announced, from its
    simulation alone (`times`: per operation, start and end)."""
    numbers = np.full(w.ops.size, -1, dtype=np.int32)
    per_phase: dict[int, list[dict]] = {}
    for rows, phases in rank_phases(w, times):
        for k, p in enumerate(phases):
            mine = rows[p.first:p.first + p.operations]
            numbers[mine] = k
            writes = mine[w.ops["kind"][mine] == KINDS["write"]]
            if writes.size:
                per_phase.setdefault(k, []).append(_rank_share(p, times, writes, int(w.ops["length"][writes[0]])))
    return numbers, [_announcement(job, k, shares) for k, shares in sorted(per_phase.items())]


def _rank_share(p, times: np.ndarray, writes: np.ndarray, first_write: int) -> dict:
    start = float(times[writes[0], 0])
    predicted = None if p.predicted_end_ns is None else max(0.0, p.predicted_end_ns / 1e9 - start)
    return {"operations": p.operations, "written": p.written, "t_alone": float(p.end_ns / 1e9 - start),
            "predicted_operations": p.predicted_operations, "predicted_written": p.predicted_written,
            "predicted_t_alone": predicted or None, "first_write": first_write}


def _announcement(job: int, k: int, shares: list[dict]) -> Announcement:
    """A job's phase from its ranks' shares: bytes summed, the longest time (as coord's State joins members)."""
    def summed(key: str):
        values = [s[key] for s in shares]
        return None if None in values else sum(values)

    def longest(key: str):
        values = [s[key] for s in shares]
        return None if None in values else max(values)
    return Announcement(job, k, summed("operations"), summed("written"), longest("t_alone"),
                        summed("predicted_operations"), summed("predicted_written"), longest("predicted_t_alone"),
                        summed("first_write"))


@dataclass
class TraceScenario:
    """Two replayed traces, each on nodes of its own, every file striped over all the platform's targets."""
    platform: Platform
    traces: tuple[Path, Path]
    ranks_per_node: int | None = None

    def __post_init__(self) -> None:
        self.jobs = [self.job(t) for t in self.traces]
        self.platform.values["clients.nodes"] = max(self.platform["clients.nodes"], self.nodes)  # nodes of their own
        self.alone_times = [engine.run(self.platform, w).times for w in self.jobs]
        found = [announcements(i, w, t) for i, (w, t) in enumerate(zip(self.jobs, self.alone_times))]
        self.numbers = np.concatenate([n for n, _ in found])
        self.announced = {(a.job, a.phase): a for _, listed in found for a in listed}
        self.placed = self._placed()

    def job(self, trace: Path) -> Workload:
        """The trace's run as one job, every file striped over all the platform's targets."""
        return workload.from_trace(self.platform, trace, self.ranks_per_node, stripe_count=-1)

    def _placed(self) -> list[Workload]:
        """The jobs side by side: B on the nodes after A's, its files numbered apart from A's."""
        a, b = self.jobs
        _, n, rpn, _ = b.jobs[0]
        ops = b.ops.copy()
        ops["file"] += FILES_PER_JOB
        return [a, dataclasses.replace(b, ops=ops, layouts={f + FILES_PER_JOB: v for f, v in b.layouts.items()},
                                       jobs=[(0.0, n, rpn, self.nodes - -(-n // rpn))])]

    @property
    def ranks(self) -> tuple[int, int]:
        return self.jobs[0].jobs[0][1], self.jobs[1].jobs[0][1]

    @property
    def nodes(self) -> int:
        return sum(-(-n // rpn) for w in self.jobs for _, n, rpn, _ in w.jobs)

    def alone(self) -> tuple[float, float]:
        """Each job's run alone: its last operation's end."""
        return float(self.alone_times[0][:, 1].max()), float(self.alone_times[1][:, 1].max())

    def pair(self, dt: float, policy: Policy | None, mode: str) -> tuple[float, float, list]:
        """A at max(0, -dt), B at max(0, dt): each one's run time and the coordinator's decisions."""
        starts = [max(0.0, -dt), max(0.0, dt)]
        both = workload.combine(self.placed, starts)
        if policy is None:
            outcome, decisions = engine.run(self.platform, both), []
        else:
            said = {key: a.said(mode) for key, a in self.announced.items()}
            bandwidth = self.platform["targets.count"] * self.platform["targets.write_bandwidth"]
            coordinator = PhaseCoordinator(policy, list(self.ranks), {}, bandwidth, announced=said)
            outcome = engine.run(self.platform, both, coordinator=coordinator, phases=self.numbers)
            decisions = coordinator.decisions
        ends = [float(outcome.times[both.ops["job"] == j, 1].max()) - starts[j] for j in range(2)]
        return ends[0], ends[1], decisions


def unlike(decisions: list[dict], oracle: list[dict]) -> int:
    """Announcements decided otherwise than under oracle announcements (by job and phase)."""
    theirs = {(d["job"], d["phase"]): d["decision"] for d in oracle}
    return sum(theirs.get((d["job"], d["phase"])) != d["decision"] for d in decisions) + \
        len(set(theirs) - {(d["job"], d["phase"]) for d in decisions})


def sweep(s: TraceScenario, points: int, metric: str, min_gain: float) -> dict:
    """Per dt in [-T_B, T_A] (whole runs alone), uncoordinated, then each policy under oracle and predicted
    announcements: I_A, I_B, f / f_none and the announcements decided otherwise than under oracle ones. A policy
    whose places do not depend on the estimates (`Policy.revises` false: fcfs, interrupt) decides alike under
    both: it runs once, its announcements `any`."""
    t_a, t_b = s.alone()
    rows = []
    for dt in offsets(t_a, t_b, points):
        a, b, _ = s.pair(dt, None, "oracle")
        none = s.ranks[0] * a + s.ranks[1] * b
        rows.append(_row(dt, "none", "-", a, b, (t_a, t_b), none, s.ranks, None))
        for policy in (Policy(name, metric, min_gain) for name in COORDINATED):
            oracle: list[dict] = []
            for mode in MODES if policy.revises else (ANY,):
                a, b, decisions = s.pair(dt, policy, "oracle" if mode == ANY else mode)
                oracle = oracle or decisions
                rows.append(_row(dt, policy.name, mode, a, b, (t_a, t_b), none, s.ranks, unlike(decisions, oracle)))
    return {"traces": [str(t) for t in s.traces], "ranks": list(s.ranks), "t_alone": [t_a, t_b], "metric": metric,
            "min_gain": min_gain, "announcements": [dataclasses.asdict(a) | {"verdict": a.verdict}
                                                    for a in s.announced.values()], "rows": rows}


def _row(dt: float, policy: str, mode: str, a: float, b: float, alone: tuple[float, float], none: float,
         ranks: tuple[int, int], unlike_oracle: int | None) -> dict:
    f = ranks[0] * a + ranks[1] * b
    return {"dt": dt, "policy": policy, "announce": mode, "t_a": a, "t_b": b, "i_a": a / alone[0],
            "i_b": b / alone[1], "f_ratio": f / none, "unlike_oracle": unlike_oracle}


def print_report(report: dict) -> None:
    """The text of `ioloom sim coord --trace-a --trace-b`."""
    t_a, t_b = report["t_alone"]
    print(f"A: {report['traces'][0]} ({report['ranks'][0]} ranks): {t_a:.4f} s alone; B: {report['traces'][1]} "
          f"({report['ranks'][1]} ranks): {t_b:.4f} s alone")
    print("announced phases (alone; predicted at each phase's first operation, beside the actual):")
    print(f"  {'job':>3} {'phase':>5} {'ops':>6} {'predicted':>9} {'MiB written':>11} {'predicted':>9} "
          f"{'t_alone s':>10} {'predicted':>10}  verdict")
    for a in report["announcements"]:
        print(f"  {'AB'[a['job']]:>3} {a['phase']:>5} {a['operations']:>6,} {shown(a['predicted_operations']):>9} "
              f"{a['written'] / 2**20:>11.3f} {shown(a['predicted_written'], '.3f', 2**20):>9} {a['t_alone']:>10.6f} "
              f"{shown(a['predicted_t_alone'], '.6f'):>10}  {a['verdict']}")
    print(f"{'dt (s)':>8} {'policy':>9} {'announce':>9} {'I_A':>6} {'I_B':>6} {'f/f_none':>8}  decided unlike oracle")
    for r in report["rows"]:
        print(f"{r['dt']:+8.4f} {r['policy']:>9} {r['announce']:>9} {r['i_a']:6.3f} {r['i_b']:6.3f} "
              f"{r['f_ratio']:8.3f}  {shown(r['unlike_oracle'])}")


def plot(report: dict, path: Path) -> None:
    """The Δ-graphs, a panel per kind of announcement (each beside the uncoordinated runs and the policies that
    do not depend on announcements)."""
    rows = [{**r, "pair": f"{mode} announcements"} for mode in MODES for r in report["rows"]
            if r["announce"] in ("-", ANY, mode)]
    plot_rows(rows, path)


def main(traces: tuple[Path, Path], points: int, metric: str, min_gain: float, platform: Platform,
         ranks_per_node: int, output: Path | None, as_json: bool) -> None:
    """`ioloom sim coord --trace-a --trace-b` (its options: python/ioloom/sim/cli.py; sim.coord.main checked the
    platform and policy and made `output`); bad traces raise WorkloadError or SimError with the message to
    print."""
    report = sweep(TraceScenario(platform, traces, ranks_per_node), points, metric, min_gain)
    if not publish(report, output, plot, as_json):
        print_report(report)
