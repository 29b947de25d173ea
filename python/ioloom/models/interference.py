"""Cross-application I/O interference (Dorier 2014, Ch. 6): how often it happens, how much it costs two
applications that share bandwidth, and CALCioM's choice between interfering, serialising and interrupting."""
from __future__ import annotations

from dataclasses import dataclass
from math import comb

from ioloom.models import _check


def p_concurrent_io(job_counts: dict[int, float], mean_io_fraction: float) -> float:
    """Eq. 6.2: P(Y > 1), the probability that two or more applications are in an I/O phase at once.

    `job_counts` maps n (applications running) to P(X = n), or to any non-negative weights (normalised
    here, so a histogram of observed counts works). Each application is in I/O with probability E(mu),
    independently, so P(Y = k | X = n) = C(n,k) E(mu)^k (1 - E(mu))^(n-k) (Eq. 6.1 as intended; the
    thesis prints the exponent of E(mu) as n, a typo) and
    P(Y > 1) = 1 - sum_n P(X=n) (1-E(mu))^n - sum_n P(X=n) n E(mu) (1-E(mu))^(n-1).
    """
    mu = _check.probability("mean_io_fraction", mean_io_fraction)
    if not job_counts:
        raise ValueError("job_counts must give P(X = n) for at least one n")
    for n, w in job_counts.items():
        _check.count("job count n", n, minimum=0)
        _check.positive(f"weight of n={n}", w, allow_zero=True)
    total = sum(job_counts.values())
    if total <= 0:
        raise ValueError("job_counts weights must not all be zero")
    return sum(w / total * p_at_least_two(n, mu) for n, w in job_counts.items())


def concurrency_from_swf(path) -> dict[int, float]:
    """P(X = n), the fraction of time n jobs run at once, from a Standard Workload Format log (Parallel
    Workloads Archive; D Fig. 6.1(b) uses ANL-Intrepid-2009-1.swf). Fields used: 2 submit time, 3 wait time,
    4 run time (seconds); a job runs from submit + wait to that plus its run time. Jobs with an unknown
    (negative) wait or run time are skipped; ';' starts a comment."""
    edges = []
    with open(path) as f:
        for line_no, line in enumerate(f, start=1):
            fields = line.split(";", 1)[0].split()
            if not fields:
                continue
            try:
                submit, wait, run = float(fields[1]), float(fields[2]), float(fields[3])
            except (IndexError, ValueError):
                raise ValueError(f"{path}:{line_no}: not an SWF job line (need submit, wait and run time "
                                 f"in fields 2-4)") from None
            if wait >= 0 and run > 0:
                edges += [(submit + wait, 1), (submit + wait + run, -1)]
    if not edges:
        raise ValueError(f"{path}: no job with a known start and run time")
    edges.sort()
    time_at: dict[int, float] = {}
    running, last = 0, edges[0][0]
    for t, step in edges:
        time_at[running] = time_at.get(running, 0.0) + t - last
        running, last = running + step, t
    total = sum(time_at.values())
    return {n: d / total for n, d in sorted(time_at.items()) if d > 0}


def p_in_io(k: int, n: int, mean_io_fraction: float) -> float:
    """Eq. 6.1 (corrected): P(Y = k | X = n) = C(n,k) E(mu)^k (1 - E(mu))^(n-k)."""
    mu = _check.probability("mean_io_fraction", mean_io_fraction)
    return comb(n, k) * mu ** k * (1 - mu) ** (n - k) if 0 <= k <= n else 0.0


def p_at_least_two(n: int, mu: float) -> float:
    """P(Y > 1 | X = n) = 1 - P(Y = 0 | n) - P(Y = 1 | n)."""
    return 1.0 - p_in_io(0, n, mu) - p_in_io(1, n, mu)


@dataclass(frozen=True)
class SharedRun:
    """Observed I/O times of A and B and their interference factors I = T / T_alone."""
    dt: float
    t_a: float
    t_b: float
    i_a: float
    i_b: float


def proportional_sharing(t_a: float, t_b: float, dt: float, w_a: float = 1.0, w_b: float = 1.0) -> SharedRun:
    """One point of the Δ-graph: A starts its I/O phase at 0, B at dt; while both are active A gets the
    fraction w_a / (w_a + w_b) of the bandwidth and B the rest; alone, each gets all of it.

    With equal weights and T_A = T_B = T this gives I = 2 - |dt|/T for |dt| < T (Dorier Sec. 6.1.2).
    """
    t_a, t_b = _check.positive("t_a", t_a), _check.positive("t_b", t_b)
    w_a, w_b = _check.positive("w_a", w_a), _check.positive("w_b", w_b)
    if dt < 0:  # the Δ-graph of (A, B) is the mirror of that of (B, A)
        m = proportional_sharing(t_b, t_a, -dt, w_b, w_a)
        return SharedRun(dt, m.t_b, m.t_a, m.i_b, m.i_a)
    if dt >= t_a:
        return SharedRun(dt, t_a, t_b, 1.0, 1.0)
    left_a, share_a = t_a - dt, w_a / (w_a + w_b)
    finish_a, finish_b = left_a / share_a, t_b / (1 - share_a)  # durations of the overlap if both stayed
    if finish_a <= finish_b:  # A finishes inside the overlap, B then runs alone
        end_a = dt + finish_a
        end_b = end_a + t_b - finish_a * (1 - share_a)
    else:
        end_b = dt + finish_b
        end_a = end_b + left_a - finish_b * share_a
    return SharedRun(dt, end_a, end_b - dt, end_a / t_a, (end_b - dt) / t_b)


def delta_graph(t_a: float, t_b: float, w_a: float = 1.0, w_b: float = 1.0, points: int = 21) -> list[SharedRun]:
    """The Δ-graph under proportional sharing: `points` values of dt evenly spread over [-T_B, T_A]."""
    points = _check.count("points", points, minimum=2)
    step = (t_a + t_b) / (points - 1)
    return [proportional_sharing(t_a, t_b, -t_b + i * step, w_a, w_b) for i in range(points)]


@dataclass(frozen=True)
class Pending:
    """An I/O phase as a scheduler sees it: `cores` running the application, `t_alone` the whole phase's time
    alone, `remaining` the alone time it still needs, `elapsed` the time since it was announced, `storage` the
    fraction of its time alone that is the storage's (its bytes at the whole bandwidth; the rest is the
    program's own, copies and computation between writes, which no other phase slows)."""
    cores: int
    t_alone: float
    remaining: float
    elapsed: float = 0.0
    storage: float = 1.0

    def __post_init__(self) -> None:
        assert 0 < self.storage <= 1, "a phase writes something: its storage part is a fraction in (0, 1]"


METRICS = ("core-seconds", "factors")


def phase_cost(cores: int, t_alone: float, observed: float, metric: str) -> float:
    """One application's term of f: N_X T_X (core-seconds, Eq. 6.4) or I_X = T_X / T_X(alone) (factors)."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    return cores * observed if metric == "core-seconds" else observed / t_alone


def speeds(group: list[Pending]) -> list[float]:
    """How fast each phase of `group` progresses (1: as alone) while all write at once: phase X asks for the
    fraction `storage` of the bandwidth it would use alone, and the bandwidth is shared in proportion to the
    cores, a phase asking less than its share leaving the rest to the others (weighted max-min fairness). When
    every phase's time is all storage's this is Sec. 6.1.2's proportional sharing, for any number of phases."""
    alloc, unmet, free = [0.0] * len(group), set(range(len(group))), 1.0
    while unmet:
        weight = sum(group[i].cores for i in unmet)
        met = {i for i in unmet if group[i].storage <= free * group[i].cores / weight}
        if not met:
            for i in unmet:
                alloc[i] = free * group[i].cores / weight
            break
        for i in met:
            alloc[i] = group[i].storage
            free -= group[i].storage
        unmet -= met
    return [a / p.storage for a, p in zip(alloc, group)]


def shared_ends(group: list[Pending]) -> list[float]:
    """When each phase of `group` ends if all of them write from now on at once, each at its speed (speeds)
    until the first of them is done, then the others at their new speeds."""
    left = [p.remaining for p in group]
    ends = [0.0] * len(group)
    active, clock = [i for i, r in enumerate(left) if r > 0], 0.0
    while active:
        speed = dict(zip(active, speeds([group[i] for i in active])))
        first = min(active, key=lambda i: left[i] / speed[i])
        step = left[first] / speed[first]  # until the first of them is done
        clock += step
        for i in active:
            left[i] -= step * speed[i]
        left[first] = 0.0
        for i in active:
            ends[i] = clock
        active = [i for i in active if left[i] > 1e-12 * group[i].t_alone]
    return ends


def sharing_cost(order: list[Pending], writing: int, metric: str = "core-seconds") -> float:
    """f when the first `writing` phases of `order` write at once (shared_ends) and the others then write one
    after the other at the whole bandwidth; a phase's observed time is its elapsed time plus when it ends."""
    assert 1 <= writing or not order, "a non-empty order has at least one phase writing"
    ends = shared_ends(order[:writing])
    total = sum(phase_cost(p.cores, p.t_alone, p.elapsed + end, metric) for p, end in zip(order, ends))
    clock = max(ends, default=0.0)
    for p in order[writing:]:
        clock += p.remaining
        total += phase_cost(p.cores, p.t_alone, p.elapsed + clock, metric)
    return total


def serial_cost(order: list[Pending], metric: str = "core-seconds") -> float:
    """f when the phases write one after the other in `order`, each at the whole bandwidth: phase k's observed
    time is its elapsed time plus the remaining times of phases 0..k (Eq. 6.4 is the case of two phases: FCFS is
    [A, B], interruption [B, A], with A's elapsed and B's waiting time counted)."""
    return sharing_cost(order, 1, metric)


@dataclass(frozen=True)
class Choice:
    """Machine time wasted in I/O for each policy, by `metric`: f = sum_X N_X T_X (core-seconds) or the sum of
    interference factors sum_X I_X (factors), and the least."""
    dt: float
    interfere: float
    serialise: float
    interrupt: float
    best: str
    reason: str


def calciom_choice(n_a: int, t_a: float, n_b: int, t_b: float, dt: float, metric: str = "core-seconds") -> Choice:
    """CALCioM's choice for A (N_A cores, T_A alone) and B arriving dt later (Dorier Eqs. 6.4-6.5).

    serialise (first come, first served): f = N_A T_A + N_B (T_A + T_B - dt);
    interrupt (the first is paused until the second is done): f = N_A (T_A + T_B) + N_B T_B;
    interfere: proportional sharing weighted by core counts (see proportional_sharing).
    For dt < 0 the roles swap. With no overlap (dt >= T_A) all three cost N_A T_A + N_B T_B.
    With metric="factors", f = I_A + I_B: interrupt iff dt < T_A - T_B^2 / T_A.
    """
    n_a, n_b = _check.count("n_a", n_a), _check.count("n_b", n_b)
    t_a, t_b = _check.positive("t_a", t_a), _check.positive("t_b", t_b)
    if dt < 0:
        c = calciom_choice(n_b, t_b, n_a, t_a, -dt, metric)
        return Choice(dt, c.interfere, c.serialise, c.interrupt, c.best, c.reason)
    run = proportional_sharing(t_a, t_b, dt, n_a, n_b)
    costs = {"interfere": phase_cost(n_a, t_a, run.t_a, metric) + phase_cost(n_b, t_b, run.t_b, metric)}
    a = Pending(n_a, t_a, max(t_a - dt, 0.0), elapsed=min(dt, t_a))
    b = Pending(n_b, t_b, t_b)
    costs["serialise"] = serial_cost([a, b], metric)
    costs["interrupt"] = costs["serialise"] if dt >= t_a else serial_cost([b, a], metric)
    # prefer the policy needing no coordination on ties, then the one that does not pause a running job
    best = min(("interfere", "serialise", "interrupt"), key=lambda k: costs[k])
    reasons = {
        "interfere": "the phases do not overlap or sharing wastes no more than either alternative",
        "serialise": "the first application has little left to write, so making the second wait wastes least",
        "interrupt": "pausing the first application lets the second (smaller or shorter) one finish at "
                     "once, wasting least",
    }
    return Choice(dt, costs["interfere"], costs["serialise"], costs["interrupt"], best, reasons[best])
