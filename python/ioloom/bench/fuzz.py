"""`ioloom bench fuzz`: damage real traces and logfs containers on purpose and run every reader on each case.

Seeds are made by running real programs: a trace of `dd` and `cat` over logfs (`ioloom run --logfs`, which also
leaves a container of sequential writes) and a container of strided writes, an overwrite, a truncate and a hole
with an extra backend (`ioloom container run -b`). Each case copies the seeds, mutates one file (byte flips,
truncations at and around every chunk, block and entry boundary, field-aware mutations with the checksums made
to match, huge values, duplicated, dropped and reordered chunks, deleted or symlinked files, hostile metadata
lines), then runs the trace reader, every container tool and a preloaded read on it. Python calls run in worker
processes (forked, so they start fast); a worker that dies by a signal is a crash, one that does not finish a
tool within the timeout is a hang. The preloaded read (`cat` through libioloom-logfs) is a subprocess of its own.
What each outcome means: docs/bench.md, section "Fuzzing".
"""
from __future__ import annotations

import builtins
import dataclasses
import enum
import hashlib
import io
import json
import multiprocessing
import os
import random
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
import zlib
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path

import typer

from ioloom.bench import app
from ioloom.errors import is_user_error

OUTCOMES = ("ok", "clean", "crash", "hang", "uncaught", "wrong")  # worst last but one: a case counts as its worst
SEVERITY = {"ok": 0, "clean": 1, "wrong": 2, "uncaught": 3, "hang": 4, "crash": 5}
TRACE_MAGIC, TRACE_HEADER, CHUNK = b"IOLOOMTR", struct.Struct("<8sHHI"), struct.Struct("<III")
INFO, OPS, FILES, EVENTS, FOLDED, FILE_DELTAS = 1, 2, 3, 4, 5, 6
TABLES = {OPS: "OPS", FILES: "FILES", FILE_DELTAS: "FILE_DELTAS"}
HUGE = (0, 1, 2, 127, 128, 255, 4095, 4096, (1 << 31) - 1, 1 << 31, (1 << 32) - 1, 1 << 32, (1 << 32) + 1,
        (1 << 53) + 1, (1 << 62), (1 << 63) - 1, 1 << 63, (1 << 64) - 2, (1 << 64) - 1)
HOSTILE_TEXT = ("", "x", "12ab", "-1", "0", "1e309", "nan", " ", "1 2", "1 2 3 4", "x y", "4294967296",
                "9223372036854775808", "18446744073709551616", "-9223372036854775809", "\u00ff\u0100", "0x10",
                "1_000", "\t7", "1" * 400)
INFO_KEYS = ("pid", "ppid", "rank", "nranks", "dropped_events", "clean_exit", "ended_by_exec", "start_monotonic_ns",
             "start_realtime_ns", "clock_init", "clock_finalize", "exclude:/tmp", "include:/tmp", "layers", "argv",
             "buffer_budget_exhausted_tid", "note.x")
ENTRY_FIELDS = (("kind", 0, "<I"), ("file_id", 4, "<I"), ("offset", 8, "<Q"), ("length", 16, "<Q"),
                ("count", 24, "<Q"), ("stride", 32, "<Q"), ("physical", 40, "<Q"), ("pstride", 48, "<Q"),
                ("stamp", 56, "<Q"), ("stamp_last", 64, "<Q"), ("data_sum", 72, "<Q"))
BLOCK_FIELDS = (("magic", 0, "<I"), ("version", 4, "<I"), ("writer", 8, "<Q"), ("count", 16, "<I"))
RECORD_FIELDS = (("kind", 4, "<H"), ("version", 6, "<H"), ("file_id", 8, "<I"), ("offset", 16, "<Q"),
                 ("length", 24, "<Q"), ("count", 32, "<Q"), ("stride", 40, "<Q"), ("physical", 48, "<Q"),
                 ("pstride", 56, "<Q"), ("stamp", 64, "<Q"), ("stamp_last", 72, "<Q"), ("writer", 80, "<Q"),
                 ("data_sum", 88, "<Q"))  # a record of a run of writes (format version 3)
BLOCK_SIZE, ENTRY_SIZE, RECORD_SIZE = 32, 80, 96
MEMBER_KINDS, MEMBER_WEIGHTS = ("index.", "ioloom-logfs.meta", "records.", "log."), (4, 2, 2, 2)  # what a case damages
FILE_LIMIT = 64 << 20  # the largest file a worker or the preloaded read may write (a hostile size is not followed)
CASE_ROOT = "/ioloom-fuzz-case"  # where a case stands while it is drawn: write_case puts the directory it is written to
WRITER = """import os, random, sys
data = random.Random(7).randbytes(1 << 16)
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
for i in range(16):
    os.pwrite(fd, data[i * 1024:(i + 1) * 1024], i * 3072)
os.pwrite(fd, data[:5000], 40000)
os.ftruncate(fd, 60000)
os.pwrite(fd, data[5000:9000], 70000)
os.close(fd)
"""


# ---- seeds

@dataclasses.dataclass
class Seeds:
    """The real inputs every case starts from: the files under `root` by relative path, the trace's streams,
    each container's logical bytes and backends, and what the reader made of the intact trace."""
    root: Path
    files: dict[str, bytes]
    directories: list[str]  # every directory under root (an extra backend's spread directory may hold nothing)
    streams: list[str]
    containers: dict[str, bytes]  # container path -> its logical bytes
    backends: dict[str, list[str]]  # container path -> its extra backend directories
    stream_digests: dict[str, str]  # stream path -> digest of its events, the stream read alone
    crc: str  # how this build's chunks are summed (CRC_FORMS)


def _ioloom(*args: str, env: dict | None = None, cwd: Path | None = None) -> None:
    out = subprocess.run([sys.executable, "-m", "ioloom", *args], capture_output=True, text=True, cwd=cwd,
                         env={**os.environ, "IOLOOM_LOGFS_CHUNK": "65536", **(env or {})}, timeout=300)
    if out.returncode:
        raise RuntimeError(f"making the fuzz seeds: ioloom {' '.join(args)} exited {out.returncode}: {out.stderr}")


def make_seeds(root: Path, seed: int) -> Seeds:
    """Trace a small real program over logfs and write a second container with an extra backend, under root."""
    for sub in ("mnt", "mnt2", "extra", "outside"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "src").write_bytes(random.Random(seed).randbytes(100_000))
    (root / "outside" / "secret").write_bytes(b"not the container's bytes\n" * 64)
    (root / "writer.py").write_text(WRITER)
    _ioloom("run", "-o", "trace", "--logfs", "mnt", "--", "sh", "-c",
            "dd if=src of=mnt/seq bs=4096 status=none && cat mnt/seq > copy", cwd=root)
    # and a stream of FOLDED chunks beside them (times at 1 us: the SMALL time columns too)
    _ioloom("run", "-o", "folded", "--fold", "--fold-quantum-ns", "1000", "--", "dd", "if=src", "of=copy2",
            "bs=512", "status=none", cwd=root)
    for stream in (root / "folded").iterdir():
        stream.rename(root / "trace" / stream.name)
    (root / "folded").rmdir()
    _name_streams(root / "trace")
    # as rank 0, the writer group r0, whose logs go to the extra backend (docs/logfs-format.md: backend
    # (fnv1a("r0") ^ fnv1a("/data")) mod 2 = 1); without a rank the group is named by the pid, and the backend with it
    _ioloom("container", "run", "-m", "mnt2", "-b", "extra", "--", sys.executable, "writer.py", "mnt2/data",
            env={"PMI_RANK": "0"}, cwd=root)
    seeds = load_seeds(root)
    if not any(name.startswith("extra/") for name in seeds.files):
        raise RuntimeError(f"making the fuzz seeds: {root / 'mnt2/data'} wrote nothing to its extra backend")
    return seeds


def _name_streams(trace: Path) -> None:
    """The streams renamed <k>-<program>.ioloom in the order their processes started: their names (host and pid)
    change from run to run, and the streams' order decides which one a case damages."""
    from ioloom.trace import open_trace
    streams = sorted(open_trace(trace).streams, key=lambda s: int(s.info["start_monotonic_ns"]))
    for k, stream in enumerate(streams):
        program = Path(stream.info["argv"].split("\x1f")[0]).name  # arguments are separated by U+001F
        Path(stream.info["path"]).rename(trace / f"{k}-{program}.ioloom")


def load_seeds(root: Path) -> Seeds:
    from ioloom.logfs.format import Container
    files = {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    directories = [str(p.relative_to(root)) for p in sorted(root.rglob("*")) if p.is_dir()]
    streams = sorted(name for name in files if name.startswith("trace/"))
    containers, backends = {}, {}
    for name in ("mnt/seq", "mnt2/data"):
        c = Container.open(root / name)
        containers[name] = c.read()
        backends[name] = [str(Path(b).relative_to(root)) for b in c.meta.backends[1:]]
    digests = {}
    for name in streams:
        digest = trace_digest(root / name)
        if digest["problems"]:
            raise RuntimeError(f"the seed stream {root / name} does not read cleanly: {digest['problems']}")
        digests[name] = digest["streams"][Path(name).name]
    return Seeds(root, files, directories, streams, containers, backends, digests, _crc_form(files[streams[0]]))


def trace_digest(path: Path) -> dict:
    """What the reader makes of a trace: its problems and a digest of every stream's events (rows sorted, so
    chunks read in another order give the same digest)."""
    import pyarrow as pa

    from ioloom.trace import open_trace
    trace = open_trace(path)
    streams = {}
    for stream in trace.streams:
        table = stream.read()
        table = pa.table({n: (c.cast(pa.string()) if pa.types.is_dictionary(c.type) else c)
                          for n, c in zip(table.column_names, table.columns)})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table.sort_by([(n, "ascending") for n in table.column_names]))
        streams[Path(stream.info["path"]).name] = hashlib.sha1(sink.getvalue()).hexdigest()
    return {"problems": list(trace.problems), "streams": streams}


# ---- trace mutations

CRC_FORMS = {
    "payload": lambda kind, payload: zlib.crc32(payload),
    "type+payload": lambda kind, payload: zlib.crc32(payload, zlib.crc32(struct.pack("<I", kind))),
    "type+length+payload": lambda kind, payload: zlib.crc32(payload, zlib.crc32(struct.pack("<II", kind,
                                                                                              len(payload)))),
}


def chunks(data: bytes) -> tuple[int, list[tuple[int, int, int]]]:
    """(header size, [(offset, type, payload length)]) of a stream file's whole chunks."""
    header = struct.unpack_from("<I", data, 12)[0] if len(data) >= 16 else len(data)
    out, pos = [], header
    while pos + CHUNK.size <= len(data):
        kind, length, _ = CHUNK.unpack_from(data, pos)
        if pos + CHUNK.size + length > len(data):
            break
        out.append((pos, kind, length))
        pos += CHUNK.size + length
    return header, out


def _crc_form(data: bytes) -> str:
    """Which CRC_FORMS sum this build's writer uses (the format may put the type under the checksum), or "chained"
    (format 2: each chunk's checksum goes on from the previous one's; a crafted chunk re-chains the stream)."""
    from ioloom.trace.stream_file import rechain  # the trace reader loads numpy and pandas: not at start-up

    if rechain(data) == data:
        return "chained"
    _, found = chunks(data)
    for name, form in CRC_FORMS.items():
        if all(form(k, data[o + 12:o + 12 + n]) == CHUNK.unpack_from(data, o)[2] for o, k, n in found):
            return name
    return "payload"


def _chunk(kind: int, payload: bytes, crc: str) -> bytes:
    return CHUNK.pack(kind, len(payload), CRC_FORMS[crc](kind, payload) if crc in CRC_FORMS else 0) + payload


def _replace_chunk(data: bytes, at: tuple[int, int, int], payload: bytes, crc: str, kind: int | None = None) -> bytes:
    from ioloom.trace.stream_file import rechain

    offset, old_kind, length = at
    out = data[:offset] + _chunk(old_kind if kind is None else kind, payload, crc) + data[offset + 12 + length:]
    return rechain(out) if crc == "chained" else out


def uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while pos < len(data):
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not byte & 0x80:
            break
    return value, pos


def _huge(rng: random.Random, near: int | None = None) -> int:
    """A hostile value for an integer field: 0 (a divisor, an empty count), one near the field's own value, one
    near a power of two where arithmetic overflows, or random bits."""
    pick = rng.random()
    if pick < 0.15:
        return 0
    if near is not None and pick < 0.35:
        return max(0, near + rng.choice((-1, 1, 2, -2, near, 1 << 32)))
    if pick < 0.85:
        return rng.choice(HUGE)
    return rng.getrandbits(rng.choice((8, 16, 32, 64, 70)))


def _flip(rng: random.Random, data: bytes, start: int = 0, end: int | None = None) -> tuple[bytes, str]:
    end = len(data) if end is None else end
    if end <= start:
        return data, "nothing to flip"
    out, where = bytearray(data), []
    for _ in range(rng.choice((1, 1, 2, 4))):
        at = rng.randrange(start, end)
        out[at] ^= rng.randrange(1, 256)
        where.append(at)
    return bytes(out), f"bytes flipped at {where}"


def _cut(rng: random.Random, data: bytes, bounds: list[int]) -> tuple[bytes, str]:
    at = rng.choice(bounds) + rng.choice((0, 0, 0, -1, 1, 4, -4, 11, 12, 13))
    at = min(max(at, 0), len(data))
    return data[:at], f"truncated to {at} bytes (of {len(data)})"


def _ends_clean(data: bytes) -> bool:
    """Whether a stream ends exactly after a whole clean_exit INFO chunk: a stream cut there (after a clean_exit
    that late chunks made the writer restate) is a complete stream to any reader, so the cut cannot be noticed."""
    _, found = chunks(data)
    if not found:
        return False
    offset, kind, length = found[-1]
    payload = data[offset + 12:offset + 12 + length]
    return offset + 12 + length == len(data) and kind == INFO and payload.startswith(b"clean_exit\0")


def _info_pairs(payload: bytes) -> list[tuple[bytes, bytes]]:
    parts = payload.split(b"\0")
    return list(zip(parts[0:-1:2], parts[1::2]))


def mutate_info(rng: random.Random, data: bytes, at, crc: str) -> tuple[bytes, str]:
    pairs = _info_pairs(data[at[0] + 12:at[0] + 12 + at[2]])
    key = rng.choice([k for k, _ in pairs] + [k.encode() for k in INFO_KEYS])
    value = rng.choice(HOSTILE_TEXT).encode()
    if rng.random() < 0.2:
        payload = b"".join(k + b"\0" + v + b"\0" for k, v in pairs) + key + b"\0" + value  # no closing NUL
    else:
        payload = b"".join(k + b"\0" + (value if k == key else v) + b"\0" for k, v in pairs)
        payload += b"" if key in dict(pairs) else key + b"\0" + value + b"\0"
    return _replace_chunk(data, at, payload, crc), f"INFO {key.decode(errors='replace')}={value[:40]!r}, CRC made valid"


def mutate_table(rng: random.Random, data: bytes, at, crc: str) -> tuple[bytes, str]:
    """An OPS, FILES or FILE_DELTAS chunk with one varint replaced by a huge value, a layer byte out of range or a
    string without its NUL; the CRC made to match."""
    payload = bytearray(data[at[0] + 12:at[0] + 12 + at[2]])
    if not payload:
        return data, "empty table chunk"
    choice = rng.random()
    if choice < 0.5:
        pos = rng.randrange(len(payload))
        _, end = _read_uvarint(bytes(payload), pos)
        value = _huge(rng)
        payload[pos:end] = uvarint(value)
        what = f"varint at {pos} set to {value}"
    elif choice < 0.8 and at[1] == OPS:
        pos = rng.randrange(len(payload))
        payload[pos] = rng.choice((4, 5, 127, 255))
        what = f"byte {pos} (a layer?) set to {payload[pos]}"
    else:
        payload = payload[:-1]
        what = "the last string lost its NUL"
    return _replace_chunk(data, at, bytes(payload), crc), f"{TABLES[at[1]]} {what}, CRC valid"


def _event_fields(payload: bytes) -> list[tuple[str, int, int]]:
    """(name, start, end) of an EVENTS payload's header varints and each column's mode byte and length varint."""
    fields, pos = [], 0
    for name in ("tid", "n", "t_base"):
        _, end = _read_uvarint(payload, pos)
        fields.append((name, pos, end))
        pos = end
    for column in range(14):
        if pos >= len(payload):
            break
        fields.append((f"column {column} mode", pos, pos + 1))
        length, end = _read_uvarint(payload, pos + 1)
        fields.append((f"column {column} body length", pos + 1, end))
        pos = end + length
    return fields


def mutate_events(rng: random.Random, data: bytes, at, crc: str) -> tuple[bytes, str]:
    payload = data[at[0] + 12:at[0] + 12 + at[2]]
    if rng.random() < 0.3:
        flipped, where = _flip(rng, payload)
        return _replace_chunk(data, at, flipped, crc), f"EVENTS payload {where}, CRC valid"
    name, start, end = rng.choice(_event_fields(payload))
    if name.endswith("mode"):
        new = bytes([rng.choice((0, 1, 2, 3, 4, 127, 255))])
    else:
        new = uvarint(_huge(rng, _read_uvarint(payload, start)[0])) if rng.random() < 0.9 else b"\xff" * 11
    return _replace_chunk(data, at, payload[:start] + new + payload[end:], crc), \
        f"EVENTS {name} set to {new.hex()}, CRC valid"


def mutate_folded(rng: random.Random, data: bytes, at, crc: str) -> tuple[bytes, str]:
    """A FOLDED chunk's payload with a byte changed, or one of its header varints (version, tid, n, quantum,
    t_base, shape count) set to a huge value, the checksum made to match."""
    payload = data[at[0] + 12:at[0] + 12 + at[2]]
    if rng.random() < 0.6:
        flipped, where = _flip(rng, payload)
        return _replace_chunk(data, at, flipped, crc), f"FOLDED payload {where}, CRC valid"
    starts, pos = [], 0
    for _ in range(6):
        _, end = _read_uvarint(payload, pos)
        starts.append((pos, end))
        pos = end
    k = rng.randrange(len(starts))
    start, end = starts[k]
    new = uvarint(_huge(rng, _read_uvarint(payload, start)[0]))
    return _replace_chunk(data, at, payload[:start] + new + payload[end:], crc), \
        f"FOLDED header varint {k} set to {new.hex()}, CRC valid"


def mutate_stream(rng: random.Random, data: bytes, crc: str) -> tuple[bytes, str, bool]:
    """One mutation of a stream file: (bytes, what was done, whether the reader must notice it when it changes
    the events: the mutation breaks a checksum, a length or the order the format promises)."""
    header, found = chunks(data)
    bounds = [0, 8, 16, header] + [o for o, _, _ in found] + [len(data)]
    pick = rng.random()
    typed = {k: [c for c in found if c[1] == k] for k in (INFO, EVENTS, FOLDED, *TABLES)}
    tables = [c for k in TABLES for c in typed[k]]
    if pick < 0.16:
        return (*_flip(rng, data, 8), True)
    if pick < 0.30:
        cut, what = _cut(rng, data, bounds)
        return cut, what, not _ends_clean(cut)
    if pick < 0.36 and found:
        c = rng.choice(found)
        copy = data[c[0]:c[0] + 12 + c[2]]
        at = c[0] + 12 + c[2] if rng.random() < 0.5 else len(data)
        return data[:at] + copy + data[at:], f"chunk at {c[0]} (type {c[1]}) duplicated at {at}", True
    if pick < 0.42 and len(found) > 1:
        a, b = sorted(rng.sample(found, 2))
        first, second = data[a[0]:a[0] + 12 + a[2]], data[b[0]:b[0] + 12 + b[2]]
        return (data[:a[0]] + second + data[a[0] + 12 + a[2]:b[0]] + first + data[b[0] + 12 + b[2]:],
                f"chunks at {a[0]} and {b[0]} swapped", True)
    if pick < 0.46 and found:  # a whole EVENTS chunk taken out is noticed only where the checksums are chained
        c = rng.choice(found)
        return data[:c[0]] + data[c[0] + 12 + c[2]:], f"chunk at {c[0]} (type {c[1]}) removed", \
            c[1] != EVENTS or crc == "chained"
    if pick < 0.52 and found:
        c, kind = rng.choice(found), rng.choice((0, 1, 2, 3, 4, 5, 6, 255, (1 << 32) - 1))
        return data[:c[0]] + struct.pack("<I", kind) + data[c[0] + 4:], \
            f"chunk at {c[0]} type {c[1]} -> {kind}, CRC unchanged", True
    if pick < 0.56 and found:
        c, length = rng.choice(found), _huge(rng, rng.choice(found)[2]) & 0xFFFFFFFF
        return data[:c[0] + 4] + struct.pack("<I", length) + data[c[0] + 8:], \
            f"chunk at {c[0]} length {c[2]} -> {length}", True
    if pick < 0.60:
        field, offset = rng.choice((("major", 8), ("minor", 10), ("header size", 12)))
        value = _huge(rng) & (0xFFFF if offset < 12 else 0xFFFFFFFF)
        return data[:offset] + value.to_bytes(4 if offset == 12 else 2, "little") + data[offset + (4 if offset == 12
                                                                                                    else 2):], \
            f"header {field} set to {value}", True
    if pick < 0.75 and typed[INFO]:
        return (*mutate_info(rng, data, rng.choice(typed[INFO]), crc), False)
    if pick < 0.85 and tables:
        return (*mutate_table(rng, data, rng.choice(tables), crc), False)
    if typed[FOLDED] and (not typed[EVENTS] or rng.random() < 0.5):
        return (*mutate_folded(rng, data, rng.choice(typed[FOLDED]), crc), False)
    if typed[EVENTS]:
        return (*mutate_events(rng, data, rng.choice(typed[EVENTS]), crc), False)
    return (*_flip(rng, data, 8), True)


# ---- container mutations

def _with_sums(data: bytes) -> bytes:
    """The index journal with every block's sums recomputed (so a crafted entry passes them)."""
    import numpy as np

    from ioloom.logfs.format import BLOCK, header_sum, sum64
    out, at = bytearray(data), 0
    while at + BLOCK_SIZE <= len(out):
        count = struct.unpack_from("<I", out, at + 16)[0]
        end = at + BLOCK_SIZE + count * ENTRY_SIZE
        if end > len(out):
            break
        struct.pack_into("<Q", out, at + 24, sum64(bytes(out[at + BLOCK_SIZE:end])))
        head = np.frombuffer(bytes(out[at:at + BLOCK_SIZE]), BLOCK)[0]
        struct.pack_into("<I", out, at + 20, header_sum(head))
        at = end
    return bytes(out)


def _blocks(data: bytes) -> list[tuple[int, int]]:
    """(offset, end) of each whole block of an index journal."""
    out, at = [], 0
    while at + BLOCK_SIZE <= len(data):
        end = at + BLOCK_SIZE + struct.unpack_from("<I", data, at + 16)[0] * ENTRY_SIZE
        if end > len(data):
            break
        out.append((at, end))
        at = end
    return out


def _set_field(data: bytes, at: int, fields, rng: random.Random) -> tuple[bytes, str]:
    name, offset, fmt = rng.choice(fields)
    old = struct.unpack_from(fmt, data, at + offset)[0]
    value = _huge(rng, old) & ((1 << (8 * struct.calcsize(fmt))) - 1)
    return data[:at + offset] + struct.pack(fmt, value) + data[at + offset + struct.calcsize(fmt):], \
        f"{name} {old} -> {value}"


def _an_entry(rng: random.Random, data: bytes, blocks: list[tuple[int, int]]) -> int:
    """The offset of an index entry, a pattern (count > 1) half the time when there is one."""
    entries = [at for s, e in blocks for at in range(s + BLOCK_SIZE, e, ENTRY_SIZE)]
    patterns = [at for at in entries if struct.unpack_from("<Q", data, at + 24)[0] > 1]
    return rng.choice(patterns if patterns and rng.random() < 0.5 else entries)


def mutate_index(rng: random.Random, data: bytes) -> tuple[bytes, str, bool]:
    blocks = _blocks(data)
    bounds = sorted({0, len(data)} | {b for s, e in blocks for b in [s, s + BLOCK_SIZE, *range(s + BLOCK_SIZE, e,
                                                                                                  ENTRY_SIZE), e]})
    pick = rng.random()
    if pick < 0.15 or not blocks:
        return (*_flip(rng, data), True)
    if pick < 0.3:
        return (*_cut(rng, data, bounds), True)
    start, end = rng.choice(blocks)
    if pick < 0.65 and end > start + BLOCK_SIZE:
        entry = _an_entry(rng, data, blocks)
        changed, what = _set_field(data, entry, ENTRY_FIELDS, rng)
        for _ in range(rng.choice((0, 0, 0, 1, 2))):  # sometimes fields together (a count with a stride)
            changed, more = _set_field(changed, entry, ENTRY_FIELDS, rng)
            what += f", {more}"
        return _with_sums(changed), f"index entry at {entry}: {what}, sums made valid", False
    if pick < 0.75:
        changed, what = _set_field(data, start, BLOCK_FIELDS, rng)
        return _with_sums(changed), f"block at {start}: {what}, sums made valid", False
    if pick < 0.85:
        return data[:end] + data[start:end] + data[end:], f"block at {start} duplicated", False
    if pick < 0.92 and len(blocks) > 1:
        (a, b), (c, d) = sorted(rng.sample(blocks, 2))
        return data[:a] + data[c:d] + data[b:c] + data[a:b] + data[d:], f"blocks at {a} and {c} swapped", False
    return data[:start] + data[end:], f"block at {start} removed", False


def mutate_records(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    import numpy as np

    from ioloom.logfs.format import RECORD, header_sum
    pick = rng.random()
    if pick < 0.3 or len(data) < RECORD_SIZE:
        return _flip(rng, data)
    if pick < 0.55:
        return _cut(rng, data, list(range(0, len(data) + 1, RECORD_SIZE)))
    at = RECORD_SIZE * rng.randrange(len(data) // RECORD_SIZE)
    changed, what = _set_field(data, at, RECORD_FIELDS, rng)
    head = np.frombuffer(changed[at:at + RECORD_SIZE], RECORD)[0]
    changed = changed[:at + 12] + struct.pack("<I", header_sum(head)) + changed[at + 16:]
    return changed, f"record at {at}: {what}, header sum made valid"


def _meta_line(rng: random.Random, case: Path, container: Path) -> str:
    key = rng.choice(("backend", "backend", "backend", "chunk", "mode", "ioloom-logfs", "junk"))
    if key == "backend":
        value = rng.choice(("../outside", "..", ".", "/nonexistent/x", "", str(case / "outside"), str(case / "mnt"),
                            str(case), str(container), str(container.parent), "extra/../../outside",
                            str(case / "extra")))
    else:
        value = rng.choice(HOSTILE_TEXT)
    return f"{key} {value}"


def mutate_meta(rng: random.Random, data: bytes, case: Path, container: Path) -> tuple[bytes, str, bool]:
    """(bytes, what, inert): inert when only a line that does not name where data lives was added."""
    pick = rng.random()
    if pick < 0.2:
        return (*_flip(rng, data), False)
    if pick < 0.35:
        return (*_cut(rng, data, [i for i, b in enumerate(data) if b == 10] + [0, len(data)]), False)
    lines = data.decode(errors="replace").splitlines()
    line = _meta_line(rng, case, container)
    replace = rng.random() < 0.5 and len(lines) > 1
    if replace:
        lines[rng.randrange(len(lines))] = line
    else:
        lines.insert(rng.randrange(1, len(lines) + 1), line)
    inert = not replace and line.split(" ")[0] in ("chunk", "mode", "junk")
    return ("\n".join(lines) + "\n").encode(), f"meta line {line!r} {'in place of one' if replace else 'added'}", inert


# ---- cases

@dataclasses.dataclass
class Case:
    """One mutated copy of the seeds: the files changed ({path: bytes, or None to delete, or "->target" for a
    symlink}), what was done, the target ("trace" or a container path) and whether the change must be noticed
    (`guarded`) or cannot change the logical bytes (`inert`)."""
    number: int
    target: str
    what: str
    changes: dict[str, bytes | str | None]
    guarded: bool = True
    inert: bool = False


def make_case(seeds: Seeds, seed: int, number: int, only: str | None = None) -> Case:
    """Case `number` of `seed`; only="trace" or "container" keeps to one kind (the draw that picks the kind is
    made all the same, so a case of that kind is the same case with or without `only`). It is drawn with its files
    under CASE_ROOT, so it does not depend on where it is written (a worker's directory, the failures)."""
    case_root = Path(CASE_ROOT)
    rng = random.Random(f"{seed}/{number}")
    if (rng.random() < 0.45 or only == "trace") and only != "container":
        name = rng.choice(seeds.streams)
        data, what, guarded = mutate_stream(rng, seeds.files[name], seeds.crc)
        return Case(number, "trace", f"{name}: {what}", {name: data}, guarded)
    container = rng.choice(sorted(seeds.containers))
    dirs = [container, *seeds.backends[container]]
    members = sorted(n for n in seeds.files if any(n.startswith(d + "/") for d in dirs))
    kind = rng.choices(MEMBER_KINDS, MEMBER_WEIGHTS)[0]
    name = rng.choice([n for n in members if _member_kind(n).startswith(kind)] or members)
    base, data = _member_kind(name), _moved(seeds, name, CASE_ROOT)
    pick = rng.random()
    if pick < 0.05:
        return Case(number, container, f"{name}: deleted", {name: None})
    if pick < 0.08 and base.startswith("log."):
        return Case(number, container, f"{name}: a symlink to outside/secret",
                    {name: "->" + str(case_root / "outside" / "secret")})
    if base.startswith("index."):
        changed, what, guarded = mutate_index(rng, data)
        return Case(number, container, f"{name}: {what}", {name: changed}, guarded)
    if base.startswith("records."):
        changed, what = mutate_records(rng, data)
        return Case(number, container, f"{name}: {what}", {name: changed}, inert=True)
    if base.startswith("log."):
        changed, what = _flip(rng, data) if rng.random() < 0.7 else _cut(rng, data, [0, len(data) // 2, len(data)])
        return Case(number, container, f"{name}: {what}", {name: changed})
    changed, what, inert = mutate_meta(rng, data, case_root, case_root / container)
    return Case(number, container, f"{name}: {what}", {name: changed}, inert=inert)


def _member_kind(name: str) -> str:
    """A container member's name without the `<id>.` its files take in a shared spread directory: `log.G` etc."""
    from ioloom.logfs.format import ID_PREFIX
    return ID_PREFIX.sub("", Path(name).name)


def _moved(seeds: Seeds, name: str, root: str) -> bytes:
    """A seed file as it is when the seeds are copied to root (metadata names its backends by absolute path)."""
    return _placed(name, seeds.files[name], str(seeds.root), str(root))


def _placed(name: str, data: bytes, old: str, new: str) -> bytes:
    """A container member's bytes with the directory `old` named `new` in its metadata."""
    return data.replace(old.encode(), new.encode()) if name.endswith("ioloom-logfs.meta") else data


def write_case(seeds: Seeds, case: Case, root: Path) -> None:
    """What the case reads under root, beside a file outside the container that no tool may touch: the changed
    stream alone (a trace of one stream), or the container and its backends (paths in the metadata moved there,
    their directories made as the seeds have them, empty or not) with the change applied."""
    dirs = ["trace"] if case.target == "trace" else [case.target, *seeds.backends[case.target]]
    for d in dirs:
        shutil.rmtree(root / d, ignore_errors=True)
        for sub in (s for s in seeds.directories if s == d or s.startswith(d + "/")):
            (root / sub).mkdir(parents=True)
    names = case.changes if case.target == "trace" else [n for n in seeds.files if any(n.startswith(d + "/")
                                                                                        for d in dirs)]
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        change = case.changes.get(name, _moved(seeds, name, CASE_ROOT))
        if isinstance(change, str):
            path.symlink_to(change[2:].replace(CASE_ROOT, str(root), 1))
        elif change is not None:
            path.write_bytes(_placed(name, change, CASE_ROOT, str(root)))
    secret = root / "outside" / "secret"
    if not secret.is_file():
        secret.parent.mkdir(parents=True, exist_ok=True)
        secret.write_bytes(seeds.files["outside/secret"])


# ---- running a case

class Escape(Exception):
    """A container tool tried to change something outside the container and its declared backends."""


class TooLong(Exception):
    """A tool returned more bytes than the original logical file plus a margin."""


class Guard:
    """While active, writes, renames and deletions outside `allowed` raise Escape instead of happening (the
    Python calls the container tools make: os, shutil.rmtree, open)."""
    CHANGES = ("unlink", "remove", "rmdir", "mkdir", "truncate")  # (path, ...): the path itself is changed
    MOVES = ("rename", "replace")

    def __init__(self, allowed: list[Path]):
        self.allowed = [os.path.realpath(p) for p in allowed]
        self.saved: dict = {}

    def _check(self, path, what: str, follow: bool = True) -> None:
        """Escape unless path (its parent resolved, and itself when `follow`) lies in an allowed directory."""
        if isinstance(path, int):
            return
        path = os.fspath(path)
        real = os.path.realpath(path) if follow else \
            os.path.join(os.path.realpath(os.path.dirname(path) or "."), os.path.basename(path))
        if not any(real == a or real.startswith(a + os.sep) for a in self.allowed):
            raise Escape(f"{what} {path} (outside the container and its backends)")

    def _patch(self, module, name: str, wrap) -> None:
        original = self.saved[(module, name)] = getattr(module, name)
        setattr(module, name, wrap(original, name))

    def _changing(self, original, name):
        def call(path, *args, **kwargs):
            if kwargs.get("dir_fd") is None:  # rmtree's own unlinks by dir_fd come after its checked path
                self._check(path, name, follow=False)
            return original(path, *args, **kwargs)
        return call

    def _moving(self, original, name):
        def call(src, dst, *args, **kwargs):
            self._check(src, name, follow=False)
            self._check(dst, name, follow=False)
            return original(src, dst, *args, **kwargs)
        return call

    def _opening(self, original, name):
        def call(path, flags, *args, **kwargs):
            if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC):
                self._check(path, "open for writing")
            return original(path, flags, *args, **kwargs)
        return call

    def _opening_file(self, original, name):
        def call(file, mode="r", *args, **kwargs):
            if any(c in mode for c in "wax+"):
                self._check(file, "open for writing")
            return original(file, mode, *args, **kwargs)
        return call

    def __enter__(self):
        for name in self.CHANGES:
            self._patch(os, name, self._changing)
        for name in self.MOVES:
            self._patch(os, name, self._moving)
        self._patch(os, "open", self._opening)
        self._patch(shutil, "rmtree", self._changing)
        self._patch(builtins, "open", self._opening_file)
        self._patch(io, "open", self._opening_file)
        return self

    def __exit__(self, *exc):
        for (module, name), original in self.saved.items():
            setattr(module, name, original)
        self.saved = {}


class Bounded(io.RawIOBase):
    """A binary sink that keeps what is written, up to a limit."""

    def __init__(self, limit: int):
        self.parts: list[bytes] = []
        self.size, self.limit = 0, limit

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.size += len(data)
        if self.size > self.limit:
            raise TooLong(f"more than {self.limit} bytes")
        self.parts.append(bytes(data))
        return len(data)

    def value(self) -> bytes:
        return b"".join(self.parts)


@dataclasses.dataclass
class Result:
    number: int
    target: str
    what: str
    outcome: str = "ok"
    details: list = dataclasses.field(default_factory=list)  # [tool, outcome, message]

    def note(self, tool: str, outcome: str, message: str) -> None:
        self.details.append([tool, outcome, message[:300]])
        if SEVERITY[outcome] > SEVERITY[self.outcome]:
            self.outcome = outcome


def _call(result: Result, tool: str, report, fn):
    """Run one tool: its value, or None after noting a clean error or an uncaught exception."""
    report(tool)
    try:
        return fn()
    except Escape as err:
        result.note(tool, "wrong", str(err))
    except TooLong as err:
        return err
    except BaseException as err:  # noqa: BLE001 (every exception is classified, none is lost)
        result.note(tool, "clean" if is_user_error(err) else "uncaught", f"{type(err).__name__}: {err}")
    return None


def run_trace_case(seeds: Seeds, case: Case, root: Path, report) -> Result:
    result = Result(case.number, case.target, case.what)
    found = _call(result, "open_trace+read", report, lambda: trace_digest(root / "trace"))
    original = {Path(name).name: seeds.stream_digests[name] for name in case.changes}
    if isinstance(found, dict):
        if found["problems"]:
            result.note("open_trace+read", "clean", found["problems"][0])
        elif case.guarded and found["streams"] != original:
            result.note("open_trace+read", "wrong", "events differ from the original and no problem was reported")
    return result


def _judge(result: Result, tool: str, got, case: Case, original: bytes, checked_ok: bool | None) -> None:
    """A tool returned bytes: wrong when they differ from the original and either `check` called the container
    OK, or the mutation could not change the logical bytes, or they came through a symlink out of it."""
    if got is None:
        return
    differs = isinstance(got, TooLong) or got != original
    symlinked = any(isinstance(v, str) for v in case.changes.values())
    if differs and (checked_ok or case.inert or symlinked):
        why = "check said OK" if checked_ok else "the mutation cannot change them" if case.inert else \
            "a log symlinked out of the container was followed"
        result.note(tool, "wrong", f"returned bytes that differ from the original ({why})")
    elif differs:
        result.note(tool, "clean", "bytes differ, and check reported the damage")


def _mounts(root: Path, container: str) -> dict[str | os.PathLike, list[str | os.PathLike]]:
    """The logfs mount of a container copied under root, with the extra backend it was made with (make_seeds)."""
    mount = (root / container).parent
    return {mount: [root / "extra"] if mount.name == "mnt2" else []}


def preloaded_read(case_root: Path, container: str, limit: int, timeout: float) -> tuple[str, object]:
    """`cat` of the logical file through libioloom-logfs: ("ok", bytes), ("clean", message), ("crash", signal),
    ("hang", ...) or ("ok", TooLong) when it printed more than `limit` bytes."""
    from ioloom.logfs import preload
    out = case_root / "preloaded-read"
    env = {**os.environ, **preload.env(_mounts(case_root, container))}

    try:  # the worker's limits apply (file size, no core files; SIGXFSZ ignored, so a long write fails EFBIG)
        with open(out, "wb") as sink:
            proc = subprocess.run(["cat", str(case_root / container)], stdout=sink, stderr=subprocess.PIPE,
                                  env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "hang", f"no answer in {timeout:g} s"
    if out.stat().st_size > limit:
        return "ok", TooLong(f"more than {limit} bytes")
    if proc.returncode < 0:
        return "crash", f"killed by {signal.Signals(-proc.returncode).name}"
    if proc.returncode:
        return "clean", proc.stderr.decode(errors="replace").strip()
    return "ok", out.read_bytes()


def run_container_case(seeds: Seeds, case: Case, root: Path, report, timeout: float) -> Result:
    from ioloom.logfs import tools
    result = Result(case.number, case.target, case.what)
    path, original = root / case.target, seeds.containers[case.target]
    flat = root / "flat" / "file"  # flatten's temporary goes next to it
    allowed = [path, *(root / b for b in seeds.backends[case.target]), flat.parent]
    limit = len(original) + (1 << 20)
    shutil.rmtree(flat.parent, ignore_errors=True)
    flat.parent.mkdir()
    with Guard(allowed):
        _call(result, "stat", report, lambda: tools.summary(path))
        _call(result, "ls", report, lambda: [tools.summary(c) for c in tools.find_containers(path.parent)])
        checked = _call(result, "check", report, lambda: tools.check(path))
        checked_ok = checked is not None and checked.ok
        sink = Bounded(limit)
        got = _call(result, "cat", report, lambda: (tools.cat(path, sink), sink.value())[1])
        _judge(result, "cat", got, case, original, checked_ok)
        got = _call(result, "flatten", report, lambda: (tools.flatten(path, flat), flat.read_bytes())[1])
        _judge(result, "flatten", got, case, original, checked_ok)
    report("preloaded read")
    outcome, value = preloaded_read(root, case.target, limit, timeout)
    if outcome == "ok":
        _judge(result, "preloaded read", value, case, original, checked_ok)
    elif outcome != "ok":
        result.note("preloaded read", outcome, str(value))
    with Guard(allowed):
        _call(result, "recover", report, lambda: tools.recover(path))
        _call(result, "rm", report, lambda: tools.remove(path))
    if not (root / "outside" / "secret").is_file():
        result.note("rm", "wrong", "a file outside the container was deleted")
    return result


def run_case(seeds: Seeds, seed: int, number: int, root: Path, report, timeout: float,
             only: str | None = None) -> Result:
    case = make_case(seeds, seed, number, only)
    write_case(seeds, case, root)
    if case.target == "trace":
        return run_trace_case(seeds, case, root, report)
    return run_container_case(seeds, case, root, report, timeout)


# ---- workers

def _worker(conn, seeds: Seeds, seed: int, root: Path, timeout: float, only: str | None) -> None:
    """Runs the case numbers it is sent; reports each tool as it starts (so the parent can time it) and then
    the result."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    warnings.simplefilter("ignore")  # numpy's warnings on hostile values: the outcome is judged, not printed
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the file-size limit fails with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    soft = _vm_size() + (3 << 30)
    resource.setrlimit(resource.RLIMIT_AS, (soft, soft))
    while True:
        number = conn.recv()
        if number is None:
            return
        try:
            result = run_case(seeds, seed, number, root, lambda tool: conn.send(("tool", tool)), timeout, only)
        except Exception:  # noqa: BLE001 (a fault of the harness itself, not of a tool: the campaign stops)
            conn.send(("error", traceback.format_exc()))
            return
        conn.send(("done", dataclasses.asdict(result)))


def _vm_size() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


@dataclasses.dataclass
class Slot:
    process: BaseProcess
    conn: Connection
    root: Path
    number: int | None = None
    tool: str = ""
    since: float = 0.0


class Campaign:
    """Cases spread over worker processes; a dead worker is a crash, a tool past the timeout a hang."""

    def __init__(self, seeds: Seeds, seed: int, workdir: Path, workers: int, timeout: float, only: str | None):
        self.seeds, self.seed, self.workdir, self.timeout, self.only = seeds, seed, workdir, timeout, only
        self.context = multiprocessing.get_context("fork")
        self.slots = [self._start(workdir / f"worker{i}") for i in range(workers)]
        self.results: list[dict] = []
        self.interrupted = False

    def _start(self, root: Path) -> Slot:
        parent, child = self.context.Pipe()
        process = self.context.Process(target=_worker, args=(child, self.seeds, self.seed, root / "case",
                                                             self.timeout, self.only), daemon=True)
        process.start()
        child.close()
        return Slot(process, parent, root)

    def _give(self, slot: Slot, numbers) -> None:
        slot.number = next(numbers, None)
        slot.tool, slot.since = "writing the case", time.monotonic()
        if slot.number is not None:
            slot.conn.send(slot.number)

    def _lost(self, slot: Slot, outcome: str, message: str) -> None:
        assert slot.number is not None  # a worker is lost on a case it was given
        case = make_case(self.seeds, self.seed, slot.number, self.only)
        result = Result(slot.number, case.target, case.what)
        result.note(slot.tool, outcome, message)
        self.results.append(dataclasses.asdict(result))
        if slot.process.is_alive():
            slot.process.kill()
        slot.process.join()
        fresh = self._start(slot.root)
        slot.process, slot.conn, slot.number = fresh.process, fresh.conn, None

    def _receive(self, slot: Slot) -> None:
        try:
            kind, value = slot.conn.recv()
        except (EOFError, OSError):
            slot.process.join()
            code = slot.process.exitcode
            name = signal.Signals(-code).name if code and code < 0 else f"exit {code}"
            return self._lost(slot, "crash", f"the worker died ({name})")
        if kind == "error":
            raise RuntimeError(f"ioloom bench fuzz: the harness failed on case {slot.number}:\n{value}")
        if kind == "tool":
            slot.tool, slot.since = value, time.monotonic()
        else:
            self.results.append(value)
            slot.number = None

    def run(self, numbers, progress=None) -> list[dict]:
        """The results of the cases `numbers`; on KeyboardInterrupt (Ctrl-C, or SIGTERM in the command), those of
        the cases finished so far."""
        try:
            self._run(iter(numbers), progress)
        except KeyboardInterrupt:
            self.interrupted = True
        return self.results

    def _run(self, numbers, progress) -> None:
        for slot in self.slots:
            self._give(slot, numbers)
        while any(s.number is not None for s in self.slots):
            busy = [s for s in self.slots if s.number is not None]
            deadline = min(s.since for s in busy) + self.timeout
            for conn in wait([s.conn for s in busy], timeout=max(0.0, deadline - time.monotonic())):
                slot = next(s for s in busy if s.conn is conn)
                self._receive(slot)
            for slot in busy:
                if slot.number is not None and time.monotonic() - slot.since > self.timeout:
                    self._lost(slot, "hang", f"no answer in {self.timeout:g} s")
            for slot in self.slots:
                if slot.number is None:
                    self._give(slot, numbers)
            if progress:
                progress(self.results)

    def close(self) -> None:
        for slot in self.slots:
            if slot.process.is_alive():
                slot.conn.send(None)
                slot.process.join(timeout=5)
                if slot.process.is_alive():
                    slot.process.kill()


# ---- campaign

def tally(results: list[dict], interrupted: bool = False) -> dict[str, int]:
    counts = {outcome: 0 for outcome in OUTCOMES}
    for r in results:
        counts[r["outcome"]] += 1
    return {"cases": len(results), **counts, "interrupted": interrupted}


def tally_line(counts: dict[str, int]) -> str:
    return (f"crashes: {counts['crash']}  hangs: {counts['hang']}  uncaught exceptions: {counts['uncaught']}  "
            f"wrong results: {counts['wrong']}")


def save_failure(seeds: Seeds, seed: int, result: dict, failures: Path, only: str | None = None) -> Path:
    """The failing case's files and what happened, to reproduce it with the commands in repro.sh."""
    where = failures / f"{result['number']:07d}-{result['outcome']}"
    case = make_case(seeds, seed, result["number"], only)
    write_case(seeds, case, where)
    (where / "case.json").write_text(json.dumps({"seed": seed, **result}, indent=1))
    if case.target == "trace":
        commands = f"ioloom stats {where / 'trace'}\n"
    else:
        from ioloom.logfs import preload
        env = " ".join(f"{name}={value}" for name, value in preload.env(_mounts(where, case.target)).items())
        commands = "".join(f"ioloom container {tool} {where / case.target}\n" for tool in ("check", "stat", "cat"))
        commands += f"{env} cat {where / case.target}\n"
    rerun = f"ioloom bench fuzz --seed {seed} --seeds {seeds.root} --start {result['number']} --cases 1" + \
        (f" --only {only}" * bool(only))
    (where / "repro.sh").write_text(f"# {rerun}\n{commands}")
    return where


def campaign(seed: int, cases: int, workdir: Path, start: int = 0, workers: int | None = None,
             timeout: float = 10.0, only: str | None = None, progress=None,
             seeds_dir: Path | None = None) -> tuple[dict[str, int], list[dict]]:
    """Make the seeds under workdir (or take those an earlier campaign made in seeds_dir), run cases
    start..start+cases-1, save the failing ones under workdir/failures; returns the tally and the failing
    results."""
    os.environ["IOLOOM_READER_THREADS"] = "1"  # the workers are the parallelism (and they are forked)
    seeds = load_seeds(seeds_dir) if seeds_dir else make_seeds(workdir / "seeds", seed)
    runner = Campaign(seeds, seed, workdir, workers or os.cpu_count() or 1, timeout, only)
    try:
        results = runner.run(range(start, start + cases), progress)
    finally:
        runner.close()
    failing = sorted((r for r in results if SEVERITY[r["outcome"]] >= SEVERITY["wrong"]), key=lambda r: r["number"])
    for r in failing:
        save_failure(seeds, seed, r, workdir / "failures", only)
    return tally(results, runner.interrupted), failing


class Only(enum.StrEnum):
    trace = "trace"
    container = "container"


def _print_summary(seed: int, start: int, cases: int, elapsed: float, counts: dict, failing: list[dict]) -> None:
    stopped = f" (interrupted after {counts['cases']:,} of {cases:,})" if counts["interrupted"] else ""
    print(f"ioloom bench fuzz: seed {seed}, cases {start}..{start + cases - 1}{stopped}, {elapsed:.1f} s")
    print(f"  cases run: {counts['cases']:,}  read fine: {counts['ok']:,}  clean errors: {counts['clean']:,}")
    print(f"  {tally_line(counts)}")
    for r in failing[:20]:
        tool, _, message = next(d for d in r["details"] if d[1] == r["outcome"])
        print(f"  case {r['number']}: {r['outcome']} in {tool}: {r['what']}: {message}")


def _scratch() -> str | None:
    """Memory-backed /dev/shm when there is one: flatten and recover fsync every file they write."""
    return "/dev/shm" if os.access("/dev/shm", os.W_OK) else None


@app.command("fuzz")
def fuzz_command(seed: int = typer.Option(1, "--seed", help="Chooses every mutation: the same seed, seeds and case "
                                           "numbers give the same cases."),
                 cases: int = typer.Option(2000, "--cases", min=1, help="Cases to run."),
                 start: int = typer.Option(0, "--start", min=0, help="Number of the first case (to rerun one)."),
                 workdir: Path = typer.Option(None, "--dir", help="Where seeds, cases and failures go "
                                              "(default: a new temporary directory, kept when a case fails)."),
                 workers: int = typer.Option(None, "--workers", min=1, help="Worker processes (default: the CPUs)."),
                 timeout: float = typer.Option(10.0, "--timeout", min=0.1, help="Seconds one tool may take on one "
                                               "case before the case counts as a hang."),
                 only: Only = typer.Option(None, "--only", help="Only trace cases, or only container cases."),
                 seeds_dir: Path = typer.Option(None, "--seeds", help="The seeds an earlier campaign made (its "
                                                "DIR/seeds), instead of tracing them afresh: fresh seeds hold other "
                                                "times and pids, so the same seed draws other bytes."),
                 as_json: bool = typer.Option(False, "--json", help="Print the tally and failures as JSON.")) -> None:
    """Mutate real traces and logfs containers and run the reader, every container tool and a preloaded read
    on each case: prints cases run, clean errors, crashes, hangs, uncaught exceptions and wrong results."""
    directory = workdir or Path(tempfile.mkdtemp(prefix="ioloom-fuzz-", dir=_scratch()))
    began = time.monotonic()
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # `kill` stops it as Ctrl-C does: with the tally
    shown = [0]

    def progress(results: list[dict]) -> None:  # a line per 1,000 cases on stderr, for long campaigns
        if len(results) // 1000 > shown[0]:
            shown[0] = len(results) // 1000
            seconds = time.monotonic() - began
            print(f"  {len(results):,} of {cases:,} cases, {seconds:.0f} s; {tally_line(tally(results))}",
                  file=sys.stderr)
    counts, failing = campaign(seed, cases, directory, start, workers, timeout, only and only.value, progress,
                               seeds_dir)
    elapsed = time.monotonic() - began
    if as_json:
        print(json.dumps({"seed": seed, "start": start, "seconds": round(elapsed, 1), **counts,
                          "failures": failing}))
    else:
        _print_summary(seed, start, cases, elapsed, counts, failing)
    if failing:
        print(f"failing cases written to {directory / 'failures'} (each with repro.sh)", file=sys.stderr)
        raise typer.Exit(1)
    if workdir is None:
        shutil.rmtree(directory, ignore_errors=True)
