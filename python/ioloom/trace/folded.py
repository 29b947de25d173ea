"""Folded traces (docs/trace-format.md, "Folded traces"): a trace rewritten as one file whose events are folded by
the predictor's grammar, which `open_trace` opens as it opens the trace it came from (the same streams, files,
metadata and events, column for column).

Per stream, each event's fields other than its times are its **shape** (offsets, call ids, parents and collective
numbers as changes from the event before on the same file or in the stream, so every iteration of a loop has the
same shapes); runs of one shape are tokens (shape, run length); the token sequence is folded by Sequitur
(`ioloom.predict.grammar`, docs/predict.md) and its rules stored; the times are stored as gaps and durations.
Every section is compressed with xz.
"""
from __future__ import annotations

import functools
import json
import lzma
import struct
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa

from ioloom.trace.model import EVENT_SCHEMA, FILE_SCHEMA, Stream, Trace
from ioloom.trace.varint import decode_varints, unzigzag

if TYPE_CHECKING:  # imported where it folds: reading a trace needs no grammar
    from ioloom.predict.grammar import Node

MAGIC = b"IOLOOMFD"
MAJOR, MINOR = 1, 0
NAME = "trace.ioloom-folded"  # the file inside a folded trace directory
GRAMMAR_CAP = 1 << 16  # symbols of a stream's grammar (its Python objects bound memory); later tokens: the tail
# The shape of an event: its fields but times, rank and pid, in this order (docs/trace-format.md says how each
# is coded).
SHAPE = ("tid", "layer", "op", "file_id", "handle", "offset", "req_bytes", "ret_minus_req", "errno", "aux",
         "call_id", "parent", "coll_seq")


class FoldedDamaged(ValueError):
    """A folded trace that cannot be read; the message says what is wrong."""


# ---- varints ------------------------------------------------------------------------------------------------

def zigzag(values: np.ndarray) -> np.ndarray:
    v = np.asarray(values, np.int64)
    return ((v << 1) ^ (v >> 63)).view(np.uint64)


def encode_varints(values: np.ndarray) -> bytes:
    """Unsigned LEB128 of every value (uint64), as the trace format's varints."""
    u = np.asarray(values, np.uint64)
    if u.size == 0:
        return b""
    lengths = np.ones(u.size, np.int64)
    for k in range(1, 10):
        lengths += u >= np.uint64(1) << np.uint64(7 * k)
    starts = np.cumsum(lengths) - lengths
    out = np.empty(int(lengths.sum()), np.uint8)
    for k in range(int(lengths.max())):
        rows = np.flatnonzero(lengths > k)
        low = ((u[rows] >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
        out[starts[rows] + k] = low | np.where(lengths[rows] > k + 1, 0x80, 0).astype(np.uint8)
    return out.tobytes()


def _pack(values: np.ndarray) -> bytes:
    return lzma.compress(encode_varints(values), preset=9)


def _unpack(blob: bytes) -> np.ndarray:
    try:
        raw = lzma.decompress(blob)
    except lzma.LZMAError as e:
        raise FoldedDamaged(f"a section does not decompress ({e})") from None
    if raw and raw[-1] >= 0x80:
        raise FoldedDamaged("a section ends inside a varint")
    return decode_varints(np.frombuffer(raw, np.uint8))


# ---- shapes: fields as changes, so that loops repeat ------------------------------------------------------------

def _changes(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Each value minus the previous one of its group (the first of a group: minus 0); -1 values coded 0, others
    as their change + 1 (after zigzag: nullable changes)."""
    frame = pd.DataFrame({"v": values, "g": groups})
    known = frame[frame.v != -1]
    change = known.v - known.groupby("g").v.shift(1, fill_value=0)
    out = np.zeros(len(values), np.uint64)
    out[known.index.to_numpy()] = zigzag(change.to_numpy()) + np.uint64(1)
    return out


def _unchanges(codes: np.ndarray, groups: np.ndarray) -> np.ndarray:
    known = codes != 0
    frame = pd.DataFrame({"d": unzigzag(codes[known] - np.uint64(1)), "g": groups[known]})
    out = np.full(len(codes), -1, np.int64)
    out[known] = frame.groupby("g").d.cumsum().to_numpy()
    return out


def _step(values: np.ndarray) -> np.ndarray:
    """Each value minus the one before (the first: minus 0): a loop over new files (ids in order) repeats."""
    return np.diff(values.astype(np.int64), prepend=0)


def _last_call(call_id: np.ndarray) -> np.ndarray:
    """The latest call id at or before each event (0 before the first)."""
    return pd.Series(np.where(call_id >= 0, call_id, np.nan)).ffill().fillna(0).to_numpy(np.int64)


def _parents(parent: np.ndarray, call_id: np.ndarray) -> np.ndarray:
    """Parents as the distance back from the latest call id (0: the call just before), -1 coded 0."""
    known = parent != -1
    out = np.zeros(len(parent), np.uint64)
    out[known] = zigzag(_last_call(call_id)[known] - parent[known]) + np.uint64(1)
    return out


def shapes_of(table: pa.Table, layers: list[str], ops: list[str]) -> np.ndarray:
    """The shape of every event of a stream (rows of SHAPE), as uint64."""
    col = {name: table.column(name).to_numpy(zero_copy_only=False) for name in
           ("tid", "file_id", "handle", "offset", "req_bytes", "ret_bytes", "errno", "aux", "call_id", "parent",
            "coll_seq")}
    layer = pd.Categorical(table.column("layer").to_pylist(), categories=layers).codes
    op = pd.Categorical(table.column("op").to_pylist(), categories=ops).codes
    one = np.zeros(table.num_rows, np.int64)
    return np.column_stack([
        zigzag(col["tid"]), layer.astype(np.uint64), op.astype(np.uint64), zigzag(_step(col["file_id"])),
        zigzag(col["handle"]), _changes(col["offset"], col["file_id"]), zigzag(col["req_bytes"]),
        zigzag(col["ret_bytes"] - col["req_bytes"]), zigzag(col["errno"]), zigzag(col["aux"]),
        _changes(col["call_id"], one), _parents(col["parent"], col["call_id"]),
        _changes(col["coll_seq"], col["file_id"])]).astype(np.uint64)


def _by_shape(values: np.ndarray, shape_ids: np.ndarray) -> np.ndarray:
    """Each time (gap or duration) as its change from the previous event of the same shape (from 0), zigzag."""
    frame = pd.DataFrame({"v": values, "s": shape_ids})
    return zigzag((frame.v - frame.groupby("s").v.shift(1, fill_value=0)).to_numpy())


def _from_shape(codes: np.ndarray, shape_ids: np.ndarray) -> np.ndarray:
    return pd.DataFrame({"d": unzigzag(codes), "s": shape_ids}).groupby("s").d.cumsum().to_numpy(np.int64)


def _events_of(shape: np.ndarray, layers: list[str], ops: list[str]) -> dict[str, np.ndarray | list]:
    """The columns (but times, rank and pid) of events from their shapes."""
    s = {name: shape[:, i] for i, name in enumerate(SHAPE)}
    file_id = np.cumsum(unzigzag(s["file_id"]))
    call_id = _unchanges(s["call_id"], np.zeros(len(file_id), np.int64))
    parent = np.full(len(file_id), -1, np.int64)
    known = s["parent"] != 0
    parent[known] = _last_call(call_id)[known] - unzigzag(s["parent"][known] - np.uint64(1))
    req = unzigzag(s["req_bytes"])
    return {"tid": unzigzag(s["tid"]), "layer": [layers[i] for i in s["layer"]], "op": [ops[i] for i in s["op"]],
            "file_id": file_id, "handle": unzigzag(s["handle"]), "offset": _unchanges(s["offset"], file_id),
            "req_bytes": req, "ret_bytes": unzigzag(s["ret_minus_req"]) + req, "errno": unzigzag(s["errno"]),
            "aux": unzigzag(s["aux"]), "call_id": call_id, "parent": parent,
            "coll_seq": _unchanges(s["coll_seq"], file_id)}


# ---- the grammar over runs of shapes -----------------------------------------------------------------------------

def runs_of(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Runs of equal ids: (id, length) per run."""
    if ids.size == 0:
        return ids, ids
    starts = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))
    return ids[starts], np.diff(np.append(starts, ids.size))


def fold(tokens: np.ndarray, cap: int = GRAMMAR_CAP) -> tuple[list[list[int]], np.ndarray]:
    """Sequitur's rules over the tokens (rule 0 is S; an item is 2 x token, or 2 x rule + 1), and the tokens past
    the grammar's cap, stored as they come."""
    from ioloom.predict.grammar import Grammar

    grammar = Grammar(cap=cap)
    taken = 0
    for token in tokens.tolist():
        if grammar.size >= cap:
            break
        grammar.input(token)
        taken += 1
    number = {grammar.start.id: 0}
    for rule_id in grammar.rules:
        number.setdefault(rule_id, len(number))
    rules: list[list[int]] = [[] for _ in number]
    for rule_id, rule in grammar.rules.items():
        rules[number[rule_id]] = [_item(node, number) for node in rule.body()]
    return rules, tokens[taken:]


def _item(node: Node, number: dict[int, int]) -> int:
    """A rule body's node as stored: 2 x its token, or 2 x its rule's number + 1."""
    if node.rule is not None:
        return 2 * number[node.rule.id] + 1
    return 2 * node.sym


def unfold(rules: list[list[int]], tail: np.ndarray) -> np.ndarray:
    """The tokens the rules and tail stand for."""
    done: dict[int, np.ndarray] = {}

    def expand(rule: int, depth: int = 0) -> np.ndarray:
        if rule not in done:
            if depth > len(rules):
                raise FoldedDamaged("the grammar's rules refer to each other in a cycle")
            parts = [np.array([item // 2]) if item % 2 == 0 else expand(item // 2, depth + 1) for item in rules[rule]]
            done[rule] = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        return done[rule]

    for item in (i for body in rules for i in body if i % 2):
        if item // 2 >= len(rules):
            raise FoldedDamaged(f"a rule refers to rule {item // 2} of {len(rules)}")
    return np.concatenate([expand(0).astype(np.int64), tail.astype(np.int64)]) if rules else tail.astype(np.int64)


def _grammar_section(rules: list[list[int]], tail: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Tokens (shape, run length), then the rules (count, then length and items each), then the tail."""
    body = [len(pairs), *pairs.reshape(-1).tolist(), len(rules)]
    for rule in rules:
        body += [len(rule), *rule]
    return np.array([*body, len(tail), *tail.tolist()], np.uint64)


def _read_grammar(values: np.ndarray) -> tuple[np.ndarray, list[list[int]], np.ndarray]:
    v = values.astype(np.int64)
    try:
        n = int(v[0])
        pairs, at = v[1:1 + 2 * n].reshape(n, 2), 1 + 2 * n
        rules = []
        for _ in range(int(v[at])):
            length = int(v[at + 1])
            rules.append(v[at + 2:at + 2 + length].tolist())
            at += 1 + length
        tail = v[at + 2:at + 2 + int(v[at + 1])]
    except (IndexError, ValueError):
        raise FoldedDamaged("the grammar section is cut short") from None
    return pairs, rules, tail


# ---- one stream ----------------------------------------------------------------------------------------------

def fold_stream(stream: Stream, quantum: int = 1) -> tuple[dict, dict[str, bytes]]:
    """A stream's header entry and its sections (shapes, grammar, times in units of `quantum` ns: 1 keeps them
    exact, more rounds each time down to a multiple of it)."""
    table = stream.read()
    layers = sorted(set(table.column("layer").to_pylist()))
    ops = sorted(set(table.column("op").to_pylist()))
    shapes = shapes_of(table, layers, ops)
    distinct, ids = np.unique(shapes, axis=0, return_inverse=True) if len(shapes) else (shapes, np.zeros(0, int))
    ids = ids.reshape(-1)  # each event's shape
    run_ids, lengths = runs_of(ids)
    pairs, tokens = np.unique(np.column_stack([run_ids, lengths]), axis=0, return_inverse=True) \
        if len(run_ids) else (np.zeros((0, 2), np.int64), np.zeros(0, np.int64))
    rules, tail = fold(tokens.reshape(-1))
    t_start, t_end = (table.column(n).to_numpy() // quantum for n in ("t_start", "t_end"))
    gaps = t_start - np.concatenate(([0], t_end[:-1]))
    sections = {"shapes": _pack(distinct.reshape(-1)), "grammar": _pack(_grammar_section(rules, tail, pairs)),
                "times": _pack(np.concatenate([_by_shape(gaps, ids), _by_shape(t_end - t_start, ids)]))}
    entry = {"pid": stream.pid, "rank": stream.rank, "info": stream.info, "events": table.num_rows, "quantum": quantum,
             "layers": layers, "ops": ops, "shapes": len(distinct), "tokens": len(tokens.reshape(-1)),
             "grammar_symbols": sum(map(len, rules)), "tail_tokens": len(tail)}
    return entry, sections


def _unfold_stream(entry: dict, sections: dict[str, bytes]) -> pa.Table:
    n = entry["events"]
    distinct = _unpack(sections["shapes"]).reshape(-1, len(SHAPE))
    pairs, rules, tail = _read_grammar(_unpack(sections["grammar"]))
    tokens = unfold(rules, tail)
    if tokens.size and (tokens.max() >= len(pairs) or pairs[:, 0].max() >= len(distinct)):
        raise FoldedDamaged("a token or shape number is out of range")
    shape_ids = np.repeat(pairs[tokens, 0], pairs[tokens, 1]) if tokens.size else np.zeros(0, np.int64)
    coded = _unpack(sections["times"])
    if len(shape_ids) != n or len(coded) != 2 * n:
        raise FoldedDamaged(f"a stream holds {len(shape_ids):,} events and {len(coded) // 2:,} times, not {n:,}")
    times = np.concatenate([_from_shape(coded[:n], shape_ids), _from_shape(coded[n:], shape_ids)])
    columns = _events_of(distinct[shape_ids], entry["layers"], entry["ops"])
    t_end = np.cumsum(times[:n] + times[n:])
    quantum = int(entry["quantum"])
    columns.update(t_start=(t_end - times[n:]) * quantum, t_end=t_end * quantum, rank=np.full(n, entry["rank"]),
                   pid=np.full(n, entry["pid"]))
    return pa.table({field.name: columns[field.name] for field in EVENT_SCHEMA}).cast(EVENT_SCHEMA)


# ---- the file ------------------------------------------------------------------------------------------------

def write(trace: Trace, path: Path, quantum: int = 1, progress=lambda events: None) -> dict:
    """Writes the folded form of a trace to `path` (a file); the header written. quantum: see fold_stream."""
    entries, blobs, at = [], [], 0
    for stream in trace.streams:
        entry, sections = fold_stream(stream, quantum)
        progress(entry["events"])
        entry["sections"] = {}
        for name, blob in sections.items():
            entry["sections"][name] = [at, len(blob)]
            blobs.append(blob)
            at += len(blob)
        entries.append(entry)
    files = [list(row.values()) for row in trace.files.to_pylist()]
    header = lzma.compress(json.dumps({"meta": trace.meta, "files": files, "problems": trace.problems,
                                       "streams": entries}, default=str).encode(), preset=9)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(MAGIC + struct.pack("<HHI", MAJOR, MINOR, len(header)) + header + b"".join(blobs))
    tmp.replace(path)
    return json.loads(lzma.decompress(header))


def read(path: Path) -> Trace:
    """A folded trace as the Trace it was made from; streams are unfolded when first read."""
    data = path.read_bytes()
    if data[:8] != MAGIC or len(data) < 16:
        raise FoldedDamaged(f"{path}: not a folded ioloom trace")
    major, _minor, size = struct.unpack("<HHI", data[8:16])
    if major != MAJOR:
        raise FoldedDamaged(f"{path}: folded trace version {major}, this ioloom reads {MAJOR}; fold the trace again")
    try:
        header = json.loads(lzma.decompress(data[16:16 + size]))
    except (ValueError, lzma.LZMAError):
        raise FoldedDamaged(f"{path}: its header is damaged") from None
    body = memoryview(data)[16 + size:]
    streams = [_stream(entry, body) for entry in header["streams"]]
    columns: list[list] = [list(c) for c in zip(*header["files"])] if header["files"] else [[], [], [], []]
    files = pa.table(columns, schema=FILE_SCHEMA)
    quanta = sorted({int(entry["quantum"]) for entry in header["streams"]})
    meta = {**header["meta"], "path": str(path.parent), "folded": f"{MAJOR}.{MINOR}", "time_quantum_ns": quanta}
    return Trace(streams, files, meta,
                 header["problems"])


def _stream(entry: dict, body: memoryview) -> Stream:
    sections = {name: bytes(body[at:at + length]) for name, (at, length) in entry["sections"].items()}
    whole = functools.cache(lambda: _unfold_stream(entry, sections))
    return Stream(entry["pid"], entry["rank"], entry["info"], lambda columns: whole().select(columns)
                  if columns else whole())
