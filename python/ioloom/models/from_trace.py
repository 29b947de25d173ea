"""Model inputs measured from a trace (`ioloom.open_trace`): the write pattern and the compute/write split.

Works on the frame of `Trace.ops_named()` (string `op` and `layer`, columns rank, file_id, offset,
req_bytes, ret_bytes, t_start, t_end in ns). Bytes are counted at one layer only, the highest one that
wrote (MPI-IO, else stdio, else POSIX), so a collective write is not counted again as its POSIX writes.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ioloom.models.striping import Pattern

LAYER_ORDER = ("mpiio", "stdio", "posix")
NS = 1e9


def _by_process(events: pd.DataFrame) -> pd.DataFrame:
    """`events` with a `writer` column: the MPI rank, or for non-MPI processes (rank -1) -1 - pid, so that
    separate processes of a non-MPI run count as separate writers."""
    writer = events["rank"]
    if "pid" in events:
        writer = writer.where(writer >= 0, -1 - events["pid"])
    return events.assign(writer=writer)


def _io_events(events: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(all I/O events, write events) at the highest layer that wrote."""
    writes_any = events[events["op"].str.contains("write", case=False) & (events["ret_bytes"] > 0)]
    for layer in LAYER_ORDER:
        if (writes_any["layer"] == layer).any():
            io = events[events["layer"] == layer]
            return io, io[io["op"].str.contains("write", case=False) & (io["ret_bytes"] > 0)]
    raise ValueError("trace has no successful write at any I/O layer; nothing to advise on")


def pattern(events: pd.DataFrame) -> Pattern:
    """Writers, mean bytes per writer, median request size, shared file or not, contiguous or not."""
    _, writes = _io_events(_by_process(events))
    per_rank = writes.groupby("writer")
    bytes_per = per_rank["ret_bytes"].sum()
    files_per_writer = writes.groupby("file_id")["writer"].nunique()
    shared = bool((files_per_writer > 1).any())
    known = writes[writes["offset"] >= 0]
    contiguous = all(int((g["offset"] + g["ret_bytes"]).max() - g["offset"].min()) == int(g["ret_bytes"].sum())
                     for _, g in known.groupby(["writer", "file_id"]))
    request = int(writes["req_bytes"].median())
    mean_bytes = int(round(bytes_per.mean()))
    return Pattern(len(bytes_per), max(mean_bytes, request), request, shared, contiguous)


@dataclass(frozen=True)
class Split:
    """Mean over ranks of the time in writes and outside any I/O call (seconds), over the whole run."""
    compute: float
    write: float
    ranks: int


def compute_write_split(events: pd.DataFrame) -> Split:
    """Write time W = summed duration of a rank's write calls; compute time C = the rank's span (first to
    last event of any layer) minus the summed duration of all its I/O calls at the counted layer."""
    events = _by_process(events)
    io, writes = _io_events(events)
    by_rank = events.groupby("writer")  # the span includes process events (MPI_Init ... MPI_Finalize)
    span = (by_rank["t_end"].max() - by_rank["t_start"].min()) / NS
    io_time = (io["t_end"] - io["t_start"]).groupby(io["writer"]).sum() / NS
    write_time = (writes["t_end"] - writes["t_start"]).groupby(writes["writer"]).sum() / NS
    ranks = write_time.index
    compute = (span[ranks] - io_time[ranks]).clip(lower=0)
    if (compute <= 0).all():
        raise ValueError("the trace shows no time outside I/O calls; the compute time cannot be measured")
    return Split(float(compute.mean()), float(write_time.mean()), len(ranks))
