"""How well the tracer's own model predicted (IOLOOM_PREDICT=1): its figures from the side stream, beside the
Python model run over the same symbols (docs/predict.md, "In the tracer"). The two follow one specification, so
they must predict the same sets; `same_predictions_pct` says on how many calls they did. From the side stream's
version 2, the tracer predicts sizes, offsets and gaps too: given each call's kind, offset and size (its event),
the Python process model runs over the same calls and `same_candidates_pct` says on how many calls every kept
candidate was the same. The Python model runs once over the calls for both (python_run)."""
from __future__ import annotations

from collections.abc import Iterator

from ioloom.predict.metrics import WINDOW, pct
from ioloom.predict.model import Operation, Options, ProcessModel, Sequence
from ioloom.predict.side import KEPT, SideStream

MEMORY_KEYS = ("memory_cap", "memory_peak", "memory_refused", "grammars_stopped")  # the side stream's INFO
# model_symbols's answer: per call the model's symbol and those predicted for it; per model symbol its pair
Numbered = tuple[list[int], list[tuple[int, ...]], dict[int, tuple[int, int]]]


def limits_reached(o: dict) -> list[str]:
    """What the tracer's model stopped learning for, one sentence each (`ioloom predict`, the HTML report):
    its grammar's cap, its memory budget (docs/predict.md, "Memory")."""
    out = []
    if o.get("grammar_past_cap"):
        out.append(f"tracer's grammar cap reached: {o['grammar_past_cap']:,} calls past its {o['grammar_cap']:,} "
                   "symbols were predicted from the frozen grammar (raise IOLOOM_PREDICT_CAP to learn them)")
    if o.get("memory_refused") or o.get("grammars_stopped"):
        out.append(f"tracer's memory cap reached: {o['memory_refused']:,} allocations refused, "
                   f"{o['grammars_stopped']:,} grammars stopped learning; local models at most "
                   f"{o['memory_peak'] / 2**20:.1f} of {o['memory_cap'] / 2**20:.0f} MiB, those refused left "
                   "unlearnt (raise IOLOOM_PREDICT_MEMORY to learn them)")
    return out


def _score(symbol: int, predicted: tuple[int, ...], count: int) -> float:
    """Eq. of docs/predict.md's symbol accuracy: 1/k when the symbol is among the k predicted. Of more than KEPT
    predicted symbols only KEPT are kept: a symbol among the others scores 0."""
    return 1 / count if count and symbol in predicted else 0.0


def model_symbols(side: SideStream) -> Numbered:
    """Per call, the tracer model's symbol and those it predicted for the call (kept), and per model symbol its
    (stack symbol, file key). Version 1: the stack symbols. Version 2: (stack symbol, file key) pairs numbered in
    order of appearance, the last number standing for every pair past the tracer's limit (`max_symbols`)."""
    if side.major == 1:
        return side.calls, side.predicted, {s: (s, 0) for s in side.symbols}
    limit = side.count("max_symbols") or 1024
    ids: dict[tuple[int, int], int] = {}  # (stack symbol, file key): its number
    calls = [ids.setdefault(pair, min(len(ids), limit - 1)) for pair in zip(side.calls, side.call_keys)]
    predicted = [tuple(ids[(c.symbol, c.key)] for c in kept) for kept in side.predicted]
    pairs: dict[int, tuple[int, int]] = {}
    for pair, symbol in ids.items():
        pairs.setdefault(symbol, pair)
    return calls, predicted, pairs


def _options(side: SideStream) -> Options:
    """The tracer model's options (the side stream's INFO; before version 2 its local grammars were Python's)."""
    return Options(grammar_cap=side.count("grammar_cap") or Options.grammar_cap,
                   local_cap=side.count("local_cap") or Options.local_cap)


def python_run(side: SideStream, operations: list[tuple[str, int, int, int]] | None, numbered: Numbered | None = None
               ) -> Iterator[tuple[tuple[int, ...], bool | None]]:
    """One run of the Python model over the tracer's calls: per call, the symbols it predicted before it
    (ascending), and whether its kept candidates were the tracer's (symbols, sizes, offsets, rounded gaps), None
    without `operations` (per call its kind, offset, size and bytes moved: source.call_operations). With them the
    process model runs (its sequence gives the symbols), else its sequence alone. `numbered`: model_symbols(side), when
    the caller has it already."""
    calls, _, pairs = numbered or model_symbols(side)
    options = _options(side)
    if operations is None:
        sequence = Sequence(options.grammar_cap, options.distinct_values, True, options.local_cap)
        for symbol in calls:
            yield tuple(sorted(sequence.predicted())), None
            sequence.input(symbol)
        return
    model = ProcessModel({}, {}, options)
    clock = 0
    for symbol, key, gap, kept, (kind, offset, size, moved) in zip(calls, side.call_keys, side.gaps,
                                                                   side.predicted, operations):
        candidates = model.predict()
        mine = [(*pairs[c.symbol], c.size, c.offset, round(c.gap_ns)) for c in candidates[:KEPT]]
        yield tuple(c.symbol for c in candidates), mine == [(c.symbol, c.key, c.size, c.offset, c.gap_ns)
                                                            for c in kept]
        model.kinds.setdefault(symbol, kind)
        model.places.setdefault(symbol, str(key))
        clock += gap  # only gaps count: each call takes no time on this clock, as on the tracer's
        model.observe(Operation(symbol, kind, str(key), key, offset, size, clock, clock, moved))


def online_figures(side: SideStream | None, operations: list[tuple[str, int, int, int]] | None = None) -> dict | None:
    """The tracer model's figures for one process, None without a side stream (or one with no call).
    `operations`: per call its kind, offset, size and bytes moved (source.call_operations), for
    `same_candidates_pct`."""
    if side is None or not side.calls:
        return None
    figures = {"calls": len(side.calls), "frames": side.count("frames"), "stack_symbols": len(side.symbols),
               "symbols_past_cap": side.count("symbols_past_cap"), "predicting": side.count("predict") == 1}
    if not figures["predicting"]:
        return figures
    online, offline, same, candidates = [], [], [], []
    numbered = model_symbols(side)
    calls, predicted, _ = numbered
    runs = python_run(side, operations, numbered)
    for index, (symbol, kept, count, (mine, same_kept)) in enumerate(zip(calls, predicted, side.npredicted, runs)):
        same.append(1.0 if mine[:KEPT] == kept and len(mine) == count else 0.0)
        candidates.append(float(bool(same_kept)))
        if index:
            online.append(_score(symbol, kept, count))
            offline.append(_score(symbol, mine, len(mine)))
    return {**figures, "symbol_accuracy_pct": pct(online),
            "symbol_accuracy_last_window_pct": pct(online[-WINDOW:]),
            "python_symbol_accuracy_pct": pct(offline), "same_predictions_pct": pct(same),
            "grammar_cap": _options(side).grammar_cap, "grammar_size": side.count("grammar_size"),
            "grammar_past_cap": side.count("grammar_past_cap"),
            **{key: side.count(key) for key in MEMORY_KEYS},
            "same_candidates_pct": pct(candidates) if operations is not None else None}
