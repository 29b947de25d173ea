"""A probe campaign: rounds of measurements on a schedule (a count and an interval, so it can also run from cron
with --rounds 1), every round appended to the store as soon as it is measured.

In each round every target is measured once per (request size, writer count, fsync) in a shuffled order (seeded),
so that a trend in time does not fall on one target. Directory targets are measured for real, one after another;
simulated targets (`sim:N`) are measured together by one simulation per round, at simulated time round x interval,
so the platform's background load (docs/sim.md) is what they see.
"""
from __future__ import annotations

import itertools
import random
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ioloom.probe import store, targets
from ioloom.probe.targets import Target


@dataclass(frozen=True)
class Plan:
    targets: list[Target]
    requests: list[int]            # bytes per request
    writers: list[int]
    fsync: list[bool]
    volume: int                    # bytes per writer (at least the request)
    rounds: int
    interval: float                # seconds between the starts of two rounds
    seed: int = 1
    sim_platform: Path | None = None

    def configurations(self) -> list[tuple[int, int, bool]]:
        return list(itertools.product(self.requests, self.writers, self.fsync))

    def volume_for(self, request: int) -> int:
        return max(self.volume, request)


def campaign_id(started: float) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started)) + "-" + socket.gethostname()


def _row(plan_id: str, number: int, when_ns: int, t: Target, config: tuple[int, int, bool], measured: dict) -> dict:
    request, writers, fsync = config
    return {"campaign": plan_id, "round": number, "time_ns": when_ns, "host": socket.gethostname(),
            "target": t.name, "kind": t.kind, "request_bytes": request, "writers": writers, "fsync": fsync,
            **measured}


def _real_round(plan: Plan, plan_id: str, number: int, rng: random.Random) -> list[dict]:
    work = [(t, c) for t in plan.targets if t.kind != "sim" for c in plan.configurations()]
    rng.shuffle(work)
    rows = []
    for t, (request, writers, fsync) in work:
        when = time.time_ns()
        measured = targets.measure(t, request, writers, plan.volume_for(request), fsync)
        rows.append(_row(plan_id, number, when, t, (request, writers, fsync), measured))
    return rows


def _simulated_round(plan: Plan, plan_id: str, number: int, started: float) -> list[dict]:
    from ioloom.probe import simulated

    sims = [t for t in plan.targets if t.kind == "sim"]
    if not sims:
        return []
    at = number * plan.interval
    measured = simulated.measure(plan, sims, at)
    when = int((started + at) * 1e9)
    return [_row(plan_id, number, when, t, config, m) for (t, config), m in measured.items()]


def run(plan: Plan, out: Path, report: Callable[[int, list[dict]], None] = lambda n, rows: None) -> str:
    """Runs the campaign, appending each round to the store `out`; returns the campaign's id."""
    started = time.time()
    plan_id = campaign_id(started)
    rng = random.Random(plan.seed)
    real = any(t.kind != "sim" for t in plan.targets)
    for number in range(plan.rounds):
        if real:
            _wait_until(started + number * plan.interval)
        rows = _simulated_round(plan, plan_id, number, started) + _real_round(plan, plan_id, number, rng)
        store.append(out, plan_id, number, rows)
        report(number, rows)
    return plan_id


def _wait_until(moment: float) -> None:
    delay = moment - time.time()
    if delay > 0:
        time.sleep(delay)

