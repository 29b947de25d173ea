"""What `ioloom container ls|stat|cat|flatten|check|recover|rm` do, as functions the CLI and tests call."""
from __future__ import annotations

import os
import shutil
import stat
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ioloom.logfs.format import (
    BLOCK,
    BLOCK_MAGIC,
    ENTRY,
    ENTRY_RULES,
    PACK_NAME,
    RECORD,
    UNLINK,
    VERSION,
    WRITE,
    Container,
    FormatError,
    Journal,
    Meta,
    entry_problems,
    header_sum,
    is_container,
    load_journals,
    log_size,
    only_file,
    open_inside,
    open_log,
    parse_journal,
    physical_ends,
    read_inside,
    read_meta,
    record_layout,
    strip_prefix,
    sum64,
    sum64_rows,
)
from ioloom.progress import Advance, Bar, silent


def find_containers(root: str | os.PathLike) -> list[Path]:
    """The container itself, or every container under a directory (not descending into containers)."""
    root = strip_prefix(root)
    if is_container(root):
        return [root]
    found = []
    for dirpath, dirnames, _ in os.walk(root):
        here = Path(dirpath)
        for name in list(dirnames):
            if is_container(here / name):
                found.append(here / name)
                dirnames.remove(name)
    return sorted(found)


def packed_files(pack: Path) -> dict[str, int]:
    """The existing files of a pack (DIR/.ioloom-pack) and their sizes."""
    return {name: c.size for name, c in packed_containers(pack).items()}


def packed_containers(pack: Path) -> dict[str, Container]:
    """The existing files of a pack, each opened for reading (the journals are read once for all): a file
    exists when its last entry in the order (stamp, writer) is not an unlink; names come from the groups'
    names.<group> journals."""
    meta = read_meta(pack)
    journals = load_journals(meta)
    names: dict[int, str] = {}
    for backend in meta.backends:
        for group in meta.groups(backend, "names"):
            for line in read_inside(meta.member(backend, "names", group)).decode(errors="replace").splitlines():
                file_id, _, name = line.partition(" ")
                names.setdefault(int(file_id, 16), name)
    if not journals:
        return {}
    entries = np.concatenate([j.entries for j in journals])
    writers = np.concatenate([j.writers for j in journals])
    order = np.lexsort((writers, entries["stamp"], entries["file_id"]))
    last = {int(e["file_id"]): int(e["kind"]) for e in entries[order]}
    return {names[i]: Container(pack.parent / names[i], meta, only_file(journals, i))
            for i, kind in sorted(last.items()) if kind != UNLINK and i in names}


def is_packed(path: str | os.PathLike) -> bool:
    path = strip_prefix(path)
    pack = path.parent / PACK_NAME
    return not is_container(path) and is_container(pack) and path.name in packed_files(pack)


def summary(path: Path) -> dict:
    """Facts about one container: sizes, writers, files, index size and how many entries are patterns."""
    c = Container.open(path)
    entries, writers, _ = c.all_entries()
    logs = [j.log_path for j in c.journals if j.log_path.exists()]
    return {
        "path": str(path), "version": c.meta.version, "size": c.size, "chunk": c.meta.chunk,
        "mode": f"{c.meta.mode:04o}", "backends": [str(b) for b in c.meta.backends],
        "groups": len(c.journals), "writers": int(len(np.unique(writers))), "index_entries": int(len(entries)),
        "pattern_entries": int(np.count_nonzero(entries["count"] > 1)),
        "records": int(entries["count"].sum()) if len(entries) else 0,
        "index_bytes": sum(j.total_bytes for j in c.journals),
        "records_bytes": sum(log_size(j.records_path) or 0 for j in c.journals),
        "log_bytes": sum(p.stat().st_blocks * 512 for p in logs),
        "files": sum(len(c.meta.files(b)) for b in c.meta.backends),
    }


def cat(path: Path, out, progress: Bar = silent) -> int:
    """Write the logical file to a binary stream; returns bytes written. `progress` draws the bytes written."""
    done = 0
    c = Container.open(path)
    with progress(c.size) as advance:
        for data in c.chunks():
            out.write(data)
            done += len(data)
            advance(len(data))
    return done


@contextmanager
def _replacing(target: Path, tag: str):
    """A binary file to write `target` through: a temporary next to it, made durable (fsync) and renamed over
    target when the block completes, removed when it fails (a full disk, a damaged log). So target is always
    either what it was or the complete new file, even across a crash."""
    tmp = target.with_name(f".{tag}.{target.name}.{os.getpid()}")
    tmp.unlink(missing_ok=True)  # a leftover of a crashed run (or anything planted there): never written through
    try:
        with open(open_inside(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "wb") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if isinstance(err, OSError) and err.filename in (None, str(tmp)):
            err.filename = str(target)  # the name the user gave, not our temporary's
        raise


def flatten(path: Path, target: Path, progress: Bar = silent) -> int:
    """Write the logical file as a plain file: each extent copied in the kernel (copy_file_range), holes left
    sparse. Written through _replacing(): target is replaced only by the complete file. `progress` draws the
    logical bytes done."""
    c = Container.open(path)
    logs: dict[Path, int] = {}
    try:
        with _replacing(target, "flatten") as out, progress(c.size) as advance:
            for offset, length, log, phys in c.pieces():
                advance(length)
                if log is None:
                    continue
                src = logs.get(log) or logs.setdefault(log, open_log(log))
                while length:
                    n = os.copy_file_range(src, out.fileno(), length, phys, offset)
                    if n <= 0:
                        raise FormatError(f"{log}: ends before offset {phys + length}; run `ioloom container check`")
                    offset, phys, length = offset + n, phys + n, length - n
            os.ftruncate(out.fileno(), c.size)
    finally:
        for fd in logs.values():
            os.close(fd)
    return c.size


@dataclass
class CheckReport:
    problems: list[str] = field(default_factory=list)
    records_checked: int = 0
    unindexed_records: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


def _valid_record(data: bytes, at: int, layout: np.dtype, magic: int, version: int) -> np.ndarray | None:
    if at + layout.itemsize > len(data):
        return None
    head = np.frombuffer(data, layout, 1, at)[0]
    if head["magic"] != magic or head["version"] != version or header_sum(head) != int(head["header_sum"]):
        return None
    return head


def _as_run(head: np.ndarray) -> np.ndarray:
    """A version-2 record (one write) as a run of one."""
    run = np.zeros(1, RECORD)[0]
    for name in head.dtype.names:
        run[name] = head[name]
    run["count"], run["stamp_last"] = 1, head["stamp"]
    return run


def journal_records(records: Path, version: int = VERSION):
    """The valid records of a record journal in order (RECORD rows: a version-2 record is a run of one), whatever
    the state of their data. Records are appended whole; after a torn append (a sum that does not match) the
    scan resumes at the next magic."""
    try:
        data = read_inside(records)
    except FileNotFoundError:
        data = b""
    layout, magic = record_layout(version)
    magic_bytes = int(magic).to_bytes(4, "little")
    at = 0
    while at + layout.itemsize <= len(data):
        head = _valid_record(data, at, layout, magic, version)
        if head is None:
            at = data.find(magic_bytes, at + 1)
            if at < 0:
                return
            continue
        at += layout.itemsize
        yield head if layout is RECORD else _as_run(head)


def _open_log(log: Path):
    """A group's log for reading (an empty stream when it is missing), never through a link."""
    return open(open_inside(log), "rb") if log_size(log) is not None else open(os.devnull, "rb")


# One write of a run, as check and recover use it: its stamp is exact for a run's first and last write; a write
# between them gets stamp + i (a writer's stamps grow by at least 1 per write; the index's entries are made of
# whole runs, so their stamps are always exact ones); its data_sum is its data's, taken from the log.
ONE_WRITE = np.dtype([("kind", "<u2"), ("file_id", "<u4"), ("offset", "<u8"), ("length", "<u8"), ("stamp", "<u8"),
                      ("writer", "<u8"), ("data_sum", "<u8"), ("physical", "<u8")])
BATCH_BYTES = 16 << 20  # log bytes read at a time when data sums are taken from a log


def _run_shape_ok(run: np.ndarray, stored: int) -> bool:
    """A record a writer makes: a valid entry's shape (docs/logfs-format.md, "Valid entries"), stamps that grow by at
    least 1 per write, and no more data than the log stores (so a crafted count cannot make the work grow)."""
    one = run.reshape(1)
    count = int(run["count"])
    return (entry_problems(one)[0] < 0 and int(run["stamp"]) + count - 1 <= int(run["stamp_last"])
            and count * int(run["length"]) <= stored)


def _write_sums(f, run: np.ndarray, advance: Advance) -> np.ndarray:
    """lf_sum64 of each write of a run, read from the log in batches of about BATCH_BYTES (`advance` is told the
    bytes read)."""
    count, length, pstride = int(run["count"]), int(run["length"]), int(run["pstride"])
    sums = np.zeros(count, np.uint64)
    step = max(1, min(BATCH_BYTES // max(length, 1), (BATCH_BYTES - length) // max(pstride, 1) + 1))
    for lo in range(0, count, step):
        k = min(step, count - lo)
        f.seek(int(run["physical"]) + lo * pstride)
        span = (k - 1) * pstride + length
        data = f.read(span)
        advance(len(data))
        buf = np.frombuffer(data.ljust(span, b"\0"), np.uint8)
        # a stride is only the step between two writes: a run of one write may hold any pstride (the format does
        # not constrain it, and C ignores it), which as_strided cannot take above 2^63 (fuzz seed 1301, case 1284)
        rows = np.lib.stride_tricks.as_strided(buf, shape=(k, length), strides=(pstride if k > 1 else 0, 1),
                                               writeable=False)
        sums[lo:lo + k] = sum64_rows(rows)
    return sums


def _writes_of(run: np.ndarray, sums: np.ndarray) -> np.ndarray:
    count = len(sums)
    i = np.arange(count, dtype=np.uint64)
    out = np.zeros(count, ONE_WRITE)
    for name in ("kind", "file_id", "length", "writer"):
        out[name] = run[name]
    out["offset"], out["physical"] = run["offset"] + i * run["stride"], run["physical"] + i * run["pstride"]
    out["stamp"] = run["stamp"] + i
    out["stamp"][-1] = run["stamp_last"]
    out["data_sum"] = sums
    return out


def journal_writes(records: Path, log: Path, version: int = VERSION, advance: Advance = lambda done: None):
    """Each write of every record of a group that a writer could have made and whose data lies in the log, with
    whether its record's data sum matches the log: (ONE_WRITE row, intact), in journal order. `advance` is told
    the data bytes read."""
    size = log_size(log) or 0
    stored = os.lstat(log).st_blocks * 512 if size else 0
    with _open_log(log) as f:
        for run in journal_records(records, version):
            if not _run_shape_ok(run, stored) or int(physical_ends(run.reshape(1))[0]) > size:
                continue  # not a record a writer makes, or its data would lie past the log's end: lost
            sums = _write_sums(f, run, advance)
            intact = int(sums.sum(dtype=np.uint64)) == int(run["data_sum"])
            for write in _writes_of(run, sums):
                yield write, intact


def scan_records(records: Path, log: Path, version: int = VERSION, advance: Advance = lambda done: None):
    """The intact writes of a group, in journal order: (ONE_WRITE row, data offset in the log). Intact: its record's
    own sum matches and the log holds the record's data with its data sum. `advance` is told the data bytes read."""
    for write, intact in journal_writes(records, log, version, advance):
        if intact:
            yield write, int(write["physical"])


def _record_key(head: np.ndarray) -> tuple[int, ...]:
    """What tells a group's records apart (a truncate or create has no data: it may share its physical offset)."""
    return tuple(int(head[name]) for name in ("writer", "file_id", "kind", "offset", "physical"))


def groups(meta: Meta) -> list[Journal]:
    """Every writer group of every backend, whichever of its log, record journal and index exist (a group missing
    one of them is damaged), each with the valid blocks of its index (entries not checked: see check)."""
    found = sorted({(backend, group) for backend in meta.backends for kind in ("log", "records", "index")
                    for group in meta.groups(backend, kind)})
    out = []
    for backend, group in found:
        index = meta.member(backend, "index", group)
        try:
            data = read_inside(index)
        except FileNotFoundError:
            data = b""
        blocks, valid = parse_journal(data)
        entries = np.concatenate([b for _, b in blocks]) if blocks else np.zeros(0, ENTRY)
        writers = np.concatenate([np.full(len(b), h["writer"], np.uint64) for h, b in blocks]) \
            if blocks else np.zeros(0, np.uint64)
        out.append(Journal(group, index, meta.member(backend, "log", group), meta.member(backend, "records", group),
                           entries, writers, len(blocks), valid, len(data)))
    return out


def _sound_entries(j: Journal, report: CheckReport | None) -> np.ndarray:
    """Which entries of a group can be checked against its log: valid, and within the log. What is not is
    reported, with the command that repairs it."""
    problems = entry_problems(j.entries)
    size = log_size(j.log_path)
    valid = problems < 0
    reach = np.zeros(len(j.entries), np.uint64)
    reach[valid] = physical_ends(j.entries[valid])
    within = valid & (reach <= (size or 0))
    if report is None:
        return within
    if np.any(~valid):
        first = int(np.flatnonzero(~valid)[0])
        report.problems.append(f"{j.index_path}: {int(np.sum(~valid))} invalid index entries (the first, entry "
                               f"{first}, has an invalid {ENTRY_RULES[problems[first]]}): run `ioloom container "
                               "recover` to rebuild the index from the record journal")
    if np.any(valid & ~within):
        lost = f"is {size} bytes" if size is not None else "is missing"
        report.problems.append(f"{j.log_path}: {lost}, but {int(np.sum(valid & ~within))} index entries reach "
                               f"byte {int(reach.max())}: their data is lost; run `ioloom container recover` to "
                               "index what remains")
    return within


def log_bytes(journals: list[Journal]) -> int:
    """The data bytes in the groups' logs: what reading every record's data once reads."""
    return sum(log_size(j.log_path) or 0 for j in journals)


def check(path: Path, progress: Bar = silent) -> CheckReport:
    """Verify the index against the logs and record journals: every block's sums and entries; for every record an
    entry names, the journal's writes that cover it (offset, length, writer) and their data's sums; and that no
    intact write of a record journal is missing from the index. OK only when `cat` returns every intact record's
    bytes. `progress` draws the data bytes read (each record's data once)."""
    directory = strip_prefix(path)
    meta = read_meta(directory)
    report = CheckReport()
    journals = groups(meta)
    with progress(log_bytes(journals)) as advance:
        for j in journals:
            _check_group(j, meta.version, report, advance)
    if report.unindexed_records:
        report.problems.append(f"{report.unindexed_records} intact records in the logs are not in any index "
                               "(a writer that did not close?): run `ioloom container recover`")
    return report


def _check_group(j: Journal, version: int, report: CheckReport, advance: Advance) -> None:
    """check() of one writer group: its index's blocks and entries against its record journal and log."""
    if j.valid_bytes != j.total_bytes:
        report.problems.append(f"{j.index_path}: {j.total_bytes - j.valid_bytes} bytes after block {j.blocks} "
                               "are torn or corrupt (a crash while publishing?): run `ioloom container recover`")
    records = j.records_path
    writes = list(journal_writes(records, j.log_path, version, advance))
    described = {_record_key(w): (w, intact) for w, intact in writes}
    sound = _sound_entries(j, report)
    if len(j.entries) and not described:
        report.problems.append(f"{records}: missing or empty, but {j.index_path.name} has {len(j.entries)} "
                               "entries: run `ioloom container recover` (it rebuilds the journal from the "
                               "index and the log)")
        return
    indexed: set[tuple[int, ...]] = set()
    for e, writer in zip(j.entries[sound], j.writers[sound]):
        _check_entry(j.log_path, e, int(writer), described, report, indexed)
    unindexed = sum(_record_key(w) not in indexed for w, intact in writes if intact)
    if unindexed and not j.total_bytes:
        report.problems.append(f"{records}: {unindexed} intact records, but {j.index_path.name} is missing: "
                               "run `ioloom container recover`")
    report.unindexed_records += unindexed


def _check_entry(log: Path, e: np.ndarray, writer: int, described: dict, report: CheckReport,
                 indexed: set) -> None:
    """Each record of the entry must be covered, from its start, by writes of its writer in the record journal
    that follow each other in the file and in the log (a record may be several contiguous writes), with intact
    data. The work is bounded by the journal: an entry can name no more records than it describes writes."""
    total, stamps = 0, []
    count = 1 if e["kind"] != WRITE else int(e["count"])
    if count > len(described):
        report.problems.append(f"{log}: an entry at logical {int(e['offset'])} names {count} records, more than the "
                               f"record journal holds ({len(described)}): run `ioloom container recover`")
        return
    for i in range(count):
        start, want_offset = int(e["physical"]) + i * int(e["pstride"]), int(e["offset"]) + i * int(e["stride"])
        data_at = start
        while True:
            key = (writer, int(e["file_id"]), int(e["kind"]), want_offset + data_at - start, data_at)
            head, intact = described.get(key, (None, False))
            where = f"{log} at {data_at}"
            report.records_checked += 1
            if head is None:
                report.problems.append(f"{where}: no intact record in the record journal where the index says one "
                                       f"is (logical offset {key[3]}): run `ioloom container recover`")
                return
            if int(head["length"]) > start + int(e["length"]) - data_at:
                report.problems.append(f"{where}: a record of {int(head['length'])} bytes runs past the index "
                                       "entry's: run `ioloom container recover`")
                return
            if not intact:
                report.problems.append(f"{where}: data checksum mismatch (the log was damaged after it was "
                                       "written): run `ioloom container recover` to index what is intact")
                return
            total += int(head["data_sum"])
            stamps.append(int(head["stamp"]))
            indexed.add(key)
            data_at += int(head["length"])
            if e["kind"] != WRITE or data_at >= start + int(e["length"]) or not head["length"]:
                break
        if e["kind"] == WRITE and data_at != start + int(e["length"]):
            report.problems.append(f"{log} at {start}: records of {data_at - start} bytes where the index entry "
                                   f"says {int(e['length'])}: run `ioloom container recover`")
            return
    if total % (1 << 64) != int(e["data_sum"]):
        report.problems.append(f"{log}: entry at logical {int(e['offset'])}: combined checksum mismatch: run "
                               "`ioloom container recover`")
    elif (stamps[0], stamps[-1]) != (int(e["stamp"]), int(e["stamp_last"])):  # its place in the order of writes
        report.problems.append(f"{log}: entry at logical {int(e['offset'])}: its stamps are not its records' (the "
                               "order of overlapping writes would change): run `ioloom container recover`")


# Index rows while rebuilding: [kind, file_id, offset, length, count, stride, physical, pstride, stamp,
# stamp_last, data_sum], merged by the rules of the C writer (lf_write.c: continues, extends, fold_into_pattern).
KIND, FILE_ID, OFFSET, LENGTH, COUNT, STRIDE, PHYSICAL, PSTRIDE, STAMP_LAST, SUM = 0, 1, 2, 3, 4, 5, 6, 7, 9, 10


def _continues(e: list[int], r: list[int]) -> bool:
    return (e[KIND] == r[KIND] == WRITE and e[COUNT] == 1 and e[FILE_ID] == r[FILE_ID]
            and r[OFFSET] == e[OFFSET] + e[LENGTH] and r[PHYSICAL] == e[PHYSICAL] + e[LENGTH])


def _extends(e: list[int], r: list[int]) -> bool:
    if not (e[KIND] == r[KIND] == WRITE and e[LENGTH] == r[LENGTH] and e[FILE_ID] == r[FILE_ID]):
        return False
    if e[COUNT] == 1:
        return r[OFFSET] >= e[OFFSET] + e[LENGTH] and r[PHYSICAL] > e[PHYSICAL]
    return r[OFFSET] == e[OFFSET] + e[COUNT] * e[STRIDE] and r[PHYSICAL] == e[PHYSICAL] + e[COUNT] * e[PSTRIDE]


def _extend(e: list[int], r: list[int]) -> None:
    if e[COUNT] == 1:
        e[STRIDE], e[PSTRIDE] = r[OFFSET] - e[OFFSET], r[PHYSICAL] - e[PHYSICAL]
    e[COUNT] += 1
    e[STAMP_LAST] = r[STAMP_LAST]
    e[SUM] = (e[SUM] + r[SUM]) % (1 << 64)


def _entries_for(records: list[tuple[np.ndarray, int]], patterns: bool) -> np.ndarray:
    """Index entries for one writer's records in order, merging runs as the C writer does (when `patterns`)."""
    rows: list[list[int]] = []
    for head, data_at in records:
        stamp = int(head["stamp"])
        r = [int(head["kind"]), int(head["file_id"]), int(head["offset"]), int(head["length"]), 1, 0, data_at, 0,
             stamp, stamp, int(head["data_sum"])]
        if patterns and rows and _continues(rows[-1], r):
            rows[-1][LENGTH] += r[LENGTH]
            rows[-1][STAMP_LAST] = stamp
            rows[-1][SUM] = (rows[-1][SUM] + r[SUM]) % (1 << 64)
            if len(rows) > 1 and _extends(rows[-2], rows[-1]):
                _extend(rows[-2], rows.pop())
        elif patterns and rows and _extends(rows[-1], r):
            _extend(rows[-1], r)
        else:
            rows.append(r)
    out = np.zeros(len(rows), ENTRY)
    for i, row in enumerate(rows):
        out[i] = tuple(row)
    return out


def _block(writer: int, entries: np.ndarray, version: int = VERSION) -> bytes:
    head = np.zeros(1, BLOCK)[0]
    head["magic"], head["version"], head["writer"], head["count"] = BLOCK_MAGIC, version, writer, len(entries)
    head["entries_sum"] = sum64(entries.tobytes())
    head["header_sum"] = header_sum(head)
    return head.tobytes() + entries.tobytes()


def _overlapping_writers(records: list[tuple[np.ndarray, int]]) -> bool:
    """Do records of different writers overlap? Then entries stay single records, so each keeps its own stamp
    in the total order (a pattern is ordered by its first record)."""
    spans = sorted((int(h["offset"]), int(h["offset"]) + (int(h["length"]) if h["kind"] == WRITE else 1 << 63),
                    int(h["writer"])) for h, _ in records)
    return any(b[0] < a[1] and a[2] != b[2] for a, b in zip(spans, spans[1:]))


def _new_records(version: int, n: int, e: np.ndarray, writer: int) -> np.ndarray:
    """n journal records of the container's version for parts of entry e (a version-3 record: a run of one)."""
    layout, magic = record_layout(version)
    out = np.zeros(n, layout)
    out["magic"], out["version"], out["kind"], out["file_id"], out["writer"] = \
        magic, version, e["kind"], e["file_id"], writer
    if layout is RECORD:
        out["count"] = 1
    return out


def _sealed(out: np.ndarray) -> np.ndarray:
    """The records with their header sums (computed with header_sum 0, as it is in a new record)."""
    out["header_sum"] = sum64_rows(out.view(np.uint8).reshape(len(out), out.dtype.itemsize)) & np.uint64(0xFFFFFFFF)
    return out


def _entry_records(log, e: np.ndarray, writer: int, version: int) -> np.ndarray:
    """The journal records an index entry stands for, rebuilt from the log `log` (a numpy view of it), their data
    sums taken from the log as it is: one run (version 2: one record per record of the entry). Reads in batches:
    memory stays bounded."""
    count, length = int(e["count"]), int(e["length"])
    i = np.arange(count, dtype=np.uint64)
    physical = e["physical"] + i * e["pstride"]
    sums = np.zeros(count, np.uint64)
    step = max(1, BATCH_BYTES // max(length, 1))
    for lo in range(0, count, step):
        starts = physical[lo:lo + step].astype(np.int64)
        rows = log[starts[:, None] + np.arange(length, dtype=np.int64)[None, :]]
        sums[lo:lo + step] = sum64_rows(rows.reshape(len(starts), length))
    if version > 2:
        out = _new_records(version, 1, e, writer)
        for name in ("offset", "length", "count", "stride", "physical", "pstride", "stamp", "stamp_last"):
            out[name] = e[name]
        out["data_sum"] = sums.sum(dtype=np.uint64)
        return _sealed(out)
    out = _new_records(version, count, e, writer)
    out["offset"], out["length"], out["physical"] = e["offset"] + i * e["stride"], length, physical
    out["data_sum"] = sums
    out["stamp"] = e["stamp"] + i  # a writer's stamps grow by at least 1 per write: the last record's is exact
    out["stamp"][-1] = e["stamp_last"]
    return _sealed(out)


def _uncovered(e: np.ndarray, writer: int, described: dict) -> list[tuple[int, int, int]]:
    """(logical offset, physical offset, length) of each part of the entry's records that no journal record
    describes: a record is covered from its start by journal records that follow each other (as check walks)."""
    parts = []
    for i in range(int(e["count"])):
        start, offset = int(e["physical"]) + i * int(e["pstride"]), int(e["offset"]) + i * int(e["stride"])
        at, end = start, start + int(e["length"])
        while (head := described.get((writer, int(e["file_id"]), int(e["kind"]), offset + at - start, at))) is not None:
            if not head["length"] or at + int(head["length"]) > end:
                break
            at += int(head["length"])
        if at < end or (at == start and head is None):
            parts.append((offset + at - start, at, end - at))
    return parts


def _part_records(log, e: np.ndarray, writer: int, parts: list[tuple[int, int, int]], version: int) -> np.ndarray:
    """Journal records for parts of an entry, one write each, data sums taken from the log as it is."""
    out = _new_records(version, len(parts), e, writer)
    out["stamp"] = e["stamp_last"]
    if version > 2:
        out["stamp_last"] = e["stamp_last"]
    for k, (offset, physical, length) in enumerate(parts):
        out[k]["offset"], out[k]["physical"], out[k]["length"] = offset, physical, length
        out[k]["data_sum"] = sum64(log[physical:physical + length])
    return _sealed(out)


def _lost_records(j: Journal, heads: list[np.ndarray], version: int) -> np.ndarray:
    """Records the group's index holds but its record journal lost (the journal deleted, emptied or cut short),
    rebuilt from the index and the log, so that recover keeps what `cat` serves. Only entries later than the
    journal's last intact record of their writer: an entry inside the journal's span that does not match it is
    index damage, which the journal repairs. Entries reaching past the data the log stores are left out, so the
    work is bounded by the log's stored bytes."""
    sound = _sound_entries(j, None)
    size = log_size(j.log_path)
    none = np.zeros(0, record_layout(version)[0])
    if not size or not np.any(sound):
        return none
    described = {_record_key(h): h for h in heads}
    last: dict[int, int] = {}
    for h in heads:
        last[int(h["writer"])] = max(last.get(int(h["writer"]), 0), int(h["stamp"]))
    stored = os.lstat(j.log_path).st_blocks * 512
    found = []
    with open(open_inside(j.log_path), "rb") as f:
        log = np.memmap(f, np.uint8, "r", shape=(size,))
        for e, writer in zip(j.entries[sound], j.writers[sound]):
            writer = int(writer)
            if int(e["count"]) * int(e["length"]) > stored or int(e["stamp_last"]) <= last.get(writer, -1):
                continue
            if writer not in last:  # none of the writer's records left: the whole entry, at numpy speed
                found.append(_entry_records(log, e, writer, version))
            elif parts := _uncovered(e, writer, described):
                found.append(_part_records(log, e, writer, parts, version))
        del log
    return np.concatenate(found) if found else none


def recover(path: Path, progress: Bar = silent) -> dict:
    """Rebuild every index journal from the intact records of the record journals (a record whose data in the log
    does not match its sum is left out). A group whose record journal is lost gets it rebuilt first from its index
    and log (stats["rebuilt"] counts those records). Each new journal and index replaces the old one atomically
    (rename); nothing in the logs is changed. `progress` draws the data bytes of the records scanned."""
    directory = strip_prefix(path)
    meta = read_meta(directory)
    scanned: list[tuple[Journal, list]] = []
    rebuilt_records = 0
    journals = groups(meta)
    with progress(log_bytes(journals)) as advance:
        for j in journals:
            journal = j.records_path
            intact = list(scan_records(journal, j.log_path, meta.version, advance))
            if len(rebuilt := _lost_records(j, [h for h, _ in intact], meta.version)):
                old = read_inside(journal) if log_size(journal) is not None else b""
                with _replacing(journal, "recover") as out:  # what was there stays: the scan skips non-records
                    out.write(old + rebuilt.tobytes())
                intact = list(scan_records(journal, j.log_path, meta.version))
                rebuilt_records += len(rebuilt)
            scanned.append((j, intact))
    patterns = not _overlapping_writers([r for _, recs in scanned for r in recs])
    stats = {"logs": len(scanned), "records": 0, "entries": 0, "patterns": patterns, "rebuilt": rebuilt_records}
    for j, records in scanned:
        by_writer: dict[int, list] = {}
        for head, data_at in records:
            by_writer.setdefault(int(head["writer"]), []).append((head, data_at))
        blob = b""
        for writer, recs in sorted(by_writer.items()):
            recs.sort(key=lambda r: int(r[0]["stamp"]))
            entries = _entries_for(recs, patterns)
            blob += _block(writer, entries, meta.version)
            stats["records"] += len(recs)
            stats["entries"] += len(entries)
        with _replacing(j.index_path, "recover") as out:  # its temporary is not matched by index.* while written
            out.write(blob)
    return stats


BACKEND_FILES = ("log.", "records.", "index.", "names.")  # what logfs puts in an extra backend directory


def _backend_files(meta: Meta, backend: Path) -> list[str] | None:
    """The container's files in an extra backend directory (None: it is gone; in a shared spread directory, the
    names that begin with its id), refusing (FormatError) a directory that holds anything else of it."""
    try:
        fd = os.open(backend, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    prefix = meta.prefix(backend)
    try:
        names = [n for n in os.listdir(fd) if n.startswith(prefix)]
        foreign = [n for n in names if not n[len(prefix):].startswith(BACKEND_FILES)
                   or not stat.S_ISREG(os.lstat(n, dir_fd=fd).st_mode)]
    finally:
        os.close(fd)
    if foreign:
        raise FormatError(f"{backend}: an extra backend of the container holds {foreign[0]!r}, which logfs did not "
                          "put there; nothing was deleted. Move what you keep there elsewhere, then run the command "
                          "again")
    return names


def remove(path: Path) -> None:
    """Delete a container: its files in its extra backend directories (each checked first: only logfs's files,
    nothing followed through a link; a directory of its own is removed, a shared spread one stays), then its own
    directory, with the metadata, last."""
    directory = strip_prefix(path)
    if directory.is_symlink():
        raise FormatError(f"{directory} is a symbolic link to a container: remove the link with rm, or give the "
                          "container's own path")
    meta = read_meta(directory, missing_ok=True)
    extras = [(backend, _backend_files(meta, backend)) for backend in meta.backends[1:]]
    for backend, names in reversed([(b, names) for b, names in extras if names is not None]):
        fd = os.open(backend, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            for name in names:
                os.unlink(name, dir_fd=fd)
        finally:
            os.close(fd)
        if not meta.spread:
            os.rmdir(backend)
    shutil.rmtree(directory)  # fd-based: removes links inside, never what they point to
