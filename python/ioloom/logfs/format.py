"""The logfs container format (docs/logfs-format.md), read and written from Python.

A container is a directory holding `ioloom-logfs.meta`, data logs `log.<group>` (the data alone), record journals
`records.<group>` (a 96-byte record per regular run of writes, for check and recover; version 2: a 64-byte record
per write) and index journals `index.<group>`
(blocks: a 32-byte header then 80-byte entries). The C side is
native/logfs/lf_format.h; both are tested against the same vectors (tests/vectors/logfs).
"""
from __future__ import annotations

import errno
import heapq
import io
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

VERSION = 3         # what the C writer makes; version 2 containers are read too (and written as version 2)
READABLE = (2, 3)
META_NAME = "ioloom-logfs.meta"
JOURNALS = ("log", "records", "index")  # a writer group's files: <journal>.<group>
LOCK_NAME = "lock"
SPREAD_DIR = "lf-spread"  # an extra backend root's shared directories: ROOT/lf-spread/<bucket>
SPREAD_MAX = 4096
# An extra backend directory: <root>/<rel>.lf<id> (a container's own) or <root>/lf-spread/<bucket> (shared, where a
# container's files are named <id>.<journal>.<group>).
BACKEND_DIR = re.compile(r"(\.lf[0-9a-f]+-[0-9a-f]+|/" + SPREAD_DIR + r"/[0-9a-f]+)$")
ID_PREFIX = re.compile(r"^[0-9a-f]+-[0-9a-f]+\.")
PREFIX = "logfs:"
RECORD_MAGIC = 0x3352464C     # "LFR3"
RECORD_MAGIC_V2 = 0x3252464C  # "LFR2"
BLOCK_MAGIC = 0x3142494C
WRITE, TRUNCATE, CREATE, UNLINK = 1, 2, 3, 4
PACK_NAME = ".ioloom-pack"  # a directory's packed files (1-N) live in this container
U64 = (1 << 64) - 1
MAX_SIZE = 1 << 62  # LF_MAX_SIZE: no logical or physical byte lies at or past it
MAX_BACKENDS = 8    # the container's directory and up to 7 extra backends

RECORD = np.dtype([("magic", "<u4"), ("kind", "<u2"), ("version", "<u2"), ("file_id", "<u4"),
                   ("header_sum", "<u4"), ("offset", "<u8"), ("length", "<u8"), ("count", "<u8"), ("stride", "<u8"),
                   ("physical", "<u8"), ("pstride", "<u8"), ("stamp", "<u8"), ("stamp_last", "<u8"),
                   ("writer", "<u8"), ("data_sum", "<u8")])
RECORD_V2 = np.dtype([("magic", "<u4"), ("kind", "<u2"), ("version", "<u2"), ("file_id", "<u4"),
                      ("header_sum", "<u4"), ("offset", "<u8"), ("length", "<u8"), ("stamp", "<u8"),
                      ("writer", "<u8"), ("data_sum", "<u8"), ("physical", "<u8")])
ENTRY = np.dtype([("kind", "<u4"), ("file_id", "<u4"), ("offset", "<u8"), ("length", "<u8"), ("count", "<u8"),
                  ("stride", "<u8"), ("physical", "<u8"), ("pstride", "<u8"), ("stamp", "<u8"),
                  ("stamp_last", "<u8"), ("data_sum", "<u8")])
BLOCK = np.dtype([("magic", "<u4"), ("version", "<u4"), ("writer", "<u8"), ("count", "<u4"),
                  ("header_sum", "<u4"), ("entries_sum", "<u8")])
assert (RECORD.itemsize, RECORD_V2.itemsize, ENTRY.itemsize, BLOCK.itemsize) == (96, 64, 80, 32)


def record_layout(version: int) -> tuple[np.dtype, int]:
    """The record dtype and magic of a container version's record journals."""
    return (RECORD_V2, RECORD_MAGIC_V2) if version == 2 else (RECORD, RECORD_MAGIC)


class FormatError(ValueError):
    """The directory is not a readable container of this version."""


def sum64_rows(rows: np.ndarray) -> np.ndarray:
    """lf_sum64 of each row of a 2-D uint8 array: 4-lane Fletcher-style sums over little-endian 64-bit words
    (see lf_format.h), all rows at once."""
    n, length = rows.shape
    padded = np.ascontiguousarray(rows)
    if length % 32:
        padded = np.zeros((n, length + (-length % 32)), np.uint8)
        padded[:, :length] = rows
    words = padded.view("<u8").reshape(n, -1, 4)
    weights = np.arange(words.shape[1], 0, -1, dtype=np.uint64)[None, :, None]
    mix = np.zeros(n, np.uint64)
    with np.errstate(over="ignore"):
        a = words.sum(axis=1, dtype=np.uint64)
        b = (words * weights).sum(axis=1, dtype=np.uint64)
        for j in range(4):
            r = np.uint64(17 + j)
            mix += a[:, j] * np.uint64(2 * j + 1) + ((b[:, j] << r) | (b[:, j] >> (np.uint64(64) - r)))
    return mix ^ np.uint64(length)


def sum64(data: bytes | memoryview) -> int:
    """lf_sum64 of one byte string."""
    return int(sum64_rows(np.frombuffer(data, np.uint8)[None, :])[0])


def header_sum(row: np.ndarray) -> int:
    """Low 32 bits of sum64 of a record or block header with its header_sum field zeroed."""
    copy = row.copy()
    copy["header_sum"] = 0
    return sum64(copy.tobytes()) & 0xFFFFFFFF


def _planted_link(path: Path) -> FormatError:
    return FormatError(f"{path}: a symbolic link where the container keeps its own file; nothing was read or "
                       "written through it: remove the link (and run `ioloom container check`)")


def open_inside(path: Path, flags: int = os.O_RDONLY) -> int:
    """A descriptor on a file of a container, never through a symbolic link (a link planted in a container must
    not make a tool show or change another file)."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise _planted_link(path) from None
        raise


def read_inside(path: Path) -> bytes:
    with open(open_inside(path), "rb") as f:
        return f.read()


def open_log(log: Path) -> int:
    """A descriptor on a data log the index points into, read-only; a missing log is a damaged container."""
    try:
        return open_inside(log)
    except FileNotFoundError:
        raise FormatError(f"{log}: missing, but the index points into it; `ioloom container check` lists what is "
                          "lost") from None


def strip_prefix(path: str | os.PathLike) -> Path:
    text = os.fspath(path)
    return Path(text[len(PREFIX):] if text.startswith(PREFIX) else text)


def is_member(path: str, logical_paths) -> bool:
    """Whether `path` is one of logfs's own files: a journal, the metadata or the lock file in a container (a
    directory among `logical_paths`, the paths a program opened as files) or in an extra backend directory, or the
    ROMIO hints file its runs name (preload.own_log_collectives)."""
    from ioloom.logfs.preload import ROMIO_HINTS
    if path == os.fspath(ROMIO_HINTS):
        return True
    parent, _, name = path.rpartition("/")
    in_backend = BACKEND_DIR.search(parent) is not None
    if in_backend:
        name = ID_PREFIX.sub("", name)
    named = name in (META_NAME, LOCK_NAME) or name.partition(".")[0] in JOURNALS and "." in name
    return named and (parent in logical_paths or in_backend)


def is_container(path: str | os.PathLike) -> bool:
    return (strip_prefix(path) / META_NAME).is_file()


def fnv1a(text: str) -> int:
    """FNV-1a, 32 bits (lf_fnv1a): how names are hashed to spread directories and packed file ids."""
    h = 2166136261
    for byte in text.encode():
        h = ((h ^ byte) * 16777619) & 0xFFFFFFFF
    return h


@dataclass
class Meta:
    version: int
    chunk: int
    mode: int
    backends: list[Path]  # the container's directory first, then its extra backend directories (checked)
    id: str = ""          # what its extra backend directories end in: .lf<id>, or its files there begin with: <id>.
    origin: str = ""      # its path below its mount when it was made
    spread: int = 0       # > 0: its extra backend directories are shared ones, ROOT/lf-spread/<bucket>

    def below_root(self) -> str:
        """Where an extra backend's directory lies below its root (lf_meta.c: below_root)."""
        return f"{SPREAD_DIR}/{fnv1a(self.id) % self.spread:03x}" if self.spread else f"{self.origin}.lf{self.id}"

    def prefix(self, backend: Path) -> str:
        """What this container's file names begin with on a backend: `<id>.` in a shared spread directory."""
        return f"{self.id}." if self.spread and backend != self.backends[0] else ""

    def files(self, backend: Path) -> list[str]:
        """The names of this container's files on a backend (none if it is gone)."""
        if not backend.is_dir():
            return []
        prefix = self.prefix(backend)
        return sorted(name for name in os.listdir(backend) if name.startswith(prefix))

    def groups(self, backend: Path, kind: str) -> list[str]:
        """The groups that have a file `kind` (log, records, index, names) on a backend."""
        head = self.prefix(backend) + kind + "."
        return [name[len(head):] for name in self.files(backend) if name.startswith(head) and len(name) > len(head)]

    def member(self, backend: Path, kind: str, group: str) -> Path:
        return backend / f"{self.prefix(backend)}{kind}.{group}"


def _within(inner: str, outer: str) -> bool:
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


def _backend_problem(directory: Path, meta: Meta, root: str, missing_ok: bool) -> tuple[Path, str | None]:
    """The extra backend directory ROOT/origin.lf<id> (ROOT absolute, or relative to the container), and why it is
    refused, if it is (docs/logfs-format.md, "Backends"; lf_meta.c applies the same rules)."""
    if not re.fullmatch(r"[0-9a-f-]+", meta.id):
        return directory, "an extra backend, but no valid 'id' line"
    if meta.origin.startswith("/") or any(part in ("", ".", "..") for part in meta.origin.split("/")):
        return directory, "an extra backend, but no valid 'origin' line (a relative path of names)"
    base = os.path.normpath(os.path.join(directory, root))
    tail = meta.below_root()
    path = Path(base) / tail
    try:
        real_root = os.path.realpath(base, strict=True)
    except OSError:
        return path, "a backend root that does not exist (a file system not mounted?)"
    real = real_root
    for part in tail.split("/"):  # below the root, nothing is followed: what exists must be real directories
        real = os.path.join(real, part)
        try:
            mode = os.lstat(real).st_mode
        except FileNotFoundError:
            if missing_ok:
                break
            return path, "its directory is missing (the data of its logs is lost, or its file system is not mounted)"
        if stat.S_ISLNK(mode):
            return path, "a symbolic link lies between its root and it"
        if not stat.S_ISDIR(mode):
            return path, "it is not a directory"
    real_backend, real_dir = os.path.join(real_root, tail), os.path.realpath(directory)
    if _within(real_dir, real_backend) or _within(real_backend, real_dir):
        return path, "a backend that is the container, holds it or lies inside it"
    return path, None


def read_meta(directory: Path, missing_ok: bool = False) -> Meta:
    """The container's metadata, its backends checked (docs/logfs-format.md, "Backends"); with `missing_ok`, extra
    backend directories that are gone are accepted (rm finishing a half-removed container)."""
    try:
        text = read_inside(directory / META_NAME).decode(errors="replace")
    except FileNotFoundError:
        raise FormatError(f"{directory} is not a logfs container (no {META_NAME}); "
                          "give the container's directory, e.g. one created under IOLOOM_LOGFS_ROOTS") from None
    lines = text.splitlines()

    def damaged(what: str) -> FormatError:
        return FormatError(f"{directory / META_NAME}: {what}, so the file is damaged; rewrite it as "
                           f"docs/logfs-format.md describes (first line 'ioloom-logfs {VERSION}', then chunk, mode, "
                           "id, extras, origin and backend lines)")

    if "\0" in text:  # no path may hold one (os calls raise ValueError), and lf_meta.c would stop reading there
        raise damaged("it holds a NUL byte")

    first = lines[0].split() if lines else []
    if len(first) != 2 or first[0] != "ioloom-logfs" or not first[1].isdigit():
        raise damaged("the first line is not 'ioloom-logfs VERSION'")
    version = int(first[1])
    if version not in READABLE:
        raise FormatError(f"{directory}: format version {version}, this ioloom reads versions "
                          f"{', '.join(map(str, READABLE))}; use the ioloom release that wrote it")
    if not text.endswith("\n"):
        raise damaged("it ends inside a line (cut short?)")
    meta = Meta(version, 0, 0, [directory])
    fields: dict[str, str] = {}
    roots = []
    for line in lines[1:]:
        key, _, value = line.partition(" ")
        if key == "backend":
            roots.append(value)
        else:
            fields.setdefault(key, value)
    if any(key not in fields for key in ("chunk", "mode", "id", "extras")):
        raise damaged("a chunk, mode, id or extras line is missing (cut short?)")
    try:
        meta.chunk, meta.mode, extras = int(fields["chunk"]), int(fields["mode"], 8), int(fields["extras"])
    except ValueError:
        raise damaged("a chunk, mode or extras line is not a number") from None
    meta.id, meta.origin = fields["id"], fields.get("origin", "")
    if extras != len(roots):
        raise damaged("its extras line does not count its backend lines (cut short?)")
    try:
        meta.spread = int(fields.get("spread", "0"))
    except ValueError:
        raise damaged("its spread line is not a number") from None
    if not 0 <= meta.spread <= SPREAD_MAX:
        raise damaged(f"its spread line is out of range (0 to {SPREAD_MAX})")
    if len(roots) >= MAX_BACKENDS:
        raise damaged(f"{len(roots)} backend lines (at most {MAX_BACKENDS - 1})")
    if meta.chunk < 4096 or meta.chunk % 4096:
        raise damaged("its chunk is not a multiple of 4096")
    for root in roots:
        path, why = _backend_problem(directory, meta, root, missing_ok)
        if why:
            raise FormatError(f"{directory / META_NAME}: 'backend {root}' is refused: {why}. Nothing was read, "
                              "changed or deleted; if the file was edited, restore the line written when the "
                              "container was made (docs/logfs-format.md, Backends)")
        meta.backends.append(path)
    return meta


@dataclass
class Journal:
    """One index journal: its group's log, the valid blocks' entries, and where the valid part ends."""
    group: str
    index_path: Path
    log_path: Path
    records_path: Path
    entries: np.ndarray  # ENTRY
    writers: np.ndarray  # writer id per entry
    blocks: int
    valid_bytes: int
    total_bytes: int


def parse_journal(data: bytes) -> tuple[list[tuple[np.ndarray, np.ndarray]], int]:
    """Valid blocks [(block header, entries)] up to the first torn or corrupt one, and the bytes they span."""
    blocks, at = [], 0
    while at + BLOCK.itemsize <= len(data):
        head = np.frombuffer(data, BLOCK, 1, at)[0]
        body = int(head["count"]) * ENTRY.itemsize
        end = at + BLOCK.itemsize + body
        if (head["magic"] != BLOCK_MAGIC or head_sum_bad(head) or end > len(data)
                or sum64(data[at + BLOCK.itemsize:end]) != int(head["entries_sum"])):
            break
        blocks.append((head, np.frombuffer(data, ENTRY, int(head["count"]), at + BLOCK.itemsize)))
        at = end
    return blocks, at


# The rules an index entry must meet, in the order they are checked (lf_entry_problem names the first it breaks).
ENTRY_RULES = ("kind", "count", "length", "stride", "pstride", "offset", "physical")


def _ends_in_range(start: np.ndarray, steps: np.ndarray, stride: np.ndarray, length: np.ndarray) -> np.ndarray:
    """start + steps * stride + length <= MAX_SIZE, computed without overflow (all uint64)."""
    limit = np.uint64(MAX_SIZE)
    room = limit - np.minimum(start, limit)
    ok = (start <= limit) & (length <= room)
    room = room - np.where(ok, length, np.uint64(0))
    return ok & ((steps == 0) | (stride == 0) | (steps <= room // np.maximum(stride, np.uint64(1))))


def entry_problems(e: np.ndarray) -> np.ndarray:
    """Per entry, the index in ENTRY_RULES of the first rule it breaks, or -1 (docs/logfs-format.md, "Valid
    entries"; the C reader's lf_entry_problem is the same, both tested on tests/vectors/logfs/entries.json)."""
    kind, count, length = e["kind"], e["count"], e["length"]
    write, pattern = kind == WRITE, count > 1
    steps = np.where(count > 0, count - np.uint64(1), np.uint64(0))
    broken = [(kind < WRITE) | (kind > UNLINK), (count == 0) | (~write & (count != 1)), write != (length > 0),
              pattern & (e["stride"] < length), pattern & (e["pstride"] < length),
              ~_ends_in_range(e["offset"], steps, e["stride"], length),
              ~_ends_in_range(e["physical"], steps, e["pstride"], length)]
    first = np.full(len(e), -1)
    for rule in reversed(range(len(broken))):
        first[broken[rule]] = rule
    return first


def _valid_or_refused(index: Path, entries: np.ndarray) -> None:
    bad = np.flatnonzero(entry_problems(entries) >= 0)
    if len(bad):
        rule = ENTRY_RULES[entry_problems(entries[bad[:1]])[0]]
        raise FormatError(f"{index}: {len(bad)} index entries are invalid (the first, entry {bad[0]}, has an invalid "
                          f"{rule}): a crafted or damaged index whose checksums match; nothing was read from it. "
                          "`ioloom container recover` rebuilds the index from the record journals")


def physical_ends(e: np.ndarray) -> np.ndarray:
    """Where each write entry's last record ends in its log (valid entries: no overflow); 0 for the others."""
    return np.where(e["kind"] == WRITE, e["physical"] + (e["count"] - np.uint64(1)) * e["pstride"] + e["length"], 0)


def head_sum_bad(head: np.ndarray) -> bool:
    return header_sum(head) != int(head["header_sum"])


def pack_id(name: str) -> int:
    """A packed file's file_id: fnv1a-32 of its name, never 0."""
    return fnv1a(name) or 1


def only_file(journals: list[Journal], file_id: int) -> list[Journal]:
    """The journals restricted to one packed file's entries."""
    out = []
    for j in journals:
        keep = j.entries["file_id"] == file_id
        out.append(Journal(j.group, j.index_path, j.log_path, j.records_path, j.entries[keep], j.writers[keep],
                           j.blocks, j.valid_bytes, j.total_bytes))
    return out


def load_journals(meta: Meta, file_id: int | None = None) -> list[Journal]:
    """Every group's journal; with file_id, only that packed file's entries. An index holding an invalid entry, or
    entries reaching past the end of their log, is refused with a FormatError (check reads them as they are:
    tools.groups)."""
    journals = []
    for backend in meta.backends:
        for group in meta.groups(backend, "index"):
            index = meta.member(backend, "index", group)
            data = read_inside(index)
            blocks, valid = parse_journal(data)
            entries = np.concatenate([b for _, b in blocks]) if blocks else np.zeros(0, ENTRY)
            writers = np.concatenate([np.full(len(b), h["writer"], np.uint64) for h, b in blocks]) \
                if blocks else np.zeros(0, np.uint64)
            journal = Journal(group, index, meta.member(backend, "log", group), meta.member(backend, "records", group),
                              entries, writers, len(blocks), valid, len(data))
            _valid_or_refused(index, entries)
            _within_log(journal)
            journals.append(journal)
    return journals if file_id is None else only_file(journals, file_id)


def log_size(log: Path) -> int | None:
    """The size of a data log (never through a link), None when it is missing."""
    try:
        st = os.lstat(log)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise _planted_link(log)
    return st.st_size


def _within_log(j: Journal) -> None:
    size = log_size(j.log_path)
    reach = int(physical_ends(j.entries).max()) if len(j.entries) else 0
    if size is not None and reach > size:
        raise FormatError(f"{j.log_path}: {size} bytes, but its index entries reach byte {reach} (the log lost its "
                          "end); `ioloom container check` lists what is lost, `ioloom container recover` indexes "
                          "what remains")


@dataclass
class Extents:
    """The resolved view: sorted, non-overlapping extents; log -1 is a hole."""
    offset: np.ndarray
    length: np.ndarray
    physical: np.ndarray
    log: np.ndarray
    size: int


def _sets_size(e: np.ndarray) -> np.ndarray:
    """Truncates set the size; an unlink (of a packed file) is a truncate to 0."""
    return (e["kind"] == TRUNCATE) | (e["kind"] == UNLINK)


def _entry_end(e: np.ndarray) -> np.ndarray:
    writes = e["offset"] + (e["count"] - 1) * e["stride"] + e["length"]
    return np.where(_sets_size(e), e["offset"], np.where(e["kind"] == CREATE, 0, writes))


def logical_size(entries: np.ndarray, writers: np.ndarray) -> int:
    """Replay in key order (stamp, writer): writes extend the size, truncates set it."""
    order = np.lexsort((writers, entries["stamp"]))
    size = 0
    for sets, end in zip(_sets_size(entries[order]), _entry_end(entries[order])):
        size = int(end) if sets else max(size, int(end))
    return size


WINDOW = 64 << 20  # logical bytes resolved at a time: memory follows the window, not the file


def expand(entries: np.ndarray, writers: np.ndarray, logs: np.ndarray, lo: int, hi: int) -> dict[str, np.ndarray]:
    """One row per record overlapping [lo, hi), clipped to it (a truncate or unlink to s: a hole from s on)."""
    e = {k: entries[k].astype(np.int64) for k in ("offset", "length", "count", "stride", "physical", "pstride")}
    holes = _sets_size(entries)
    writes = (entries["kind"] == WRITE) & (e["length"] > 0) & (e["offset"] < hi)
    step = np.where(e["count"] > 1, e["stride"], 1)
    first = np.where(lo < e["offset"] + e["length"], 0, (lo - e["offset"] - e["length"]) // step + 1)
    last = np.minimum(e["count"] - 1, (hi - 1 - e["offset"]) // step)
    counts = np.where(writes, np.maximum(last - first + 1, 0), 0) + (holes & (e["offset"] < hi))
    idx = np.repeat(np.arange(len(entries)), counts)
    j = first[idx] + np.arange(len(idx)) - np.repeat(np.cumsum(counts) - counts, counts)
    off = e["offset"][idx] + j * e["stride"][idx]
    hole = holes[idx]
    start = np.maximum(np.where(hole, e["offset"][idx], off), lo)
    end = np.where(hole, hi, np.minimum(off + e["length"][idx], hi))
    phys = np.where(hole, 0, e["physical"][idx] + j * e["pstride"][idx] + (start - off))
    return {"off": start.astype(np.uint64), "end": end.astype(np.uint64), "phys": phys.astype(np.uint64),
            "stamp": entries["stamp"][idx], "writer": writers[idx], "log": np.where(hole, -1, logs[idx])}


def next_record(entries: np.ndarray, at: int) -> int:
    """The logical offset of the first record (of a write) ending after `at`, at least `at`; MAX_SIZE if none."""
    e = entries[entries["kind"] == WRITE]
    off, length, count = (e[k].astype(np.int64) for k in ("offset", "length", "count"))
    step = np.where(count > 1, e["stride"].astype(np.int64), 1)
    first = np.where(at < off + length, 0, (at - off - length) // step + 1)
    starts = (off + first * step)[first < count]
    return max(at, int(starts.min())) if len(starts) else MAX_SIZE


def resolve(entries: np.ndarray, writers: np.ndarray, logs: np.ndarray, lo: int, hi: int, size: int) -> Extents:
    """The extents of [lo, hi): the latest write wins (key: stamp, then writer id), byte by byte; truncates and
    unlinks hide what came before."""
    r = expand(entries, writers, logs, lo, hi)
    order = np.argsort(r["off"], kind="stable")
    r = {k: v[order] for k, v in r.items()}
    if len(r["off"]) < 2 or np.all(r["end"][:-1] <= r["off"][1:]):
        return _merge(Extents(r["off"], r["end"] - r["off"], r["phys"], r["log"], size))
    return _merge(_sweep(r, size))


def _sweep(r: dict[str, np.ndarray], size: int) -> Extents:
    bounds = np.unique(np.concatenate([r["off"], r["end"]]))
    out: list[tuple[int, int, int, int]] = []
    heap: list[tuple[int, int, int]] = []
    nxt, n = 0, len(r["off"])
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        if lo >= size:
            break  # nothing past the logical size is ever read
        hi = min(hi, size)
        while nxt < n and int(r["off"][nxt]) <= lo:
            heapq.heappush(heap, (-int(r["stamp"][nxt]), -int(r["writer"][nxt]), nxt))
            nxt += 1
        while heap and int(r["end"][heap[0][2]]) <= lo:
            heapq.heappop(heap)
        if heap:
            i = heap[0][2]
            log = int(r["log"][i])
            out.append((lo, hi - lo, int(r["phys"][i]) + (lo - int(r["off"][i])) if log >= 0 else 0, log))
    cols = np.array(out, dtype=np.int64).reshape(-1, 4) if out else np.zeros((0, 4), np.int64)
    return Extents(cols[:, 0].astype(np.uint64), cols[:, 1].astype(np.uint64), cols[:, 2].astype(np.uint64),
                   cols[:, 3], size)


def _merge(x: Extents) -> Extents:
    """Join neighbours that continue each other in the same log (fewer, larger copies)."""
    if len(x.offset) < 2:
        return x
    joins = ((x.log[1:] == x.log[:-1]) & (x.offset[:-1] + x.length[:-1] == x.offset[1:])
             & ((x.log[1:] < 0) | (x.physical[:-1] + x.length[:-1] == x.physical[1:])))
    starts = np.flatnonzero(np.concatenate([[True], ~joins]))
    length = np.add.reduceat(x.length, starts)
    return Extents(x.offset[starts], length, x.physical[starts], x.log[starts], x.size)


@dataclass
class Container:
    """A container opened for reading: its metadata, journals and logical size; extents are resolved a window
    at a time as pieces() walks the file."""
    path: Path
    meta: Meta
    journals: list[Journal]
    size: int = field(init=False)

    @classmethod
    def open(cls, path: str | os.PathLike) -> Container:
        """A container, or a packed file (DIR/NAME stored in DIR/.ioloom-pack)."""
        directory = strip_prefix(path)
        pack = directory.parent / PACK_NAME
        if not is_container(directory) and is_container(pack):
            meta = read_meta(pack)
            return cls(directory, meta, load_journals(meta, pack_id(directory.name)))
        meta = read_meta(directory)
        return cls(directory, meta, load_journals(meta))

    def __post_init__(self) -> None:
        entries, writers, _ = self.all_entries()
        self.size = logical_size(entries, writers)

    def all_entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not self.journals:
            return np.zeros(0, ENTRY), np.zeros(0, np.uint64), np.zeros(0, np.int64)
        entries = np.concatenate([j.entries for j in self.journals])
        writers = np.concatenate([j.writers for j in self.journals])
        logs = np.concatenate([np.full(len(j.entries), i, np.int64) for i, j in enumerate(self.journals)])
        return entries, writers, logs

    def pieces(self, offset: int = 0, length: int | None = None):
        """(logical offset, length, log path or None for zeros, physical offset) covering [offset, offset+length).
        Windows holding no data are skipped to the next record: the work follows the entries, not the size."""
        stop = self.size if length is None else min(self.size, offset + length)
        entries, writers, logs = self.all_entries()
        pos, lo = offset, offset // WINDOW * WINDOW
        while lo < stop:
            x = resolve(entries, writers, logs, lo, lo + WINDOW, self.size)
            if not np.any(x.log >= 0):
                lo = max(lo + WINDOW, next_record(entries, lo + WINDOW) // WINDOW * WINDOW)
                continue
            for i in range(len(x.offset)):
                start, end = max(int(x.offset[i]), pos), min(int(x.offset[i] + x.length[i]), stop)
                if end <= start:
                    continue
                if start > pos:
                    yield pos, start - pos, None, 0
                log = int(x.log[i])
                yield start, end - start, (self.journals[log].log_path if log >= 0 else None), \
                    int(x.physical[i]) + (start - int(x.offset[i]))
                pos = end
            lo += WINDOW
        if pos < stop:
            yield pos, stop - pos, None, 0

    def chunks(self, offset: int = 0, length: int | None = None):
        """The bytes of [offset, offset+length), piece by piece (zeros for holes), each log opened once."""
        handles: dict[Path, io.BufferedReader] = {}
        try:
            for _, n, log, phys in self.pieces(offset, length):
                if log is None:
                    for done in range(0, n, WINDOW):  # a long hole in pieces: memory stays bounded
                        yield bytes(min(WINDOW, n - done))
                    continue
                f = handles.get(log) or handles.setdefault(log, open(open_log(log), "rb"))
                f.seek(phys)
                data = f.read(n)
                if len(data) != n:
                    raise FormatError(f"{log}: the index points past the end of the log (at {phys}, {n} bytes)")
                yield data
        finally:
            for f in handles.values():
                f.close()

    def read(self, offset: int = 0, length: int | None = None) -> bytes:
        return b"".join(self.chunks(offset, length))
