"""`ioloom sim sweep`: a parameter sweep (ranks x stripe count x stripe size) of one bench pattern, each point one
simulation, run on Dask: a LocalCluster of worker processes by default, a running scheduler's cluster with
`--scheduler ADDRESS`, or in this process with `--serial`. A point's result depends only on its inputs (the
platform, its seed and the pattern), never on where it ran, so every executor gives the same rows."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import product


@dataclass(frozen=True)
class Point:
    ranks: int
    stripe_count: int
    stripe_size: int


def simulate(values: dict, bench: str, ranks_per_node: int, point: Point) -> dict:
    """One point of the sweep (run on a worker): the bench document's figures that do not depend on the machine
    the simulator ran on."""
    from ioloom.sim import engine, platform, results, workload

    p = platform.Platform(dict(values))
    p.values["clients.nodes"] = max(p["clients.nodes"], -(-point.ranks // ranks_per_node))
    w = workload.bench_job(p, workload.parse_bench_args(bench), point.ranks, ranks_per_node,
                           stripe_count=point.stripe_count, stripe_size=point.stripe_size)
    o = engine.run(p, w)
    doc = results.job_document(o, 0)
    row = {"ranks": point.ranks, "stripe_count": point.stripe_count, "stripe_size": point.stripe_size,
           "simulated_time": o.simulated_time, "transfers": int(o.pieces.size)}
    for s in doc["summary"]:
        row[f"{s['op']}_effective_bw"] = s["effective_bw"]["median"]
        row[f"{s['op']}_raw_bw"] = s["raw_bw"]["median"]
    return row


def points(ranks: list[int], counts: list[int], sizes: list[int]) -> list[Point]:
    return [Point(r, c, s) for r, c, s in product(ranks, counts, sizes)]


def _serial(run: Callable[[Point], dict], todo: list[Point]) -> list[dict]:
    return [run(p) for p in todo]


def _on_dask(run: Callable[[Point], dict], todo: list[Point], scheduler: str | None, workers: int) -> list[dict]:
    from distributed import Client, LocalCluster  # imported here: only a sweep needs Dask

    from ioloom.analysis.executor import connect

    if scheduler is None:
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            return client.gather(client.map(run, todo, pure=False))
    with connect(scheduler) as client:
        return client.gather(client.map(run, todo, pure=False))


def run(values: dict, bench: str, ranks_per_node: int, todo: list[Point], scheduler: str | None = None,
        workers: int = 2, serial: bool = False) -> list[dict]:
    """Every point's row, in the order of `todo`."""
    from functools import partial

    one = partial(simulate, values, bench, ranks_per_node)
    return _serial(one, todo) if serial else _on_dask(one, todo, scheduler, workers)
