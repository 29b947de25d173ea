"""The predictor of one process (docs/predict.md): the grammar of its context symbols, a size model per symbol,
an offset model and an inter-arrival time model per transition between symbols. `ProcessModel.predict()` says
what the next operation may be (one candidate per predicted symbol); `observe(op)` learns the operation that came.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from ioloom.predict.grammar import Grammar

KINDS = ("open", "close", "read", "write")
DATA_KINDS = ("read", "write")
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1  # the C model's int64_t: its totals and drift saturate there
HISTORY = 8  # values over which a size model's grammar must have been exact once to be kept before the mean
HISTORY_MASK = (1 << HISTORY) - 1
MISS = 256  # a run length's error when its end is mispredicted once (fixed point of the halving averages)
Transition = tuple[int | None, int]  # (the symbol before, None for the first operation; the symbol)


class Operation(NamedTuple):
    """One operation of a process, as the predictor sees it. offset: where it started (-1 unknown), size: bytes
    asked (0 for open and close); `place`: the file key its offset is counted on (the symbol's file); file_id:
    the trace's id of the file itself; moved: the bytes a read or write moved (its return: fewer than asked for a
    short read, a line of fgets), -1 when unknown (taken as the size asked)."""
    symbol: int
    kind: str
    place: str
    file_id: int
    offset: int
    size: int
    t_start: int
    t_end: int
    moved: int = -1

    @property
    def end(self) -> int:
        """Where a read or write of known offset ended: its offset plus the bytes it moved."""
        return self.offset + (self.moved if self.moved >= 0 else self.size)


class Candidate(NamedTuple):
    """One predicted next operation: its symbol and the size, offset and gap (ns after the current operation
    ends) predicted for it; size 0 and offset -1 for open and close."""
    symbol: int
    size: int
    offset: int
    gap_ns: float


@dataclass
class Options:
    """The model's limits (docs/predict.md, "Parameters")."""
    grammar_cap: int = 1 << 16   # symbols in the main grammar; past it the grammar is frozen (counted)
    distinct_values: int = 24    # distinct sizes (offset changes) a local grammar keeps before its fallback
    distant_ns: int = 1_000_000  # a transition whose average inter-arrival time reaches this is distant
    local_cap: int = 4096        # symbols in each local grammar (sizes, offsets, run lengths)
    run_positions: int = 64      # places in a run told apart by the size and offset models (later ones share)
    return_depth: int = 64       # ends of earlier accesses an offset may return to


class Sequence:
    """Predicts the next value of a stream of integers (docs/predict.md, "Runs"). With `runs`, a run of one value
    is one token of the grammar, and each value has a model of its run lengths: within a run, the value is
    predicted again until the length predicted when the run began (or, past it, the longest run seen); at that
    length, what the grammar predicts after the value."""

    def __init__(self, cap: int, limit: int = 24, runs: bool = True, local_cap: int = 4096):
        self.grammar = Grammar(cap=cap)
        self.runs, self.limit, self.local_cap = runs, limit, local_cap
        self.lengths: dict[int, LocalModel] = {}
        self.value: int | None = None
        self.count = 0
        self.expected = 0  # the length predicted for the current run; 0: none known

    def input(self, value: int) -> None:
        if not self.runs:
            self.grammar.input(value)
            return
        if value == self.value:
            self.count += 1
            return
        self._end_run()
        self.grammar.input(value)
        self.value, self.count = value, 1
        model = self.lengths.get(value)
        self.expected = model.predict() if model else 0

    def _end_run(self) -> None:
        if self.value is not None:
            model = self.lengths.setdefault(self.value, LocalModel(self.limit, "max", runs=False,
                                                                   cap=self.local_cap))
            model.observe(self.count)

    def predicted(self) -> set[int]:
        after = self.grammar.predicted()
        if not self.runs or self.value is None:
            return after
        model = self.lengths.get(self.value)
        if model is None:  # the value's first run: it may go on
            return after | {self.value}
        ends = self.count == self.expected or (self.count > self.expected and self.count == model.high)
        return (after or {self.value}) if ends else {self.value}


def _rounded_quotient(a: int, b: int) -> int:
    """a / b (b > 0) rounded half to even, exactly (round(a / b) goes through a float past 2^53; sequence.c's)."""
    q, r = divmod(a, b)
    return q + 1 if 2 * r > b or (2 * r == b and q % 2) else q


@dataclass
class LocalModel:
    """The values seen at one symbol (sizes), one transition (offset changes) or one value's runs (lengths): one
    value, then a local grammar over the distinct values, then past `limit` distinct values the mean (sizes), 0
    (offsets: consecutive) or the largest (run lengths). Past the fallback to the mean or the largest, a local
    model of the changes from one value to the next (the drift: a count changing by a step that cycles) predicts
    the last value plus the change it predicts, whenever it has been the closer of the two lately. Before the
    fallback to the mean, the mean replaces the local grammar's prediction while the grammar has not been exact
    on any of the last HISTORY values and the mean has been the closer of the two lately (docs/predict.md, "What
    each candidate says")."""
    limit: int
    fallback_value: str  # "mean", "zero" or "max"
    runs: bool = True
    cap: int = 4096
    tokens: dict[int, int] = field(default_factory=dict)
    counts: list[int] = field(default_factory=list)
    sequence: Sequence | None = None
    last: int = 0
    total: int = 0
    seen: int = 0
    low: int = 0
    high: int = 0
    drift: LocalModel | None = None  # past the fallback to the mean or the largest: a model of the changes
    errors: list[int] = field(default_factory=lambda: [0, 0])  # halving averages of |error|: fallback, drift
    grammar_error: int = 0  # before the fallback to the mean: the halving average of the grammar's |error|
    exact: int = 0  # before the fallback to the mean: bit i set if the grammar was exact i + 1 values ago

    def __post_init__(self) -> None:
        self.sequence = Sequence(self.cap, self.limit, self.runs, self.cap)

    def observe(self, value: int) -> None:
        if self.drift is not None:  # score the fallback and the drift, then teach the drift
            self.errors[0] = (self.errors[0] + self._rule_error(self._level(), value)) // 2
            self.errors[1] = (self.errors[1] + self._rule_error(self._drifted(), value)) // 2
            self.drift.observe(value - self.last)
        elif self.fallback_value == "mean" and self.sequence is not None and self.seen:  # score grammar and mean
            by_grammar = self._by_grammar(self.sequence)
            self.exact = (self.exact << 1 | (by_grammar == value)) & HISTORY_MASK
            self.grammar_error = (self.grammar_error + abs(by_grammar - value)) // 2
            self.errors[0] = (self.errors[0] + abs(self._level() - value)) // 2
        self.low, self.high = (value, value) if not self.seen else (min(self.low, value), max(self.high, value))
        self.last, self.total, self.seen = value, min(max(self.total + value, INT64_MIN), INT64_MAX), self.seen + 1
        if self.sequence is None:
            return
        if value not in self.tokens:
            if len(self.tokens) == self.limit:
                self.sequence = None  # the fallback: the local grammar and its values are freed
                self.tokens, self.counts, self.errors[0] = {}, [], 0
                if self.fallback_value != "zero":
                    self.drift = LocalModel(self.limit, "zero", cap=self.cap)
                return
            self.tokens[value] = len(self.tokens)
            self.counts.append(0)
        token = self.tokens[value]
        self.counts[token] += 1
        self.sequence.input(token)

    def _rule_error(self, predicted: int, value: int) -> int:
        """How wrong a rule predicting `predicted` was on `value`: a run length (the largest its fallback) by the
        ends it mispredicts (none if exact, one if longer, two if shorter), any other value by its distance."""
        if self.fallback_value != "max":
            return abs(predicted - value)
        return 0 if predicted == value else MISS if predicted > value else 2 * MISS

    @property
    def fallen_back(self) -> bool:
        return self.sequence is None

    def _level(self) -> int:
        return {"mean": _rounded_quotient(self.total, self.seen), "zero": 0, "max": self.high}[self.fallback_value]

    def _drifted(self) -> int:
        """The drift's prediction: the last value plus the change it predicts, at least 0 (sizes, run lengths,
        phase lengths and volumes are never negative) and at most INT64_MAX (sequence.c's drifted saturates)."""
        assert self.drift is not None
        return min(max(0, self.last + self.drift.predict()), INT64_MAX)

    def predict(self) -> int:
        if self.sequence is None:
            if self.drift is not None and self.errors[1] < self.errors[0]:
                return self._drifted()
            return self._level()
        if self.seen > HISTORY and not self.exact and self.errors[0] < self.grammar_error:
            return self._level()  # a model falling back to the mean, its grammar not exact lately: the mean
        return self._by_grammar(self.sequence)

    def _by_grammar(self, sequence: Sequence) -> int:
        """The local grammar's prediction (`sequence`, this model's own until its fallback): its one value, or the
        one it predicts seen most often, or the last."""
        if len(self.tokens) == 1:
            return self.last
        values = list(self.tokens)
        expected = sequence.predicted()
        if not expected:
            return self.last
        return values[max(sorted(expected), key=lambda token: self.counts[token])]  # ties: the first seen


@dataclass
class TimeModel:
    """Inter-arrival times (end of one operation to the start of the next) of one transition: min, max, mean and
    variance (Welford), and the halving average of Eq. 7.1 (first sample as start) kept apart for immediate gaps
    (under `distant_ns`) and distant ones, with a local model of which kind comes next (docs/predict.md,
    "Inter-arrival time")."""
    distant_ns: int
    ewma: list[float] = field(default_factory=lambda: [0.0, 0.0])  # immediate, distant
    seen: list[int] = field(default_factory=lambda: [0, 0])
    kinds: LocalModel = field(default_factory=lambda: LocalModel(2, "zero", runs=True, cap=4096))
    n: int = 0
    low: int = 0
    high: int = 0
    mean: float = 0.0
    m2: float = 0.0

    def predict(self) -> float:
        """The gap expected next: the average of the kind predicted (of the other kind if this one was never
        seen)."""
        kind = self.kinds.predict()
        return self.ewma[kind] if self.seen[kind] else self.ewma[1 - kind]

    def observe(self, gap: int) -> None:
        kind = int(gap >= self.distant_ns)
        self.ewma[kind] = gap if not self.seen[kind] else (self.ewma[kind] + gap) / 2
        self.seen[kind] += 1
        self.kinds.observe(kind)
        self.low, self.high = (gap, gap) if self.n == 0 else (min(self.low, gap), max(self.high, gap))
        self.n += 1
        delta = gap - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (gap - self.mean)

    @property
    def variance(self) -> float:
        return self.m2 / self.n if self.n else 0.0


@dataclass
class PairedModels:
    """Two kinds of local model per key (a symbol's sizes, a transition's offset changes): one over all the key's
    values, and one per place in the run (docs/predict.md, "Places in a run"). Each value observed scores both
    on whether they would have predicted it exactly; the one with more exact predictions is used, the placed one
    on ties. A place not learnt yet takes the nearest place before it."""
    fallback: str
    options: Options
    whole: dict[tuple, LocalModel] = field(default_factory=dict)
    placed: dict[tuple, LocalModel] = field(default_factory=dict)
    tally: dict[tuple, list[int]] = field(default_factory=dict)  # key: [exact by whole, exact by placed]

    def _local(self) -> LocalModel:
        return LocalModel(self.options.distinct_values, self.fallback, cap=self.options.local_cap)

    def _chosen(self, key: tuple, place: int) -> LocalModel | None:
        whole = self.whole.get(key)
        if whole is None:
            return None
        placed = _nearest(self.placed, key, place)
        by_whole, by_placed = self.tally[key]
        return whole if by_whole > by_placed or placed is None else placed

    def predict(self, key: tuple, place: int) -> int:
        """The value predicted for `key` at `place`; 0 for a key never seen."""
        model = self._chosen(key, place)
        return model.predict() if model else 0

    def observe(self, key: tuple, place: int, value: int) -> None:
        whole = self.whole.get(key)
        if whole is None:
            whole, self.tally[key] = self.whole.setdefault(key, self._local()), [0, 0]
        else:
            placed = _nearest(self.placed, key, place) or whole
            self.tally[key][0] += whole.predict() == value
            self.tally[key][1] += placed.predict() == value
        whole.observe(value)
        self.placed.setdefault((*key, place), self._local()).observe(value)

    def fallen_back(self) -> int:
        """Local models (of either kind) that fell back to their mean or 0."""
        return sum(m.fallen_back for m in (*self.whole.values(), *self.placed.values()))


@dataclass
class Returns:
    """Offsets that go back to where an earlier access to the file ended, or to the offset of the last access at
    the same transition and place (docs/predict.md, "Returns", "Absolute offsets"): per file key, the ends of the
    last `return_depth` reads and writes since its last open or close; per transition and place in the run, a
    local model of how many accesses back (0: none of them) and the last offset seen there. Each is used at a
    transition and place once it has predicted the offsets there exactly more often than the offset changes and
    than the other has (ties: changes, then returns)."""
    options: Options
    ends: dict[str, deque[int]] = field(default_factory=dict)
    models: dict[tuple, LocalModel] = field(default_factory=dict)
    absolute: dict[tuple, int] = field(default_factory=dict)  # (from, to, place): the offset seen there last
    tally: dict[tuple, list[int]] = field(default_factory=dict)  # (from, to, place): [by change, return, absolute]

    def predict(self, key: str, transition: tuple, place: int) -> int | None:
        model = _nearest(self.models, transition, place)
        back = model.predict() if model else 0
        ends = self.ends.get(key)
        return ends[-back] if ends is not None and 1 <= back <= len(ends) else None

    def preferred(self, transition: tuple, place: int) -> str:
        """Which predicts the offsets at this transition and place: "change", "return" or "absolute"."""
        by_change, by_return, by_absolute = self.tally.get((*transition, place), (0, 0, 0))
        if by_absolute > max(by_change, by_return):
            return "absolute"
        return "return" if by_return > by_change else "change"

    def observe(self, key: str, transition: tuple, place: int, op: Operation, by_change: int) -> None:
        """Learn a read or write of known offset; `by_change`: the offset the offset changes predicted for it."""
        at = (*transition, place)
        tally = self.tally.setdefault(at, [0, 0, 0])
        tally[0] += by_change == op.offset
        tally[1] += self.predict(key, transition, place) == op.offset
        tally[2] += self.absolute.get(at) == op.offset
        self.absolute[at] = op.offset
        ends = self.ends.setdefault(key, deque(maxlen=self.options.return_depth))
        back = next((j for j in range(1, len(ends) + 1) if ends[-j] == op.offset), 0)
        model = self.models.setdefault(at, LocalModel(self.options.distinct_values, "zero",
                                                      cap=self.options.local_cap))
        model.observe(back)
        ends.append(op.end)

    def forget(self, key: str) -> None:
        """An open or a close: the file's earlier ends are another file's (or may be)."""
        self.ends.pop(key, None)


@dataclass
class ProcessModel:
    """What one process has done so far and what it will do next. `kinds[s]` and `places[s]`: the kind and file
    key of symbol s (given by whoever numbers the symbols)."""
    kinds: dict[int, str]
    places: dict[int, str]
    options: Options = field(default_factory=Options)
    sequence: Sequence = field(init=False)
    sizes: PairedModels = field(init=False)  # per symbol
    offsets: PairedModels = field(init=False)  # per transition
    returns: Returns = field(init=False)
    times: dict[Transition, TimeModel] = field(default_factory=dict)
    positions: dict[str, int] = field(default_factory=dict)
    current: int | None = None
    last_end: int = 0

    def __post_init__(self) -> None:
        o = self.options
        self.sequence = Sequence(o.grammar_cap, o.distinct_values, True, o.local_cap)
        self.sizes, self.offsets, self.returns = PairedModels("mean", o), PairedModels("zero", o), Returns(o)

    @property
    def grammar(self) -> Grammar:
        """The main grammar (over runs of symbols)."""
        return self.sequence.grammar

    def predict(self) -> list[Candidate]:
        return [self._candidate(symbol) for symbol in sorted(self.sequence.predicted())]

    def _place_in_run(self, symbol: int) -> int:
        """Where an operation of `symbol` coming next stands in its run (1: it starts one), capped."""
        place = self.sequence.count + 1 if symbol == self.sequence.value else 1
        return min(place, self.options.run_positions)

    def _candidate(self, symbol: int) -> Candidate:
        transition: Transition = (self.current, symbol)
        timing = self.times.get(transition)
        gap = timing.predict() if timing else 0.0
        if self.kinds[symbol] not in DATA_KINDS:
            return Candidate(symbol, 0, -1, gap)
        place = self._place_in_run(symbol)
        size = self.sizes.predict((symbol,), place)
        return Candidate(symbol, size, self._offset(self.places[symbol], transition, place), gap)

    def _offset(self, key: str, transition: tuple, place: int) -> int:
        by_change = self.positions.get(key, 0) + self.offsets.predict(transition, place)
        preferred = self.returns.preferred(transition, place)
        if preferred == "absolute":
            return self.returns.absolute[(*transition, place)]
        back = self.returns.predict(key, transition, place) if preferred == "return" else None
        return by_change if back is None else back

    def observe(self, op: Operation) -> None:
        transition: Transition = (self.current, op.symbol)
        if self.current is not None:
            timing = self.times.setdefault(transition, TimeModel(self.options.distant_ns))
            timing.observe(max(op.t_start - self.last_end, 0))
        if op.kind in DATA_KINDS:
            place = self._place_in_run(op.symbol)
            self.sizes.observe((op.symbol,), place, op.size)
            if op.offset >= 0:
                by_change = self.positions.get(op.place, 0) + self.offsets.predict(transition, place)
                self.returns.observe(op.place, transition, place, op, by_change)
                self.offsets.observe(transition, place, op.offset - self.positions.get(op.place, 0))
                self.positions[op.place] = op.end
        else:
            self.positions[op.place] = 0  # open and close: the next access is counted from the file's start
            self.returns.forget(op.place)
        self.sequence.input(op.symbol)
        self.current, self.last_end = op.symbol, op.t_end

    def distant(self, transition: Transition) -> bool:
        """A transition between I/O phases (its average inter-arrival time reaches the distant threshold)."""
        timing = self.times.get(transition)
        return timing is not None and timing.mean >= self.options.distant_ns


def _nearest(models: dict, key: tuple, place: int) -> LocalModel | None:
    """The model of `key` at `place` in the run, or, not learnt yet, at the nearest place before it."""
    for at in range(place, 0, -1):
        model = models.get((*key, at))
        if model is not None:
            return model
    return None
