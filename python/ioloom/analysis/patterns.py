"""Access-pattern classes per file (Boito et al. 2011, section 4; Kettering's N-1 / N-N / 1-N).

Sharing, judged on the calls the application made itself (the top layer of the file):
- N-1 strided (SFSA strided): several processes on one file, their byte ranges interleave;
- N-1 segmented (SFSA non-strided): several processes, each on its own contiguous region;
- N-1 shared read: several processes whose ranges overlap only because they read the same bytes (an input
  every rank reads);
- N-N (MFWA): each process has files of its own, and several processes do so;
- 1-N: one process accesses several files nobody else touches; 1-1: one process, one file.
Order, over each process's calls in time order: sequential (each access starts where the last ended),
strided (one start-to-start distance dominates, given), sequential with gaps, or random.
"""
from __future__ import annotations

import pandas as pd

from ioloom.analysis.metrics import POSIX, top_level
from ioloom.analysis.ops import READ, WRITE

DOMINANT = 0.8  # share of accesses a stride must have to call the order "strided"


def _disjoint(per_rank: pd.DataFrame) -> bool:
    extents = per_rank.sort_values("off_min")
    return bool((extents["end_max"].to_numpy()[:-1] <= extents["off_min"].to_numpy()[1:]).all())


def _sharing(per_rank: pd.DataFrame, writers: pd.DataFrame, private_owners: pd.Series) -> str:
    """per_rank, writers: [off_min, end_max) of every process, and of the processes that wrote."""
    processes = len(per_rank)
    if processes > 1:
        if _disjoint(per_rank):
            return "N-1 segmented (SFSA non-strided)"
        if len(writers) < 2 or _disjoint(writers):  # the overlap is ranks reading the same bytes
            return "N-1 shared read (processes read the same bytes)"
        return "N-1 strided (SFSA strided)"
    owner = per_rank.index[0]
    if private_owners.nunique() > 1:
        return "N-N (MFWA)"
    return "1-N" if (private_owners == owner).sum() > 1 else "1-1"


def _order(part: pd.DataFrame, strides: pd.DataFrame) -> dict:
    transitions = int((part["ops"] - 1).clip(lower=0).sum())
    if transitions == 0:
        return {"order": "single access", "stride": None}
    consecutive = part["consecutive"].sum() / transitions
    sequential = part["sequential"].sum() / transitions
    top = strides.groupby("value")["count"].sum().sort_values(ascending=False)
    if consecutive >= DOMINANT:
        return {"order": "sequential", "stride": None}
    if len(top) and top.iloc[0] / transitions >= DOMINANT and top.index[0] != 0:
        return {"order": "strided", "stride": int(top.index[0])}
    if sequential >= DOMINANT:
        return {"order": "sequential with gaps", "stride": None}
    return {"order": "random", "stride": None}


def classify(groups: pd.DataFrame, strides: pd.DataFrame, stripe_size: int) -> list[dict]:
    """One entry per file that moved data."""
    data = top_level(groups)
    data = data[data["kind"].isin([READ, WRITE]) & (data["ops"] > 0)]
    owners = data.groupby("file_id")["rank"].nunique()
    private = data[data["file_id"].isin(owners[owners == 1].index)].groupby("file_id")["rank"].first()
    posix = groups[(groups["layer"] == POSIX) & groups["kind"].isin([READ, WRITE])]
    stride_table = strides[strides["measure"] == "stride"]
    out = []
    for file_id, part in data.groupby("file_id"):
        per_rank = part.groupby("rank").agg(off_min=("off_min", "min"), end_max=("end_max", "max"))
        writers = part[part["kind"] == WRITE].groupby("rank").agg(off_min=("off_min", "min"),
                                                                  end_max=("end_max", "max"))
        layer = int(part["layer"].iloc[0])
        own_strides = stride_table[(stride_table["file_id"] == file_id) & (stride_table["layer"] == layer)
                                   & (stride_table["nested"] == 0)]
        file_posix = posix[posix["file_id"] == file_id]
        posix_ops = int(file_posix["ops"].sum())
        sharing = _sharing(per_rank, writers, private)
        out.append({
            "file_id": int(file_id), "sharing": sharing, "processes": len(per_rank),
            "interleaved": sharing.startswith("N-1 strided"),
            **_order(part, own_strides),
            "requests": int(part["ops"].sum()), "small_requests": int(part["small"].sum()),
            "posix_requests": posix_ops, "stripe_size": stripe_size,
            "misaligned_requests": int(file_posix["misaligned"].sum()),
        })
    return out
