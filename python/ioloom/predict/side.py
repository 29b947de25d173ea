"""The predictor's side stream: `<stream>.predict`, written beside a process's event stream by the tracer when
IOLOOM_STACKS or IOLOOM_PREDICT asks for call-stack symbols (native/trace/predict.c; its format: docs/predict.md,
"The side stream"). It holds each traced open, close, read and write's context symbol (its operation and its call
stack as (module, offset) frames), from version 2 its file key and the gap before it, and, with IOLOOM_PREDICT=1,
what the tracer's model predicted for it (version 2: each candidate's symbol, file key, size, offset and gap)."""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

MAGIC = b"IOLOOMPR"
MAJORS = (1, 2)  # read; the tracer writes the last
HEADER = struct.Struct("<8sHHI")
CHUNK = struct.Struct("<III")
INFO, MODULES, SYMBOLS, CALLS, KEYS = 1, 2, 3, 4, 5
KEPT = 8  # candidates the tracer keeps per call (native/trace/predict.c)
SUFFIX = ".predict"


class SideStreamDamaged(ValueError):
    """A side stream that cannot be read at all (not one, or of a major version this reader does not know)."""


@dataclass(frozen=True)
class Frame:
    module: str  # the module's path ("" for an address in no module)
    offset: int  # from the module's load address


@dataclass(frozen=True)
class StackSymbol:
    op: str                  # "" for the symbol that stands for every stack past the tracer's limit
    frames: tuple[Frame, ...]


@dataclass(frozen=True)
class Predicted:
    """One candidate the tracer's model gave for a call (version 2): the symbol it predicted, as its stack symbol
    and file key, with its size, offset (-1: none; a change from the base may predict another below 0) and gap
    (ns after the last call's end, rounded)."""
    symbol: int
    key: int
    size: int
    offset: int
    gap_ns: int


@dataclass
class SideStream:
    path: Path
    major: int = 2
    info: dict[str, str] = field(default_factory=dict)
    symbols: dict[int, StackSymbol] = field(default_factory=dict)
    keys: dict[int, str] = field(default_factory=dict)  # file keys (version 2)
    tids: list[int] = field(default_factory=list)        # per call, in the order the tracer's model took them
    calls: list[int] = field(default_factory=list)       # per call, its symbol
    call_keys: list[int] = field(default_factory=list)   # per call, its file key (version 1: 0)
    gaps: list[int] = field(default_factory=list)        # per call, ns from the last call's end (version 1: 0)
    # per call, what was predicted for it (kept): version 1 the stack symbols, version 2 Predicted candidates
    predicted: list[tuple] = field(default_factory=list)
    npredicted: list[int] = field(default_factory=list)  # per call, how many symbols were predicted
    problems: list[str] = field(default_factory=list)

    def count(self, key: str) -> int:
        return int(self.info.get(key, 0))


def side_path(stream_path: str | Path) -> Path:
    """Where the side stream of an event stream (`<host>-<pid>[-<n>].ioloom`) is."""
    path = Path(stream_path)
    return path.with_suffix(SUFFIX)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise IndexError("varint runs past its chunk")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if byte < 0x80:
            return value, pos


def _cstr(data: bytes, pos: int) -> tuple[str, int]:
    end = data.index(b"\0", pos)
    return data[pos:end].decode("utf-8", "replace"), end + 1


def read_side(path: str | Path) -> SideStream | None:
    """The side stream at `path`, None when there is none. Damaged chunks are skipped and named in `problems`."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    if len(data) < HEADER.size:
        raise SideStreamDamaged(f"{path}: too short for a side stream ({len(data)} bytes); remove it or trace again")
    magic, major, _minor, header = HEADER.unpack_from(data)
    if magic != MAGIC or major not in MAJORS or not HEADER.size <= header <= len(data):
        raise SideStreamDamaged(f"{path}: not a side stream of major version {' or '.join(map(str, MAJORS))} "
                                f"(magic {magic!r}, major {major}); read it with the ioloom that wrote it, or trace "
                                "again")
    side, modules = SideStream(path, major), {0: ""}
    pos, crc = header, 0
    while pos + CHUNK.size <= len(data):
        kind, length, stored = CHUNK.unpack_from(data, pos)
        end = pos + CHUNK.size + length
        if end > len(data):
            side.problems.append(f"{path.name}: cut short at byte {pos} (the process was killed while writing)")
            break
        payload = data[pos + CHUNK.size:end]
        computed = zlib.crc32(payload, zlib.crc32(data[pos:pos + 8], crc))
        if computed != stored:
            side.problems.append(f"{path.name}: chunk at byte {pos} fails its checksum: skipped")
        else:
            _chunk(side, modules, kind, payload, pos)
        pos, crc = end, stored
    return side


def _chunk(side: SideStream, modules: dict[int, str], kind: int, payload: bytes, pos: int) -> None:
    try:
        if kind == INFO:
            at = 0
            while at < len(payload):
                key, at = _cstr(payload, at)
                side.info[key], at = _cstr(payload, at)
        elif kind == MODULES:
            at = 0
            while at < len(payload):
                index, at = _varint(payload, at)
                modules[index], at = _cstr(payload, at)
        elif kind == SYMBOLS:
            _symbol(side, modules, payload)
        elif kind == CALLS:
            (_calls if side.major == 1 else _calls_v2)(side, payload)
        elif kind == KEYS and side.major >= 2:
            number, at = _varint(payload, 0)
            side.keys[number], at = _cstr(payload, at)
        else:
            side.problems.append(f"{side.path.name}: chunk of unknown type {kind} at byte {pos}: skipped")
    except (IndexError, ValueError, KeyError) as err:
        side.problems.append(f"{side.path.name}: malformed chunk of type {kind} at byte {pos} ({err}): skipped")


def _symbol(side: SideStream, modules: dict[int, str], payload: bytes) -> None:
    symbol, at = _varint(payload, 0)
    op, at = _cstr(payload, at)
    count, at = _varint(payload, at)
    frames = []
    for _ in range(count):
        module, at = _varint(payload, at)
        offset, at = _varint(payload, at)
        frames.append(Frame(modules[module], offset))
    side.symbols[symbol] = StackSymbol(op, tuple(frames))


def _calls(side: SideStream, payload: bytes) -> None:
    at = 0
    tids: list[int] = []
    calls: list[int] = []
    predicted: list[tuple[int, ...]] = []
    counts: list[int] = []
    while at < len(payload):
        tid, at = _varint(payload, at)
        symbol, at = _varint(payload, at)
        count, at = _varint(payload, at)
        kept = []
        for _ in range(min(count, KEPT)):
            value, at = _varint(payload, at)
            kept.append(value)
        if symbol not in side.symbols:
            raise KeyError(f"symbol {symbol} used before it is named")
        tids.append(tid)
        calls.append(symbol)
        predicted.append(tuple(kept))
        counts.append(count)
    side.tids += tids
    side.calls += calls
    side.call_keys += [0] * len(calls)
    side.gaps += [0] * len(calls)
    side.predicted += predicted
    side.npredicted += counts


def _candidate(payload: bytes, at: int) -> tuple[Predicted, int]:
    fields = []
    for _ in range(5):
        value, at = _varint(payload, at)
        fields.append(value)
    symbol, key, size, zigzag, gap = fields
    return Predicted(symbol, key, size, zigzag >> 1 ^ -(zigzag & 1), gap), at


def _calls_v2(side: SideStream, payload: bytes) -> None:
    """Records of version 2: tid, symbol, file key, gap, count, then up to KEPT candidates."""
    at = 0
    records: list[tuple[list[int], tuple[Predicted, ...]]] = []
    while at < len(payload):
        fields = []
        for _ in range(5):
            value, at = _varint(payload, at)
            fields.append(value)
        kept = []
        for _ in range(min(fields[4], KEPT)):
            candidate, at = _candidate(payload, at)
            kept.append(candidate)
        if fields[1] not in side.symbols or fields[2] not in side.keys:
            raise KeyError(f"symbol {fields[1]} or file key {fields[2]} used before it is named")
        records.append((fields, tuple(kept)))
    for (tid, symbol, key, gap, count), candidates in records:
        side.tids.append(tid)
        side.calls.append(symbol)
        side.call_keys.append(key)
        side.gaps.append(gap)
        side.predicted.append(candidates)
        side.npredicted.append(count)
