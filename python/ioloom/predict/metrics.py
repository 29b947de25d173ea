"""How well the predictor did on one process (docs/predict.md, "Metrics"): it runs over the operations in order,
predicts each one from those before it, and scores the prediction against what came, as Dorier's thesis Ch. 7
scores Omnisc'IO: symbols over a sliding window of ten operations, sizes by Eq. 7.2, offsets against the contiguous
baseline (Table 7.6), segments by the hit ratio of Eq. 7.3 (Table 7.7), inter-arrival times against immediate
reaccess (Table 7.8) and the grammar's size as operations go (Fig. 7.3). With k symbols predicted, each candidate
counts 1/k.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from ioloom.predict.model import DATA_KINDS, Candidate, Operation, Options, ProcessModel

WINDOW = 10
SERIES_POINTS = 400  # at most this many (operation, window accuracy) points in `symbol_window`


def hit(predicted: tuple[int, int] | None, observed: tuple[int, int] | None) -> float:
    """Eq. 7.3: the overlap of two segments [start, end) over the distance between their extremes, in percent;
    100 when both are empty, 0 when only one is."""
    if predicted is None or observed is None:
        return 100.0 if predicted is None and observed is None else 0.0
    overlap = max(0, min(predicted[1], observed[1]) - max(predicted[0], observed[0]))
    return 100.0 * overlap / (max(predicted[1], observed[1]) - min(predicted[0], observed[0]))


def segment(offset: int, size: int) -> tuple[int, int] | None:
    return (offset, offset + size) if offset >= 0 and size > 0 else None


@dataclass
class Scores:
    """Running sums of one process's scores."""
    symbol: list[float] = field(default_factory=list)  # per operation after the first
    window: list[float] = field(default_factory=list)  # the mean of the last WINDOW symbol scores
    size_errors: list[float] = field(default_factory=list)
    offsets: list[float] = field(default_factory=list)
    offsets_contiguous: list[float] = field(default_factory=list)
    hits: list[float] = field(default_factory=list)
    hits_known: list[float] = field(default_factory=list)  # the hits of operations whose symbol came before
    time_errors: list[float] = field(default_factory=list)
    time_errors_immediate: list[float] = field(default_factory=list)
    grammar_sizes: list[tuple[int, int]] = field(default_factory=list)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _rounded_mean(values: list[float], digits: int) -> float | None:
    mean = _mean(values)
    return None if mean is None else round(mean, digits)


def evaluate(operations: list[Operation], kinds: dict[int, str], places: dict[int, str],
             options: Options | None = None) -> tuple[dict, ProcessModel]:
    """Run the model over a process's operations; its figures (the keys of docs/predict.md) and the model."""
    model = ProcessModel(kinds, places, options or Options())
    scores = Scores()
    recent: deque[float] = deque(maxlen=WINDOW)
    ends: dict[int, int] = {}  # the contiguous baseline: where the last access to each file ended
    met: set[int] = set()  # symbols met so far
    for index, op in enumerate(operations):
        if index:
            scored = len(scores.hits)
            _score(scores, recent, model, model.predict(), op, ends)
            if len(scores.hits) > scored and op.symbol in met:
                scores.hits_known.append(scores.hits[-1])
        met.add(op.symbol)
        model.observe(op)
        if op.kind in DATA_KINDS and op.offset >= 0:
            ends[op.file_id] = op.end
        elif op.kind not in DATA_KINDS:
            ends[op.file_id] = 0
        if (index + 1) & index == 0 or index + 1 == len(operations):
            scores.grammar_sizes.append((index + 1, model.grammar.size))
    return _figures(scores, model, len(operations)), model


def _score(scores: Scores, recent: deque, model: ProcessModel, candidates: list[Candidate], op: Operation,
           ends: dict[int, int]) -> None:
    k = len(candidates)
    symbol = sum(1 for c in candidates if c.symbol == op.symbol) / k if k else 0.0
    scores.symbol.append(symbol)
    recent.append(symbol)
    scores.window.append(sum(recent) / len(recent))
    gap = max(op.t_start - model.last_end, 0)
    scores.time_errors.append(sum(abs(c.gap_ns - gap) for c in candidates) / k / 1e9 if k else gap / 1e9)
    scores.time_errors_immediate.append(gap / 1e9)
    observed = segment(op.offset, op.size) if op.kind in DATA_KINDS else None
    if op.kind in DATA_KINDS and op.offset < 0:
        return  # where it went is unknown (a pipe, an append): no offset, no segment to score
    scores.hits.append(sum(hit(segment(c.offset, c.size), observed) for c in candidates) / k if k else 0.0)
    if op.kind not in DATA_KINDS:
        return
    scores.offsets.append(sum(1 for c in candidates if c.offset == op.offset) / k if k else 0.0)
    scores.offsets_contiguous.append(1.0 if ends.get(op.file_id, 0) == op.offset else 0.0)
    if op.size > 0:
        scores.size_errors.append(sum(abs(c.size - op.size) for c in candidates) / k / op.size if k else 1.0)


def pct(values: Sequence[float]) -> float | None:
    """The mean of `values` (each 0 to 1: a score, or a bool for right or wrong) as a percentage to two decimals;
    None for no value. Every percentage of ioloom predict's figures is one."""
    return round(100 * sum(values) / len(values), 2) if values else None


def _sampled(window: list[float]) -> list[tuple[int, float]]:
    """(operation, window accuracy %) at most SERIES_POINTS times, evenly, the last one included; the window after
    operation i + 2 is window[i] (the first operation is not predicted)."""
    step = max(1, -(-len(window) // SERIES_POINTS))
    picks = list(range(0, len(window), step)) + ([len(window) - 1] if window and (len(window) - 1) % step else [])
    return [(i + 2, round(100 * window[i], 2)) for i in picks]


def _figures(scores: Scores, model: ProcessModel, operations: int) -> dict:
    converged = next((i + 2 for i, w in enumerate(scores.window) if w == 1.0 and i + 1 >= WINDOW), None)
    immediate = sum(1 for t in model.times if not model.distant(t))
    return {
        "operations": operations,
        "symbols": len(model.kinds),
        "symbol_accuracy_pct": pct(scores.symbol),
        "symbol_accuracy_last_window_pct": pct(scores.window[-1:]),
        "converged_at_operation": converged,
        "size_error_mean": _rounded_mean(scores.size_errors, 4),
        "size_exact_pct": pct([e == 0 for e in scores.size_errors]),
        "offset_accuracy_pct": pct(scores.offsets),
        "offset_contiguous_pct": pct(scores.offsets_contiguous),
        "hit_ratio_pct": _rounded_mean(scores.hits, 2),
        "hit_ratio_known_symbols_pct": _rounded_mean(scores.hits_known, 2),
        "first_appearances": len(scores.hits) - len(scores.hits_known),
        "time_error_s": _mean(scores.time_errors),
        "time_error_immediate_reaccess_s": _mean(scores.time_errors_immediate),
        "transitions_immediate": immediate,
        "transitions_distant": len(model.times) - immediate,
        "grammar_size": scores.grammar_sizes,
        "symbol_window": _sampled(scores.window),
        "grammar_rules": len(model.grammar.rules),
        "grammar_past_cap": model.grammar.past_cap,
        "sizes_fallen_back": model.sizes.fallen_back(),
        "offsets_fallen_back": model.offsets.fallen_back(),
    }
