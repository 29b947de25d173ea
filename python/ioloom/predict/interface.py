"""The prediction interface for the coordinator and the simulator (docs/predict.md, "Prediction interface"): one
process's I/O calls are given one by one as they happen; the predictor says what comes next, how many operations
remain in the current I/O phase and when that phase ends.

An **I/O phase** is a run of operations each starting less than the phase gap (by default `Options.distant_ns`:
the model's immediate transitions) after the previous one ended; a longer gap (computation, communication) starts
a new phase. The length of each phase in operations is learnt by a local model (the grammar of docs/predict.md over
the lengths, so a pattern such as 26, 26, 98, 26, 26, 98 is learnt), the bytes it writes by another (what a
coordinator is announced), and the time per operation inside phases by the halving average of Eq. 7.1. `Phases`
is this part alone; its C twin is native/predict/phase.h, held to the same answers by shared vectors.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ioloom.predict.model import Candidate, LocalModel, Operation, Options, ProcessModel
from ioloom.predict.source import Symbols, file_key, kind_of


class Next(NamedTuple):
    """One predicted next operation: the call and file key of its symbol (`write out_#.dat`), its kind, size
    (bytes; 0 for open and close), offset (-1 for open and close), expected start (ns, the caller's clock) and
    weight (1/k of k candidates)."""
    symbol: str
    kind: str
    size: int
    offset: int
    start_ns: int
    weight: float


class Phase(NamedTuple):
    """The current I/O phase: operations done in it, operations predicted to remain (None: unknown), the
    predicted end (ns, the caller's clock; None: unknown), the phase length predicted when it began, the bytes
    written in it so far and the bytes it writes in all, predicted when it began (None: unknown)."""
    done: int
    remaining: int | None
    end_ns: int | None
    length: int | None
    written: int = 0
    to_write: int | None = None


class Phases:
    """The phase part of the interface, apart from the model (the C twin's `pg_phases`, native/predict/phase.h):
    told each operation's kind, size, start and end; asked the current phase with the model's candidates for the
    next operation. A gap of at least `gap_ns` from one operation's end to the next one's start starts a new
    phase."""

    def __init__(self, options: Options, gap_ns: int):
        self.gap_ns = gap_ns
        self.lengths = LocalModel(options.distinct_values, "max", cap=options.local_cap)
        self.volumes = LocalModel(options.distinct_values, "max", cap=options.local_cap)  # bytes written
        self.done = 0  # operations of the current phase
        self.written = 0  # bytes it wrote
        self.expected: int | None = None  # its length, predicted when it began
        self.to_write: int | None = None  # its bytes written, predicted when it began
        self.op_ns = 0.0  # halving average of end-to-end time between operations of one phase
        self.last_end: int | None = None
        self.held = 0  # ns the process was held since the last operation (`hold`)

    def hold(self, ns: int) -> None:
        """The process was held `ns` (waiting for a coordinator) before its next operation: that time is no gap
        and no step of the phase."""
        self.held += ns

    def observe(self, kind: str, size: int, t_start: int, t_end: int) -> None:
        """One operation (open, close, read or write) of `size` bytes asked, from t_start to t_end (ns)."""
        if self.last_end is not None and t_start - self.held - self.last_end >= self.gap_ns:
            self._close()
        if self.done == 0:
            self._begin()
        elif self.last_end is not None:
            step = t_end - self.held - self.last_end
            self.op_ns = step if self.op_ns == 0 else (self.op_ns + step) / 2
        self.held = 0
        self.done += 1
        self.written += max(size, 0) if kind == "write" else 0
        self.last_end = t_end

    def _close(self) -> None:
        """The current phase ended: its length and bytes are learnt (nothing happens with no phase under way)."""
        if self.done:
            self.lengths.observe(self.done)
            self.volumes.observe(self.written)
            self.done = self.written = 0

    def _begin(self) -> None:
        self.expected = self.lengths.predict() if self.lengths.seen else None
        self.to_write = self.volumes.predict() if self.volumes.seen else None

    def now(self, candidates: Callable[[], list[Candidate]], now_ns: int | None = None) -> Phase:
        """The current phase, `candidates()` giving the model's candidates for the next operation (asked only
        past the phase's predicted length, or before any is known). Asked at now_ns at least gap_ns after the
        last operation's end, the phase an operation starting then begins (done 0; the current one ends there,
        learnt)."""
        if self.last_end is None:
            return Phase(0, None, None, None)
        if now_ns is not None and now_ns - self.held - self.last_end >= self.gap_ns:
            self._close()
            self._begin()
            return self._ahead(now_ns)
        remaining = self._remaining(candidates)
        end = None if remaining is None else self.last_end + round(remaining * self.op_ns)
        return Phase(self.done, remaining, end, self.expected, self.written, self.to_write)

    def _ahead(self, now_ns: int) -> Phase:
        end = None if self.expected is None else now_ns + round(self.expected * self.op_ns)
        return Phase(0, self.expected, end, self.expected, 0, self.to_write)

    def _remaining(self, candidates: Callable[[], list[Candidate]]) -> int | None:
        if self.expected is not None and self.done < self.expected:
            return self.expected - self.done
        predicted = candidates()
        if predicted and all(c.gap_ns >= self.gap_ns for c in predicted):
            return 0
        return None


class Predictor:
    """One process's predictor: call `observe` after each I/O call, ask `next` and `phase` at any time. Phases
    are split at gaps of `phase_gap_ns` (default: the model's distant_ns)."""

    def __init__(self, options: Options | None = None, phase_gap_ns: int | None = None):
        self.options = options or Options()
        self.symbols = Symbols()
        self.model = ProcessModel(self.symbols.kinds, self.symbols.places, self.options)
        self.phases = Phases(self.options, self.options.distant_ns if phase_gap_ns is None else phase_gap_ns)
        self.files: dict[str, int] = {}

    def observe(self, call: str, path: str, offset: int, size: int, t_start: int, t_end: int, aux: int = -1) -> bool:
        """Learns one call (named as the tracer names it: open64, pwrite, fwrite, close...; aux as the trace's,
        for copies and aio). Returns False, learning nothing, for a call that is not an open, close, read or
        write."""
        kind = kind_of(call, aux)
        if kind is None:
            return False
        place = file_key(path)
        data = kind in ("read", "write")
        self.phases.observe(kind, size, t_start, t_end)
        symbol = self.symbols.of(call, kind, place)
        file_id = self.files.setdefault(path, len(self.files))
        self.model.observe(Operation(symbol, kind, place, file_id, offset if data else -1, max(size, 0) if data else 0,
                                     t_start, t_end))
        return True

    def hold(self, ns: int) -> None:
        """The process was held `ns` (waiting for a coordinator) before its next call: no gap of its phase."""
        self.phases.hold(ns)

    def next(self) -> list[Next]:
        """The operations that may come next (none before the first call is observed)."""
        if self.phases.last_end is None:
            return []
        candidates = self.model.predict()
        return [Next(self.symbols.names[c.symbol], self.symbols.kinds[c.symbol], c.size, c.offset,
                     self.phases.last_end + round(c.gap_ns), 1 / len(candidates)) for c in candidates]

    def phase(self, now_ns: int | None = None) -> Phase:
        """How many operations of the current phase are done and remain, and when it is predicted to end; the
        bytes it wrote and is predicted to write. Past the predicted length, it ends when the next transition is
        predicted distant (remaining 0), else the remainder is unknown. With now_ns past the phase gap: the phase
        an operation starting then would begin (`Phases.now`)."""
        return self.phases.now(self.model.predict, now_ns)
