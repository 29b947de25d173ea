"""libioloom-async in a trace: its async layer (native/async/trace.c) split into the I/O time the simulation saw
and the time its writers spent out of its sight.

Client calls (async_write, async_commit, async_signal, async_end_iteration) are the visible time. Each store of a
block (async_store) has as parent the call_id of the call that gave the block; a store that ran on another thread
or process than that call (a helper thread, a dedicated core or node) is hidden, one on the call's own thread (the
synchronous mode: inside the call) is already part of the visible time. A store whose call is not in the trace
(a client not traced) is counted apart. The writer's own calls during a store (its POSIX writes of the block and
its index record) have the store's key as parent, as a store has: they are the store's, in the layer below."""
from __future__ import annotations

import pandas as pd
import pyarrow.compute as pc

COLUMNS = ["t_start", "t_end", "layer", "op", "pid", "tid", "rank", "handle", "aux", "req_bytes", "ret_bytes",
           "call_id", "parent"]
STORE = "async_store"
KEY_BIT = 1 << 62  # set in every key of libioloom-async (native/async/trace.c), in no call id of the tracer
NS = 1e9


def _is_async(table):
    return pc.equal(table.column("layer").cast("string"), "async")


def _has_async(stream) -> bool:
    """Whether a stream holds async events: from the layers its operation table names (a stream file's reader
    says, info["layers_named"]), else from its layer column alone."""
    if "layers_named" in stream.info:
        return "async" in stream.info["layers_named"]
    return any(pc.any(_is_async(table)).as_py() for table in stream.ranges(["layer"]))


def async_events(trace) -> pd.DataFrame:
    """The async layer's events and the calls made under its stores, of every stream that has any, read range by
    range (only they are kept)."""
    parts = []
    for stream in filter(_has_async, trace.streams):
        for table in stream.ranges(COLUMNS):
            chosen = table.filter(pc.or_(_is_async(table), pc.greater_equal(table.column("parent"), KEY_BIT)))
            if chosen.num_rows:
                parts.append(chosen.to_pandas().astype({"op": str, "layer": str}))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=COLUMNS)


def _seconds(frame: pd.DataFrame) -> float:
    return float((frame["t_end"] - frame["t_start"]).sum()) / NS


def hidden_and_visible(events: pd.DataFrame) -> dict | None:
    """The split, in total and per client (its rank among clients); None when the trace has no async event."""
    if not (events["layer"] == "async").any():
        return None
    below = events[events["layer"] != "async"]
    events = events[events["layer"] == "async"]
    calls, stores = events[events["op"] != STORE], events[events["op"] == STORE]
    tied = stores.merge(calls[calls["call_id"] >= 0][["call_id", "pid", "tid"]], left_on="parent",
                        right_on="call_id", how="left", suffixes=("", "_call"))
    untied = tied["pid_call"].isna()
    inside = ~untied & (tied["pid"] == tied["pid_call"]) & (tied["tid"] == tied["tid_call"])
    hidden = tied[~untied & ~inside]
    clients = []
    for client, own in calls.groupby("handle"):
        mine = hidden[hidden["handle"] == client]
        clients.append({"client": int(client), "calls": int(len(own)), "visible_seconds": _seconds(own),
                        "hidden_seconds": _seconds(mine), "hidden_bytes": int(mine["req_bytes"].sum())})
    return {"calls": int(len(calls)), "visible_seconds": _seconds(calls), "stores": int(len(stores)),
            "store_seconds": _seconds(stores), "hidden_seconds": _seconds(hidden),
            "inside_seconds": _seconds(tied[inside]), "untied_stores": int(untied.sum()),
            "stored_bytes": int(stores["req_bytes"].sum()), "clients": clients, **_below(below)}


def _below(below: pd.DataFrame) -> dict:
    """The writer's own calls during the stores (POSIX, stdio): how many, their time, the bytes they wrote."""
    from ioloom.trace.ops import direction
    writes = below[below["op"].map(lambda op: direction(op) == "write").astype(bool)]
    return {"store_calls_below": int(len(below)), "store_seconds_below": _seconds(below),
            "store_bytes_written_below": int(writes["ret_bytes"].clip(lower=0).sum())}


def from_trace(trace) -> dict | None:
    return hidden_and_visible(async_events(trace))
