"""The prediction interface for the coordinator and the simulator (docs/predict.md, "Prediction interface"): one
process's I/O calls are given one by one as they happen; the predictor says what comes next, how many operations
remain in the current I/O phase and when that phase ends.

An **I/O phase** is a run of operations each starting less than `Options.distant_ns` after the previous one ended
(the model's immediate transitions); a longer gap (computation, communication) starts a new phase. The length of
each phase in operations is learnt by a local model (the grammar of docs/predict.md over the lengths, so a
pattern such as 26, 26, 98, 26, 26, 98 is learnt), the bytes it writes by another (what a coordinator is
announced), and the time per operation inside phases by the halving average of Eq. 7.1.
"""
from __future__ import annotations

from typing import NamedTuple

from ioloom.predict.model import LocalModel, Operation, Options, ProcessModel
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


class Predictor:
    """One process's predictor: call `observe` after each I/O call, ask `next` and `phase` at any time."""

    def __init__(self, options: Options | None = None):
        self.options = options or Options()
        self.symbols = Symbols()
        self.model = ProcessModel(self.symbols.kinds, self.symbols.places, self.options)
        self.lengths = LocalModel(self.options.distinct_values, "max", cap=self.options.local_cap)
        self.volumes = LocalModel(self.options.distinct_values, "max", cap=self.options.local_cap)  # bytes written
        self.files: dict[str, int] = {}
        self.done = 0  # operations of the current phase
        self.written = 0  # bytes it wrote
        self.expected: int | None = None  # its length, predicted when it began
        self.to_write: int | None = None  # its bytes written, predicted when it began
        self.op_ns = 0.0  # halving average of end-to-end time between operations of one phase
        self.last_end: int | None = None

    def observe(self, call: str, path: str, offset: int, size: int, t_start: int, t_end: int, aux: int = -1) -> bool:
        """Learns one call (named as the tracer names it: open64, pwrite, fwrite, close...; aux as the trace's,
        for copies and aio). Returns False, learning nothing, for a call that is not an open, close, read or
        write."""
        kind = kind_of(call, aux)
        if kind is None:
            return False
        self._phase_step(t_start, t_end)
        place = file_key(path)
        data = kind in ("read", "write")
        self.written += max(size, 0) if kind == "write" else 0
        symbol = self.symbols.of(call, kind, place)
        file_id = self.files.setdefault(path, len(self.files))
        self.model.observe(Operation(symbol, kind, place, file_id, offset if data else -1, max(size, 0) if data else 0,
                                     t_start, t_end))
        return True

    def _phase_step(self, t_start: int, t_end: int) -> None:
        if self.last_end is not None and t_start - self.last_end >= self.options.distant_ns:
            self.lengths.observe(self.done)  # the phase that just ended
            self.volumes.observe(self.written)
            self.done = self.written = 0
        if self.done == 0:
            self.expected = self.lengths.predict() if self.lengths.seen else None
            self.to_write = self.volumes.predict() if self.volumes.seen else None
        elif self.last_end is not None:
            step = t_end - self.last_end
            self.op_ns = step if self.op_ns == 0 else (self.op_ns + step) / 2
        self.done += 1
        self.last_end = t_end

    def next(self) -> list[Next]:
        """The operations that may come next (none before the first call is observed)."""
        if self.last_end is None:
            return []
        candidates = self.model.predict()
        return [Next(self.symbols.names[c.symbol], self.symbols.kinds[c.symbol], c.size, c.offset,
                     self.last_end + round(c.gap_ns), 1 / len(candidates)) for c in candidates]

    def phase(self) -> Phase:
        """How many operations of the current phase are done and remain, and when it is predicted to end; the
        bytes it wrote and is predicted to write. Past the predicted length, it ends when the next transition is
        predicted distant (remaining 0), else the remainder is unknown."""
        if self.last_end is None:
            return Phase(0, None, None, None)
        remaining = self._remaining()
        end = None if remaining is None else self.last_end + round(remaining * self.op_ns)
        return Phase(self.done, remaining, end, self.expected, self.written, self.to_write)

    def _remaining(self) -> int | None:
        if self.expected is not None and self.done < self.expected:
            return self.expected - self.done
        candidates = self.model.predict()
        if candidates and all(c.gap_ns >= self.options.distant_ns for c in candidates):
            return 0
        return None
