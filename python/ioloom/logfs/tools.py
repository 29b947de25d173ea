"""What `ioloom container ls|stat|cat|flatten|check|recover|rm` do, as functions the CLI and tests call."""
from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ioloom.logfs.format import (BLOCK, BLOCK_MAGIC, ENTRY, PACK_NAME, RECORD, RECORD_MAGIC, TRUNCATE, UNLINK,
                                 VERSION, WRITE, Container, FormatError, header_sum, is_container, load_journals,
                                 only_file, open_log, read_meta, strip_prefix, sum64)


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
        for journal in sorted(backend.glob("names.*")) if backend.is_dir() else []:
            for line in journal.read_text().splitlines():
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
        "log_bytes": sum(p.stat().st_blocks * 512 for p in logs),
        "files": sum(len(list(b.iterdir())) for b in c.meta.backends if b.is_dir()),
    }


def cat(path: Path, out) -> int:
    """Write the logical file to a binary stream; returns bytes written."""
    done = 0
    for data in Container.open(path).chunks():
        out.write(data)
        done += len(data)
    return done


@contextmanager
def _replacing(target: Path, tag: str):
    """A binary file to write `target` through: a temporary next to it, made durable (fsync) and renamed over
    target when the block completes, removed when it fails (a full disk, a damaged log). So target is always
    either what it was or the complete new file, even across a crash."""
    tmp = target.with_name(f".{tag}.{target.name}.{os.getpid()}")
    try:
        with open(tmp, "wb") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if isinstance(err, OSError) and err.filename in (None, str(tmp)):
            err.filename = str(target)  # the name the user gave, not our temporary's
        raise


def flatten(path: Path, target: Path) -> int:
    """Write the logical file as a plain file: each extent copied in the kernel (copy_file_range), holes left
    sparse. Written through _replacing(): target is replaced only by the complete file."""
    c = Container.open(path)
    logs: dict[Path, int] = {}
    try:
        with _replacing(target, "flatten") as out:
            for offset, length, log, phys in c.pieces():
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


def _valid_record(data: bytes, at: int) -> np.ndarray | None:
    if at + RECORD.itemsize > len(data):
        return None
    head = np.frombuffer(data, RECORD, 1, at)[0]
    if head["magic"] != RECORD_MAGIC or head["version"] != VERSION or header_sum(head) != int(head["header_sum"]):
        return None
    return head


def journal_records(records: Path):
    """The valid records of a record journal in order, whatever the state of their data. Records are appended
    whole, 64 bytes each; after a torn append (a sum that does not match) the scan resumes at the next magic."""
    data = records.read_bytes() if records.exists() else b""
    magic = int(RECORD_MAGIC).to_bytes(4, "little")
    at = 0
    while at + RECORD.itemsize <= len(data):
        head = _valid_record(data, at)
        if head is None:
            at = data.find(magic, at + 1)
            if at < 0:
                return
            continue
        at += RECORD.itemsize
        yield head


def scan_records(records: Path, log: Path):
    """The intact records of a group, in journal order: (record, data offset in the log). Intact: the record's
    own sum matches and the log holds data with its data sum."""
    with open(log, "rb") if log.exists() else open(os.devnull, "rb") as f:
        for head in journal_records(records):
            f.seek(int(head["physical"]))
            if sum64(f.read(int(head["length"]))) == int(head["data_sum"]):
                yield head, int(head["physical"])


def _record_key(head: np.ndarray) -> tuple[int, ...]:
    """What tells a group's records apart (a truncate or create has no data: it may share its physical offset)."""
    return tuple(int(head[name]) for name in ("writer", "file_id", "kind", "offset", "physical"))


def check(path: Path) -> CheckReport:
    """Verify the index against the logs and record journals: every block's sums; for every record an entry names,
    the journal's record of it (offset, length, writer) and the data's sum; and that no intact record of a record
    journal is missing from the index."""
    directory = strip_prefix(path)
    meta = read_meta(directory)
    report = CheckReport()
    for j in load_journals(meta):
        if j.valid_bytes != j.total_bytes:
            report.problems.append(f"{j.index_path}: {j.total_bytes - j.valid_bytes} bytes after block {j.blocks} "
                                   "are torn or corrupt (a crash while publishing?): run `ioloom container recover`")
        records = j.index_path.with_name("records." + j.group)
        described = {_record_key(h): h for h in journal_records(records)}
        if len(j.entries) and not j.log_path.exists():
            report.problems.append(f"{j.log_path}: missing, but {len(j.entries)} index entries point into it")
            continue
        indexed: set[tuple[int, ...]] = set()
        with open(j.log_path, "rb") if len(j.entries) else open(os.devnull, "rb") as f:
            for e, writer in zip(j.entries, j.writers):
                _check_entry(f, j.log_path, e, int(writer), described, report, indexed)
        report.unindexed_records += sum(_record_key(h) not in indexed for h, _ in scan_records(records, j.log_path))
    if report.unindexed_records:
        report.problems.append(f"{report.unindexed_records} intact records in the logs are not in any index "
                               "(a writer that did not close?): run `ioloom container recover`")
    return report


def _check_entry(f, log: Path, e: np.ndarray, writer: int, described: dict, report: CheckReport,
                 indexed: set) -> None:
    """Each record of the entry must be covered, from its start, by journal records of its writer that follow
    each other in the file and in the log (a record may be several contiguous writes), with intact data."""
    total = 0
    count = 1 if e["kind"] != WRITE else int(e["count"])
    for i in range(count):
        start, want_offset = int(e["physical"]) + i * int(e["pstride"]), int(e["offset"]) + i * int(e["stride"])
        data_at = start
        while True:
            key = (writer, int(e["file_id"]), int(e["kind"]), want_offset + data_at - start, data_at)
            head = described.get(key)
            where = f"{log} at {data_at}"
            report.records_checked += 1
            if head is None:
                report.problems.append(f"{where}: no intact record in the record journal where the index says one "
                                       f"is (logical offset {key[3]})")
                return
            f.seek(data_at)
            if sum64(f.read(int(head["length"]))) != int(head["data_sum"]):
                report.problems.append(f"{where}: data checksum mismatch (the log was damaged after it was written)")
                return
            total += int(head["data_sum"])
            indexed.add(key)
            data_at += int(head["length"])
            if e["kind"] != WRITE or data_at >= start + int(e["length"]) or not head["length"]:
                break
        if e["kind"] == WRITE and data_at != start + int(e["length"]):
            report.problems.append(f"{log} at {start}: records of {data_at - start} bytes where the index entry "
                                   f"says {int(e['length'])}")
            return
    if total % (1 << 64) != int(e["data_sum"]):
        report.problems.append(f"{log}: entry at logical {int(e['offset'])}: combined checksum mismatch")


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


def _block(writer: int, entries: np.ndarray) -> bytes:
    head = np.zeros(1, BLOCK)[0]
    head["magic"], head["version"], head["writer"], head["count"] = BLOCK_MAGIC, VERSION, writer, len(entries)
    head["entries_sum"] = sum64(entries.tobytes())
    head["header_sum"] = header_sum(head)
    return head.tobytes() + entries.tobytes()


def _overlapping_writers(records: list[tuple[np.ndarray, int]]) -> bool:
    """Do records of different writers overlap? Then entries stay single records, so each keeps its own stamp
    in the total order (a pattern is ordered by its first record)."""
    spans = sorted((int(h["offset"]), int(h["offset"]) + (int(h["length"]) if h["kind"] == WRITE else 1 << 63),
                    int(h["writer"])) for h, _ in records)
    return any(b[0] < a[1] and a[2] != b[2] for a, b in zip(spans, spans[1:]))


def recover(path: Path) -> dict:
    """Rebuild every index journal from the intact records of the record journals (a record whose data in the log
    does not match its sum is left out). Each new index replaces the old one atomically (rename); nothing in the
    logs or record journals is changed."""
    directory = strip_prefix(path)
    meta = read_meta(directory)
    logs = [log for b in meta.backends if b.is_dir() for log in sorted(b.glob("log.*"))]
    scanned = {log: list(scan_records(log.with_name("records." + log.name[len("log."):]), log)) for log in logs}
    patterns = not _overlapping_writers([r for recs in scanned.values() for r in recs])
    stats = {"logs": len(logs), "records": 0, "entries": 0, "patterns": patterns}
    for log, records in scanned.items():
        index = log.with_name("index." + log.name[len("log."):])
        by_writer: dict[int, list] = {}
        for head, data_at in records:
            by_writer.setdefault(int(head["writer"]), []).append((head, data_at))
        blob = b""
        for writer, recs in sorted(by_writer.items()):
            recs.sort(key=lambda r: int(r[0]["stamp"]))
            entries = _entries_for(recs, patterns)
            blob += _block(writer, entries)
            stats["records"] += len(recs)
            stats["entries"] += len(entries)
        with _replacing(index, "recover") as out:  # its temporary is not matched by index.* while written
            out.write(blob)
    return stats


def remove(path: Path) -> None:
    """Delete a container from every backend, the primary directory (with the metadata) last."""
    directory = strip_prefix(path)
    meta = read_meta(directory)
    for backend in reversed(meta.backends):
        if backend.exists():
            shutil.rmtree(backend)
