"""Simulated probe targets: one `ioloom sim` run per round measures every (sim:N target, configuration) at once,
each as its own job (its writers on nodes of their own, one file per writer striped on target N only), all
starting at the round's simulated time. A measurement's time is its job's first data call to its last end (after
fsync), as for a directory target."""
from __future__ import annotations

import numpy as np

from ioloom.probe.targets import Target, TargetError
from ioloom.sim.workload import Placement


class _On(Placement):
    """A placement that puts every file on one target."""

    def __init__(self, target: int):  # no draw to make: the parent's generator is not needed
        self.target = target

    def place(self, count: int) -> list[int]:
        return [self.target]


def _platform(plan, jobs_writers: int, at: float):
    from ioloom.sim import platform

    p = platform.load(plan.sim_platform)
    for t in plan.targets:
        if t.kind == "sim" and t.index >= p["targets.count"]:
            raise TargetError(f"target {t.name!r}: the platform has {p['targets.count']} targets (sim:0 to "
                              f"sim:{p['targets.count'] - 1})")
    p.values["clients.nodes"] = max(p["clients.nodes"], jobs_writers)
    p.values["background.horizon"] = max(p["background.horizon"], at + 2 * p["background.period"])
    return p


def measure(plan, sims: list[Target], at: float) -> dict[tuple[Target, tuple[int, int, bool]], dict]:
    """Every simulated target under every configuration of `plan`, at simulated time `at`."""
    from ioloom.sim import engine, workload
    from ioloom.sim.workload import KINDS

    cases = [(t, c) for t in sims for c in plan.configurations()]
    p = _platform(plan, sum(w for _, (_, w, _) in cases), at)
    jobs, node, file = [], 0, 0
    for number, (t, (request, writers, fsync)) in enumerate(cases):
        args = workload.parse_bench_args(f"-a posix -F -w -s 1 -b {plan.volume_for(request)} -t {request}"
                                         + (" -e" if fsync else ""))
        jobs.append(workload.bench_job(p, args, writers, 1, job=number, first_node=node, first_file=file,
                                       placement=_On(t.index), stripe_count=1))
        node, file = node + writers, file + writers
    outcome = engine.run(p, workload.combine(jobs, [at] * len(jobs)))
    ops, times = outcome.workload.ops, outcome.times
    timed = np.isin(ops["kind"], [KINDS["write"], KINDS["sync"]])
    measured = {}
    for number, case in enumerate(cases):
        mine = timed & (ops["job"] == number)
        begin, end = times[mine, 0].min(), times[mine, 1].max()
        total = float(ops["length"][mine & (ops["kind"] == KINDS["write"])].sum())
        per_rank = [times[mine & (ops["rank"] == r), 1].max() - times[mine & (ops["rank"] == r), 0].min()
                    for r in range(case[1][1])]
        measured[case] = {"bytes": int(total), "seconds": float(end - begin), "throughput": total / (end - begin),
                          "slowest_writer_seconds": float(max(per_rank))}
    return measured
