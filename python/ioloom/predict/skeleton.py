"""The grammar written out as the program's I/O skeleton (docs/predict.md, "Skeleton"): "repeat 100 x: open
out_#.h5, 24 x write out_#.h5 1 MiB, close out_#.h5". A terminal of the main grammar is a run of one symbol, its
lengths from the run-length model ("24 x", "80-140 x").

Sequitur folds a loop of n iterations into rules that each hold two halves of the one before (R2 -> R1 R1,
R3 -> R2 R2 ...), so a rule whose body is made of one repeated thing is read as "that thing, so many times", the
counts added; adjacent repeats of one thing are merged; any other rule is written in place.
"""
from __future__ import annotations

from ioloom.predict.grammar import Grammar, Node, Rule
from ioloom.predict.model import LocalModel

Base = tuple[str, int]  # ("t", symbol) or ("r", rule id)
Item = tuple[Base, int]  # a base and how many times in a row


def human_bytes(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            value = n / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} B"


class Skeleton:
    """Writes the items of a grammar's rules with the symbols' names and sizes."""

    def __init__(self, grammar: Grammar, names: list[str], sizes: dict[tuple[int], LocalModel],
                 runs: dict[int, LocalModel] | None = None):
        self.grammar, self.names, self.runs = grammar, names, runs or {}
        self.sizes = {key[0]: (model.low, model.high) for key, model in sizes.items()}  # per symbol
        self._repeats: dict[int, Item | None] = {}

    def _base(self, node: Node) -> Item:
        if node.rule is None:
            return ("t", node.sym), 1
        repeat = self._repeat(node.rule)
        return repeat if repeat is not None else (("r", node.rule.id), 1)

    def _repeat(self, rule: Rule) -> Item | None:
        """(base, count) when the rule's body is one base repeated, else None."""
        if rule.id not in self._repeats:
            runs = _merged(self._base(node) for node in rule.body())
            self._repeats[rule.id] = runs[0] if len(runs) == 1 else None
        return self._repeats[rule.id]

    def items(self, rule: Rule) -> list[Item]:
        """The rule's body as runs of bases; a rule that is not a repeat is written in place."""
        parts: list[Item] = []
        for node in rule.body():
            base, count = self._base(node)
            parts.extend(self.items(self.grammar.rules[base[1]]) if base[0] == "r" and count == 1 else
                         [(base, count)])
        return _merged(parts)

    def length(self, base: Base) -> float:
        """Operations one instance of a base stands for (each run at its mean length)."""
        symbols = [base[1]] if base[0] == "t" else self.grammar.expansion(self.grammar.rules[base[1]])
        return sum(self._mean_run(symbol) for symbol in symbols)

    def _mean_run(self, symbol: int) -> float:
        run = self.runs.get(symbol)
        return run.total / run.seen if run is not None and run.seen else 1.0

    def write(self, items: list[Item], limit: int = 12) -> str:
        shown = [self._item(item) for item in items[:limit]]
        return ", ".join(shown) + (f", ... ({len(items) - limit} more)" if len(items) > limit else "")

    def _item(self, item: Item) -> str:
        (kind, value), count = item
        if kind == "t":
            text = self._symbol(value)
            return text if count == 1 else f"{count} x {text}"
        inner = self.write(self.items(self.grammar.rules[value]))
        return f"repeat {count} x: ({inner})"

    def _symbol(self, symbol: int) -> str:
        """A terminal of the main grammar: a run of one symbol, written `[LENGTH x ]NAME[ SIZE]`."""
        run = self.runs.get(symbol)
        times = "" if run is None or run.high == 1 else \
            (f"{run.low} x " if run.low == run.high else f"{run.low}-{run.high} x ")
        if symbol not in self.sizes:
            return f"{times}{self.names[symbol]}"
        low, high = self.sizes[symbol]
        span = human_bytes(low) if low == high else f"{human_bytes(low)}-{human_bytes(high)}"
        return f"{times}{self.names[symbol]} {span}"

    def main_loop(self) -> str | None:
        """The repeat of S that covers the most operations, written out; None if S repeats nothing."""
        loops = [item for item in self.items(self.grammar.start) if item[1] > 1]
        if not loops:
            return None
        best = max(loops, key=lambda item: item[1] * self.length(item[0]))
        text = self._item(best)
        return text[:-1].replace(": (", ": ", 1) if text.startswith("repeat") else text

    def full(self) -> str:
        return self.write(self.items(self.grammar.start))


def _merged(items) -> list[Item]:
    """Adjacent runs of one base joined."""
    out: list[Item] = []
    for base, count in items:
        if out and out[-1][0] == base:
            out[-1] = (base, out[-1][1] + count)
        else:
            out.append((base, count))
    return out
