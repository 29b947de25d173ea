"""The reduce for the cross-layer view: what each MPI-IO call turned into at the POSIX layer.

The link is the trace's explicit `parent` (the call_id of the MPI-IO call a POSIX call ran inside), never a
guess from times. Time of an MPI-IO call is split as in Wright's Fig. 4.8: read, write, lock and unlock are
the summed durations of the POSIX calls of that category under it; `other` is the rest of the call's time
(communication, computation of the file view, metadata calls, waiting).
"""
from __future__ import annotations

import pandas as pd

from ioloom.analysis.metrics import NS
from ioloom.analysis.range_tables import CHILD_CATEGORIES

SPLIT_COLUMNS = [f"{c}_ns" for c in CHILD_CATEGORIES]


def _split(row) -> dict:
    total = sum(row[c] for c in SPLIT_COLUMNS) or 1
    return {c[:-3]: {"seconds": float(row[c] / NS), "share": float(row[c] / total)} for c in SPLIT_COLUMNS}


def by_operation(splits: pd.DataFrame) -> list[dict]:
    """Per MPI-IO operation name and file: calls, seconds, bytes, the POSIX calls under it by category,
    the Fig. 4.8 time split, and how many independent writes were done by data sieving."""
    if splits.empty:
        return []
    keys = ["op", "file_id", "collective"]
    grouped = splits.groupby(keys, sort=True)
    sums = grouped[[c for c in splits.columns if c.endswith(("_ns", "_ops", "_bytes"))] +
                   ["bytes", "calls", "sieving"]].sum()
    sums["ranks"] = grouped["rank"].nunique()
    out = []
    for (op, file_id, collective), row in sums.iterrows():
        out.append({"op": op, "file_id": int(file_id), "collective": bool(collective), "calls": int(row["calls"]),
                    "ranks": int(row["ranks"]), "seconds": float(row["time_ns"] / NS), "bytes": int(row["bytes"]),
                    "posix_ops": {c: int(row[f"{c}_ops"]) for c in CHILD_CATEGORIES},
                    "posix_read_bytes": int(row["posix_read_bytes"]),
                    "posix_write_bytes": int(row["posix_write_bytes"]),
                    "time_split": _split(row), "sieving_calls": int(row["sieving"])})
    return out


def collectives(calls: pd.DataFrame) -> pd.DataFrame:
    """One row per collective (file, coll_seq, op) across ranks, from the calls kept in detail: the ranks in
    it, its window, bytes asked for, the Fig. 4.8 split summed over ranks, and the aggregators (the ranks
    whose POSIX calls moved data) with the bytes each moved."""
    coll = calls[calls["collective"] & (calls["coll_seq"] >= 0)]
    if coll.empty:
        return pd.DataFrame(columns=["file_id", "coll_seq", "op", "ranks", "t_start", "t_end", "bytes",
                                     "aggregators", *SPLIT_COLUMNS])
    coll = coll.assign(moved=coll["posix_read_bytes"] + coll["posix_write_bytes"])
    rows = []
    for (file_id, seq, op), part in coll.groupby(["file_id", "coll_seq", "op"], sort=True):
        movers = part[part["moved"] > 0].groupby("rank")["moved"].sum()
        rows.append({"file_id": int(file_id), "coll_seq": int(seq), "op": op, "ranks": int(part["rank"].nunique()),
                     "t_start": int(part["t_start"].min()), "t_end": int(part["t_end"].max()),
                     "bytes": int(part["bytes"].sum()),
                     "aggregators": {int(r): int(b) for r, b in movers.items()},
                     **{c: int(part[c].sum()) for c in SPLIT_COLUMNS}})
    return pd.DataFrame(rows)


def collectives_json(table: pd.DataFrame) -> list[dict]:
    out = []
    for row in table.to_dict("records"):
        out.append({"file_id": row["file_id"], "coll_seq": row["coll_seq"], "op": row["op"], "ranks": row["ranks"],
                    "seconds": (row["t_end"] - row["t_start"]) / NS, "bytes": row["bytes"],
                    "aggregators": [{"rank": r, "bytes": b} for r, b in row["aggregators"].items()],
                    "time_split": _split(row)})
    return out


def calls_json(calls: pd.DataFrame) -> list[dict]:
    """Each MPI-IO call kept in detail: rank, call id, op, file, window, bytes, the POSIX calls under it by
    category and its Fig. 4.8 time split."""
    out = []
    for row in calls.sort_values(["t_start", "rank"]).to_dict("records"):
        out.append({"rank": row["rank"], "call_id": row["call_id"], "op": row["op"], "file_id": row["file_id"],
                    "coll_seq": row["coll_seq"], "t_start_s": row["t_start"] / NS,
                    "seconds": (row["t_end"] - row["t_start"]) / NS,
                    "bytes": row["bytes"], "posix_ops": {c: row[f"{c}_ops"] for c in CHILD_CATEGORIES},
                    "posix_read_bytes": row["posix_read_bytes"], "posix_write_bytes": row["posix_write_bytes"],
                    "time_split_s": {c: row[f"{c}_ns"] / NS for c in CHILD_CATEGORIES}, "sieving": row["sieving"]})
    return out
