"""libioloom-async in a trace: its async layer (native/async/trace.c) split into the I/O time the simulation saw
and the time its writers spent out of its sight.

Client calls (async_write, async_commit, async_signal, async_end_iteration) are the visible time. Each store of a
block (async_store) has as parent the call_id of the call that gave the block; a store that ran on another thread
or process than that call (a helper thread, a dedicated core or node) is hidden, one on the call's own thread (the
synchronous mode: inside the call) is already part of the visible time. A store whose call is not in the trace
(a client not traced) is counted apart. The writer's own calls during a store (its POSIX writes of the block and
its index record) have the store's key as parent, as a store has: they are the store's, in the layer below.

The writer side also records when it is done with each client's iteration (async_writer_iteration, its parent the
key of that client's async_end_iteration) and each plugin run (async_plugin): per iteration, when the simulation
ended it, when the writer side was done with it (the lag between the two), and the writer's store and plugin
time."""
from __future__ import annotations

import pandas as pd
import pyarrow.compute as pc

COLUMNS = ["t_start", "t_end", "layer", "op", "pid", "tid", "rank", "handle", "aux", "req_bytes", "ret_bytes",
           "call_id", "parent"]
STORE, WRITER_ITERATION, PLUGIN = "async_store", "async_writer_iteration", "async_plugin"
WRITER_OPS = (STORE, WRITER_ITERATION, PLUGIN)  # the writer side's events; the others are the simulation's calls
ITERATIONS_SHOWN = 20  # the per-iteration table's first rows
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
    calls, stores = events[~events["op"].isin(WRITER_OPS)], events[events["op"] == STORE]
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
            "stored_bytes": int(stores["req_bytes"].sum()), "clients": clients, **_below(below),
            **_writer_side(events, calls)}


def _writer_side(events: pd.DataFrame, calls: pd.DataFrame) -> dict:
    """When the writer side worked: its ends of iteration tied to the clients' (the lag: writer done minus client
    ended, per client and iteration), its plugin runs, and per iteration (the first ITERATIONS_SHOWN) the times
    from the first async event at which the clients ended it and the writer side was done, with its store and
    plugin seconds."""
    done, plugins = events[events["op"] == WRITER_ITERATION], events[events["op"] == PLUGIN]
    ends = calls[(calls["op"] == "async_end_iteration") & (calls["call_id"] >= 0)]
    tied = done.merge(ends[["call_id", "t_end"]], left_on="parent", right_on="call_id", suffixes=("", "_call"))
    lag = (tied["t_end"] - tied["t_end_call"]) / NS
    zero = int(events["t_start"].min())
    iterations = []
    for iteration in sorted(set(ends["aux"]) | set(done["aux"]))[:ITERATIONS_SHOWN]:
        mine = {name: frame[frame["aux"] == iteration] for name, frame in
                (("ended", ends), ("done", done), ("stores", events[events["op"] == STORE]), ("plugins", plugins))}
        iterations.append({"iteration": int(iteration),
                           "clients_ended": _latest(mine["ended"], zero), "writer_done": _latest(mine["done"], zero),
                           "store_seconds": _seconds(mine["stores"]), "plugin_seconds": _seconds(mine["plugins"])})
    return {"writer_iterations": int(len(done)), "tied_writer_iterations": int(len(tied)),
            "lag_median_seconds": float(lag.median()) if len(lag) else None,
            "lag_max_seconds": float(lag.max()) if len(lag) else None,
            "plugin_runs": int(len(plugins)), "plugin_seconds": _seconds(plugins), "iterations": iterations}


def _latest(frame: pd.DataFrame, zero: int) -> float | None:
    """Seconds from `zero` to the last end among the events, None without any."""
    return float(frame["t_end"].max() - zero) / NS if len(frame) else None


def _below(below: pd.DataFrame) -> dict:
    """The writer's own calls during the stores (POSIX, stdio): how many, their time, the bytes they wrote."""
    from ioloom.trace.ops import direction
    writes = below[below["op"].map(lambda op: direction(op) == "write").astype(bool)]
    return {"store_calls_below": int(len(below)), "store_seconds_below": _seconds(below),
            "store_bytes_written_below": int(writes["ret_bytes"].clip(lower=0).sum())}


def from_trace(trace) -> dict | None:
    return hidden_and_visible(async_events(trace))
