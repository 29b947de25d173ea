"""The predictor's side stream: `<stream>.predict`, written beside a process's event stream by the tracer when
IOLOOM_STACKS or IOLOOM_PREDICT asks for call-stack symbols (native/trace/predict.c; its format: docs/predict.md,
"The side stream"). It holds each traced open, close, read and write's context symbol (its operation and its call
stack as (module, offset) frames) and, with IOLOOM_PREDICT=1, what the tracer's grammar predicted for it."""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

MAGIC = b"IOLOOMPR"
MAJOR = 1
HEADER = struct.Struct("<8sHHI")
CHUNK = struct.Struct("<III")
INFO, MODULES, SYMBOLS, CALLS = 1, 2, 3, 4
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


@dataclass
class SideStream:
    path: Path
    info: dict[str, str] = field(default_factory=dict)
    symbols: dict[int, StackSymbol] = field(default_factory=dict)
    tids: list[int] = field(default_factory=list)        # per call, in the order the tracer's model took them
    calls: list[int] = field(default_factory=list)       # per call, its symbol
    predicted: list[tuple[int, ...]] = field(default_factory=list)  # per call, what was predicted for it (kept)
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
    if magic != MAGIC or major != MAJOR or not HEADER.size <= header <= len(data):
        raise SideStreamDamaged(f"{path}: not a side stream of major version {MAJOR} (magic {magic!r}, major "
                                f"{major}); read it with the ioloom that wrote it, or trace again")
    side, modules = SideStream(path), {0: ""}
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
            _calls(side, payload)
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
    at, tids, calls, predicted, counts = 0, [], [], [], []
    while at < len(payload):
        tid, at = _varint(payload, at)
        symbol, at = _varint(payload, at)
        count, at = _varint(payload, at)
        kept = []
        for _ in range(min(count, 8)):
            value, at = _varint(payload, at)
            kept.append(value)
        if symbol not in side.symbols:
            raise KeyError(f"symbol {symbol} used before it is named")
        tids.append(tid), calls.append(symbol), predicted.append(tuple(kept)), counts.append(count)
    side.tids += tids
    side.calls += calls
    side.predicted += predicted
    side.npredicted += counts
