"""libioloom-async in ioloom's trace (docs/async.md, "Traced"): real runs of the CM1-like kernel under `ioloom run`
put the library's calls and its writer side's stores, ends of iteration and plugin runs in the async layer, each
store tied by id to the call that gave its block and each writer-side end of iteration to the client's, and the
report splits hidden from visible I/O time and shows when the writer side worked."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import MpiRunner
from ioloom import mpi
from ioloom.async_io.kernel import Setup, kernel_command
from ioloom.async_io.traced import async_events, from_trace, hidden_and_visible
from ioloom.trace import open_trace
from test_async_plugins import plugin
from test_async_plugins import with_plugin as plugin_config

pytestmark = [pytest.mark.mpi, pytest.mark.skipif("openmpi" not in {i.name for i in mpi.implementations()},
                                                  reason="needs Open MPI")]
ITERATIONS, VARIABLES = 4, ("u", "v", "theta")


def traced_run(tmp_path, mode: str, nranks: int, layers: str = "posix,stdio,mpiio,async", zero_copy=False,
               with_plugin=False):
    impl = mpi.by_name("openmpi")
    setup = Setup(tmp_path / "out", mode=mode, variables=VARIABLES, dims=(16, 16, 8), bandwidth=8 << 20)
    config = tmp_path / "cm1.yaml"
    config.write_text(plugin_config(setup, plugin(MpiRunner(impl))) if with_plugin else setup.yaml())
    cmd = kernel_command(impl, nranks, config, setup, ITERATIONS, 0.01, event="checkpoint", zero_copy=zero_copy)
    done = subprocess.run([sys.executable, "-m", "ioloom", "run", "-o", str(tmp_path / "trace"), "--layers", layers,
                           "--", *cmd], capture_output=True, text=True, timeout=180,
                          env={**os.environ, **impl.base_env()})
    assert done.returncode == 0, done.stderr[-2000:]
    return open_trace(tmp_path / "trace")


@pytest.mark.parametrize("mode,nranks,zero_copy", [("dedicated-cores", 3, False), ("helper-thread", 2, True)])
def test_stores_out_of_sight_are_hidden_and_tied_to_their_calls(tmp_path, mode, nranks, zero_copy):
    trace = traced_run(tmp_path, mode, nranks, zero_copy=zero_copy)
    events = async_events(trace)
    clients = 2
    giving = "async_commit" if zero_copy else "async_write"
    assert (events["op"] == giving).sum() == clients * ITERATIONS * len(VARIABLES)
    assert (events["op"] == "async_end_iteration").sum() == (events["op"] == "async_signal").sum() == 8
    calls = events[events["op"] == giving].set_index("call_id")
    stores = events[events["op"] == "async_store"]
    assert len(stores) == clients * ITERATIONS * len(VARIABLES)
    given = calls.loc[stores["parent"]]  # each store's call: same client (handle), same iteration (aux), earlier
    assert (given["handle"].to_numpy() == stores["handle"].to_numpy()).all()
    assert (given["aux"].to_numpy() == stores["aux"].to_numpy()).all()
    assert (given["t_start"].to_numpy() <= stores["t_start"].to_numpy()).all()
    split = hidden_and_visible(events)
    assert split["untied_stores"] == 0 and split["inside_seconds"] == 0
    assert split["hidden_seconds"] == split["store_seconds"]
    # each 16 KiB block takes its writer 2 ms or more at 8 MiB/s: far more than handing it over
    assert split["hidden_seconds"] >= len(stores) * 0.0019 > split["visible_seconds"]
    assert [c["client"] for c in split["clients"]] == [0, 1]
    # the writer's POSIX writes during the stores are theirs: the blocks' bytes and a 32-byte index record each
    assert split["store_bytes_written_below"] == split["stored_bytes"] + 32 * len(stores)
    # the writer side's end of each client's iteration, tied to the client's: after it began, after the stores
    done = events[events["op"] == "async_writer_iteration"]
    assert len(done) == split["tied_writer_iterations"] == clients * ITERATIONS
    ends = events[events["op"] == "async_end_iteration"].set_index("call_id").loc[done["parent"]]
    assert (ends["handle"].to_numpy() == done["handle"].to_numpy()).all()
    assert (ends["aux"].to_numpy() == done["aux"].to_numpy()).all()
    assert (ends["t_start"].to_numpy() <= done["t_end"].to_numpy()).all()
    last_store = stores.groupby(["handle", "aux"])["t_end"].max()
    assert (last_store.loc[list(zip(done["handle"], done["aux"]))].to_numpy() <= done["t_end"].to_numpy()).all()
    if mode == "dedicated-cores":  # on the dedicated core, not in the clients' processes
        assert set(done["pid"]).isdisjoint(set(events[events["op"] == giving]["pid"]))
    assert split["lag_median_seconds"] >= 0 and [it["iteration"] for it in split["iterations"]] == [0, 1, 2, 3]


def test_synchronous_stores_are_inside_the_calls(tmp_path):
    split = from_trace(traced_run(tmp_path, "synchronous", 2))
    assert split["stores"] == 2 * ITERATIONS * len(VARIABLES) and split["untied_stores"] == 0
    assert split["hidden_seconds"] == 0 and split["inside_seconds"] == split["store_seconds"] > 0
    assert split["visible_seconds"] >= split["inside_seconds"]


def test_layer_off_records_nothing(tmp_path):
    assert from_trace(traced_run(tmp_path, "helper-thread", 2, layers="posix")) is None


def test_report_shows_hidden_and_visible(tmp_path):
    """With a plugin on the dedicated core: its runs are the writer side's events, and the report shows them."""
    events = async_events(traced_run(tmp_path, "dedicated-cores", 3, with_plugin=True))
    runs = events[events["op"] == "async_plugin"]
    clients = 2
    assert len(runs) == clients * ITERATIONS and sorted(set(runs["handle"])) == [0, 1]
    assert set(runs["pid"]) == set(events[events["op"] == "async_store"]["pid"])  # the dedicated core's process
    assert (runs["req_bytes"] == len(VARIABLES) * 16 * 16 * 8 * 8).all()  # the client's blocks of the iteration
    split = hidden_and_visible(events)
    assert split["plugin_runs"] == len(runs) and split["plugin_seconds"] > 0
    done = subprocess.run([sys.executable, "-m", "ioloom", "report", str(tmp_path / "trace"), "-o",
                           str(tmp_path / "r.html"), "--predict-ops", "0"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    page = (tmp_path / "r.html").read_text()
    assert "Asynchronous output (libioloom-async)" in page and "hidden: stores on a helper thread" in page
    assert "written by the writers" in page and "calls during the stores" in page
    assert "When the writer side worked" in page and f"{len(runs)} plugin runs on the writer side" in page


def test_store_of_an_untraced_client_is_counted_apart():
    import pandas as pd
    key = 1 << 62
    events = pd.DataFrame([  # client 0's write (traced) and two stores on a dedicated rank, one of an untraced client
        {"t_start": 0, "t_end": 10, "layer": "async", "op": "async_write", "pid": 1, "tid": 1, "handle": 0, "aux": 0,
         "req_bytes": 8, "ret_bytes": 8, "call_id": key, "parent": -1},
        {"t_start": 20, "t_end": 120, "layer": "async", "op": "async_store", "pid": 2, "tid": 2, "handle": 0, "aux": 0,
         "req_bytes": 8, "ret_bytes": 8, "call_id": -1, "parent": key},
        {"t_start": 130, "t_end": 330, "layer": "async", "op": "async_store", "pid": 2, "tid": 2, "handle": 1, "aux": 0,
         "req_bytes": 8, "ret_bytes": 8, "call_id": -1, "parent": key | 1 << 12},
    ])
    split = hidden_and_visible(events)
    assert split["untied_stores"] == 1 and split["hidden_seconds"] == 100e-9 and split["store_seconds"] == 300e-9
    assert split["visible_seconds"] == 10e-9 and split["store_calls_below"] == 0
