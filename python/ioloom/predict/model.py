"""The predictor of one process (docs/predict.md): the grammar of its context symbols, a size model per symbol,
an offset model and an inter-arrival time model per transition between symbols. `ProcessModel.predict()` says
what the next operation may be (one candidate per predicted symbol); `observe(op)` learns the operation that came.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from ioloom.predict.grammar import Grammar

KINDS = ("open", "close", "read", "write")
DATA_KINDS = ("read", "write")


class Operation(NamedTuple):
    """One operation of a process, as the predictor sees it. offset: where it started (-1 unknown), size: bytes
    asked (0 for open and close); `place`: the file key its offset is counted on (the symbol's file); file_id:
    the trace's id of the file itself."""
    symbol: int
    kind: str
    place: str
    file_id: int
    offset: int
    size: int
    t_start: int
    t_end: int


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


@dataclass
class LocalModel:
    """The values seen at one symbol (sizes) or one transition (offset changes): one value, then a local grammar
    over the distinct values, then past `limit` distinct values the mean (sizes) or 0 (offsets: consecutive)."""
    limit: int
    fallback_value: str  # "mean" or "zero"
    tokens: dict[int, int] = field(default_factory=dict)
    counts: list[int] = field(default_factory=list)
    grammar: Grammar | None = field(default_factory=Grammar)
    last: int = 0
    total: int = 0
    seen: int = 0
    low: int = 0
    high: int = 0

    def observe(self, value: int) -> None:
        self.low, self.high = (value, value) if not self.seen else (min(self.low, value), max(self.high, value))
        self.last, self.total, self.seen = value, self.total + value, self.seen + 1
        if self.grammar is None:
            return
        if value not in self.tokens:
            if len(self.tokens) == self.limit:
                self.grammar = None  # the fallback: the local grammar and its values are freed
                self.tokens, self.counts = {}, []
                return
            self.tokens[value] = len(self.tokens)
            self.counts.append(0)
        token = self.tokens[value]
        self.counts[token] += 1
        self.grammar.input(token)

    @property
    def fallen_back(self) -> bool:
        return self.grammar is None

    def predict(self) -> int:
        if self.grammar is None:
            return round(self.total / self.seen) if self.fallback_value == "mean" else 0
        if len(self.tokens) == 1:
            return self.last
        values = list(self.tokens)
        expected = self.grammar.predicted()
        if not expected:
            return self.last
        return values[max(expected, key=lambda token: self.counts[token])]


@dataclass
class TimeModel:
    """Inter-arrival times (end of one operation to the start of the next) of one transition: the halving
    average of Eq. 7.1 (first sample as start), min, max, mean and variance (Welford)."""
    ewma: float = 0.0
    n: int = 0
    low: int = 0
    high: int = 0
    mean: float = 0.0
    m2: float = 0.0

    def observe(self, gap: int) -> None:
        self.ewma = gap if self.n == 0 else (self.ewma + gap) / 2
        self.low, self.high = (gap, gap) if self.n == 0 else (min(self.low, gap), max(self.high, gap))
        self.n += 1
        delta = gap - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (gap - self.mean)

    @property
    def variance(self) -> float:
        return self.m2 / self.n if self.n else 0.0


@dataclass
class ProcessModel:
    """What one process has done so far and what it will do next. `kinds[s]` and `places[s]`: the kind and file
    key of symbol s (given by whoever numbers the symbols)."""
    kinds: dict[int, str]
    places: dict[int, str]
    options: Options = field(default_factory=Options)
    grammar: Grammar = field(init=False)
    sizes: dict[int, LocalModel] = field(default_factory=dict)
    offsets: dict[tuple[int, int], LocalModel] = field(default_factory=dict)
    times: dict[tuple[int, int], TimeModel] = field(default_factory=dict)
    positions: dict[str, int] = field(default_factory=dict)
    current: int | None = None
    last_end: int = 0

    def __post_init__(self) -> None:
        self.grammar = Grammar(cap=self.options.grammar_cap)

    def predict(self) -> list[Candidate]:
        return [self._candidate(symbol) for symbol in sorted(self.grammar.predicted())]

    def _candidate(self, symbol: int) -> Candidate:
        transition = (self.current, symbol)
        timing = self.times.get(transition)
        gap = timing.ewma if timing else 0.0
        if self.kinds[symbol] not in DATA_KINDS:
            return Candidate(symbol, 0, -1, gap)
        size = self.sizes[symbol].predict() if symbol in self.sizes else 0
        change = self.offsets[transition].predict() if transition in self.offsets else 0
        return Candidate(symbol, size, self.positions.get(self.places[symbol], 0) + change, gap)

    def observe(self, op: Operation) -> None:
        transition = (self.current, op.symbol)
        if self.current is not None:
            self.times.setdefault(transition, TimeModel()).observe(max(op.t_start - self.last_end, 0))
        if op.kind in DATA_KINDS:
            limit = self.options.distinct_values
            self.sizes.setdefault(op.symbol, LocalModel(limit, "mean")).observe(op.size)
            if op.offset >= 0:
                change = op.offset - self.positions.get(op.place, 0)
                self.offsets.setdefault(transition, LocalModel(limit, "zero")).observe(change)
                self.positions[op.place] = op.offset + op.size
        else:
            self.positions[op.place] = 0  # open and close: the next access is counted from the file's start
        self.grammar.input(op.symbol)
        self.current, self.last_end = op.symbol, op.t_end

    def distant(self, transition: tuple[int, int]) -> bool:
        """A transition between I/O phases (its average inter-arrival time reaches the distant threshold)."""
        timing = self.times.get(transition)
        return timing is not None and timing.mean >= self.options.distant_ns
