"""The order across processes a replay keeps (docs/replay.md, "Order across processes"): for each call on a file
several processes use, how many calls of each other process must be done before it starts. Three rules, each a
wait for a call that took effect earlier in the original:
- ended: the calls that had ended before this one started;
- locks: a record lock request waits for the release of each conflicting lock another process was granted first;
- sizes: a read whose byte count shows that a write it overlapped in time had extended the file waits for that
  write, and a write whose extension it had not seen waits for the read.
In an MPI-IO replay the collective calls made again may wait for each other inside the MPI library, where the
original's did not: rule 1 measures "ended before" on times where every part of a collective ends no earlier than
its last part started (collective_times), so that no wait points from a part of a collective to one that cannot end
before that part has started.
"""
from __future__ import annotations

import fcntl
import re
from dataclasses import dataclass

import numpy as np

from ioloom.trace.ops import POSIX_READS, POSIX_WRITES

LOCK_REQUESTS = frozenset({fcntl.F_SETLK, fcntl.F_SETLKW, fcntl.F_OFD_SETLK, fcntl.F_OFD_SETLKW})
LOCK_TYPES = frozenset({fcntl.F_RDLCK, fcntl.F_WRLCK})
CLOSES = frozenset({"close", "fclose"})
TRUNCATES = frozenset({"ftruncate", "ftruncate64"})
SEEK_SET = 0
COMPLETIONS = re.compile(r"^MPI_(Wait|Test)|_end$")  # MPI-IO events that end a request another one started


def waits(processes: list, shared: set[int], initial_sizes: dict[int, int]) -> list[list[dict[int, int]]]:
    """Per process, per call: {other process: calls of it to be done first}, given only where that number grows
    (the counters only grow, so a smaller number later is already met)."""
    need = [np.zeros((len(p.calls), len(processes)), np.int64) for p in processes]
    after_ended(processes, shared, need, collective_times(processes))
    after_releases(processes, shared, need)
    after_sizes(processes, shared, initial_sizes, need)
    return [_rows(n) for n in need]


def _rows(need: np.ndarray) -> list[dict[int, int]]:
    met = np.zeros(need.shape[1], np.int64)
    rows = []
    for counts in need:
        rows.append({q: int(k) for q, k in enumerate(counts) if k > met[q]})
        np.maximum(met, counts, out=met)
    return rows


def collective_times(processes: list) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per process its calls' (starts, ends), the original's but that each part of an MPI-IO collective (the calls
    of one file and coll_seq: its initiations and, for a non-blocking or split one, their completions) ends no
    earlier than the last initiating part started, and a completion no earlier than the last completion started (a
    non-blocking collective may progress only inside the completions of all its ranks); the calls after it in its
    process moved as late (a call starts no earlier than the one before it ended). Repeated until nothing moves:
    each round only raises times to other calls' times, so it ends."""
    starts = [np.array([c.t_start for c in p.calls], np.int64) for p in processes]
    ends = [np.maximum.accumulate(np.array([c.t_end for c in p.calls], np.int64)) for p in processes]
    parts: dict[tuple[int, int], list[tuple[int, int, bool]]] = {}
    for p, process in enumerate(processes):
        for i, c in enumerate(process.calls):
            if c.layer == "mpiio" and c.coll_seq >= 0:
                parts.setdefault((c.file_id, c.coll_seq), []).append((p, i, bool(COMPLETIONS.search(c.op))))
    moved = bool(parts)
    while moved:
        moved = False
        for members in parts.values():
            last = [max((starts[p][i] for p, i, completing in members if completing == kind), default=-1)
                    for kind in (False, True)]  # the last initiation's start, the last completion's
            for p, i, completing in members:
                least = max(last) if completing else last[0]
                if ends[p][i] < least:
                    ends[p][i], moved = least, True
        for p in range(len(processes)):
            np.maximum.accumulate(ends[p], out=ends[p])
            starts[p][1:] = np.maximum(starts[p][1:], ends[p][:-1])
    return list(zip(starts, ends))


def after_ended(processes: list, shared: set[int], need: list[np.ndarray],
                times: list[tuple[np.ndarray, np.ndarray]]) -> None:
    """A call on a shared file waits for the calls of the others that had all ended before it started (times:
    collective_times)."""
    ends = [end for _, end in times]
    for p, process in enumerate(processes):
        starts = times[p][0]
        on_shared = np.array([c.file_id in shared for c in process.calls], bool)
        for q in range(len(processes)):
            if q != p:
                need[p][:, q] = np.where(on_shared, np.searchsorted(ends[q], starts, "left"), 0)


@dataclass
class Hold:
    """A record lock a process was granted (fcntl, from l_start over l_len, 0: to the end) until its release."""
    process: int
    index: int
    file_id: int
    first: int
    last: float
    write: bool
    granted: int  # the request's end
    release: int | None  # index of the unlock or close that ended it; None: held to the end
    released: int  # the release's start


def holds(process, p: int) -> list[Hold]:
    """The record locks process p (its index) was granted, each with its release."""
    out = []
    for i, c in enumerate(process.calls):
        kind = (c.aux >> 16) & 0xFF
        if not (c.op.startswith("fcntl") and c.aux & 0xFFFF in LOCK_REQUESTS and kind in LOCK_TYPES
                and (c.aux >> 24) & 0xFF == SEEK_SET and c.ret == 0 and c.offset >= 0):
            continue
        last = c.offset + c.req if c.req > 0 else float("inf")
        j = next((j for j in range(i + 1, len(process.calls)) if _releases(process.calls[j], c.file_id, c.offset,
                                                                            last)), None)
        out.append(Hold(p, i, c.file_id, c.offset, last, kind == fcntl.F_WRLCK, c.t_end, j,
                        process.calls[j].t_start if j is not None else 0))
    return out


def _releases(c, file_id: int, first: int, last: float) -> bool:
    """Whether call c ends a lock on [first, last) of file_id: a close of the file, or an unlock over the range."""
    if c.file_id != file_id:
        return False
    if c.op in CLOSES:
        return True
    unlock_last = c.offset + c.req if c.req > 0 else float("inf")
    return (c.op.startswith("fcntl") and (c.aux >> 16) & 0xFF == fcntl.F_UNLCK and c.offset < last
            and first < unlock_last)


def after_releases(processes: list, shared: set[int], need: list[np.ndarray]) -> None:
    """A lock request waits for the release of each conflicting lock another process was granted before it.
    Conflicting holds cannot overlap, so the one granted first was released before the other was granted: a
    request that ended (was granted) first was granted first."""
    every = [h for p, process in enumerate(processes) for h in holds(process, p) if h.file_id in shared]
    for a in every:
        for b in every:
            if (b.process != a.process and b.file_id == a.file_id and (a.write or b.write)
                    and a.first < b.last and b.first < a.last and b.granted < a.granted
                    and b.release is not None and b.released < a.granted):
                row = need[a.process][a.index]
                row[b.process] = max(row[b.process], b.release + 1)


def after_sizes(processes: list, shared: set[int], initial_sizes: dict[int, int], need: list[np.ndarray]) -> None:
    """What a read returns depends on the file's size when it reads: when a write of another process overlapped
    it in time (neither had ended before the other started), the read's byte count says which came first.
    Files no process truncates only (their size only grows)."""
    truncated = {c.file_id for p in processes for c in p.calls if c.op in TRUNCATES}
    for file_id in shared - truncated:
        writes = _writes(processes, file_id)
        for p, process in enumerate(processes):
            for i, c in enumerate(process.calls):
                if (c.file_id == file_id and c.op in POSIX_READS and c.offset >= 0 and c.req > 0 and c.ret >= 0):
                    _order_read(writes, p, i, c, initial_sizes.get(file_id, 0), need)


@dataclass
class Writes:
    """One file's positioned writes of every process, sorted by start: process, index, start, end, and where the
    write ends in the file (offset + bytes written)."""
    process: np.ndarray
    index: np.ndarray
    start: np.ndarray
    end: np.ndarray
    reach: np.ndarray
    longest: int  # the longest duration: a write started that much before a read's start has ended by then
    ended: np.ndarray  # ends, sorted
    reach_by_end: np.ndarray  # the furthest reach of the writes ended by each sorted end


def _writes(processes: list, file_id: int) -> Writes:
    rows = sorted((c.t_start, c.t_end, p, i, c.offset + c.ret) for p, process in enumerate(processes)
                  for i, c in enumerate(process.calls)
                  if c.file_id == file_id and c.op in POSIX_WRITES and c.offset >= 0 and c.ret > 0)
    start, end, process, index, reach = (np.array(column, np.int64) for column in zip(*rows)) if rows else \
        (np.zeros(0, np.int64),) * 5
    by_end = np.argsort(end, kind="stable")
    return Writes(process, index, start, end, reach, int((end - start).max()) if rows else 0, end[by_end],
                  np.maximum.accumulate(reach[by_end]) if rows else reach)


def _order_read(w: Writes, p: int, i: int, read, initial: int, need: list[np.ndarray]) -> None:
    ended = np.searchsorted(w.ended, read.t_start, "left")  # writes ended before the read started
    size = max(initial, int(w.reach_by_end[ended - 1]) if ended else 0)  # the file's size at least, then
    window = slice(np.searchsorted(w.start, read.t_start - w.longest, "left"),
                   np.searchsorted(w.start, read.t_end, "right"))
    overlapping = np.flatnonzero((w.end[window] >= read.t_start) & (w.process[window] != p)) + window.start
    seen = read.offset + read.ret
    if read.ret < read.req:  # the read found the end of the file at `seen`: a write reaching further came after
        for k in overlapping[w.reach[overlapping] > seen]:
            row = need[w.process[k]][w.index[k]]
            row[p] = max(row[p], i + 1)
    if size < seen:  # a write that overlapped it in time had made the file reach `seen`: the earliest started
        sources = overlapping[w.reach[overlapping] >= seen if read.ret == read.req else w.reach[overlapping] == seen]
        if len(sources):
            k = sources[0]
            need[p][i][w.process[k]] = max(need[p][i][w.process[k]], w.index[k] + 1)
