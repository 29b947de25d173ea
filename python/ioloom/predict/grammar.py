"""Sequitur with predictors (docs/predict.md, "The grammar" and "Predictors"): an online grammar of a stream of
integer symbols that also says which symbols may come next.

Sequitur (Nevill-Manning and Witten) keeps two constraints as each symbol is appended to rule S: no digram (pair
of adjacent symbols) appears twice in the grammar (a repeat becomes a rule, or the rule it already is), and every
rule is used at least twice (a rule used once is put back in place). Rule bodies are circular doubly linked lists
of nodes around a guard; a dictionary indexes each digram's first node.

Predictors (Omnisc'IO, Dorier's thesis Ch. 7) are marks on nodes: a marked terminal is a symbol expected next, a
marked non-terminal is an instance of a rule a marked symbol lies inside. When the input matches a marked
terminal, the mark moves to the node after it (leaving a rule moves the marks of its marked instances); marks
that did not match are dropped; when none is left, every occurrence of the last symbol of S (or, when S ends
with a rule, every instance of that rule) is marked with the rules around it, and moved on. The prediction is
the set of marked terminals' symbols. Marks follow the nodes through Sequitur's rewrites.
"""
from __future__ import annotations

from dataclasses import dataclass, field


class Node:
    """One symbol in a rule body of `owner` (`rule` None: a terminal, `sym` >= 0; `rule` set: an instance of that
    rule, `sym` = -id-1), or its guard (`is_guard`; no rule, its `sym` never compared). A node not yet in a body
    links to itself."""
    __slots__ = ("sym", "rule", "owner", "prev", "next", "mark", "is_guard")

    def __init__(self, sym: int, rule: Rule | None, owner: Rule, is_guard: bool = False):
        self.sym, self.rule, self.owner, self.is_guard = sym, rule, owner, is_guard
        self.prev: Node = self
        self.next: Node = self
        self.mark = False


class Rule:
    """A rule: its body between `guard.next` and `guard.prev`, the nodes that use it, and how many of its body's
    nodes are marked."""
    __slots__ = ("id", "guard", "uses", "marked")

    def __init__(self, rule_id: int):
        self.id = rule_id
        self.guard = Node(0, None, self, is_guard=True)
        self.uses: set[Node] = set()
        self.marked = 0

    @property
    def first(self) -> Node:
        return self.guard.next

    @property
    def last(self) -> Node:
        return self.guard.prev

    def body(self) -> list[Node]:
        out: list[Node] = []
        node = self.guard.next
        while not node.is_guard:
            out.append(node)
            node = node.next
        return out


@dataclass
class Grammar:
    """The grammar and its predictors. `cap`: at most that many symbols in all rule bodies; past it the grammar
    stops growing (each symbol not appended is counted in `past_cap`) and predicts from what it holds."""
    cap: int = 1 << 16
    rules: dict[int, Rule] = field(default_factory=dict)
    size: int = 0
    past_cap: int = 0
    _digrams: dict[tuple[int, int], Node] = field(default_factory=dict)
    _terminals: dict[int, set[Node]] = field(default_factory=dict)
    _expected: set[Node] = field(default_factory=set)
    _next_id: int = 0

    def __post_init__(self) -> None:
        self.start = self._new_rule()

    # ---- the prediction --------------------------------------------------------------------------------------
    def predicted(self) -> set[int]:
        """The symbols expected next (empty: no prediction)."""
        return {node.sym for node in self._expected}

    def input(self, sym: int) -> None:
        """Take the next symbol: move the predictors, append it to S and restore Sequitur's constraints (or, past
        the cap, only move the predictors), then find predictors anew if none is left."""
        assert sym >= 0, "terminals are non-negative integers"
        self._update(sym)
        if self.size < self.cap:
            self._append(sym)
            if not self._expected:
                self._discover(self._occurrences_of(self.start.last))
        else:
            self.past_cap += 1
            if not self._expected:
                self._discover(list(self._terminals.get(sym, ())))

    def _occurrences_of(self, node: Node) -> list[Node]:
        """Where the last symbol of S (a terminal, or a rule: its instances) appears in the grammar."""
        return list(node.rule.uses) if node.rule is not None else list(self._terminals[node.sym])

    def _update(self, sym: int) -> None:
        matched = [node for node in self._expected if node.sym == sym]
        for node in [node for node in self._expected if node.sym != sym]:
            if node.mark:
                self._unmark_up(node)
        self._advance(matched)

    def _discover(self, targets: list[Node]) -> None:
        """Mark every target and, recursively, every instance of the rules holding it; then move them on."""
        seen: set[int] = set()
        pending = list(targets)
        for node in targets:
            self._mark(node)
        while pending:
            owner = pending.pop().owner
            if owner is self.start or owner.id in seen:
                continue
            seen.add(owner.id)
            for use in owner.uses:
                self._mark(use)
                pending.append(use)
        self._advance(targets)

    def _advance(self, matched: list[Node]) -> None:
        """Move the marks of `matched` (nodes just completed) to the nodes after them; a node that ends its rule
        completes the rule's marked instances in turn."""
        completed: dict[Node, None] = {}  # in order, each once
        targets: list[Node] = []
        pending = list(matched)
        while pending:
            node = pending.pop()
            if node in completed:
                continue
            completed[node] = None
            if not node.next.is_guard:
                targets.append(node.next)
            elif node.owner is not self.start:
                pending.extend(use for use in node.owner.uses if use.mark)
        for node in completed:
            self._unmark(node)
        for node in targets:
            self._mark_down(node)
        for node in completed:
            self._drop_orphans(node)

    # ---- marks ---------------------------------------------------------------------------------------------
    def _mark(self, node: Node) -> None:
        if not node.mark:
            node.mark = True
            node.owner.marked += 1
            if node.rule is None:
                self._expected.add(node)

    def _unmark(self, node: Node) -> None:
        if node.mark:
            node.mark = False
            node.owner.marked -= 1
            self._expected.discard(node)

    def _mark_down(self, node: Node) -> None:
        """Mark a node expected next and, if it is a rule, the first symbol of its expansion."""
        self._mark(node)
        while node.rule is not None:
            node = node.rule.first
            self._mark(node)

    def _unmark_up(self, node: Node) -> None:
        """Drop a mark that failed; a rule left without marks is no longer entered by its instances."""
        self._unmark(node)
        owner = node.owner
        if owner is not self.start and owner.marked == 0:
            for use in [use for use in owner.uses if use.mark]:
                self._unmark_up(use)

    def _drop_orphans(self, node: Node) -> None:
        """A rule whose instances are all unmarked keeps no marks in its body (predictor utility)."""
        rule = node.rule
        if rule is not None and rule.marked and not any(use.mark for use in rule.uses):
            for inner in rule.body():
                if inner.mark:
                    self._unmark(inner)
                    self._drop_orphans(inner)

    # ---- Sequitur --------------------------------------------------------------------------------------------
    def _new_rule(self) -> Rule:
        rule = Rule(self._next_id)
        self._next_id += 1
        self.rules[rule.id] = rule
        return rule

    def _new_node(self, sym: int, rule: Rule | None, owner: Rule) -> Node:
        node = Node(sym, rule, owner)
        self.size += 1
        if rule is not None:
            rule.uses.add(node)
        else:
            self._terminals.setdefault(sym, set()).add(node)
        return node

    def _copy(self, node: Node, owner: Rule) -> Node:
        return self._new_node(node.sym, node.rule, owner)

    def _append(self, sym: int) -> None:
        node = self._new_node(sym, None, self.start)
        self._insert_after(self.start.last, node)
        self._check(node.prev)

    def _insert_after(self, left: Node, node: Node) -> None:
        self._join(node, left.next)
        self._join(left, node)

    def _join(self, left: Node, right: Node) -> None:
        """Link left to right; left's old digram leaves the index (runs of three equal symbols keep theirs)."""
        if left.next is not left:  # left is in a body already
            self._forget_digram(left)
            if _middle_of_three(right):
                self._digrams[(right.sym, right.sym)] = right
            if _middle_of_three(left):
                self._digrams[(left.sym, left.sym)] = left.prev
        left.next, right.prev = right, left

    def _forget_digram(self, node: Node) -> None:
        if node.is_guard or node.next.is_guard:
            return
        key = (node.sym, node.next.sym)
        if self._digrams.get(key) is node:
            del self._digrams[key]

    def _remove(self, node: Node) -> None:
        """Take a node out of its rule (its rule, if it is an instance, loses a use)."""
        self._unmark(node)
        self._join(node.prev, node.next)
        self._forget_digram(node)
        self.size -= 1
        if node.rule is not None:
            node.rule.uses.discard(node)
        else:
            self._terminals[node.sym].discard(node)

    def _check(self, node: Node) -> bool:
        """Enforce digram uniqueness on the digram starting at node; True if it was a repeat."""
        if node.is_guard or node.next.is_guard:
            return False
        key = (node.sym, node.next.sym)
        found = self._digrams.get(key)
        if found is None:
            self._digrams[key] = node
            return False
        if found is not node and found.next is not node and node.next is not found:
            self._match(node, found)
        return found is not node

    def _match(self, new: Node, old: Node) -> None:
        """The digram at `new` repeats the one at `old`: both become one rule (or `old`'s whole rule)."""
        if old.prev.is_guard and old.next.next.is_guard and old.owner is not self.start:
            rule = old.owner
            self._substitute(new, rule)
        else:
            rule = self._new_rule()
            first, second = self._copy(new, rule), self._copy(new.next, rule)
            self._insert_after(rule.guard, first)
            self._insert_after(first, second)
            self._substitute(old, rule)
            self._substitute(new, rule)
            self._digrams[(first.sym, second.sym)] = first
        first, second = rule.first, rule.first.next
        for node in (first, second):
            if node.rule is not None and len(node.rule.uses) == 1 and node.owner is rule:
                self._expand(node, node.rule)

    def _substitute(self, node: Node, rule: Rule) -> None:
        """Replace the digram at node by an instance of rule (its marks move into the rule's body)."""
        marks = (node.mark, node.next.mark)
        left = node.prev
        self._remove(left.next)
        self._remove(left.next)
        instance = self._new_node(-rule.id - 1, rule, left.owner)
        self._insert_after(left, instance)
        if any(marks):
            self._mark(instance)
            for inner, marked in zip((rule.first, rule.first.next), marks):
                if marked:
                    self._mark(inner)
        if not self._check(left):
            self._check(instance)

    def _expand(self, node: Node, rule: Rule) -> None:
        """Rule utility: node's rule is used only here; its body takes the node's place."""
        owner = node.owner
        left, right = node.prev, node.next
        body = rule.body()
        if not node.mark:
            for inner in body:
                if inner.mark:
                    self._unmark(inner)
                    self._drop_orphans(inner)
        self._unmark(node)
        self._forget_digram(node)
        self._forget_digram(left)
        rule.uses.discard(node)
        self.size -= 1
        del self.rules[rule.id]
        for inner in body:
            rule.marked -= inner.mark
            owner.marked += inner.mark
            inner.owner = owner
        left.next, body[0].prev = body[0], left
        body[-1].next, right.prev = right, body[-1]
        for start in (left, body[-1]):
            if not start.is_guard and not start.next.is_guard:
                self._digrams.setdefault((start.sym, start.next.sym), start)

    # ---- reading -------------------------------------------------------------------------------------------
    def expansion(self, rule: Rule | None = None) -> list[int]:
        """The terminals a rule (default S) stands for."""
        out: list[int] = []
        stack = [(rule or self.start).first]
        while stack:
            node = stack.pop()
            if node.is_guard:
                continue
            stack.append(node.next)
            if node.rule is not None:
                stack.append(node.rule.first)
            else:
                out.append(node.sym)
        return out


def _middle_of_three(node: Node) -> bool:
    """Whether node and the nodes on either side, all in a body, are three equal symbols."""
    before, after = node.prev, node.next
    return not (node.is_guard or before.is_guard or after.is_guard) and before is not node and after is not node \
        and before.sym == node.sym == after.sym
