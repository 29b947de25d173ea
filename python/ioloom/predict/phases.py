"""A process's I/O phases as the prediction interface foresaw them (docs/predict.md, "Prediction interface"): its
operations fed in order to `interface.Predictor`; for each phase, what it is (first operation, operations, start
and end) beside what the predictor said when the phase's first operation came (its length in operations and its
end). This is what a simulator needs to replay a trace by its predicted phases (`ioloom predict --phases` prints
it; `ioloom sim run --trace --phases` and `ioloom sim coord --trace-a/--trace-b` use it on the simulated clock),
and the figures say how right the predictions were."""
from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from ioloom.predict.interface import Predictor
from ioloom.predict.metrics import pct
from ioloom.predict.model import Options
from ioloom.predict.source import ProcessOperations


class PredictedPhase(NamedTuple):
    """One I/O phase: its first operation (index in the calls given), operations, start and end (ns, the calls'
    clock), and the length and end the predictor gave after its first operation (None: not known yet); the bytes
    it wrote and those the predictor said it would write (None: not known yet)."""
    first: int
    operations: int
    start_ns: int
    end_ns: int
    predicted_operations: int | None
    predicted_end_ns: int | None
    written: int
    predicted_written: int | None


class Call(NamedTuple):
    """One call as `Predictor.observe` takes it: its name as the tracer's (open64, pwrite...), path, offset, size,
    start and end (ns) and aux (the direction of a copy or aio result: 0 read, 1 write; -1 none)."""
    call: str
    path: str
    offset: int
    size: int
    t_start: int
    t_end: int
    aux: int = -1


def foreseen(calls: Iterable[Call], options: Options | None = None) -> list[PredictedPhase]:
    """The I/O phases of one process's calls (in order), each with what the predictor said of it when it began.
    A call the predictor does not learn (not an open, close, read or write) is in no phase."""
    predictor = Predictor(options)
    phases: list[PredictedPhase] = []
    for index, c in enumerate(calls):
        if not predictor.observe(*c):
            continue
        now = predictor.phase()
        if now.done == 1:
            phases.append(PredictedPhase(index, 1, c.t_start, c.t_end, now.length, now.end_ns, now.written,
                                         now.to_write))
        else:
            phases[-1] = phases[-1]._replace(operations=now.done, end_ns=c.t_end, written=now.written)
    return phases


def predicted_phases(process: ProcessOperations, options: Options | None = None) -> list[PredictedPhase]:
    """The process's I/O phases, each with what the predictor said of it when it began; `first` indexes
    process.operations."""
    names = process.symbols.names
    # aux: the trace's direction of a copy or aio result (0 read, 1 write)
    return foreseen((Call(names[op.symbol].split()[0], op.place, op.offset, op.size, op.t_start, op.t_end,
                          0 if op.kind == "read" else 1) for op in process.operations), options)


def phase_figures(phases: list[PredictedPhase]) -> dict:
    """How right the predictions were: phases whose length was predicted (all but the first, which nothing
    foretells, and those met before any ended) and the share predicted exactly, the share of those whose bytes
    written were; the mean error of the predicted end, in seconds, over the phases given one, and the mean length
    of a phase in seconds beside it."""
    lengths = [p for p in phases if p.predicted_operations is not None]
    ends = [abs(p.predicted_end_ns - p.end_ns) / 1e9 for p in phases if p.predicted_end_ns is not None]
    spans = [(p.end_ns - p.start_ns) / 1e9 for p in phases]
    return {"phases": len(phases), "lengths_predicted": len(lengths),
            "length_right_pct": pct([p.predicted_operations == p.operations for p in lengths]),
            "written_right_pct": pct([p.predicted_written == p.written for p in lengths]),
            "end_error_mean_s": sum(ends) / len(ends) if ends else None,
            "phase_mean_s": sum(spans) / len(spans) if spans else None}
