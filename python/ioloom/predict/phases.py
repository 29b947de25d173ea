"""A process's I/O phases as the prediction interface foresaw them (docs/predict.md, "Prediction interface"): its
operations fed in order to `interface.Predictor`; for each phase, what it is (first operation, operations, start
and end) beside what the predictor said when the phase's first operation came (its length in operations and its
end). This is what a simulator needs to replay a trace by its predicted phases (`ioloom predict --phases` prints
it), and the figures say how right the predictions were."""
from __future__ import annotations

from typing import NamedTuple

from ioloom.predict.interface import Predictor
from ioloom.predict.metrics import pct
from ioloom.predict.model import Options
from ioloom.predict.source import ProcessOperations


class PredictedPhase(NamedTuple):
    """One I/O phase: its first operation (index in the process's operations), operations, start and end (ns, the
    trace's clock), and the length and end the predictor gave after its first operation (None: not known yet)."""
    first: int
    operations: int
    start_ns: int
    end_ns: int
    predicted_operations: int | None
    predicted_end_ns: int | None


def predicted_phases(process: ProcessOperations, options: Options | None = None) -> list[PredictedPhase]:
    """The process's I/O phases, each with what the predictor said of it when it began."""
    predictor, names = Predictor(options), process.symbols.names
    phases: list[PredictedPhase] = []
    for index, op in enumerate(process.operations):
        aux = 0 if op.kind == "read" else 1  # the trace's direction of a copy or aio result (0 read, 1 write)
        if not predictor.observe(names[op.symbol].split()[0], op.place, op.offset, op.size, op.t_start, op.t_end, aux):
            continue  # a call the predictor does not learn is in no phase
        now = predictor.phase()
        if now.done == 1:
            phases.append(PredictedPhase(index, 1, op.t_start, op.t_end, now.length, now.end_ns))
        else:
            phases[-1] = phases[-1]._replace(operations=now.done, end_ns=op.t_end)
    return phases


def phase_figures(phases: list[PredictedPhase]) -> dict:
    """How right the predictions were: phases whose length was predicted (all but the first, which nothing
    foretells, and those met before any ended) and the share predicted exactly; the mean error of the predicted
    end, in seconds, over the phases given one, and the mean length of a phase in seconds beside it."""
    lengths = [p for p in phases if p.predicted_operations is not None]
    ends = [abs(p.predicted_end_ns - p.end_ns) / 1e9 for p in phases if p.predicted_end_ns is not None]
    spans = [(p.end_ns - p.start_ns) / 1e9 for p in phases]
    return {"phases": len(phases), "lengths_predicted": len(lengths),
            "length_right_pct": pct([p.predicted_operations == p.operations for p in lengths]),
            "end_error_mean_s": sum(ends) / len(ends) if ends else None,
            "phase_mean_s": sum(spans) / len(spans) if spans else None}
