"""Storage-target contention under random stripe placement (Wright 2014, Ch. 6, Eqs. 6.1-6.6).

Each job (or, for PLFS, each file) is given r distinct targets chosen uniformly at random out of D_total,
independently of the other jobs. Everything below follows from that one assumption.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ioloom.models import _check


@dataclass(frozen=True)
class OstLoad:
    """Eqs. 6.1-6.4 after n jobs: targets in use, stripes requested and their ratio (the mean load)."""
    jobs: int
    d_inuse: float
    d_req: int
    d_load: float


def ost_load(requests: list[int], d_total: int) -> list[OstLoad]:
    """D_inuse, D_req and D_load after each of the jobs in `requests` starts (Eqs. 6.1, 6.3, 6.4).

    Eq. 6.1: D_inuse(n) = D_inuse(n-1) + r_n - D_inuse(n-1) r_n / D_total, D_inuse(0) = 0; with equal
    requests this is the closed form Eq. 6.2, D_total - D_total (1 - R/D_total)^n.
    """
    d_total = _check.count("targets", d_total)
    if not requests:
        raise ValueError("requests must name at least one job's stripe count")
    rows, in_use, req = [], 0.0, 0
    for j, r in enumerate(requests, start=1):
        r = _check.stripe_request(f"stripe request of job {j}", r, d_total)
        in_use = in_use + r - in_use / d_total * r
        req += r
        rows.append(OstLoad(j, in_use, req, req / in_use))
    return rows


def d_inuse_equal(stripes: int, jobs: int, d_total: int) -> float:
    """Eq. 6.2: targets in use when `jobs` jobs each ask for `stripes` targets."""
    d_total = _check.count("targets", d_total)
    stripes = _check.stripe_request("stripes", stripes, d_total)
    jobs = _check.count("jobs", jobs, minimum=0)
    return d_total - d_total * (1.0 - stripes / d_total) ** jobs


def sharing_distribution(requests: list[int], d_total: int) -> np.ndarray:
    """Expected number of targets shared by exactly k of the jobs, for k = 0..n (index k).

    A target is picked by job j with probability p_j = r_j / D_total, independently across jobs, so the
    number of jobs on one target is Poisson-binomial; with equal requests it is binomial and the count is
    D_total C(n,k) p^k (1-p)^(n-k). Entry 0 is D_total - D_inuse (Eq. 6.1).
    """
    d_total = _check.count("targets", d_total)
    dist = np.array([1.0])
    for j, r in enumerate(requests, start=1):
        p = _check.stripe_request(f"stripe request of job {j}", r, d_total) / d_total
        dist = np.append(dist * (1 - p), 0.0) + np.append(0.0, dist * p)
    return d_total * dist


def expected_max_load(requests: list[int], d_total: int) -> float:
    """Expected number of jobs on the most loaded target.

    Treats the D_total per-target counts as independent draws of the distribution above (they are in fact
    slightly negatively correlated, because each job's r_j targets are distinct), so
    E[max] = sum_{m>=1} (1 - F(m-1)^D_total) with F the per-target cumulative distribution.
    """
    d_total = _check.count("targets", d_total)
    per_target = sharing_distribution(requests, d_total) / d_total
    cdf = np.clip(np.cumsum(per_target), 0.0, 1.0)
    return float(sum(1.0 - cdf[m - 1] ** d_total for m in range(1, len(per_target))))


def plfs_load(ranks: int, d_total: int, files_per_rank: int = 1, stripes_per_file: int = 2) -> OstLoad:
    """Eqs. 6.5-6.6: PLFS writes one data file per rank (default two 1 MB stripes), each placed at random.

    Wright treats each rank as a task with R = 2; for f files per rank of s stripes each, every file is a
    task with R = s and there are n f of them: D_inuse = D_total - D_total (1 - s/D_total)^(n f),
    D_load = s n f / D_inuse.
    """
    ranks = _check.count("ranks", ranks)
    files_per_rank = _check.count("files_per_rank", files_per_rank)
    tasks = ranks * files_per_rank
    in_use = d_inuse_equal(stripes_per_file, tasks, d_total)
    req = stripes_per_file * tasks
    return OstLoad(tasks, in_use, req, req / in_use)


def plfs_tipping_point(load: float, d_total: int, files_per_rank: int = 1, stripes_per_file: int = 2) -> int:
    """The smallest rank count whose PLFS load (Eq. 6.6) exceeds `load` on `d_total` targets.

    D_load grows with n and tends to s n f / D_total, so the answer exists for any load >= 1 and lies below
    load D_total / (s f) + D_total; found by bisection.
    """
    load = _check.positive("load", load)
    if load < 1:
        raise ValueError(f"load must be >= 1 (one stripe per target is the least possible load), got {load}")
    lo, hi = 1, math.ceil(load * d_total / (stripes_per_file * files_per_rank)) + d_total
    if plfs_load(lo, d_total, files_per_rank, stripes_per_file).d_load > load:
        return lo
    while hi - lo > 1:  # invariant: load(lo) <= load < load(hi)
        mid = (lo + hi) // 2
        if plfs_load(mid, d_total, files_per_rank, stripes_per_file).d_load > load:
            hi = mid
        else:
            lo = mid
    return hi
