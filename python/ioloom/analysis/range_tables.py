"""The map step's tables for one range of a stream's events, in time order: vectorised numpy over the range's
columns (a few passes over the events, whatever the number of groups), each with what the next range needs
to carry on exactly (partition.py joins them).

Groups: (layer, kind, file_id, nested). `nested` tells the POSIX and stdio calls that an MPI-IO call issued
(the trace's explicit `parent` link) from the ones the application made itself: 0 top level, 1 under an
MPI-IO call on the same file (the bytes RIOT counts), 2 under an MPI-IO call on another file.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ioloom.analysis import ops
from ioloom.analysis.ops import LAYER_CODE, LOCK, READ, UNLOCK, WRITE

COLUMNS = ["t_start", "t_end", "layer", "op", "file_id", "handle", "offset", "req_bytes", "ret_bytes", "errno", "aux",
           "call_id", "parent", "coll_seq"]  # rank and pid are the stream's
# Darshan's access-size bins: a request of s bytes falls in the first bin whose upper bound is >= s.
SIZE_BIN_UPPER = np.array([100, 1 << 10, 10 << 10, 100 << 10, 1 << 20, 4 << 20, 10 << 20, 100 << 20, 1 << 30])
SIZE_BIN_NAMES = ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M", "1M_4M", "4M_10M", "10M_100M",
                  "100M_1G", "1G_PLUS")
TOP_VALUES = 16  # common sizes / strides kept per group and stream (Darshan keeps 4 in the log)
TOP_CARRIED = 4 * TOP_VALUES  # counted per group from range to range: the top 16 are exact unless a group has
                              # more than this many distinct values in a range
TIME_BINS = 2048  # finest bandwidth-over-time resolution, in power-of-two nanosecond widths
CHILD_CATEGORIES = ("read", "write", "lock", "unlock", "other")  # Fig. 4.8's split of an MPI-IO call
NO_TIME = np.iinfo(np.int64).max

# A group's code packs (file_id + 1, layer, kind, nested) into one int64, mixed radix, nested fastest.
NESTINGS, KIND_SLOTS, LAYER_SLOTS = 3, 8, 4


def columns(table, names: list[str]) -> dict[str, np.ndarray]:
    """A range's columns as numpy arrays plus kind and layer codes; op as an index into `names`, the stream's
    op names (extended with the range's new ones, so codes mean the same in every range)."""
    c = {name: table.column(name).to_numpy() for name in COLUMNS if name not in ("layer", "op")}
    c["kind"] = ops.kind_codes(table.column("op"), c["aux"])
    c["layer"] = ops.layer_codes(table.column("layer"))
    codes, range_names = ops.op_names(table.column("op"))
    known = {name: code for code, name in enumerate(names)}
    for name in range_names:
        if name not in known:
            known[name] = len(names)
            names.append(name)
    c["op"] = np.array([known[name] for name in range_names] or [0], np.int32)[codes]
    return c


def is_nonblocking_start(names: list[str]) -> np.ndarray:
    """Per op name: an MPI_File_i* call, whose bytes move at its MPI_Wait/MPI_Test completion."""
    return np.array([n.startswith("MPI_File_i") for n in names] or [False], bool)


def is_completion(names: list[str]) -> np.ndarray:
    """Per op name: MPI_Wait/MPI_Test, which complete non-blocking calls."""
    return np.array([n.startswith(("MPI_Wait", "MPI_Test")) for n in names] or [False], bool)


def take_initiation_kind(c: dict, names: list[str]) -> np.ndarray:
    """Non-blocking MPI-IO moves its bytes at completion: an MPI_Wait/MPI_Test event that completes a request
    carries the bytes and, in aux, the call_id of the MPI_File_i* call that started it (in the same block:
    partition.ready_rows holds a call back until its completion). Such an event takes that call's kind (read
    or write), so its bytes count; it is not counted again as an operation. Returns the mask of completion
    events."""
    completion = is_completion(names)[c["op"]] & (c["layer"] == LAYER_CODE["mpiio"])
    if completion.any():
        mpi = (c["layer"] == LAYER_CODE["mpiio"]) & ~completion
        c["kind"][completion] = parent_lookup(c["call_id"][mpi], c["kind"][mpi], c["aux"][completion], ops.OTHER)
    return completion


def family(c: dict, physical: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The range's MPI-IO calls (rows), the POSIX and stdio calls they issued (rows) and, for each of those,
    its call's position among the MPI-IO calls. Left out: children whose call was not traced, and `physical`
    ones (logfs's I/O on its logs, which runs inside a logical call that is already a child)."""
    is_mpi = c["layer"] == LAYER_CODE["mpiio"]
    mpi = np.flatnonzero(is_mpi)
    child = np.flatnonzero((c["parent"] >= 0) & ~is_mpi & ~physical)
    position = parent_lookup(c["call_id"][mpi], np.arange(len(mpi)), c["parent"][child], -1)
    return mpi, child[position >= 0], position[position >= 0]


def nesting(c: dict, mpi: np.ndarray, child: np.ndarray, position: np.ndarray) -> np.ndarray:
    """0 top level, 1 issued by an MPI-IO call on the same file, 2 by one on another file (or one not traced)."""
    nested = np.where((c["parent"] >= 0) & (c["layer"] != LAYER_CODE["mpiio"]), 2, 0).astype(np.int8)
    nested[child[c["file_id"][mpi][position] == c["file_id"][child]]] = 1
    return nested


def parent_lookup(call_ids: np.ndarray, values: np.ndarray, parents: np.ndarray, missing):
    """values[i] of the call whose call_id equals each parent, `missing` where no such call was traced."""
    order = np.argsort(call_ids, kind="stable")
    sorted_ids = call_ids[order]
    pos = np.clip(np.searchsorted(sorted_ids, parents), 0, max(len(sorted_ids) - 1, 0))
    found = sorted_ids[pos] == parents if len(sorted_ids) else np.zeros(len(parents), bool)
    return np.where(found, values[order][pos] if len(sorted_ids) else missing, missing)


def group_codes(c: dict, nested: np.ndarray) -> np.ndarray:
    layered = (c["file_id"].astype(np.int64) + 1) * LAYER_SLOTS + c["layer"]
    return (layered * KIND_SLOTS + c["kind"]) * NESTINGS + nested


def kind_of(code: np.ndarray) -> np.ndarray:
    return code // NESTINGS % KIND_SLOTS


def decode(frame: pd.DataFrame) -> pd.DataFrame:
    """The `code` column unpacked into file_id, layer, kind and nested."""
    code = frame.pop("code").to_numpy()
    frame.insert(0, "nested", (code % NESTINGS).astype(np.int8))
    frame.insert(0, "kind", kind_of(code).astype(np.int8))
    frame.insert(0, "layer", (code // (NESTINGS * KIND_SLOTS) % LAYER_SLOTS).astype(np.int8))
    frame.insert(0, "file_id", (code // (NESTINGS * KIND_SLOTS * LAYER_SLOTS) - 1).astype(np.int32))
    return frame


def factorize(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index of each key among the distinct keys, the distinct keys), like pd.factorize: by a table when the
    keys are non-negative and few enough to count directly (group codes, cells), else by hashing."""
    if len(keys) and keys.min() >= 0 and keys.max() < 4 * len(keys) + 4096:
        present = np.bincount(keys) > 0
        uniques = np.flatnonzero(present)
        return (np.cumsum(present) - 1)[keys], uniques
    return pd.factorize(keys)


def most_frequent(frame: pd.DataFrame, keep: int) -> pd.DataFrame:
    """The `keep` rows of highest count per code (ties: the smaller value first)."""
    frame = frame.sort_values(["code", "count", frame.columns[1]], ascending=[True, False, True], kind="stable")
    return frame[frame.groupby("code", sort=False).cumcount().to_numpy() < keep].reset_index(drop=True)


def top(index: np.ndarray, groups: np.ndarray, values: np.ndarray, name: str) -> pd.DataFrame:
    """The TOP_CARRIED most frequent values per group (index: each value's group, a position in `groups`, the
    group codes), with their counts (hash factorisation of the values, no sort of the events)."""
    value_index, uniques = pd.factorize(values)
    pair_index, pairs = factorize(index.astype(np.int64) * len(uniques) + value_index)
    frame = pd.DataFrame({"code": groups[pairs // max(len(uniques), 1)],
                          name: np.asarray(uniques, values.dtype)[pairs % max(len(uniques), 1)],
                          "count": np.bincount(pair_index, minlength=len(pairs))})
    return frame if len(frame) <= TOP_CARRIED else most_frequent(frame, TOP_CARRIED)


def union(code: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The [start, end) intervals of each code merged where they overlap or touch: (code, start, end), sorted."""
    order = np.lexsort((start, code))
    code, start, end = code[order], start[order], end[order]
    first = np.r_[True, code[1:] != code[:-1]] if len(code) else np.zeros(0, bool)
    reach = pd.Series(end).groupby(code, sort=False).cummax().to_numpy()
    fresh = first | (start > np.r_[0, reach[:-1]])
    runs = np.flatnonzero(fresh)
    return code[runs], start[runs], np.maximum.reduceat(end, runs) if len(runs) else end[:0]


def data_groups(c: dict, code: np.ndarray, options, last: pd.DataFrame):
    """Per group of reads and writes: sequential/consecutive counts, stripe misalignment, small requests and
    offset span; the size histogram, common sizes and common strides; the read intervals (for distinct bytes);
    and each group's last access (offset and end, -1 when unknown), carried to the next range in `last`."""
    data = ((c["kind"] == READ) | (c["kind"] == WRITE)) & (c["ret_bytes"] >= 0)
    idx = np.flatnonzero(data)
    index, groups = factorize(code[idx])
    # time order kept inside each group; a stable sort of small integers is a radix sort in numpy
    order = np.argsort(index.astype(np.int16) if len(groups) < 2**15 else index, kind="stable")
    idx, index = idx[order], index[order]
    g, off, size = code[idx], c["offset"][idx], c["ret_bytes"][idx]
    known = off >= 0
    end = off + size
    boundary = np.r_[True, g[1:] != g[:-1]] if len(g) else np.zeros(0, bool)  # a group's first access
    first = boundary.copy()
    prev_off, prev_end, prev_known = np.r_[0, off[:-1]], np.r_[0, end[:-1]], np.r_[False, known[:-1]]
    if len(last) and len(g):  # a group's first access follows its last one of the earlier ranges
        at = np.flatnonzero(first)
        carried = last.reindex(g[at])
        found = carried["offset"].notna().to_numpy()
        at, carried = at[found], carried[found]
        prev_off[at], prev_end[at] = carried["offset"].to_numpy(np.int64), carried["end"].to_numpy(np.int64)
        prev_known[at] = prev_off[at] >= 0
        first[at] = False
    same = ~first & known & prev_known
    stripe = options.stripe_size
    misaligned = known & (_stripes(off, end, stripe) > _stripes(0, size, stripe))
    n = len(groups)
    starts = np.flatnonzero(boundary)  # group i's accesses start at starts[i] (sorted by index)

    def per(mask):  # how many accesses of each group (a run of the sorted accesses) have `mask`
        return np.add.reduceat(mask, starts, dtype=np.int64) if n else np.zeros(0, np.int64)

    off_min = np.minimum.reduceat(np.where(known, off, np.iinfo(np.int64).max), starts) if n else off[:0]
    end_max = np.maximum.reduceat(np.where(known, end, -1), starts) if n else end[:0]
    per_group = pd.DataFrame({
        "sequential": per(same & (off >= prev_end)), "consecutive": per(same & (off == prev_end)),
        "misaligned": per(misaligned), "small": per(size < options.small_request),
        "off_min": off_min, "end_max": end_max}, index=pd.Index(groups, name="code"))
    reads = known & (kind_of(g) == READ)  # distinct bytes matter for reads only (repeated reads)
    bins = np.searchsorted(SIZE_BIN_UPPER, size, side="left")
    cell_index, cells = factorize(g * len(SIZE_BIN_NAMES) + bins)
    hist = pd.DataFrame({"code": cells // len(SIZE_BIN_NAMES), "bin": cells % len(SIZE_BIN_NAMES),
                         "count": np.bincount(cell_index, minlength=len(cells))})
    sizes = top(index, groups, size, "size")
    gap_top = top(index[same], groups, (off - prev_end)[same], "value").assign(measure="gap")
    stride_top = top(index[same], groups, (off - prev_off)[same], "value").assign(measure="stride")
    ends = np.r_[boundary[1:], True] if len(g) else boundary  # each group's last access in this range

    def accesses(at):  # offset and end of the accesses `at` (-1 when unknown), by group
        return pd.DataFrame({"offset": np.where(known, off, -1)[at], "end": np.where(known, end, -1)[at]},
                            index=pd.Index(g[at], name="code"))
    now_last = accesses(ends)
    last = pd.concat([last[~last.index.isin(now_last.index)], now_last])
    return (per_group, hist, sizes, pd.concat([gap_top, stride_top], ignore_index=True),
            (g[reads], off[reads], end[reads]), last, accesses(boundary))


def following(first: pd.DataFrame, last: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """What data_groups counts for each group's first access (`first`, offset and end by code) when it
    follows the group's last access of earlier events (`last`): its sequential and consecutive counts, and
    its gap and stride; for a stream summarised in parts, each part's first accesses after the parts
    before it."""
    prev = last.reindex(first.index)
    same = (prev["offset"].notna() & (first["offset"] >= 0) & (prev["offset"] >= 0)).to_numpy()
    first, prev = first[same], prev[same].astype(np.int64)
    off, prev_off, prev_end = first["offset"].to_numpy(), prev["offset"].to_numpy(), prev["end"].to_numpy()
    codes = first.index.to_numpy()
    counts = pd.DataFrame({"sequential": (off >= prev_end).astype(np.int64),
                           "consecutive": (off == prev_end).astype(np.int64), "misaligned": 0, "small": 0,
                           "off_min": np.iinfo(np.int64).max, "end_max": -1}, index=first.index)
    values = pd.concat([pd.DataFrame({"code": codes, "value": off - prev_end, "count": 1, "measure": "gap"}),
                        pd.DataFrame({"code": codes, "value": off - prev_off, "count": 1, "measure": "stride"})],
                       ignore_index=True)
    return counts, values


def _stripes(start, end, stripe: int) -> np.ndarray:
    """Stripes that [start, end) touches (0 when empty); shifts when the stripe is a power of two."""
    if stripe & (stripe - 1) == 0:
        shift = stripe.bit_length() - 1
        return np.where(end > start, ((end - 1) >> shift) - (start >> shift) + 1, 0)
    return np.where(end > start, (end - 1) // stripe - start // stripe + 1, 0)


def group_totals(c: dict, code: np.ndarray, duration: np.ndarray, moved: np.ndarray,
                 completion: np.ndarray) -> pd.DataFrame:
    """ops, bytes, time, errors, first start and last end per group."""
    index, codes = factorize(code)
    n = len(codes)
    first = np.full(n, np.iinfo(np.int64).max)
    last = np.full(n, np.iinfo(np.int64).min)
    np.minimum.at(first, index, c["t_start"])
    np.maximum.at(last, index, c["t_end"])
    return pd.DataFrame({"ops": np.bincount(index, ~completion, minlength=n).astype(np.int64),
                         "bytes": np.bincount(index, moved, minlength=n).astype(np.int64),
                         "time_ns": np.bincount(index, duration, minlength=n).astype(np.int64),
                         "errors": np.bincount(index, c["errno"] != 0, minlength=n).astype(np.int64),
                         "t_first": first, "t_last": last}, index=pd.Index(codes, name="code"))


def timebins(c: dict, moved: np.ndarray, counted: np.ndarray) -> pd.DataFrame:
    """Bytes moved per time bin of width 2^shift ns (power-of-two widths merge exactly, see coarsen), per layer
    and direction, by the calls in `counted` (the application's files). A call's bytes are spread evenly over
    its duration, so a call that spans bins gives each bin its share: bandwidth is drawn while it is spent."""
    data = (moved > 0) & counted
    if not data.any():
        return pd.DataFrame({name: np.zeros(0, np.float64 if name == "bytes" else np.int64)
                             for name in ("layer", "kind", "bin", "bytes", "shift")})
    start, bytes_ = c["t_start"][data], moved[data].astype(np.float64)
    end = np.maximum(c["t_end"][data], start + 1)  # a call of no measured duration takes one nanosecond
    shift = _shift_for(int(start.min()), int(end.max()))
    low = int(start.min()) >> shift
    width = ((int(end.max()) - 1) >> shift) - low + 1
    first, last = (start >> shift) - low, ((end - 1) >> shift) - low  # the bins [start, end) touches
    base = (c["layer"][data].astype(np.int64) * KIND_SLOTS + c["kind"][data]) * width
    rate = bytes_ / (end - start)  # bytes per ns
    edge = (first + 1 + low) << shift  # where the first bin ends
    head = np.where(first == last, bytes_, rate * (edge - start))  # the first bin's share
    tail = np.where(first == last, 0.0, rate * (end - ((last + low) << shift)))  # the last bin's
    full = rate * float(1 << shift)  # every bin in between
    cells = int(base.max()) + width
    sums = np.bincount(base + first, head, minlength=cells) + np.bincount(base + last, tail, minlength=cells)
    inner = last - first > 1
    steps = np.bincount(base[inner] + first[inner] + 1, full[inner], minlength=cells + 1) \
        - np.bincount(base[inner] + last[inner], full[inner], minlength=cells + 1)
    sums += np.cumsum(steps)[:cells]  # bins of a cell never run into the next cell's: last < width
    filled = np.flatnonzero(sums > 1e-9 * full.max())  # not the rounding left where steps cancel
    return pd.DataFrame({"layer": filled // width // KIND_SLOTS, "kind": filled // width % KIND_SLOTS,
                         "bin": filled % width + low, "bytes": sums[filled], "shift": shift})


def _shift_for(t0: int, t1: int) -> int:
    """The power-of-two bin width that cuts [t0, t1] into at most TIME_BINS bins."""
    return max(0, int(np.ceil(np.log2((t1 - t0 + 1) / TIME_BINS))))


def coarsen(frame: pd.DataFrame, shift: int | None = None) -> pd.DataFrame:
    """Time bins of mixed power-of-two widths (layer, kind, bin, bytes, shift) merged at one width: `shift`,
    or the coarsest of the frame and the one that keeps its span within TIME_BINS bins."""
    if frame.empty:
        return frame
    bins, shifts = frame["bin"].to_numpy(np.int64), frame["shift"].to_numpy(np.int64)
    if shift is None:
        shift = max(int(shifts.max()), _shift_for(int((bins << shifts).min()), int(((bins + 1) << shifts).max()) - 1))
    merged = frame.assign(bin=bins >> (shift - shifts)).groupby(["layer", "kind", "bin"])["bytes"].sum()
    return merged.reset_index().assign(shift=shift)


def _child_category(kind: np.ndarray) -> np.ndarray:
    category = np.full(len(kind), 4, np.int8)  # other
    for code, k in ((0, READ), (1, WRITE), (2, LOCK), (3, UNLOCK)):
        category[kind == k] = code
    return category


def decompose(c: dict, duration: np.ndarray, moved: np.ndarray, nested: np.ndarray, names: list[str],
              detail_limit: int, mpi: np.ndarray, child: np.ndarray, position: np.ndarray):
    """Per MPI-IO call (numpy columns): its POSIX/stdio children's time, count and bytes by category
    (Fig. 4.8); plus the first `detail_limit` calls and their children as frames, for the timelines.
    mpi, child, position: the range's `family`."""
    calls = {"call_id": c["call_id"][mpi], "op": c["op"][mpi], "file_id": c["file_id"][mpi], "kind": c["kind"][mpi],
             "t_start": c["t_start"][mpi], "t_end": c["t_end"][mpi], "bytes": moved[mpi],
             "coll_seq": c["coll_seq"][mpi]}
    category = _child_category(c["kind"][child])
    n, slots = len(mpi), len(CHILD_CATEGORIES)
    cell = position.astype(np.int64) * slots + category  # (call, category): one count for every category
    child_ns = np.bincount(cell, duration[child], minlength=n * slots).reshape(n, slots).astype(np.int64)
    child_ops = np.bincount(cell, minlength=n * slots).reshape(n, slots)
    for code, name in enumerate(CHILD_CATEGORIES):
        calls[f"{name}_ns"], calls[f"{name}_ops"] = child_ns[:, code].copy(), child_ops[:, code].copy()
    calls["other_ns"] = (calls["t_end"] - calls["t_start"]) - child_ns[:, :4].sum(axis=1)
    moves = (nested[child] == 1) & (category < 2)  # reads and writes on the call's own file
    moved_by = np.bincount(position[moves] * 2 + category[moves], moved[child][moves], minlength=n * 2)
    calls["posix_read_bytes"], calls["posix_write_bytes"] = moved_by.reshape(n, 2).astype(np.int64).T.copy()
    op_names = np.array(names or [""], dtype=object)
    calls["collective"] = np.array([ops.is_collective(x) for x in op_names], bool)[calls["op"]]
    calls["sieving"] = ((calls["kind"] == WRITE) & ~calls["collective"] & (calls["lock_ops"] > 0)
                        & (calls["read_ops"] > 0) & (calls["write_ops"] > 0))
    kept = pd.DataFrame({name: values[:detail_limit] for name, values in calls.items()})
    kept["op"] = op_names[kept["op"].to_numpy()]
    child = child[position < len(kept)]  # the kept calls' children
    children = pd.DataFrame({"call_id": c["parent"][child], "category": category[position < len(kept)],
                             "t_start": c["t_start"][child], "t_end": c["t_end"][child],
                             "offset": c["offset"][child], "bytes": moved[child]})
    return splits(calls, op_names), kept, children


def splits(calls: dict, names: np.ndarray) -> pd.DataFrame:
    """Per (op, file, kind, collective): totals of the decomposition columns over every call (exact)."""
    key = ((calls["op"].astype(np.int64) << 32 | (calls["file_id"].astype(np.int64) + 1)) << 4
           | calls["kind"].astype(np.int64) << 1 | calls["collective"])
    index, keys = pd.factorize(key)
    n = len(keys)
    sums = [k for k in calls if k.endswith(("_ns", "_ops", "_bytes"))] + ["bytes", "sieving"]
    def total(values):  # per key; exact integer sums (bincount sums in floating point)
        if n == 1:
            return np.array([values.sum()], np.int64)
        return np.bincount(index, values, minlength=n).astype(np.int64)
    out = {k: total(calls[k]) for k in sums}
    out["time_ns"] = total(calls["t_end"] - calls["t_start"])
    out["calls"] = np.bincount(index, minlength=n)
    sieved = calls["sieving"]
    first, last = np.full(n, np.nan), np.full(n, np.nan)
    np.fmin.at(first, index[sieved], calls["t_start"][sieved])
    np.fmax.at(last, index[sieved], calls["t_end"][sieved])
    return pd.DataFrame({"op": names[(keys >> 36).astype(np.int64)] if n else [],
                         "file_id": ((keys >> 4) & 0xFFFFFFFF) - 1, "kind": (keys >> 1) & 7,
                         "collective": (keys & 1).astype(bool), **out,
                         "sieving_first": first, "sieving_last": last})


def is_close(names: list[str]) -> np.ndarray:
    """Per op name: a close of a descriptor, which releases the process's record locks on the file (POSIX)."""
    return np.array([n in ("close", "fclose") for n in names] or [False], bool)


def is_open_or_close(names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per op name: whether it opens a file, whether it closes one, at any layer (a phase's bounds)."""
    opens = [n.lstrip("_").startswith(("open", "creat", "fopen", "freopen", "fdopen")) or n == "MPI_File_open"
             for n in names]
    closes = [n in ("close", "fclose", "MPI_File_close") for n in names]
    return np.array(opens or [False], bool), np.array(closes or [False], bool)


def phase_bounds(c: dict, totals: pd.DataFrame, names: list[str], carry: dict) -> pd.DataFrame:
    """Per group of data calls (`totals`: group_totals of the range), the bounds of its open-to-close phase as
    IOR and fs_test time one: the start of the latest open of the file (same layer) at or before the group's
    first data call (`open_before`), and the end of the first close of it after the group's last data call
    (`close_after`); NaN where there is none. The minimum and maximum over ranges are exact. `carry` (updated):
    each file and layer's latest open start so far, and the groups still waiting for their close."""
    opens, closes = (mask[c["op"]] for mask in is_open_or_close(names))
    key = (c["file_id"].astype(np.int64) + 1) * LAYER_SLOTS + c["layer"]  # a group code's (file, layer) part
    groups = totals[np.isin(kind_of(totals.index.to_numpy()), [READ, WRITE])]
    rows = pd.DataFrame({"code": groups.index.to_numpy(), "key": groups.index.to_numpy() // (NESTINGS * KIND_SLOTS),
                         "t_first": groups["t_first"].to_numpy(), "t_last": groups["t_last"].to_numpy()})
    opened = pd.concat([carry["last_open"], pd.DataFrame({"key": key[opens], "t_open": c["t_start"][opens]})])
    rows = pd.merge_asof(rows.sort_values("t_first"), opened.sort_values("t_open"), left_on="t_first",
                         right_on="t_open", by="key", direction="backward")
    closed = pd.DataFrame({"key": key[closes], "t_close": c["t_start"][closes], "close_end": c["t_end"][closes]})
    rows = pd.merge_asof(rows.sort_values("t_last"), closed.sort_values("t_close"), left_on="t_last",
                         right_on="t_close", by="key", direction="forward").set_index("code")
    pending = carry["pending"]  # groups of earlier ranges waiting for a close: this range's first one ends them
    first_close = closed.groupby("key")["close_end"].min()
    ended = pending[pending.isin(first_close.index) & ~pending.index.isin(rows.index)]
    carry["pending"] = pd.concat([pending[~pending.isin(first_close.index) & ~pending.index.isin(rows.index)],
                                  rows["key"][rows["close_end"].isna()]])
    carry["last_open"] = opened.groupby("key", as_index=False)["t_open"].max()
    firsts = closed.groupby("key").min()  # the first range to close a key: its earliest close and close end
    carry["first_close"] = pd.concat([carry["first_close"], firsts[~firsts.index.isin(carry["first_close"].index)]])
    resolved = pd.DataFrame({"open_before": np.nan, "close_after": first_close.reindex(ended.to_numpy()).to_numpy(),
                             "carried": True}, index=ended.index)
    bounds = pd.DataFrame({"open_before": rows["t_open"].astype(np.float64),
                           "close_after": rows["close_end"].astype(np.float64), "carried": False})
    return pd.concat([bounds, resolved]).rename_axis("code")


def new_phase_carry() -> dict:
    """phase_bounds' carry before a stream's first range; `first_close` (per key, the earliest close and close
    end of the first range that closed it) lets a stream summarised in parts end the phases an earlier part
    left waiting."""
    return {"last_open": pd.DataFrame({"key": np.zeros(0, np.int64), "t_open": np.zeros(0, np.int64)}),
            "pending": pd.Series([], dtype=np.int64, index=pd.Index([], dtype=np.int64, name="code"), name="key"),
            "first_close": pd.DataFrame({"t_close": np.zeros(0, np.int64), "close_end": np.zeros(0, np.int64)},
                                        index=pd.Index([], dtype=np.int64, name="key"))}


def lock_events(c: dict, duration: np.ndarray, closes: np.ndarray) -> pd.DataFrame:
    """The range's record lock and unlock calls, and its closes of files (mask `closes`)."""
    pick = np.flatnonzero((c["kind"] == LOCK) | (c["kind"] == UNLOCK) | closes)
    return pd.DataFrame({"file_id": c["file_id"][pick], "offset": c["offset"][pick],
                         "length": c["req_bytes"][pick], "unlock": c["kind"][pick] == UNLOCK,
                         "close": closes[pick], "t_start": c["t_start"][pick], "t_end": c["t_end"][pick],
                         "wait": duration[pick]})


def pair_locks(events: pd.DataFrame, final: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Record locks paired with the unlock of the same range on the same file: wait (the lock call's own
    duration, F_SETLKW blocks) and hold (from the lock's return to the unlock's start). Returns the locks
    (file_id, offset, length, t_request, t_acquired, t_release, wait_ns, held_ns) and, unless `final`, the
    locks not released yet, held back for the next range's unlocks. A lock never unlocked is released by the
    process's next close of the file (closing any descriptor of a file releases the process's locks on it:
    OMPIO's lock probe, for one, takes a lock and closes the file)."""
    closes = events[events["close"].astype(bool)]
    frame = events[~events["close"].astype(bool)].sort_values(["file_id", "offset", "length", "t_start"],
                                                              kind="stable")
    after = frame.shift(-1)
    released = (after["unlock"].eq(True) & (after["file_id"] == frame["file_id"])
                & (after["offset"] == frame["offset"]) & (after["length"] == frame["length"]))
    frame["t_release"] = after["t_start"].where(released)
    locks = frame[~frame["unlock"].astype(bool)]
    unpaired = locks["t_release"].isna()
    if unpaired.any() and len(closes):
        locks.loc[unpaired, "t_release"] = _next_close(locks[unpaired], closes)
    waiting = locks["t_release"].isna() & (not final)
    held = locks[waiting].drop(columns="t_release")
    locks = locks[~waiting]
    out = pd.DataFrame({"file_id": locks["file_id"], "offset": locks["offset"], "length": locks["length"],
                        "t_request": locks["t_start"], "t_acquired": locks["t_end"],
                        "t_release": locks["t_release"], "wait_ns": locks["wait"]})
    out["held_ns"] = (out["t_release"] - out["t_acquired"]).clip(lower=0)
    return out.reset_index(drop=True), held.reset_index(drop=True)


def _next_close(locks: pd.DataFrame, closes: pd.DataFrame) -> pd.Series:
    """For each lock, the start of the first close of its file after the lock was acquired (NaN if none)."""
    ordered = locks.reset_index().sort_values("t_end", kind="stable")
    found = pd.merge_asof(ordered, closes[["file_id", "t_start"]].rename(columns={"t_start": "t_close"})
                          .sort_values("t_close", kind="stable"), left_on="t_end", right_on="t_close",
                          by="file_id", direction="forward")
    return pd.Series(found["t_close"].to_numpy(np.float64), index=ordered["index"].to_numpy()).reindex(locks.index)


def samples(c: dict, moved: np.ndarray, nested: np.ndarray, budget: int) -> pd.DataFrame:
    """An even subsample of the data calls (offset known) for the plots."""
    idx = np.flatnonzero(((c["kind"] == READ) | (c["kind"] == WRITE)) & (c["offset"] >= 0))
    if len(idx) > budget:
        idx = idx[np.linspace(0, len(idx) - 1, budget).astype(np.int64)]
    return pd.DataFrame({"t_start": c["t_start"][idx], "t_end": c["t_end"][idx], "layer": c["layer"][idx],
                         "kind": c["kind"][idx], "file_id": c["file_id"][idx], "offset": c["offset"][idx],
                         "bytes": moved[idx], "nested": nested[idx]})
