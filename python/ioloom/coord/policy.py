"""The coordinator's decision rules (Dorier Ch. 6.2-6.3): where a newly announced I/O phase goes in the order in
which phases write. The order is one list; its head writes, the others wait (a paused phase keeps its place).

- interfere: every phase writes at once (the order is kept for reporting only);
- fcfs: the newcomer goes last (first come, first served: serialisation);
- interrupt: the newcomer goes first, pausing the one writing between two of its writes;
- dynamic: the place that minimises f over the remaining phases (ioloom.models.serial_cost, Eq. 6.4 generalised
  to a queue), with f the machine time wasted (sum N_X T_X) or the sum of interference factors; with two phases
  this is the thesis's rule: interrupt A iff dt < 3/4 T_A when N_A = N_B and T_A = 4 T_B.

A policy only chooses a place; the service keeps the order, so no two phases can wait for each other."""
from __future__ import annotations

from dataclasses import dataclass

from ioloom.models import METRICS, Pending, serial_cost

POLICIES = ("interfere", "fcfs", "interrupt", "dynamic")


@dataclass(frozen=True)
class Policy:
    """A decision rule: `name` one of POLICIES, `metric` one of ioloom.models.METRICS (used by dynamic)."""
    name: str
    metric: str = "core-seconds"

    def __post_init__(self) -> None:
        if self.name not in POLICIES:
            raise ValueError(f"unknown policy {self.name!r}; use one of {', '.join(POLICIES)}")
        if self.metric not in METRICS:
            raise ValueError(f"unknown metric {self.metric!r}; use one of {', '.join(METRICS)}")

    @property
    def shares(self) -> bool:
        """Whether every announced phase may write at once."""
        return self.name == "interfere"

    def place(self, order: list[Pending], newcomer: Pending) -> int:
        """Where `newcomer` goes in `order` (0: before the one writing, len(order): last)."""
        if self.name == "interrupt":
            return 0
        if self.name in ("interfere", "fcfs"):
            return len(order)
        return min(range(len(order), -1, -1),  # on a tie, the later place: it disturbs no one already there
                   key=lambda k: serial_cost([*order[:k], newcomer, *order[k:]], self.metric))
