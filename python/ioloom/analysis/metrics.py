"""The reduce for metrics: operations, bytes and time per layer, file and rank; RIOT's three bandwidths;
Darshan's counters; time in record locks; amplification. Definitions and sources: docs/analysis.md.
"""
from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from ioloom.analysis.ops import KINDS, LAYER_CODE, LAYERS, READ, WRITE
from ioloom.analysis.range_tables import SIZE_BIN_NAMES, union

MB = 1024 ** 2  # the thesis's MB
NS = 1e9
DIRECTIONS = {"read": READ, "write": WRITE}
MPIIO, POSIX = LAYER_CODE["mpiio"], LAYER_CODE["posix"]


def human_bytes(n: float) -> str:
    """Bytes with binary units: 512 B, 1.50 MiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.2f} {unit}"
        n /= 1024
    return str(n)


def named(frame: pd.DataFrame) -> pd.DataFrame:
    """Layer and kind codes replaced by their names."""
    out = frame.copy()
    if "layer" in out:
        out["layer"] = np.array(LAYERS)[out["layer"].to_numpy(dtype=int)]
    if "kind" in out:
        out["kind"] = np.array(KINDS)[out["kind"].to_numpy(dtype=int)]
    return out


def totals(groups: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """ops, bytes and seconds summed over `by` (names, not codes), for every layer and kind."""
    frame = named(groups)
    out = frame.groupby(by, sort=True)[["ops", "bytes", "time_ns", "errors"]].sum().reset_index()
    out["time_s"] = out.pop("time_ns") / NS
    return out


ISSUERS = ("application", "MPI-IO")  # who issued a layer's calls: the program itself (nesting 0), or an MPI-IO call


def io_by_layer(groups: pd.DataFrame) -> list[dict]:
    """Per layer and issuer, as Darshan's job summary per module: files touched, bytes read and written, and
    the summed seconds of read, write and other calls (metadata, sync, locks). The application's own rows
    (MPI-IO, stdio, POSIX) never count a byte twice; POSIX calls an MPI-IO call issued are a row of their own."""
    frame = groups[groups["layer"] != LAYER_CODE["process"]]
    frame = frame.assign(issuer=np.where(frame["nested"] > 0, ISSUERS[1], ISSUERS[0]),
                         layer=np.array(LAYERS)[frame["layer"].to_numpy(dtype=int)])
    out = []
    for (issuer, layer), part in frame.groupby(["issuer", "layer"], sort=False):
        by_kind = part.groupby("kind")[["bytes", "time_ns", "ops"]].sum()
        of = functools.partial(_sum_of, by_kind)
        other_ns = int(by_kind["time_ns"].sum()) - of(READ, "time_ns") - of(WRITE, "time_ns")
        out.append({"layer": layer, "issued_by": issuer, "files": int(part["file_id"].nunique()),
                    "ops": int(by_kind["ops"].sum()), "read_bytes": of(READ, "bytes"),
                    "write_bytes": of(WRITE, "bytes"), "read_s": of(READ, "time_ns") / NS,
                    "write_s": of(WRITE, "time_ns") / NS, "other_s": other_ns / NS})
    order = {name: i for i, name in enumerate(("mpiio", "stdio", "posix"))}
    return sorted(out, key=lambda r: (r["issued_by"] != ISSUERS[0], order.get(r["layer"], len(order))))


def _sum_of(by_kind, kind: int, column: str) -> int:
    """One kind's sum of one column in a table of sums indexed by kind (0 when the kind has no row)."""
    return int(by_kind[column].get(kind, 0))


def _rows_of(select: dict, frame):
    """The rows of frame whose columns hold the values of select."""
    return frame[np.logical_and.reduce([frame[k] == v for k, v in select.items()])]


def application_bytes(layers: list[dict]) -> dict:
    """Bytes the program itself read and wrote: its own calls at every layer (io_by_layer's application rows)."""
    own = [r for r in layers if r["issued_by"] == ISSUERS[0]]
    return {"read_bytes": sum(r["read_bytes"] for r in own), "write_bytes": sum(r["write_bytes"] for r in own),
            "layers": [r["layer"] for r in own if r["read_bytes"] or r["write_bytes"]]}


def io_by_file(groups: pd.DataFrame) -> list[dict]:
    """Per file, the program's own calls: the layers it used there, bytes read and written, seconds; and
    the bytes POSIX calls issued by MPI-IO moved there (read plus written). Busiest first."""
    frame = groups[(groups["layer"] != LAYER_CODE["process"]) & (groups["file_id"] >= 0)]
    if frame.empty:
        return []
    own, issued = frame[frame["nested"] == 0], frame[frame["nested"] > 0]
    def moved(part, kind):
        return part[part["kind"] == kind].groupby("file_id")["bytes"].sum()
    table = pd.DataFrame({"read_bytes": moved(own, READ), "write_bytes": moved(own, WRITE),
                          "seconds": own.groupby("file_id")["time_ns"].sum() / NS,
                          "under_mpiio_bytes": issued[issued["kind"].isin([READ, WRITE])]
                          .groupby("file_id")["bytes"].sum()}).fillna(0)
    layers = own.groupby("file_id")["layer"].agg(lambda codes: ", ".join(LAYERS[c] for c in sorted(set(codes))))
    table["layers"] = layers.reindex(table.index).fillna("")
    table = table.sort_values(["write_bytes", "read_bytes"], ascending=False, kind="stable")
    return [{"file_id": int(i), "layers": row.layers, "read_bytes": int(row.read_bytes),
             "write_bytes": int(row.write_bytes), "seconds": float(row.seconds),
             "under_mpiio_bytes": int(row.under_mpiio_bytes)} for i, row in table.iterrows()]


def _per_rank(groups: pd.DataFrame, layer: int, kind: int, nested: tuple[int, ...]) -> pd.DataFrame:
    pick = groups[(groups["layer"] == layer) & (groups["kind"] == kind) & groups["nested"].isin(nested)]
    return pick.groupby("rank")[["bytes", "time_ns"]].sum()


def _posix_under(splits: pd.DataFrame, kind: int, moved: int | None = None) -> pd.DataFrame:
    """Per rank: bytes and seconds (ns) of the POSIX calls moving data in direction `moved` (default `kind`)
    that MPI-IO calls of direction `kind` issued (bytes on the call's own file, as RIOT counts them)."""
    name = KINDS[kind if moved is None else moved]
    pick = splits[splits["kind"] == kind]
    return pick.groupby("rank").agg(bytes=(f"posix_{name}_bytes", "sum"), time_ns=(f"{name}_ns", "sum"),
                                    ops=(f"{name}_ops", "sum"))


def bandwidths(groups: pd.DataFrame, splits: pd.DataFrame) -> dict:
    """RIOT's perceived MPI, effective MPI and effective POSIX bandwidths (MB/s, MB = 1024^2), per direction.

    The MPI figures count the bytes the MPI-IO calls moved (what the program asked for): perceived MPI =
    sum_r B_r / T_r^MPI, effective MPI = sum B / sum T^MPI, with T^MPI the summed time of a rank's MPI-IO calls
    of that direction. The POSIX figure counts the POSIX calls of that direction those MPI-IO calls issued on
    their file, bytes and time: effective POSIX = sum B^POSIX / sum T^POSIX. Where MPI-IO reads or rewrites
    more than asked (sieving, two-phase over holes), B^POSIX > B and `amplification` says by how much.
    Without MPI-IO calls of a direction the POSIX figure uses the application's own POSIX calls."""
    out = {}
    for name, kind in DIRECTIONS.items():
        mpi = _per_rank(groups, MPIIO, kind, (0,))
        basis = "MPI-IO calls; POSIX figure: the POSIX calls they issued on the same file (RIOT)"
        if mpi.empty:
            posix = _per_rank(groups, POSIX, kind, (0,))
            basis = "the application's own POSIX calls (no MPI-IO call of this direction)"
        else:
            posix = _posix_under(splits, kind)
            if posix["bytes"].sum() == 0:
                posix, basis = mpi.assign(time_ns=np.nan), "MPI-IO calls (no POSIX call was traced under MPI-IO)"
        ranks = posix.index.union(mpi.index)
        b_mpi = mpi["bytes"].reindex(ranks, fill_value=0)
        b_posix = posix["bytes"].reindex(ranks, fill_value=0)
        t_mpi = mpi["time_ns"].reindex(ranks, fill_value=0) / NS
        t_posix = posix["time_ns"].reindex(ranks, fill_value=0) / NS
        timed = t_mpi > 0
        out[name] = {
            "bytes": int(b_mpi.sum() if len(mpi) else b_posix.sum()), "mpi_bytes": int(b_mpi.sum()),
            "posix_bytes": int(b_posix.sum()), "ranks": int(len(ranks)),
            "mpi_time_s": float(t_mpi.sum()), "posix_time_s": _finite(t_posix.sum()),
            "perceived_mpi_MBps": _finite((b_mpi[timed] / t_mpi[timed]).sum() / MB) if timed.any() else None,
            "effective_mpi_MBps": _ratio(b_mpi.sum() / MB, t_mpi.sum()),
            "effective_posix_MBps": _ratio(b_posix.sum() / MB, t_posix.sum()),
            "bytes_counted": basis,
        }
    return out


def aggregate_bandwidths(groups: pd.DataFrame) -> dict:
    """IOR's bandwidth (fs_test's "effective"), per direction: the bytes the program moved at each file's top
    layer / the time from the earliest open to the latest close over all ranks, per file, the files' windows
    joined where they overlap; and the same over the data window alone, from the first data call's start to
    the last one's end (fs_test's "raw" taken across ranks). A rank's window on a file runs from its latest
    open before its first data call to its first close after its last (partition's phase bounds); without
    them, its data calls. A file kept open from writing to reading: the write phase ends where
    the rank's reads of it begin, and the read phase begins where its writes ended."""
    own = top_level(groups)
    out: dict[str, dict] = {}
    for name, kind in DIRECTIONS.items():
        data = own[(own["kind"] == kind) & (own["bytes"] > 0)]
        if data.empty:
            out[name] = {"aggregate_bytes": 0, "aggregate_MBps": None, "data_window_MBps": None, "phase_s": 0.0,
                         "data_window_s": 0.0, "aggregate_layers": []}
            continue
        keys = ["rank", "pid", "file_id", "layer"]
        other = own[(own["kind"] == (READ + WRITE - kind)) & (own["bytes"] > 0)].groupby(keys)
        other = data[keys].join(other.agg(other_first=("t_first", "min"), other_last=("t_last", "max")), on=keys)
        opened = data["open_before"].fillna(data["t_first"])
        opened = opened.where(~(other["other_last"] < data["t_first"]), np.maximum(opened, other["other_last"]))
        closed = data["close_after"].fillna(data["t_last"])
        closed = closed.where(~(other["other_first"] > data["t_last"]), np.minimum(closed, other["other_first"]))
        per_file = pd.DataFrame({"file_id": data["file_id"], "opened": opened, "closed": closed,
                                 "t_first": data["t_first"], "t_last": data["t_last"]}).groupby("file_id")
        span = per_file.agg(opened=("opened", "min"), closed=("closed", "max"), first=("t_first", "min"),
                            last=("t_last", "max"))
        phase_s = _covered(span["opened"].to_numpy(np.int64), span["closed"].to_numpy(np.int64)) / NS
        window_s = _covered(span["first"].to_numpy(np.int64), span["last"].to_numpy(np.int64)) / NS
        moved = data["bytes"].sum() / MB
        out[name] = {"aggregate_bytes": int(data["bytes"].sum()), "aggregate_MBps": _ratio(moved, phase_s),
                     "data_window_MBps": _ratio(moved, window_s),
                     "phase_s": phase_s, "data_window_s": window_s,
                     "aggregate_layers": [LAYERS[c] for c in sorted(data["layer"].unique())]}
    return out


def _covered(start: np.ndarray, end: np.ndarray) -> int:
    """Nanoseconds covered by the union of the [start, end) intervals."""
    _, first, last = union(np.zeros(len(start), np.int64), start, np.maximum(start, end))
    return int((last - first).sum())


def _finite(value) -> float | None:
    return float(value) if value is not None and np.isfinite(value) else None


def _ratio(numerator: float, denominator: float) -> float | None:
    return _finite(numerator / denominator) if denominator and np.isfinite(denominator) else None


def amplification(groups: pd.DataFrame, splits: pd.DataFrame) -> dict:
    """What MPI-IO turned the program's bytes into at the POSIX layer, per direction: bytes the MPI-IO calls
    asked for, bytes the POSIX calls they issued moved in the same direction (same file), and their ratio;
    for writes also the read-modify-write traffic: POSIX reads issued by MPI-IO writes (data sieving, or
    two-phase collective buffering over holes), their count, bytes and seconds, and how many writes did it."""
    out: dict[str, dict] = {}
    for name, kind in DIRECTIONS.items():
        mpi = int(_per_rank(groups, MPIIO, kind, (0,))["bytes"].sum())
        posix = int(_posix_under(splits, kind)["bytes"].sum())
        out[name] = {"mpi_bytes": mpi, "posix_bytes": posix, "ratio": _ratio(posix, mpi)}
    reads = _posix_under(splits, WRITE, READ)
    writes = splits[splits["kind"] == WRITE]
    out["write"]["read_modify_write"] = {
        "posix_reads": int(reads["ops"].sum()), "bytes_read": int(reads["bytes"].sum()),
        "seconds": float(reads["time_ns"].sum() / NS), "ranks": int((reads["ops"] > 0).sum()),
        "files": sorted(int(f) for f in writes[writes["read_ops"] > 0]["file_id"].unique())}
    return out


def _top4(frame: pd.DataFrame, value: str) -> list[dict]:
    top = frame.groupby(value)["count"].sum().sort_values(ascending=False, kind="stable").head(4)
    return [{value: int(v), "count": int(n)} for v, n in top.items()]


def darshan_counters(groups, sizes, histogram, strides) -> list[dict]:
    """Per layer, file and direction, over all ranks: the size histogram in Darshan's bins, the four most
    common access sizes and strides (gap from the end of the previous access, as Darshan), sequential and
    consecutive counts. Common values come from each process's 16 most common, so they are exact unless a
    process used more than 16 distinct values."""
    data = groups[groups["kind"].isin([READ, WRITE])]
    keys = ["layer", "file_id", "kind"]
    out = []
    for key, part in data.groupby(keys):
        where = functools.partial(_rows_of, dict(zip(keys, key)))
        hist = where(histogram).groupby("bin")["count"].sum()
        gaps = where(strides)
        layer, file_id, kind = key
        out.append({
            "layer": LAYERS[layer], "file_id": int(file_id), "direction": KINDS[kind],
            "ops": int(part["ops"].sum()), "bytes": int(part["bytes"].sum()),
            "size_histogram": {f"SIZE_{KINDS[kind].upper()}_{n}": int(hist.get(i, 0))
                               for i, n in enumerate(SIZE_BIN_NAMES)},
            "access_sizes": _top4(where(sizes), "size"),
            "strides": _top4(gaps[gaps["measure"] == "gap"].rename(columns={"value": "stride"}), "stride"),
            "sequential": int(part["sequential"].sum()), "consecutive": int(part["consecutive"].sum()),
        })
    return out


def rank_spread(groups: pd.DataFrame) -> list[dict]:
    """Per file, at the top layer that touched it: each rank's I/O time and bytes; the fastest and slowest
    rank; population variance across ranks (Darshan's F_VARIANCE_RANK_TIME / _BYTES)."""
    out = []
    for file_id, part in top_level(groups).groupby("file_id"):
        per_rank = part.groupby("rank")[["time_ns", "bytes"]].sum()
        time_s = per_rank["time_ns"] / NS
        out.append({"file_id": int(file_id), "layer": LAYERS[int(part["layer"].iloc[0])], "ranks": len(per_rank),
                    "slowest_rank": int(time_s.idxmax()), "slowest_time_s": float(time_s.max()),
                    "fastest_rank": int(time_s.idxmin()), "fastest_time_s": float(time_s.min()),
                    "median_time_s": float(time_s.median()),
                    "variance_time_s2": float(time_s.var(ddof=0)),
                    "variance_bytes": float(per_rank["bytes"].var(ddof=0))})
    return out


def application_files(groups: pd.DataFrame, excluded: list[int]) -> pd.DataFrame:
    """Groups on the application's files: not on the `excluded` ones (Options.excluded_files: system and
    MPI-runtime files, logfs's own files)."""
    return groups[(groups["file_id"] >= 0) & ~groups["file_id"].isin(excluded)]


def top_level(groups: pd.DataFrame) -> pd.DataFrame:
    """Per file, the calls of the highest layer the application used on it (MPI-IO, else stdio, else
    POSIX), not counting calls an MPI-IO call issued: what the application itself asked for."""
    own = groups[(groups["nested"] == 0) & (groups["file_id"] >= 0) & (groups["layer"] != LAYER_CODE["process"])]
    rank = own["layer"].map({MPIIO: 0, LAYER_CODE["stdio"]: 1, POSIX: 2})
    best = rank.groupby(own["file_id"]).transform("min")
    return own[rank == best]


def lock_summary(locks: pd.DataFrame) -> list[dict]:
    """Per file: record locks taken, ranks taking them, seconds waiting to get them, seconds holding them."""
    out = []
    for file_id, part in locks.groupby("file_id"):
        out.append({"file_id": int(file_id), "locks": len(part), "ranks": int(part["rank"].nunique()),
                    "wait_s": float(part["wait_ns"].sum() / NS), "held_s": float(part["held_ns"].sum() / NS),
                    "unreleased": int(part["t_release"].isna().sum())})
    return out
