"""The map step: one stream (one traced process) in, small summary tables out.

Everything here is vectorised numpy over the stream's columns, so the cost is a few passes over the
events; the output is small (a row per group of calls, per MPI-IO call kept in detail, per plot sample)
and independent of the number of events, which is what lets the reduce run on one machine.

Groups: (layer, kind, file_id, nested). `nested` tells the POSIX and stdio calls that an MPI-IO call issued
(the trace's explicit `parent` link) from the ones the application made itself: 0 top level, 1 under an
MPI-IO call on the same file (the bytes RIOT counts), 2 under an MPI-IO call on another file.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ioloom.analysis import ops
from ioloom.analysis.ops import LAYER_CODE, LOCK, META, READ, UNLOCK, WRITE

COLUMNS = ["t_start", "t_end", "layer", "op", "file_id", "offset", "req_bytes", "ret_bytes", "errno", "aux",
           "call_id", "parent", "coll_seq"]  # rank and pid are the stream's
# Darshan's access-size bins: a request of s bytes falls in the first bin whose upper bound is >= s.
SIZE_BIN_UPPER = np.array([100, 1 << 10, 10 << 10, 100 << 10, 1 << 20, 4 << 20, 10 << 20, 100 << 20, 1 << 30])
SIZE_BIN_NAMES = ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M", "1M_4M", "4M_10M", "10M_100M",
                  "100M_1G", "1G_PLUS")
TOP_VALUES = 16  # common sizes / strides kept per group and stream (Darshan keeps 4 in the log)
TIME_BINS = 2048  # finest bandwidth-over-time resolution, in power-of-two nanosecond widths
CHILD_CATEGORIES = ("read", "write", "lock", "unlock", "other")  # Fig. 4.8's split of an MPI-IO call
GROUP_KEYS = ["layer", "kind", "file_id", "nested"]


@dataclass
class Options:
    """Knobs of the analysis. stripe_size: the file system's stripe (misalignment); small_request: bytes
    under which a request counts as small; sample_budget: events kept for the plots over the whole trace;
    detail_limit: MPI-IO calls kept with their POSIX decomposition over the whole trace."""
    stripe_size: int = 1 << 20
    small_request: int = 64 << 10
    sample_budget: int = 60_000
    detail_limit: int = 60_000
    # Files of the system and of the MPI runtime (libraries, configuration, shared-memory segments, session
    # directories, pipes and sockets): counted in the totals, left out of patterns, findings and first-byte time.
    system_prefixes: tuple[str, ...] = ("/usr/", "/lib", "/etc/", "/proc/", "/sys/", "/dev/", "/run/",
                                        "/var/run/", "/opt/", "/tmp/ompi.", "/tmp/hydra", "pipe:", "socket:",
                                        "anon_inode:")
    system_markers: tuple[str, ...] = ("/.openmpi/",)  # anywhere in the path
    system_files: frozenset = frozenset()  # file ids of such paths in this trace; filled in by analyse()

    def is_system(self, path: str) -> bool:
        return (path in ("/", "/tmp") or path.startswith(self.system_prefixes)
                or any(marker in path for marker in self.system_markers))


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


def _numpy(table, name: str) -> np.ndarray:
    return table.column(name).to_numpy()


def _columns(stream) -> dict[str, np.ndarray]:
    """The stream's columns as numpy arrays, ordered by start time, plus derived kind/layer codes."""
    table = stream.read(COLUMNS)
    t_start = _numpy(table, "t_start")
    order = None if np.all(t_start[1:] >= t_start[:-1]) else np.argsort(t_start, kind="stable")
    cols = {name: _numpy(table, name) for name in COLUMNS if name not in ("layer", "op")}
    cols["kind"] = ops.kind_codes(table.column("op"), cols["aux"])
    cols["layer"] = ops.layer_codes(table.column("layer"))
    cols["op"], names = ops.op_names(table.column("op"))
    cols["completion"] = _take_initiation_kind(cols, names)
    if order is not None:
        cols = {name: values[order] for name, values in cols.items()}
    cols["names"] = names
    return cols


def _take_initiation_kind(c: dict, names: list[str]) -> np.ndarray:
    """Non-blocking MPI-IO moves its bytes at completion: an MPI_Wait/MPI_Test event that completes a request
    carries the bytes and, in aux, the call_id of the MPI_File_i* call that started it. Such an event takes that
    call's kind (read or write), so its bytes count; it is not counted again as an operation. Returns the mask of
    completion events."""
    is_completion = np.array([n.startswith(("MPI_Wait", "MPI_Test")) for n in names] or [False], bool)
    completion = is_completion[c["op"]] & (c["layer"] == LAYER_CODE["mpiio"])
    if completion.any():
        mpi = (c["layer"] == LAYER_CODE["mpiio"]) & ~completion
        c["kind"][completion] = _parent_lookup(c["call_id"][mpi], c["kind"][mpi], c["aux"][completion],
                                               ops.OTHER)
    return completion


def _nesting(c: dict) -> np.ndarray:
    """0 top level, 1 issued by an MPI-IO call on the same file, 2 by one on another file."""
    mpi = c["layer"] == LAYER_CODE["mpiio"]
    nested = np.zeros(len(mpi), np.int8)
    child = (c["parent"] >= 0) & ~mpi
    if not child.any() or not mpi.any():
        return nested
    parent_file = _parent_lookup(c["call_id"][mpi], c["file_id"][mpi], c["parent"][child], -2)
    nested[child] = np.where(parent_file == c["file_id"][child], 1, 2)
    return nested


def _parent_lookup(call_ids: np.ndarray, values: np.ndarray, parents: np.ndarray, missing):
    """values[i] of the call whose call_id equals each parent, `missing` where no such call was traced."""
    order = np.argsort(call_ids, kind="stable")
    sorted_ids = call_ids[order]
    pos = np.clip(np.searchsorted(sorted_ids, parents), 0, max(len(sorted_ids) - 1, 0))
    found = sorted_ids[pos] == parents
    return np.where(found, values[order][pos], missing)


# A group's code packs (file_id + 1, layer, kind, nested) into one int64, mixed radix, nested fastest.
NESTINGS, KIND_SLOTS, LAYER_SLOTS = 3, 8, 4


def _group_codes(c: dict, nested: np.ndarray) -> np.ndarray:
    return (((c["file_id"].astype(np.int64) + 1) * LAYER_SLOTS + c["layer"]) * KIND_SLOTS + c["kind"]) * NESTINGS + nested


def _kind_of(code: np.ndarray) -> np.ndarray:
    return code // NESTINGS % KIND_SLOTS


def _decode(frame: pd.DataFrame) -> pd.DataFrame:
    """The `code` column unpacked into file_id, layer, kind and nested."""
    code = frame.pop("code").to_numpy()
    frame.insert(0, "nested", (code % NESTINGS).astype(np.int8))
    frame.insert(0, "kind", _kind_of(code).astype(np.int8))
    frame.insert(0, "layer", (code // (NESTINGS * KIND_SLOTS) % LAYER_SLOTS).astype(np.int8))
    frame.insert(0, "file_id", (code // (NESTINGS * KIND_SLOTS * LAYER_SLOTS) - 1).astype(np.int32))
    return frame


def _top(code: np.ndarray, values: np.ndarray, name: str) -> pd.DataFrame:
    """The TOP_VALUES most frequent values per group code, with their counts (hash factorisation, no sort
    of the events)."""
    if not len(code):
        return pd.DataFrame({"code": code.astype(np.int64), name: values, "count": np.zeros(0, np.int64)})
    value_index, uniques = pd.factorize(values)
    width = len(uniques)
    pair_index, pairs = pd.factorize(code.astype(np.int64) * width + value_index)
    counts = np.bincount(pair_index, minlength=len(pairs))
    group, value = pairs // width, np.asarray(uniques)[pairs % width]
    order = np.lexsort((-counts, group))
    group, value, counts = group[order], value[order], counts[order]
    starts = np.r_[0, np.flatnonzero(group[1:] != group[:-1]) + 1]
    rank_in_group = np.arange(len(group)) - np.repeat(starts, np.diff(np.r_[starts, len(group)]))
    keep = rank_in_group < TOP_VALUES
    return pd.DataFrame({"code": group[keep], name: value[keep], "count": counts[keep]})


def _unique_bytes(code: np.ndarray, start: np.ndarray, end: np.ndarray) -> pd.Series:
    """Bytes covered at least once per group: the union of [start, end) intervals."""
    order = np.lexsort((start, code))
    frame = pd.DataFrame({"code": code[order], "start": start[order], "end": end[order]})
    reach = frame.groupby("code", sort=False)["end"].cummax()
    before = reach.groupby(frame["code"], sort=False).shift(fill_value=np.iinfo(np.int64).min).to_numpy()
    fresh = np.clip(frame["end"].to_numpy() - np.maximum(frame["start"].to_numpy(), before), 0, None)
    return pd.Series(fresh).groupby(frame["code"].to_numpy(), sort=False).sum()


def _data_groups(c: dict, code: np.ndarray, options: Options):
    """Per group of reads and writes: sequential/consecutive counts, stripe misalignment, small requests,
    unique bytes; plus the size histogram, common sizes and common strides tables."""
    data = ((c["kind"] == READ) | (c["kind"] == WRITE)) & (c["ret_bytes"] >= 0)
    idx = np.flatnonzero(data)
    idx = idx[np.argsort(code[idx], kind="stable")]  # time order kept inside each group
    g, off, size = code[idx], c["offset"][idx], c["ret_bytes"][idx]
    known = off >= 0
    end = off + size
    same = np.r_[False, g[1:] == g[:-1]] & known & np.r_[False, known[:-1]]
    prev_end, prev_off = np.r_[0, end[:-1]], np.r_[0, off[:-1]]
    stripe = options.stripe_size
    stripes_touched = np.where(size > 0, (end - 1) // stripe - off // stripe + 1, 0)
    stripes_needed = -(-size // stripe)
    index, groups = pd.factorize(g)
    n = len(groups)
    off_min, end_max = np.full(n, np.iinfo(np.int64).max), np.full(n, -1)
    np.minimum.at(off_min, index[known], off[known])
    np.maximum.at(end_max, index[known], end[known])
    per_group = pd.DataFrame({
        "sequential": np.bincount(index, same & (off >= prev_end), minlength=n).astype(np.int64),
        "consecutive": np.bincount(index, same & (off == prev_end), minlength=n).astype(np.int64),
        "misaligned": np.bincount(index, known & (stripes_touched > stripes_needed), minlength=n).astype(np.int64),
        "small": np.bincount(index, size < options.small_request, minlength=n).astype(np.int64),
        "off_min": off_min, "end_max": end_max}, index=pd.Index(groups, name="code"))
    reads = known & (_kind_of(g) == READ)  # distinct bytes matter for reads only (repeated reads)
    per_group["unique_bytes"] = _unique_bytes(g[reads], off[reads], end[reads])
    per_group["unique_bytes"] = per_group["unique_bytes"].fillna(0).astype(np.int64)
    bins = np.searchsorted(SIZE_BIN_UPPER, size, side="left")
    cell_index, cells = pd.factorize(g * len(SIZE_BIN_NAMES) + bins)
    hist = pd.DataFrame({"code": cells // len(SIZE_BIN_NAMES), "bin": cells % len(SIZE_BIN_NAMES),
                         "count": np.bincount(cell_index, minlength=len(cells))})
    sizes = _top(g, size, "size")
    gap_top = _top(g[same], (off - prev_end)[same], "value").assign(measure="gap")
    stride_top = _top(g[same], (off - prev_off)[same], "value").assign(measure="stride")
    return per_group, hist, sizes, pd.concat([gap_top, stride_top], ignore_index=True)


def _groups(c: dict, code: np.ndarray, duration: np.ndarray, moved: np.ndarray) -> pd.DataFrame:
    """ops, bytes, time, errors, first start and last end per group (hash factorisation and bincount: a few
    passes over the events whatever the number of groups)."""
    index, codes = pd.factorize(code)
    n = len(codes)
    first = np.full(n, np.iinfo(np.int64).max)
    last = np.full(n, np.iinfo(np.int64).min)
    np.minimum.at(first, index, c["t_start"])
    np.maximum.at(last, index, c["t_end"])
    return pd.DataFrame({"ops": np.bincount(index, ~c["completion"], minlength=n).astype(np.int64),
                         "bytes": np.bincount(index, moved, minlength=n).astype(np.int64),
                         "time_ns": np.bincount(index, duration, minlength=n).astype(np.int64),
                         "errors": np.bincount(index, c["errno"] != 0, minlength=n).astype(np.int64),
                         "t_first": first, "t_last": last}, index=pd.Index(codes, name="code"))


def _timebins(c: dict, moved: np.ndarray) -> pd.DataFrame:
    """Bytes moved per time bin of width 2^shift ns (power-of-two widths merge exactly in the reduce)."""
    data = moved > 0
    if not data.any():
        return pd.DataFrame(columns=["layer", "kind", "bin", "bytes", "shift"])
    t = c["t_end"][data]
    span = int(t.max() - t.min()) + 1
    shift = max(0, int(np.ceil(np.log2(span / TIME_BINS))))
    frame = pd.DataFrame({"layer": c["layer"][data], "kind": c["kind"][data], "bin": t >> shift,
                          "bytes": moved[data]})
    return frame.groupby(["layer", "kind", "bin"], sort=False)["bytes"].sum().reset_index().assign(shift=shift)


def _child_category(kind: np.ndarray) -> np.ndarray:
    category = np.full(len(kind), 4, np.int8)  # other
    for code, k in ((0, READ), (1, WRITE), (2, LOCK), (3, UNLOCK)):
        category[kind == k] = code
    return category


def _decompose(c: dict, duration: np.ndarray, moved: np.ndarray, nested: np.ndarray, detail_limit: int):
    """Per MPI-IO call (numpy columns): its POSIX/stdio children's time, count and bytes by category
    (Fig. 4.8); plus the first `detail_limit` calls and their children as frames, for the timelines."""
    mpi = np.flatnonzero(c["layer"] == LAYER_CODE["mpiio"])
    calls = {"call_id": c["call_id"][mpi], "op": c["op"][mpi], "file_id": c["file_id"][mpi], "kind": c["kind"][mpi],
             "t_start": c["t_start"][mpi], "t_end": c["t_end"][mpi], "bytes": moved[mpi],
             "coll_seq": c["coll_seq"][mpi]}
    child = np.flatnonzero((c["parent"] >= 0) & (c["layer"] != LAYER_CODE["mpiio"]))
    position = _parent_lookup(calls["call_id"], np.arange(len(mpi)), c["parent"][child], -1)
    child, position = child[position >= 0], position[position >= 0]
    category = _child_category(c["kind"][child])
    n = len(mpi)
    for code, name in enumerate(CHILD_CATEGORIES[:4]):
        pick = category == code
        calls[f"{name}_ns"] = np.bincount(position[pick], duration[child][pick], minlength=n).astype(np.int64)
        calls[f"{name}_ops"] = np.bincount(position[pick], minlength=n)
    calls["other_ops"] = np.bincount(position[category == 4], minlength=n)
    calls["other_ns"] = (calls["t_end"] - calls["t_start"]) - sum(calls[f"{k}_ns"] for k in CHILD_CATEGORIES[:4])
    same_file = nested[child] == 1
    for name, k in (("posix_read_bytes", READ), ("posix_write_bytes", WRITE)):
        pick = same_file & (c["kind"][child] == k)
        calls[name] = np.bincount(position[pick], moved[child][pick], minlength=n).astype(np.int64)
    names = np.array(c["names"] or [""], dtype=object)
    calls["collective"] = np.array([ops.is_collective(x) for x in names], bool)[calls["op"]]
    calls["sieving"] = ((calls["kind"] == WRITE) & ~calls["collective"] & (calls["lock_ops"] > 0)
                        & (calls["read_ops"] > 0) & (calls["write_ops"] > 0))
    kept = pd.DataFrame({name: values[:detail_limit] for name, values in calls.items()})
    kept["op"] = names[kept["op"].to_numpy()]
    children = pd.DataFrame({"call_id": c["parent"][child], "category": category, "t_start": c["t_start"][child],
                             "t_end": c["t_end"][child], "offset": c["offset"][child], "bytes": moved[child]})
    children = children[children["call_id"].isin(kept["call_id"])]
    return calls, names, kept, children


def _splits(calls: dict, names: np.ndarray) -> pd.DataFrame:
    """Per (op, file, kind, collective): totals of the decomposition columns over every call (exact)."""
    key = ((calls["op"].astype(np.int64) << 32 | (calls["file_id"].astype(np.int64) + 1)) << 4
           | calls["kind"].astype(np.int64) << 1 | calls["collective"])
    index, keys = pd.factorize(key)
    n = len(keys)
    sums = [k for k in calls if k.endswith(("_ns", "_ops", "_bytes"))] + ["bytes", "sieving"]
    out = {k: np.bincount(index, calls[k], minlength=n).astype(np.int64) for k in sums}
    out["time_ns"] = np.bincount(index, calls["t_end"] - calls["t_start"], minlength=n).astype(np.int64)
    out["calls"] = np.bincount(index, minlength=n)
    sieved = calls["sieving"]
    first, last = np.full(n, np.nan), np.full(n, np.nan)
    np.fmin.at(first, index[sieved], calls["t_start"][sieved])
    np.fmax.at(last, index[sieved], calls["t_end"][sieved])
    return pd.DataFrame({"op": names[(keys >> 36).astype(np.int64)] if n else [],
                         "file_id": ((keys >> 4) & 0xFFFFFFFF) - 1, "kind": (keys >> 1) & 7,
                         "collective": (keys & 1).astype(bool), **out,
                         "sieving_first": first, "sieving_last": last})


def _locks(c: dict, duration: np.ndarray) -> pd.DataFrame:
    """Record locks paired with the unlock of the same range on the same file: wait (the lock call's own
    duration, F_SETLKW blocks) and hold (from the lock's return to the unlock's start)."""
    pick = np.flatnonzero((c["kind"] == LOCK) | (c["kind"] == UNLOCK))
    if not len(pick):
        return pd.DataFrame(columns=["file_id", "offset", "length", "t_request", "t_acquired", "t_release",
                                     "wait_ns", "held_ns"])
    frame = pd.DataFrame({"file_id": c["file_id"][pick], "offset": c["offset"][pick],
                          "length": c["req_bytes"][pick], "unlock": c["kind"][pick] == UNLOCK,
                          "t_start": c["t_start"][pick], "t_end": c["t_end"][pick], "wait": duration[pick]})
    frame = frame.sort_values(["file_id", "offset", "length", "t_start"], kind="stable")
    after = frame.shift(-1)
    released = (after["unlock"].eq(True) & (after["file_id"] == frame["file_id"])
                & (after["offset"] == frame["offset"]) & (after["length"] == frame["length"]))
    frame["t_release"] = after["t_start"].where(released)
    locks = frame[~frame["unlock"]]
    out = pd.DataFrame({"file_id": locks["file_id"], "offset": locks["offset"], "length": locks["length"],
                        "t_request": locks["t_start"], "t_acquired": locks["t_end"],
                        "t_release": locks["t_release"], "wait_ns": locks["wait"]})
    out["held_ns"] = (out["t_release"] - out["t_acquired"]).clip(lower=0)
    return out.reset_index(drop=True)


def _samples(c: dict, moved: np.ndarray, nested: np.ndarray, budget: int) -> pd.DataFrame:
    """An even subsample of the data calls (offset known) for the plots."""
    idx = np.flatnonzero(((c["kind"] == READ) | (c["kind"] == WRITE)) & (c["offset"] >= 0))
    if len(idx) > budget:
        idx = idx[np.linspace(0, len(idx) - 1, budget).astype(np.int64)]
    return pd.DataFrame({"t_start": c["t_start"][idx], "t_end": c["t_end"][idx], "layer": c["layer"][idx],
                         "kind": c["kind"][idx], "file_id": c["file_id"][idx], "offset": c["offset"][idx],
                         "bytes": moved[idx], "nested": nested[idx]})


def _process(stream, c: dict, moved: np.ndarray, duration: np.ndarray, nested: np.ndarray,
             options: Options) -> dict:
    """Facts about the process: its span, when it first opened one of its files and first moved a byte of
    one, and the time its POSIX and stdio calls on its files took before that byte (time lost before the
    first byte) and in all."""
    def first(mask):
        return int(c["t_start"][mask].min()) if mask.any() else None
    n = len(c["t_start"])
    app_file = (c["file_id"] >= 0) & ~np.isin(c["file_id"], list(options.system_files))
    first_byte = first((moved > 0) & app_file)
    # time in the file system: POSIX and stdio calls (MPI-IO calls also wait for the other ranks)
    own_file_calls = app_file & ((c["layer"] == LAYER_CODE["posix"]) | (c["layer"] == LAYER_CODE["stdio"]))
    # calls that started before the first byte (not ended: a call's end and the next call's start may differ by
    # the clock correction's rounding)
    before = own_file_calls & (c["t_start"] < (first_byte if first_byte is not None else np.iinfo(np.int64).max))
    return {"rank": stream.rank, "pid": stream.pid, "events": n, "info": dict(stream.info),
            "t_first": int(c["t_start"].min()) if n else None, "t_last": int(c["t_end"].max()) if n else None,
            "t_first_open": first((c["kind"] == META) & app_file), "t_first_byte": first_byte,
            "io_before_first_byte_ns": int(duration[before].sum()),
            "io_ns": int(duration[own_file_calls].sum())}


def summarise(stream, options: Options, budget_share: float = 1.0) -> Partial:
    """The map step for one stream. budget_share: this stream's share of the plot/detail budgets."""
    c = _columns(stream)
    duration = c["t_end"] - c["t_start"]
    data = (c["kind"] == READ) | (c["kind"] == WRITE)
    moved = np.where(data & (c["ret_bytes"] > 0), c["ret_bytes"], 0)
    nested = _nesting(c)
    code = _group_codes(c, nested)
    groups = _groups(c, code, duration, moved)
    per_data, hist, sizes, strides = _data_groups(c, code, options)
    groups = groups.join(per_data, how="left")
    calls, names, kept, children = _decompose(c, duration, moved, nested,
                                              max(1, int(options.detail_limit * budget_share)))
    tag = {"rank": stream.rank, "pid": stream.pid}
    tables = [_decode(groups.reset_index())] + [_decode(t.reset_index(drop=True)) for t in (sizes, hist, strides)]
    return Partial(
        process=_process(stream, c, moved, duration, nested, options),
        groups=tables[0].assign(**tag), sizes=tables[1].assign(**tag), histogram=tables[2].assign(**tag),
        strides=tables[3].assign(**tag), timebins=_timebins(c, moved).assign(**tag),
        splits=_splits(calls, names).assign(**tag), calls=kept.assign(**tag), children=children.assign(**tag),
        locks=_locks(c, duration).assign(**tag),
        samples=_samples(c, moved, nested, max(1, int(options.sample_budget * budget_share))).assign(**tag))
