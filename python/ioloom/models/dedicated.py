"""Dedicated I/O resources: Damaris's break-even (Dorier 2014, Eq. 3.2) and the energy model (Eqs. 5.1-5.4)."""
from __future__ import annotations

from dataclasses import dataclass

from ioloom.models import _check


@dataclass(frozen=True)
class DedicatedCore:
    """Per-iteration times with and without one dedicated I/O core per node, and the verdict."""
    standard: float          # W_std + C_std
    dedicated: float         # max(C_ded, W_ded), C_ded = C_std N / (N - 1)
    gain: float              # standard - dedicated (seconds per iteration; negative: a loss)
    speedup: float           # standard / dedicated
    break_even_ratio: float  # W_std / C_std above which a dedicated core pays off when W_ded is hidden
    worthwhile: bool
    reason: str


def dedicated_core(compute: float, write: float, cores_per_node: int, write_dedicated: float | None = None
                   ) -> DedicatedCore:
    """Eq. 3.2: a dedicated core pays off when W_std + C_std > max(C_ded, W_ded).

    Assumes perfect scaling within a node (C_ded = N/(N-1) C_std) and that copying into shared memory costs
    the simulation nothing. W_ded, the time the dedicated core needs to write one iteration's data, defaults
    to W_std (it writes the same bytes). With W_ded hidden the condition is W_std / C_std > 1/(N-1): the
    thesis's "p = 100/(N-1) percent of its time" is this ratio of write to compute time.
    """
    c = _check.positive("compute", compute)
    w = _check.positive("write", write, allow_zero=True)
    n = _check.count("cores_per_node", cores_per_node, minimum=2)
    w_ded = w if write_dedicated is None else _check.positive("write_dedicated", write_dedicated, allow_zero=True)
    standard, c_ded = w + c, c * n / (n - 1)
    dedicated = max(c_ded, w_ded)
    worthwhile = standard > dedicated
    if worthwhile and w_ded > c_ded:
        reason = (f"the dedicated core's writes ({w_ded:g} s per iteration) set the pace, still shorter than the "
                  f"{standard:g} s an iteration takes now")
    elif worthwhile:
        reason = (f"writing takes {w / c:.1%} of compute time, above the break-even 1/(N-1) = {1 / (n - 1):.1%}, "
                  f"and the dedicated core finishes its writes within an iteration")
    elif w_ded >= c_ded and w_ded >= standard:
        reason = (f"the dedicated core needs {w_ded:g} s per iteration to write, longer than the "
                  f"{standard:g} s an iteration takes now, so it would become the bottleneck")
    else:
        reason = (f"writing takes {w / c:.1%} of compute time, below the break-even 1/(N-1) = {1 / (n - 1):.1%}: "
                  f"losing one of {n} cores to I/O costs more than the writes it hides")
    return DedicatedCore(standard, dedicated, standard - dedicated, standard / dedicated, 1 / (n - 1),
                         worthwhile, reason)


def sim_time(t_base: float, iterations: int, cores: int, nodes: int, s_core: float = 1.0, s_node: float = 1.0
             ) -> float:
    """Eq. 5.2: T_sim = T_base n_iter / ((n_core s_core(n_core)) (n_nodes s_node(n_nodes))).

    s_core and s_node are the measured efficiencies (0, 1] at these counts; 1 is perfect scaling.
    """
    t_base = _check.positive("t_base", t_base)
    iterations = _check.count("iterations", iterations)
    cores, nodes = _check.count("cores", cores), _check.count("nodes", nodes)
    for name, s in (("s_core", s_core), ("s_node", s_node)):
        if not 0 < _check.positive(name, s) <= 1:
            raise ValueError(f"{name} must be an efficiency in (0, 1], got {s}")
    return t_base * iterations / ((cores * s_core) * (nodes * s_node))


def dedicated_nodes_power(compute_nodes: int, dedicated_nodes: int, p_max: float, p_idle: float) -> float:
    """Eq. 5.3: P_sim = (c P_max + d (P_idle + P_max)/2) / (c + d): a dedicated node draws the mean of idle
    and full power."""
    c = _check.count("compute_nodes", compute_nodes)
    d = _check.count("dedicated_nodes", dedicated_nodes, minimum=0)
    p_max, p_idle = _check.positive("p_max", p_max), _check.positive("p_idle", p_idle, allow_zero=True)
    if p_idle > p_max:
        raise ValueError(f"p_idle ({p_idle}) must not exceed p_max ({p_max})")
    return (c * p_max + 0.5 * (p_idle + p_max) * d) / (c + d)


@dataclass(frozen=True)
class Energy:
    """Eq. 5.1 for one configuration: E = T_sim P_sim (P_sim per node, so times the node count)."""
    approach: str
    t_sim: float
    p_sim: float
    nodes: int
    energy: float


def energy(approach: str, t_base: float, iterations: int, cores_per_node: int, nodes: int, p_max: float,
           p_idle: float, *, dedicated: int = 1, io_time: float = 0.0, s_core: float = 1.0, s_node: float = 1.0
           ) -> Energy:
    """Energy of the run under one of three approaches (Eqs. 5.1-5.4), in joules when powers are in watts.

    time-partitioning: every core computes, then all wait for the I/O; T_sim = Eq. 5.2 + io_time (the total
      time the simulation spends in I/O phases, which the thesis does not model: our addition), P = P_max.
    dedicated-cores: `dedicated` cores per node do I/O, T_sim = Eq. 5.2 with n_core - dedicated, P = P_max
      (Eq. 5.4).
    dedicated-nodes: `dedicated` of the `nodes` do I/O, T_sim = Eq. 5.2 over the others, P from Eq. 5.3.
    E = T_sim P_sim times the node count, P_sim being per node.
    """
    nodes = _check.count("nodes", nodes)
    io_time = _check.positive("io_time", io_time, allow_zero=True)
    if approach == "time-partitioning":
        t = sim_time(t_base, iterations, cores_per_node, nodes, s_core, s_node) + io_time
        p = _check.positive("p_max", p_max)
    elif approach == "dedicated-cores":
        d = _check.count("dedicated", dedicated)
        if d >= cores_per_node:
            raise ValueError(f"dedicated={d} leaves no compute core out of cores_per_node={cores_per_node}")
        t = sim_time(t_base, iterations, cores_per_node - d, nodes, s_core, s_node)
        p = _check.positive("p_max", p_max)
    elif approach == "dedicated-nodes":
        d = _check.count("dedicated", dedicated)
        if d >= nodes:
            raise ValueError(f"dedicated={d} leaves no compute node out of nodes={nodes}")
        t = sim_time(t_base, iterations, cores_per_node, nodes - d, s_core, s_node)
        p = dedicated_nodes_power(nodes - d, d, p_max, p_idle)
    else:
        raise ValueError(f"approach must be one of {', '.join(APPROACHES)}, got {approach!r}")
    return Energy(approach, t, p, nodes, t * p * nodes)


APPROACHES = ("time-partitioning", "dedicated-cores", "dedicated-nodes")
