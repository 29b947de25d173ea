"""The coordinator's state, without sockets or clocks (times are passed in): the announced phases in the order in
which they write, each one's progress, and its members' leases. The service (service.py) drives it; tests drive
it directly.

A phase belongs to an application, named in HELLO: the processes of one application (the ranks of an MPI job,
each with its own connection) that announce a phase join the same one, as CALCioM's per-application coordinator
gathers its processes (Sec. 6.2.3). A member's estimates are its own bytes and time alone; the phase's are the
sum of the bytes and the longest time (its members write in parallel). The phase ends when its last member is
done, gone or expired.

A member announced without a time alone is given bytes / bandwidth, a guess: its phase is placed on it
provisionally and, when the policy places by estimates, placed again at its first measured time however
close (a revision otherwise needs REVISED_BY). With `own_time`, a phase's storage part is its bytes /
bandwidth, the rest of its time alone the program's own, which the policy does not charge to sharing
(ioloom.models.Pending.storage); without it (the simulator, whose phases are written through), all of it.

Invariants: a client is a member of at most one phase; the order holds each phase once; the first `writing`
phases of the order (at least the head) may write, the others wait for them, so two phases can never each wait
for the other."""
from __future__ import annotations

from dataclasses import dataclass, field

from ioloom.coord import REVISED_BY
from ioloom.coord.policy import Policy
from ioloom.models import Pending


@dataclass
class Member:
    """One process's share of a phase: `size` bytes expected to take `t_alone` seconds alone."""
    size: int
    t_alone: float
    seen: float
    written: int = 0
    guessed: bool = False  # announced without a time: t_alone is bytes / bandwidth


@dataclass
class Phase:
    """One application's announced I/O phase."""
    name: str
    cores: int
    announced: float
    members: dict[int, Member] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return sum(m.size for m in self.members.values())

    @property
    def written(self) -> int:
        return sum(m.written for m in self.members.values())

    @property
    def t_alone(self) -> float:
        return max(m.t_alone for m in self.members.values())

    @property
    def guessed(self) -> bool:
        return any(m.guessed for m in self.members.values())

    def pending(self, now: float, bandwidth: float | None) -> Pending:
        """The phase as the policy sees it: the alone time still needed, from the bytes still to write, and (with
        the storage's `bandwidth`) the part of it that is the storage's."""
        size, t_alone = self.size, self.t_alone
        left = 1.0 - min(self.written / size, 1.0) if size else 1.0
        storage = min(1.0, size / bandwidth / t_alone) if bandwidth and size else 1.0
        return Pending(self.cores, t_alone, t_alone * left, now - self.announced, storage)


@dataclass
class State:
    """The phases of all applications in writing order, decided by `policy`; a member unheard of for `lease`
    seconds expires. `bandwidth` (bytes/s) is the storage's: it estimates t_alone for a member announced
    without one and, with `own_time`, a phase's storage part."""
    policy: Policy
    lease: float
    bandwidth: float
    own_time: bool = False
    order: list[Phase] = field(default_factory=list)
    writing: int = 1  # the first `writing` phases of the order write at once
    counts: dict[str, int] = field(default_factory=lambda: {"announced": 0, "interrupts": 0, "queued": 0,
                                                            "shared": 0, "replaced": 0, "expired": 0,
                                                            "finished": 0})

    def find(self, client: int) -> Phase | None:
        return next((p for p in self.order if client in p.members), None)

    def inform(self, client: int, name: str, cores: int, size: int, t_alone: float, now: float) -> Phase:
        """Announce the client's share of its application's phase (placed by the policy when new), or update
        its estimates (placed again when the policy places by estimates and its time alone changed by more than
        REVISED_BY)."""
        member = Member(size, t_alone if t_alone > 0 else size / self.bandwidth, seen=now, guessed=t_alone <= 0)
        phase = self.find(client) or next((p for p in self.order if p.name == name), None)
        if phase is None:
            phase, writing = Phase(name, cores, announced=now, members={client: member}), self.writing
            self._count_place(self._place(phase, now), writing)
            return phase
        before, guessed = phase.t_alone, phase.guessed
        written = phase.members[client].written if client in phase.members else 0
        phase.members[client] = member
        member.written, phase.cores = written, max(phase.cores, cores)
        measured = guessed and not phase.guessed  # its first measured time: the provisional place is decided again
        if self.policy.revises and (measured or max(before, phase.t_alone) > REVISED_BY * min(before, phase.t_alone)):
            self._remove(phase)
            self._place(phase, now)
            self.counts["replaced"] += 1
        return phase

    def _place(self, phase: Phase, now: float):
        """Put `phase` (not in the order) where the policy says; the placement."""
        bandwidth = self.bandwidth if self.own_time else None
        place = self.policy.place([p.pending(now, bandwidth) for p in self.order], self.writing,
                                  phase.pending(now, bandwidth), REVISED_BY if phase.guessed else 1.0)
        self.order.insert(place.index, phase)
        self.writing = place.writing
        return place

    def _remove(self, phase: Phase) -> None:
        if self.order.index(phase) < self.writing:
            self.writing = max(1, self.writing - 1)
        self.order.remove(phase)

    def _count_place(self, place, writing_before: int) -> None:
        self.counts["announced"] += 1
        if len(self.order) > 1 and not self.policy.shares:
            kind = "shared" if place.writing > writing_before else "interrupts" if place.index == 0 else "queued"
            self.counts[kind] += 1

    def writes(self, phase: Phase) -> bool:
        """Whether `phase` may write now: the policy shares, or it is one of the first `writing` of the order."""
        return self.policy.shares or self.order.index(phase) < self.writing

    def may_write(self, client: int) -> bool:
        """Whether `client` may write now: it is in no phase or its phase writes."""
        phase = self.find(client)
        return phase is None or self.writes(phase)

    def release(self, client: int, written: int, now: float) -> None:
        """`written` more bytes of the client's share are on storage."""
        phase = self.find(client)
        if phase is not None:
            phase.members[client].written += written
            phase.members[client].seen = now

    def touch(self, client: int, now: float) -> None:
        phase = self.find(client)
        if phase is not None:
            phase.members[client].seen = now

    def finish(self, client: int, reason: str = "finished") -> bool:
        """The client leaves its phase (done, disconnected or expired); the phase ends with its last member.
        Whether a phase ended."""
        phase = self.find(client)
        if phase is None:
            return False
        del phase.members[client]
        if phase.members:
            return False
        self._remove(phase)
        self.counts[reason] = self.counts.get(reason, 0) + 1
        return True

    def expire(self, now: float) -> bool:
        """Drop the members not heard of for `lease` seconds (a crashed or stopped process); whether a phase
        ended."""
        gone = [c for p in self.order for c, m in p.members.items() if now - m.seen > self.lease]
        return any([self.finish(c, "expired") for c in gone])

    def snapshot(self, now: float) -> dict:
        """The order and counters, for STATUS."""
        return {"policy": self.policy.name, "metric": self.policy.metric, "min_gain": self.policy.min_gain,
                "counts": dict(self.counts),
                "order": [{"name": p.name, "clients": sorted(p.members), "cores": p.cores, "bytes": p.size,
                           "written": p.written, "t_alone": p.t_alone, "remaining": p.pending(now, None).remaining,
                           "may_write": self.writes(p)}
                          for p in self.order]}
