"""The coordinator's state, without sockets or clocks (times are passed in): the announced phases in the order in
which they write, each one's progress, and its lease. The service (service.py) drives it; tests drive it directly.

Invariants: a client has at most one phase; the order holds each phase once; with a serialising policy exactly
the head of the order may write, so two phases can never each wait for the other."""
from __future__ import annotations

from dataclasses import dataclass, field

from ioloom.coord.policy import Policy
from ioloom.models import Pending


@dataclass
class Phase:
    """One application's announced I/O phase: `size` bytes expected to take `t_alone` seconds alone."""
    client: int
    name: str
    cores: int
    size: int
    t_alone: float
    announced: float
    seen: float
    written: int = 0

    def pending(self, now: float) -> Pending:
        """The phase as the policy sees it: the alone time still needed, from the bytes still to write."""
        left = 1.0 - min(self.written / self.size, 1.0) if self.size else 1.0
        return Pending(self.cores, self.t_alone, self.t_alone * left, now - self.announced)


@dataclass
class State:
    """The phases of all clients in writing order, decided by `policy`; a phase unheard of for `lease` seconds
    expires. `bandwidth` (bytes/s) estimates t_alone for a phase announced without one."""
    policy: Policy
    lease: float
    bandwidth: float
    order: list[Phase] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: {"announced": 0, "interrupts": 0, "queued": 0,
                                                            "expired": 0, "finished": 0})

    def find(self, client: int) -> Phase | None:
        return next((p for p in self.order if p.client == client), None)

    def inform(self, client: int, name: str, cores: int, size: int, t_alone: float, now: float) -> Phase:
        """Announce a phase (placed by the policy) or update an announced one's estimates."""
        t_alone = t_alone if t_alone > 0 else size / self.bandwidth
        phase = self.find(client)
        if phase is not None:
            phase.size, phase.t_alone, phase.seen = size, t_alone, now
            return phase
        phase = Phase(client, name, cores, size, t_alone, announced=now, seen=now)
        place = self.policy.place([p.pending(now) for p in self.order], phase.pending(now))
        self._count_place(place)
        self.order.insert(place, phase)
        return phase

    def _count_place(self, place: int) -> None:
        self.counts["announced"] += 1
        if self.order and not self.policy.shares:
            self.counts["interrupts" if place == 0 else "queued"] += 1

    def may_write(self, client: int) -> bool:
        """Whether `client` may write now: it has no phase, the policy shares, or its phase heads the order."""
        phase = self.find(client)
        return phase is None or self.policy.shares or self.order[0] is phase

    def release(self, client: int, written: int, now: float) -> None:
        """`written` more bytes of the client's phase are on storage."""
        phase = self.find(client)
        if phase is not None:
            phase.written += written
            phase.seen = now

    def touch(self, client: int, now: float) -> None:
        phase = self.find(client)
        if phase is not None:
            phase.seen = now

    def finish(self, client: int, reason: str = "finished") -> bool:
        """Drop the client's phase (done, disconnected or expired); whether it had one."""
        phase = self.find(client)
        if phase is None:
            return False
        self.order.remove(phase)
        self.counts[reason] = self.counts.get(reason, 0) + 1
        return True

    def expire(self, now: float) -> list[int]:
        """Drop the phases not heard of for `lease` seconds (a crashed or stopped application): their clients."""
        gone = [p.client for p in self.order if now - p.seen > self.lease]
        for client in gone:
            self.finish(client, "expired")
        return gone

    def snapshot(self, now: float) -> dict:
        """The order and counters, for STATUS."""
        return {"policy": self.policy.name, "metric": self.policy.metric, "counts": dict(self.counts),
                "order": [{"client": p.client, "name": p.name, "cores": p.cores, "bytes": p.size,
                           "written": p.written, "t_alone": p.t_alone,
                           "remaining": p.pending(now).remaining, "may_write": self.may_write(p.client)}
                          for p in self.order]}
