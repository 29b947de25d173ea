"""FOLDED chunks (docs/trace-format.md, "FOLDED chunks"): a buffer of events the tracer folded (IOLOOM_FOLD=1,
native/trace/fold.c) unfolded into the EVENTS chunk of the same events, which the reader then decodes as any
other. Natively (`ioloom_unfold_events` of libioloom-trace-decode) when it is built, in Python here otherwise:
the same checks, the same events (the Python chunk stores every column plain)."""
from __future__ import annotations

import ctypes
import struct

import numpy as np

from ioloom.trace.folded import encode_varints, zigzag
from ioloom.trace.varint import CONST, RUNS, VARINT, _native_library, read_varint

VERSION = 1
SHAPE_FIELDS = 13
MAX_QUANTUM = 10 ** 9
MAX_EVENTS = 1 << 20
OP, LAYER, FILE, HANDLE, ABSENT, OFFSET, REQ, RET_MINUS_REQ, ERRNO, AUX, CALL, PARENT, COLL = range(SHAPE_FIELDS)
A_OFFSET, A_CALL, A_PARENT, A_COLL, A_FILE = 1, 2, 4, 8, 16
RECENT = 8  # fold.c's FOLD_RECENT: files are named by their place among the last 8 events' files
KEYS = 384  # fold.c's FOLD_KEYS: (file, operation) pairs whose offsets and coll_seq are followed
EVENTS = 4  # the chunk type the unfolded chunk has
SMALL, ESCAPE = 3, 3  # fold.h's IOLOOM_FOLD_COL_SMALL mode of a time column, and its escape code
# fold.h, enum ioloom_unfold_problem: what the reader says
PROBLEMS = {1: "its header (version, thread, event count, quantum or t_base) is malformed",
            2: "its shape table is malformed", 3: "its token table is malformed",
            4: "its grammar is malformed or does not give its events", 5: "a time column is malformed",
            6: "bytes follow its last column", 7: "no memory to unfold it"}
MASK = (1 << 64) - 1


class FoldedMalformed(ValueError):
    """A FOLDED chunk that does not unfold; the message says what is wrong."""


def unfold(payload: bytes) -> bytes:
    """The EVENTS chunk (header with type and length, checksum 0) of the events of a FOLDED payload; raises
    FoldedMalformed."""
    lib = _native_library()
    if lib is None:
        return unfold_python(payload)
    n = lib.ioloom_folded_events(payload, len(payload))
    if n == 0:
        raise FoldedMalformed(PROBLEMS[1])
    out = ctypes.create_string_buffer(lib.ioloom_events_bound(n))
    size = lib.ioloom_unfold_events(payload, len(payload), out, len(out))
    if size < 0:
        raise FoldedMalformed(PROBLEMS.get(-size, f"problem {-size}"))
    return out.raw[:size]


def _unzigzag(u: int) -> int:
    return (u >> 1) ^ -(u & 1)


class _Cursor:
    """A FOLDED payload read varint by varint: a varint that fails raises with the section's problem."""

    def __init__(self, data: bytes, problem: int):
        self.data, self.pos, self.problem = data, 0, problem

    def take(self) -> int:
        try:
            value, self.pos = read_varint(self.data, self.pos)
        except ValueError:
            raise FoldedMalformed(PROBLEMS[self.problem]) from None
        return value

    def check(self, holds: bool) -> None:
        if not holds:
            raise FoldedMalformed(PROBLEMS[self.problem])


def _shape_valid(s: list[int]) -> bool:
    absent = s[ABSENT]
    present = all(not (absent & bit and s[field]) for bit, field in
                  ((A_OFFSET, OFFSET), (A_CALL, CALL), (A_PARENT, PARENT), (A_COLL, COLL), (A_FILE, FILE)))
    return 0 <= s[OP] <= 32767 and 0 <= s[LAYER] <= 4 and s[FILE] >= 0 \
        and -(1 << 31) <= s[ERRNO] < 1 << 31 and 0 <= absent <= 31 and present


class _Files:
    """fold.c's recent files (the last RECENT files named, most recent first; the highest id so far + 1)."""

    def __init__(self):
        self.recent, self.next = [-1] * RECENT, 0

    def file_of(self, field: int) -> int:
        """The file id a shape's file field names, moved to the front; -1 when it names none."""
        file_id = self.recent[field] if field < RECENT else self.next + _unzigzag(field - RECENT)
        if not 0 <= file_id < 1 << 24:
            return -1
        place = self.recent.index(file_id) if file_id in self.recent else RECENT - 1
        del self.recent[place]
        self.recent.insert(0, file_id)
        self.next = max(self.next, file_id + 1)
        return file_id


def _read_header(c: _Cursor) -> tuple[int, int, int, int]:
    version, tid, n, quantum, t_base = (c.take() for _ in range(5))
    c.check(version == VERSION and tid < 1 << 31 and 1 <= n <= MAX_EVENTS and 1 <= quantum <= MAX_QUANTUM
            and t_base <= ((1 << 63) - 1) // quantum)
    return tid, n, quantum, t_base


def _read_shapes(c: _Cursor, n: int) -> list[list[int]]:
    c.problem = 2
    count = c.take()
    c.check(1 <= count <= n)
    shapes = [[_unzigzag(c.take()) for _ in range(SHAPE_FIELDS)] for _ in range(count)]
    c.check(all(_shape_valid(s) for s in shapes))
    return shapes


def _read_tokens(c: _Cursor, n: int, shapes: int) -> list[tuple[int, int]]:
    c.problem = 3
    count = c.take()
    c.check(1 <= count <= n)
    tokens = [(c.take(), c.take()) for _ in range(count)]
    c.check(all(shape < shapes and 1 <= run <= n for shape, run in tokens))
    return tokens


def _read_rules(c: _Cursor, tokens: int) -> list[list[int]]:
    """The rules, each its items: rule 0 (S) one item or more, the others two (Sequitur's)."""
    c.problem = 4
    count = c.take()
    c.check(2 <= count <= len(c.data) - c.pos)
    values = [c.take() for _ in range(count)]
    rules, at = values[0], 1
    c.check(1 <= rules <= count // 2)
    items = []
    for r in range(rules):
        length = values[at] if at < count else 0
        c.check((1 if r == 0 else 2) <= length <= count - at - 1)
        body = values[at + 1:at + 1 + length]
        c.check(all(1 <= x // 2 < rules if x % 2 else x // 2 < tokens for x in body))
        items.append(body)
        at += 1 + length
    c.check(at == count)
    return items


def _expand(c: _Cursor, rules: list[list[int]], tokens: list[tuple[int, int]], n: int) -> list[int]:
    """Each row's shape, S expanded (fold.c's expand: a stack as deep as there are rules)."""
    rows: list[int] = []
    stack = [(0, 0)]
    while stack:
        rule, item = stack.pop()
        if item == len(rules[rule]):
            continue
        stack.append((rule, item + 1))
        x = rules[rule][item]
        if x % 2 == 0:
            shape, run = tokens[x // 2]
            c.check(run <= n - len(rows))
            rows.extend([shape] * run)
        else:
            c.check(len(stack) < len(rules))
            stack.append((x // 2, 0))
    c.check(len(rows) == n)
    return rows


def _read_values(c: _Cursor, n: int) -> list[int]:
    """A time column in an EVENTS chunk's layout (mode, body length, body) of n values."""
    c.problem = 5
    c.check(c.pos < len(c.data))
    mode = c.data[c.pos]
    c.pos += 1
    length = c.take()
    c.check(length <= len(c.data) - c.pos and mode in (CONST, VARINT, RUNS, SMALL))
    body = _Cursor(c.data[c.pos:c.pos + length], 5)
    c.pos += length
    if mode == SMALL:
        values = _read_small(body, n)
    elif mode == CONST:
        values = [_unzigzag(body.take())] * n
    elif mode == VARINT:
        values = [_unzigzag(body.take()) for _ in range(n)]
    else:
        runs = body.take()
        body.check(1 <= runs <= n)
        run_values = [_unzigzag(body.take()) for _ in range(runs)]
        lengths = [body.take() for _ in range(runs)]
        body.check(sum(lengths) == n)
        values = [v for v, k in zip(run_values, lengths) for _ in range(k)]
    body.check(body.pos == len(body.data))
    return values


def _read_small(body: _Cursor, n: int) -> list[int]:
    """A SMALL body: n 2-bit codes (0, 1, -1, or an escaped zigzag varint after the codes), four to a byte."""
    codes = (n + 3) // 4
    body.check(codes <= len(body.data))
    raw = np.frombuffer(body.data[:codes], np.uint8)
    code = ((raw[:, None] >> np.arange(0, 8, 2, dtype=np.uint8)) & 3).reshape(-1)
    body.check(not code[n:].any())  # the last byte's unused codes are 0
    body.pos = codes
    small = (0, 1, -1)
    return [_unzigzag(body.take()) if k == ESCAPE else small[k] for k in code[:n].tolist()]


def _group_sums(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Each value plus the values before it of the same group (64-bit sums that wrap, as fold.c's)."""
    order = np.argsort(groups, kind="stable")
    ordered, sorted_groups = values[order], groups[order]
    sums = np.cumsum(ordered)
    starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])
    before = np.repeat((sums - ordered)[starts], np.diff(np.r_[starts, len(values)]))
    out = np.empty_like(values)
    out[order] = sums - before
    return out


def _file_ids(field: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Each row's file id (-1 where absent): fold.c's file_of at the rows that name a file other than the previous
    one (field > 0), that file carried to the rows after it that name the previous one (field 0)."""
    files, n = _Files(), len(field)
    moves = np.flatnonzero(present & (field != 0))
    ids = np.full(n + 1, -1, np.int64)  # ids[n] = -1: a row before any move names no file
    ids[moves] = [files.file_of(int(f)) for f in field[moves]]
    latest = np.maximum.accumulate(np.where(present & (field != 0), np.arange(n), -1))
    file_id = np.where(present, ids[np.where(latest >= 0, latest, n)], -1)
    if (file_id[present] == -1).any():
        raise FoldedMalformed(PROBLEMS[2])
    return file_id


def _followed(s: np.ndarray, file_id: np.ndarray, field: int, absent: np.ndarray) -> np.ndarray:
    """An offset or coll_seq: its change summed over the rows of its (file, operation) for the first KEYS pairs to
    appear, the change alone past them; -1 where absent."""
    key = file_id * 65536 + s[:, OP]
    unique, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    rank = np.empty(len(unique), np.int64)
    rank[np.argsort(first)] = np.arange(len(unique))
    change = np.where(absent, 0, s[:, field])
    return np.where(absent, -1, np.where(rank[inverse] < KEYS, _group_sums(change, inverse.ravel()), change))


def _rows(shapes, row_shape, gaps, durations, quantum, t_base) -> np.ndarray:
    """The events (fold.c's unfold_row), column by column: a row of t_start, t_end, then the stored columns'
    fields."""
    shape_of = np.asarray(row_shape, np.int64)
    s = np.array(shapes, np.int64)[shape_of]
    absent = s[:, ABSENT]
    file_id = _file_ids(s[:, FILE], absent & A_FILE == 0)
    with np.errstate(over="ignore"):
        gap = _group_sums(np.array(gaps, np.int64), shape_of)
        duration = _group_sums(np.array(durations, np.int64), shape_of)
        end = np.int64(t_base) + np.cumsum(gap + duration)
        call = np.cumsum(np.where(absent & A_CALL, 0, s[:, CALL]))
        return np.column_stack((
            (end - duration) * np.int64(quantum), end * np.int64(quantum), s[:, OP], s[:, LAYER], file_id,
            s[:, HANDLE], _followed(s, file_id, OFFSET, absent & A_OFFSET != 0), s[:, REQ],
            s[:, REQ] + s[:, RET_MINUS_REQ], s[:, ERRNO], s[:, AUX], np.where(absent & A_CALL, -1, call),
            np.where(absent & A_PARENT, -1, call - s[:, PARENT]), _followed(s, file_id, COLL, absent & A_COLL != 0)))


def _events_chunk(tid: int, rows: np.ndarray) -> bytes:
    """The EVENTS chunk of the rows, every column plain (docs/trace-format.md, "EVENTS chunk")."""
    start, end, op, layer, file, handle, offset, req, ret, errno, aux, call, parent, coll = rows.T
    with np.errstate(over="ignore"):
        gap = start - np.concatenate(([start[0]], end[:-1]))

        def steps(v: np.ndarray) -> np.ndarray:
            return np.concatenate((v[:1], v[1:] - v[:-1]))
        columns = (gap, end - start, op, layer, file, handle, steps(offset), steps(req), ret - req, errno,
                   steps(aux), steps(call), steps(parent), steps(coll))
    payload = encode_varints(np.array([tid, len(rows), int(start[0]) & MASK], np.uint64))
    for column in columns:
        body = encode_varints(zigzag(column))
        payload += bytes([VARINT]) + encode_varints(np.array([len(body)], np.uint64)) + body
    return struct.pack("<III", EVENTS, len(payload), 0) + payload


def _read_structure(c: _Cursor) -> tuple[tuple[int, int, int, int], list[list[int]], list[tuple[int, int]],
                                          list[list[int]]]:
    """A FOLDED payload's structure: its header, shapes, tokens and rules; the cursor left at the time columns."""
    header = _read_header(c)
    n = header[1]
    shapes = _read_shapes(c, n)
    tokens = _read_tokens(c, n, len(shapes))
    return header, shapes, tokens, _read_rules(c, len(tokens))


def _read_times(c: _Cursor, header: tuple[int, int, int, int], tokens: list[tuple[int, int]],
                rules: list[list[int]]) -> tuple[list[int], list[int], list[int]]:
    """Each row's shape (the grammar expanded) and the two time columns (gaps, durations) as stored, which follow
    the structure."""
    n = header[1]
    return _expand(c, rules, tokens, n), _read_values(c, n), _read_values(c, n)


def unfold_python(payload: bytes) -> bytes:
    """unfold() without the native library."""
    c = _Cursor(payload, 1)
    header, shapes, tokens, rules = _read_structure(c)
    row_shape, gaps, durations = _read_times(c, header, tokens, rules)
    tid, _, quantum, t_base = header
    c.problem = 6
    c.check(c.pos == len(payload))
    rows = _rows(shapes, row_shape, gaps, durations, quantum, t_base)
    return _events_chunk(tid, rows)


def parts(payload: bytes) -> tuple[int, list[int], list[int]]:
    """The bytes of a FOLDED payload's structure (header, shapes, tokens, rules: its two time columns are the
    rest), and those columns as stored: each row's gap and duration (in quanta) less those of the previous row of
    its shape. The payload is parsed once."""
    c = _Cursor(payload, 1)
    header, _, tokens, rules = _read_structure(c)
    structure = c.pos
    _, gaps, durations = _read_times(c, header, tokens, rules)
    return structure, gaps, durations
