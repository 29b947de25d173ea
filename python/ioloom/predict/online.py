"""How well the tracer's own model predicted (IOLOOM_PREDICT=1): its figures from the side stream, beside the
Python model run over the same symbols (docs/predict.md, "In the tracer"). The two follow one specification, so
they must predict the same sets; `same_predictions_pct` says on how many calls they did."""
from __future__ import annotations

from ioloom.predict.metrics import WINDOW
from ioloom.predict.model import Options, Sequence
from ioloom.predict.side import SideStream

KEPT = 8  # predicted symbols the side stream keeps per call (native/trace/predict.c)


def _score(symbol: int, predicted: tuple[int, ...], count: int) -> float:
    """Eq. of docs/predict.md's symbol accuracy: 1/k when the symbol is among the k predicted. Of more than KEPT
    predicted symbols only KEPT are kept: a symbol among the others scores 0."""
    return 1 / count if count and symbol in predicted else 0.0


def _pct(values: list[float]) -> float | None:
    return round(100 * sum(values) / len(values), 2) if values else None


def online_figures(side: SideStream | None) -> dict | None:
    """The tracer model's figures for one process, None without a side stream (or one with no call)."""
    if side is None or not side.calls:
        return None
    figures = {"calls": len(side.calls), "frames": side.count("frames"), "stack_symbols": len(side.symbols),
               "symbols_past_cap": side.count("symbols_past_cap"), "predicting": side.count("predict") == 1}
    if not figures["predicting"]:
        return figures
    cap = side.count("grammar_cap") or Options.grammar_cap
    sequence = Sequence(cap, Options.distinct_values, True, Options.local_cap)
    online, offline, same = [], [], []
    for index, (symbol, kept, count) in enumerate(zip(side.calls, side.predicted, side.npredicted)):
        mine = tuple(sorted(sequence.predicted()))
        same.append(1.0 if mine[:KEPT] == kept and len(mine) == count else 0.0)
        if index:
            online.append(_score(symbol, kept, count))
            offline.append(_score(symbol, mine, len(mine)))
        sequence.input(symbol)
    return {**figures, "symbol_accuracy_pct": _pct(online),
            "symbol_accuracy_last_window_pct": _pct(online[-WINDOW:]),
            "python_symbol_accuracy_pct": _pct(offline), "same_predictions_pct": _pct(same),
            "grammar_cap": cap, "grammar_size": side.count("grammar_size"),
            "grammar_past_cap": side.count("grammar_past_cap")}
