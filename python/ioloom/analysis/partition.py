"""The map step: one stream (one traced process) in, small summary tables out.

The stream is read range by range (`Stream.ranges`, in time order) and each range is summarised by
range_tables.py. What a range leaves open goes on to the next: each group's last access (sequential and
stride counters), the read intervals (distinct bytes), the locks not
released yet, and the events from the first MPI-IO call that may still have POSIX calls in later ranges
(held back whole, so that every call is summarised with all of its children). So the result does not depend
on the range size, and a worker's memory follows the range, not the stream.

The output is small (a row per group of calls, per MPI-IO call kept in detail, per plot sample) and
independent of the number of events, which is what lets the reduce run on one machine.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ioloom.analysis import range_tables as rt
from ioloom.analysis.ops import LAYER_CODE, META, READ, WRITE
from ioloom.trace.model import RANGE_ROWS

# A file name Open MPI's OMPIO makes beside the program's file, never its data: NAME.locktest.RANK (it probes fcntl
# locks at every MPI_File_open) and NAME-JOBID-PID.lock (the lockedfile component's shared file pointer), any
# character before its first dash, a newline too. logfs keeps the same names plain files (native/logfs/lf_runtime.c);
# tests/vectors/logfs/runtime-names.json holds the cases for both.
MPI_RUNTIME_NAME = re.compile(r"\.locktest\.|.-[0-9]+-[0-9]+\.lock\Z", re.DOTALL)


def mpi_runtime_name(path: str) -> bool:
    """Does the last component of `path` name a file of the MPI runtime (MPI_RUNTIME_NAME)?"""
    return MPI_RUNTIME_NAME.search(path.rpartition("/")[2]) is not None


SPLIT_KEYS = ["op", "file_id", "kind", "collective"]
HOLD_LIMIT = 1 << 21  # events held back at most for an asynchronous MPI-IO call not finished yet
CALL_ID_BLOCK = 12  # a thread takes its call ids in blocks of 2^12 (docs/trace-format.md, cross-layer link)
WHOLE = -1  # the `after` of a summary of a whole stream, not of a part


@dataclass
class Options:
    """Knobs of the analysis. stripe_size: the file system's stripe (misalignment); small_request: bytes
    under which a request counts as small; sample_budget: events kept for the plots over the whole trace;
    detail_limit: MPI-IO calls kept with their POSIX decomposition over the whole trace; range_rows: events a
    worker summarises at once (its memory, about 450 bytes an event; the results do not depend on it);
    split_rows: see executor.split_map (the results do not depend on it)."""
    stripe_size: int = 1 << 20
    small_request: int = 64 << 10
    sample_budget: int = 60_000
    detail_limit: int = 60_000
    range_rows: int = RANGE_ROWS
    split_rows: int = 1 << 21  # on a Dask cluster, a stream of more events is summarised in parts this long
    # Files of the system and of the MPI runtime (libraries, configuration, shared-memory segments, session
    # directories, pipes and sockets): counted in the totals, left out of patterns, findings and first-byte time.
    system_prefixes: tuple[str, ...] = ("/usr/", "/lib", "/etc/", "/proc/", "/sys/", "/dev/", "/run/",
                                        "/var/run/", "/opt/", "/tmp/ompi.", "/tmp/hydra", "pipe:", "socket:",
                                        "anon_inode:")
    system_markers: tuple[str, ...] = ("/.openmpi/", "/.pmix/")  # anywhere in the path
    system_files: frozenset = frozenset()  # file ids of such paths in this trace; filled in by analyse()
    # logfs's own files (logs, journals, metadata under a container): the physical side of the program's logical
    # I/O, shown apart and never counted as the program's; filled in by analyse()
    logfs_files: frozenset = frozenset()

    def is_system(self, path: str) -> bool:
        return (path in ("/", "/tmp") or path.startswith(self.system_prefixes)
                or any(marker in path for marker in self.system_markers)
                or mpi_runtime_name(path))

    @property
    def excluded_files(self) -> list[int]:
        """File ids that are not the application's: system and MPI-runtime files, logfs's own files."""
        return list(self.system_files | self.logfs_files)


@dataclass
class Partial:
    """What one stream contributes. Each table carries `rank` and `pid`."""
    process: dict
    groups: pd.DataFrame
    sizes: pd.DataFrame
    histogram: pd.DataFrame
    strides: pd.DataFrame
    timebins: pd.DataFrame
    splits: pd.DataFrame
    calls: pd.DataFrame
    children: pd.DataFrame
    locks: pd.DataFrame
    samples: pd.DataFrame


def summarise(stream, options: Options, budget_share: float = 1.0) -> Partial:
    """The map step for one stream. budget_share: this stream's share of the plot/detail budgets."""
    return _summary(stream, options, budget_share).partial()


def summarise_part(part, options: Options, budget_share: float = 1.0) -> _StreamSummary:
    """The map step for one part of a stream (`part.ranges` gives its events; `part.after`, the earliest start
    after it, None for the stream's last part): a summary that `join_parts` carries on from the parts before."""
    return _summary(part, options, budget_share, after=part.after)


def join_parts(summaries: list[_StreamSummary]) -> Partial:
    """The Partial of a stream from the summaries of its parts, in order: what `summarise` gives for the whole
    stream. Parts cut apart from calls of their neighbours (bad_cuts) must be summarised together first."""
    assert not bad_cuts(summaries), "parts cut across an MPI-IO call are joined before (executor._joined)"
    whole = summaries[0]
    for part in summaries[1:]:
        whole.follow(part)
    whole.release_locks(None)
    return whole.partial()


def bad_cuts(summaries: list[_StreamSummary]) -> list[int]:
    """The cuts (i: between parts i - 1 and i) that may part an MPI-IO call from its POSIX calls or its
    completion: a call of part i - 1 still running or not completed at its end, or a POSIX call whose
    MPI-IO call was not found in its own part while a call of that id's block (ids come in blocks per
    thread) was seen in another."""
    bad = {i for i in range(1, len(summaries)) if summaries[i - 1].open_at_end}
    for i, part in enumerate(summaries):
        blocks = part.orphans >> CALL_ID_BLOCK
        for j, other in enumerate(summaries):
            if j != i and np.isin(blocks, other.call_blocks).any():
                bad.update(range(min(i, j) + 1, max(i, j) + 1))
    return sorted(bad)


def _summary(stream, options: Options, budget_share: float, after: int | None = WHOLE) -> _StreamSummary:
    """after: -1 for a whole stream, else see summarise_part."""
    summary = _StreamSummary(stream, options, budget_share, after)
    for table in stream.ranges(rt.COLUMNS, options.range_rows):
        summary.add(rt.columns(table, summary.names))
    summary.close()
    return summary


def ready_rows(c: dict, names: list[str], hold_limit: int) -> int:
    """How many of a block's first events can be summarised now. Held back: the events at the block's last start
    time, and everything from the start of the first MPI-IO call that may still have POSIX calls to come: one
    running at the block's last start, or an asynchronous one not finished (a non-blocking call before its
    MPI_Wait/MPI_Test completion, a split collective's _begin before its _end: their aio requests are
    collected, and recorded, later), unless that would hold back more than `hold_limit` events (a request never
    completed). Then a call and its POSIX calls are kept on one side by their links, not by their times, which
    clocks of different layers may skew."""
    start, end = c["t_start"], c["t_end"]
    if not len(start):
        return 0
    mpi = np.flatnonzero(c["layer"] == LAYER_CODE["mpiio"])
    ready = int(np.searchsorted(start, start[-1], "left"))
    running = mpi[end[mpi] >= start[-1]]
    if len(running):
        ready = min(ready, int(running[0]))
    while True:
        cut = ready
        unfinished = _unfinished_starts(c, names, mpi[mpi < ready])
        if len(unfinished) and len(start) - unfinished[0] <= hold_limit:
            ready = min(ready, int(unfinished[0]))
        held_calls = c["call_id"][mpi[mpi >= ready]]
        children = np.flatnonzero(np.isin(c["parent"][:ready], held_calls[held_calls >= 0]))
        held_parents = c["parent"][ready:]
        head_calls = mpi[mpi < ready]
        parents = head_calls[np.isin(c["call_id"][head_calls], held_parents[held_parents >= 0])]
        ready = min([ready, *children[:1], *parents[:1]])
        if ready == cut:
            return ready


def _unfinished_starts(c: dict, names: list[str], mpi: np.ndarray) -> np.ndarray:
    """Rows of the asynchronous MPI-IO calls among `mpi` (rows) not finished by them (see ready_rows),
    ascending."""
    starts = rt.is_nonblocking_start(names)
    split = np.array([n.startswith("MPI_File_") and n.endswith(("_begin", "_end")) for n in names] or [False])
    if not starts.any() and not split.any():
        return mpi[:0]
    op = c["op"][mpi]
    nonblocking = mpi[starts[op]]
    completed = c["aux"][mpi[rt.is_completion(names)[op]]]
    waiting = nonblocking[~np.isin(c["call_id"][nonblocking], completed)]
    halves = mpi[split[op]]
    begins = halves[np.array([names[k].endswith("_begin") for k in c["op"][halves]], bool)]
    last_end = pd.Series(halves).groupby(c["handle"][halves]).max()  # a handle has one split collective at a time
    begun = begins[last_end.reindex(c["handle"][begins]).to_numpy() == begins]
    return np.union1d(waiting, begun)


def _known(pick, a, b):
    """pick(a, b) of two times either of which may be unknown (None)."""
    return b if a is None else a if b is None else pick(a, b)


class _StreamSummary:
    """Summarises a stream's ranges one after the other, carrying what a range leaves open. A summary of a
    part of a stream (`after` is not WHOLE) also keeps what the next parts need to carry on from it (`follow`):
    each group's first access, the first lock event of each locked range and close of each file, the call
    ids seen and the POSIX calls whose MPI-IO call it did not see."""

    def __init__(self, stream, options: Options, budget_share: float, after: int | None = WHOLE):
        self.stream, self.options, self.after = stream, options, after
        self.is_part = after != WHOLE
        self.open_at_end = False
        self.first_access = pd.DataFrame({"offset": [], "end": []}, dtype=np.int64,
                                         index=pd.Index([], dtype=np.int64, name="code"))
        self.lock_firsts = pd.DataFrame()  # per (file_id, offset, length): its first lock or unlock event
        self.file_closes = pd.Series([], dtype=np.int64)  # per file_id: the start of its first close
        self.orphans = self.call_blocks = np.zeros(0, np.int64)
        self.names: list[str] = []  # the stream's op names: op codes index them in every range
        self.detail_left = max(1, int(options.detail_limit * budget_share))
        self.sample_budget = max(1, int(options.sample_budget * budget_share))
        self.total = int(stream.info.get("events") or 0)  # when the stream knows its length
        self.held: dict[str, np.ndarray] | None = None
        self.last = pd.DataFrame({"offset": [], "end": []}, dtype=np.int64,
                                 index=pd.Index([], dtype=np.int64, name="code"))
        self.read_intervals = (np.zeros(0, np.int64),) * 3
        self.held_locks = rt.lock_events({k: np.zeros(0, np.int64) for k in rt.COLUMNS + ["kind"]},
                                         np.zeros(0, np.int64), np.zeros(0, bool))
        self.tables: dict[str, list[pd.DataFrame]] = {
            name: [] for name in ("groups", "phases", "per_data", "histogram", "sizes", "strides", "timebins",
                                  "splits", "calls", "children", "locks", "samples")}
        self.phase_carry = rt.new_phase_carry()
        self.process = {"rank": stream.rank, "pid": stream.pid, "events": 0, "info": dict(stream.info),
                        "t_first": None, "t_last": None, "t_first_open": None, "t_first_byte": None,
                        "io_before_first_byte_ns": 0, "io_ns": 0}

    def add(self, c: dict) -> None:
        if self.held is not None:
            c = {name: np.concatenate((self.held[name], values)) for name, values in c.items()}
        ready = ready_rows(c, self.names, HOLD_LIMIT)
        self.held = {name: values[ready:].copy() for name, values in c.items()}
        if ready:
            self._summarise({name: values[:ready] for name, values in c.items()}, final=False)

    def close(self) -> None:
        """Summarises the events still held back: the stream (or part) has no more."""
        assert self.held is not None  # add() ran: a stream read in ranges gives at least its last (maybe empty) one
        if self.is_part and self.after is not None:
            c = self.held
            mpi = np.flatnonzero(c["layer"] == LAYER_CODE["mpiio"])
            self.open_at_end = bool((c["t_end"][mpi] >= self.after).any()
                                    or len(_unfinished_starts(c, self.names, mpi)))
        self._summarise(self.held, final=True)

    def partial(self) -> Partial:
        return self._partial()

    def _summarise(self, c: dict, final: bool) -> None:
        t = self.tables
        completion = rt.take_initiation_kind(c, self.names)
        duration = c["t_end"] - c["t_start"]
        moved = np.where(((c["kind"] == READ) | (c["kind"] == WRITE)) & (c["ret_bytes"] > 0), c["ret_bytes"], 0)
        physical = np.isin(c["file_id"], list(self.options.logfs_files))
        mpi, child, position = rt.family(c, physical)
        nested = rt.nesting(c, mpi, child, position)
        code = rt.group_codes(c, nested)
        totals = rt.group_totals(c, code, duration, moved, completion)
        t["groups"].append(totals)
        t["phases"].append(rt.phase_bounds(c, totals, self.names, self.phase_carry))
        per_data, histogram, sizes, strides, reads, self.last, firsts = rt.data_groups(c, code, self.options,
                                                                                       self.last)
        if self.is_part:
            self.first_access = pd.concat([self.first_access, firsts[~firsts.index.isin(self.first_access.index)]])
            self._links(c, mpi, child, physical)
        for name, table in (("per_data", per_data), ("histogram", histogram), ("sizes", sizes), ("strides", strides)):
            t[name].append(table)
        self.read_intervals = rt.union(*(np.concatenate(pair) for pair in zip(self.read_intervals, reads)))
        splits, calls, children = rt.decompose(c, duration, moved, nested, self.names, self.detail_left, mpi, child,
                                               position)
        self.detail_left -= len(calls)
        t["splits"].append(splits)
        t["calls"].append(calls)
        t["children"].append(children)
        app_file = (c["file_id"] >= 0) & ~np.isin(c["file_id"], self.options.excluded_files)
        t["timebins"].append(rt.timebins(c, moved, app_file))
        closes = rt.is_close(self.names)[c["op"]]
        events = rt.lock_events(c, duration, closes)
        if self.is_part:
            self._first_lock_events(events)
        locks, self.held_locks = rt.pair_locks(pd.concat([self.held_locks, events], ignore_index=True),
                                               final and self.after in (None, WHOLE))
        t["locks"].append(locks)
        share = self.sample_budget * len(duration) / self.total if self.total else self.sample_budget
        t["samples"].append(rt.samples(c, moved, nested, max(1, int(np.ceil(share)))))
        self._process(c, moved, duration, app_file)

    def _links(self, c: dict, mpi: np.ndarray, child: np.ndarray, physical: np.ndarray) -> None:
        """The blocks of the call ids of a part's MPI-IO calls, and the ids of the calls that POSIX calls name
        as their parent but the part did not hold (family() leaves such calls out)."""
        ids = c["call_id"][mpi] >> CALL_ID_BLOCK
        changes = ids[np.r_[True, ids[1:] != ids[:-1]]] if len(ids) else ids  # ids rise within a thread's block
        self.call_blocks = np.union1d(self.call_blocks, changes)
        linked = (c["parent"] >= 0) & (c["layer"] != LAYER_CODE["mpiio"]) & ~physical
        if linked.sum() != len(child):
            self.orphans = np.union1d(self.orphans, np.setdiff1d(c["parent"][linked], c["parent"][child]))

    def _first_lock_events(self, events: pd.DataFrame) -> None:
        """A part's first lock or unlock of each locked range, and first close of each file (see follow)."""
        closing = events["close"].astype(bool)
        firsts = events[~closing].drop_duplicates(["file_id", "offset", "length"]).set_index(
            ["file_id", "offset", "length"])
        known = self.lock_firsts
        self.lock_firsts = firsts if known.empty else pd.concat([known, firsts[~firsts.index.isin(known.index)]])
        closes = events[closing].groupby("file_id")["t_start"].min()
        new = closes[~closes.index.isin(self.file_closes.index)]
        if len(new):
            self.file_closes = pd.concat([self.file_closes, new]) if len(self.file_closes) else new

    def follow(self, part: _StreamSummary) -> None:
        """Takes in the summary of the part that follows this one (or the parts before it) in the stream: its
        tables, and what the stream's summary read in one pass would have carried into it."""
        t = self.tables
        counts, values = rt.following(part.first_access, self.last)
        t["per_data"].append(counts)
        t["strides"].append(values)
        t["phases"].extend(self._phases_into(part))
        self.release_locks(part)
        kept = pd.concat(part.tables["calls"]).iloc[:self.detail_left] if part.tables["calls"] else None
        for name, frames in part.tables.items():
            if name not in ("phases", "calls", "children"):
                t[name].extend(frames)
        if kept is not None:
            t["calls"].append(kept)
            t["children"].extend(frame[frame["call_id"].isin(kept["call_id"])] for frame in part.tables["children"])
            self.detail_left -= len(kept)
        self.last = pd.concat([self.last[~self.last.index.isin(part.last.index)], part.last])
        self.read_intervals = rt.union(*(np.concatenate(pair) for pair in zip(self.read_intervals,
                                                                               part.read_intervals)))
        self._follow_process(part.process)

    def _phases_into(self, part: _StreamSummary) -> list[pd.DataFrame]:
        """The phase bounds of `part` with this summary's carry (rt.phase_bounds): a data call with no open
        of its file before it in the part takes the latest open of the parts before; a phase waiting for its
        close here ends at the part's first close of the file, unless the group goes on in the part first."""
        carry, later = self.phase_carry, part.phase_carry
        last_open = carry["last_open"].set_index("key")["t_open"]
        frames = []
        for frame in part.tables["phases"]:
            key = frame.index.to_numpy() // (rt.NESTINGS * rt.KIND_SLOTS)
            fill = frame["open_before"].isna() & ~frame["carried"]
            frame = frame.copy()
            frame.loc[fill, "open_before"] = last_open.reindex(key[fill.to_numpy()]).to_numpy(np.float64)
            frames.append(frame)
        pending = carry["pending"]
        groups = pd.concat(part.tables["groups"]) if part.tables["groups"] else pd.DataFrame({"t_first": []})
        t_first = groups.groupby(level=0)["t_first"].min().reindex(pending.index).to_numpy(np.float64)
        close = later["first_close"].reindex(pending.to_numpy())
        closes = close["t_close"].notna().to_numpy()
        ends = closes & ~(close["t_close"].to_numpy() >= t_first)  # NaN t_first: the group is not in the part
        frames.append(pd.DataFrame({"open_before": np.nan, "close_after": close["close_end"].to_numpy(np.float64)[ends],
                                    "carried": True}, index=pending.index[ends]))
        going_on = ~closes & np.isnan(t_first)
        carry["pending"] = pd.concat([pending[going_on], later["pending"]])
        carry["last_open"] = pd.concat([carry["last_open"], later["last_open"]]).groupby(
            "key", as_index=False)["t_open"].max()
        carry["first_close"] = pd.concat([carry["first_close"], later["first_close"][
            ~later["first_close"].index.isin(carry["first_close"].index)]])
        return frames

    def release_locks(self, part: _StreamSummary | None) -> None:
        """The locks still held at the end of this summary, released by `part`'s first unlock of the same range
        (for the latest lock of a range only, as pair_locks pairs) or else its first close of the file; with
        no part (the stream's end), the ones never released."""
        held = self.held_locks.sort_values(["file_id", "offset", "length", "t_start"], kind="stable")
        if part is None:
            release = pd.Series(np.nan, index=held.index)
        else:
            key = pd.MultiIndex.from_frame(held[["file_id", "offset", "length"]])
            latest = ~key.duplicated(keep="last")
            first = part.lock_firsts.reindex(key) if len(part.lock_firsts) else pd.DataFrame(
                {"unlock": np.full(len(held), np.nan), "t_start": np.nan}, index=key)
            unlocked = latest & first["unlock"].eq(True).to_numpy()
            release = pd.Series(np.where(unlocked, first["t_start"].to_numpy(np.float64), np.nan), index=held.index)
            release = release.fillna(part.file_closes.reindex(held["file_id"]).set_axis(held.index).astype(np.float64))
        done = release.notna() if part is not None else pd.Series(True, index=held.index)
        out = pd.DataFrame({"file_id": held["file_id"], "offset": held["offset"], "length": held["length"],
                            "t_request": held["t_start"], "t_acquired": held["t_end"], "t_release": release,
                            "wait_ns": held["wait"]})[done.to_numpy()]
        out["held_ns"] = (out["t_release"] - out["t_acquired"]).clip(lower=0)
        self.tables["locks"].append(out.reset_index(drop=True))
        self.held_locks = pd.concat([held[~done.to_numpy()], part.held_locks]) if part is not None else held[:0]

    def _follow_process(self, later: dict) -> None:
        """The process facts of this part and the one after it (see _process)."""
        p = self.process
        if p["t_first_byte"] is None:  # every call of this part came before the first byte
            p["t_first_byte"] = later["t_first_byte"]
            p["io_before_first_byte_ns"] += later["io_before_first_byte_ns"]
        p["io_ns"] += later["io_ns"]
        p["events"] += later["events"]
        for name, pick in (("t_first", min), ("t_last", max), ("t_first_open", min)):
            p[name] = _known(pick, p[name], later[name])

    def _process(self, c: dict, moved: np.ndarray, duration: np.ndarray, app_file: np.ndarray) -> None:
        """Facts about the process: its span, when it first opened one of its files and first moved a byte of
        one, and the time its POSIX and stdio calls on its files took before that byte (time lost before the
        first byte) and in all. Ranges come in time order: once the first byte is seen, no later call is
        before it."""
        def first(mask):
            return int(c["t_start"][mask].min()) if mask.any() else None
        p = self.process
        # time in the file system: POSIX and stdio calls (MPI-IO calls also wait for the other ranks)
        own = app_file & ((c["layer"] == LAYER_CODE["posix"]) | (c["layer"] == LAYER_CODE["stdio"]))
        if p["t_first_byte"] is None:
            p["t_first_byte"] = first((moved > 0) & app_file)
            # calls that started before the first byte (not ended: a call's end and the next call's start may
            # differ by the clock correction's rounding)
            before = own & (c["t_start"] < (p["t_first_byte"] if p["t_first_byte"] is not None else rt.NO_TIME))
            p["io_before_first_byte_ns"] += int(duration[before].sum())
        p["io_ns"] += int(duration[own].sum())
        p["events"] += len(duration)
        if len(duration):
            p["t_first"] = _known(min, p["t_first"], int(c["t_start"].min()))
            p["t_last"] = _known(max, p["t_last"], int(c["t_end"].max()))
        p["t_first_open"] = _known(min, p["t_first_open"], first((c["kind"] == META) & app_file))

    def _partial(self) -> Partial:
        t = {name: pd.concat(frames) for name, frames in self.tables.items()}
        groups = t["groups"].groupby(level="code").agg(
            {"ops": "sum", "bytes": "sum", "time_ns": "sum", "errors": "sum", "t_first": "min", "t_last": "max"})
        per_data = t["per_data"].groupby(level="code").agg(
            {"sequential": "sum", "consecutive": "sum", "misaligned": "sum", "small": "sum", "off_min": "min",
             "end_max": "max"})
        code, start, end = self.read_intervals
        distinct = pd.Series(end - start).groupby(code).sum()
        per_data["unique_bytes"] = distinct.reindex(per_data.index).fillna(0).astype(np.int64)
        groups = groups.join(per_data, how="left").join(
            t["phases"].groupby(level="code").agg({"open_before": "min", "close_after": "max"}), how="left")
        histogram = t["histogram"].groupby(["code", "bin"], as_index=False)["count"].sum()
        sizes = rt.most_frequent(t["sizes"].groupby(["code", "size"], as_index=False)["count"].sum(), rt.TOP_VALUES)
        strides = pd.concat([rt.most_frequent(part.groupby(["code", "value"], as_index=False)["count"].sum(),
                                              rt.TOP_VALUES).assign(measure=measure)
                             for measure, part in t["strides"].groupby("measure")]
                            or [t["strides"]], ignore_index=True)
        splits = t["splits"].groupby(SPLIT_KEYS, as_index=False, sort=False).agg(
            {**{k: "sum" for k in t["splits"].columns if k not in SPLIT_KEYS + ["sieving_first", "sieving_last"]},
             "sieving_first": "min", "sieving_last": "max"})
        samples = t["samples"].reset_index(drop=True)
        if len(samples) > self.sample_budget:
            samples = samples.iloc[np.linspace(0, len(samples) - 1, self.sample_budget).astype(np.int64)]
        tag = {"rank": self.stream.rank, "pid": self.stream.pid}
        decoded = [rt.decode(frame.reset_index(drop=frame.index.name != "code"))
                   for frame in (groups, sizes, histogram, strides)]
        return Partial(
            process=self.process, groups=decoded[0].assign(**tag), sizes=decoded[1].assign(**tag),
            histogram=decoded[2].assign(**tag), strides=decoded[3].assign(**tag),
            timebins=rt.coarsen(t["timebins"]).assign(**tag), splits=splits.assign(**tag),
            calls=t["calls"].reset_index(drop=True).assign(**tag),
            children=t["children"].reset_index(drop=True).assign(**tag),
            locks=t["locks"].reset_index(drop=True).assign(**tag), samples=samples.reset_index(drop=True).assign(**tag))
