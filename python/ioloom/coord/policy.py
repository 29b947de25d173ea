"""The coordinator's decision rules (Dorier Ch. 6.2-6.3): where a newly announced I/O phase goes in the order in
which phases write, and how many phases at the head of that order write at once (`writing`; the others wait, a
paused phase keeping its place).

- interfere: every phase writes at once (the order is kept for reporting only);
- fcfs: the newcomer goes last (first come, first served: serialisation);
- interrupt: the newcomer goes first and writes alone, pausing the ones writing between two of their writes;
- dynamic: of every serial place (ioloom.models.serial_cost, Eq. 6.4 generalised to a queue) and joining the
  phases writing (ioloom.models.sharing_cost, proportional sharing), the one that minimises f, the machine
  time wasted (sum N_X T_X) or the sum of interference factors; a serial place is chosen only if it saves at
  least `min_gain` of interference's f (the estimates are rough and every hand-over costs a round trip), so
  where serialising gains nothing the phases interfere freely. With two phases and min_gain 0 this is the
  thesis's rule: interrupt A iff dt < 3/4 T_A when N_A = N_B and T_A = 4 T_B.

A policy only chooses a place; the service keeps the order, so no two phases can wait for each other. Under
dynamic, a phase whose time alone is revised by more than REVISED_BY (its first calls measured: state.py) is
taken out of the order and placed again as a newcomer that has waited since its announcement. A newcomer whose
time alone is a guess (bytes / bandwidth: a lower bound, the program's own time left out) is placed on it only
where the place would be the same were it `doubt` times longer; elsewhere it joins the phases writing, pausing
and waiting for no one, until its first calls measure its time (then it is placed again)."""
from __future__ import annotations

from dataclasses import dataclass, replace

from ioloom.coord import COORDINATED, MIN_GAIN
from ioloom.models import METRICS, Pending, sharing_cost

POLICIES = ("interfere", *COORDINATED)  # interfere: everyone writes at once, uncoordinated


@dataclass(frozen=True)
class Placement:
    """The newcomer goes at `index` of the order; then the first `writing` phases of the order write at once."""
    index: int
    writing: int


@dataclass(frozen=True)
class Policy:
    """A decision rule: `name` one of POLICIES, `metric` one of ioloom.models.METRICS and `min_gain` (a
    fraction of f, >= 0) used by dynamic."""
    name: str
    metric: str = "core-seconds"
    min_gain: float = MIN_GAIN

    def __post_init__(self) -> None:
        if self.name not in POLICIES:
            raise ValueError(f"unknown policy {self.name!r}; use one of {', '.join(POLICIES)}")
        if self.metric not in METRICS:
            raise ValueError(f"unknown metric {self.metric!r}; use one of {', '.join(METRICS)}")
        if not 0 <= self.min_gain < 1:
            raise ValueError(f"min_gain must be in [0, 1), got {self.min_gain!r}")

    @property
    def shares(self) -> bool:
        """Whether every announced phase may write at once."""
        return self.name == "interfere"

    @property
    def revises(self) -> bool:
        """Whether a phase's place depends on its estimates (so a phase whose estimates change is placed again)."""
        return self.name == "dynamic"

    def place(self, order: list[Pending], writing: int, newcomer: Pending, doubt: float = 1.0) -> Placement:
        """Where `newcomer` goes in `order`, whose first `writing` phases write now (0: before them). `doubt` >= 1:
        the newcomer's time alone may be that many times longer (a guess); dynamic then places it on the guess
        only if the place is the same with the longer time, and otherwise lets it join the phases writing."""
        writing = max(1, min(writing, len(order)))
        if not order or self.name == "interrupt":
            return Placement(0, 1)
        if self.name in ("interfere", "fcfs"):
            return Placement(len(order), len(order) + 1 if self.shares else writing)
        guessed = self._dynamic(order, writing, newcomer)
        if doubt > 1 and guessed != self._dynamic(order, writing, longer(newcomer, doubt)):
            return Placement(writing, writing + 1)  # provisional: disturbs no one until its time is measured
        return guessed

    def _dynamic(self, order: list[Pending], writing: int, newcomer: Pending) -> Placement:
        def cost(p: Placement) -> float:
            return sharing_cost([*order[:p.index], newcomer, *order[p.index:]], p.writing, self.metric)
        join = Placement(writing, writing + 1)
        serial = [Placement(k, writing) for k in range(len(order), writing - 1, -1)] + [Placement(0, 1)]
        best = min(serial, key=cost)  # on a tie, the later place: it disturbs no one already there
        return best if cost(best) < (1 - self.min_gain) * cost(join) else join


def longer(p: Pending, factor: float) -> Pending:
    """`p` taking `factor` times as long alone for the same bytes: the extra is the program's own time."""
    return replace(p, t_alone=p.t_alone * factor, remaining=p.remaining * factor, storage=p.storage / factor)
