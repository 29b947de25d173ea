"""Python plugins of libioloom-async: a function of a script named in the configuration runs on the writer side
(a dedicated core, the helper thread, or the process itself) when a client signals its event, with numpy arrays
viewing the blocks (no copy); its statistics match numpy's over what the reader reads back. libioloom-async links
no Python: it loads it only when a Python plugin is configured."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from ioloom import async_io, paths
from ioloom.async_io.kernel import MODES, Setup, run_kernel
from test_async_errors import initialize

SCRIPT = paths.REPO_ROOT / "tests" / "programs" / "async_statistics.py"


def with_python_plugin(setup: Setup, function: str = "statistics", script=SCRIPT, scope: str = "client") -> str:
    return setup.yaml() + (f"python: {sys.executable}\n"
                           f"plugins:\n  - {{event: checkpoint, script: {script}, function: {function}, "
                           f"scope: {scope}}}\n")


def run(mpi, tmp_path, mode: str, function: str = "statistics", scope: str = "client"):
    setup = Setup(tmp_path / "out", mode=mode, variables=("u", "v"), dims=(6, 5, 4), buffer=1 << 20)
    config = tmp_path / "c.yaml"
    config.write_text(with_python_plugin(setup, function, scope=scope))
    os.environ["IOLOOM_ASYNC_TEST_STATS"] = str(tmp_path / "stats")
    try:
        result = run_kernel(mpi.impl, 3, config, setup, 4, 0.0, event="checkpoint")
    finally:
        del os.environ["IOLOOM_ASYNC_TEST_STATS"]
    assert result.returncode == 0, result.stderr
    return result


@pytest.mark.parametrize("mode", MODES)
def test_python_plugin_statistics_match_numpy(mpi, tmp_path, mode):
    run(mpi, tmp_path, mode)
    lines = [json.loads(line) for path in tmp_path.glob("stats.*") for line in path.read_text().splitlines()]
    clients = 2 if mode == "dedicated-cores" else 3
    assert sorted((r["iteration"], r["block"]) for r in lines) == [(it, b) for it in range(4) for b in range(clients)]
    # Where the plugin ran: the dedicated core's one process, or each of the three ranks.
    assert len({r["pid"] for r in lines}) == (1 if mode == "dedicated-cores" else 3)
    out = async_io.open(tmp_path / "out")
    for r in lines:
        assert r["event"] == "checkpoint" and r["views"] and r["shapes"] == {"u": [6, 5, 4], "v": [6, 5, 4]}
        for name, (total, mean, top) in r["stats"].items():
            data = np.array(out.read(name, r["iteration"], r["block"]))
            assert (total, mean, top) == (float(data.sum()), float(data.mean()), float(data.max())), (name, r)


def test_node_scope_python_plugin_gets_every_clients_blocks(mpi, tmp_path):
    run(mpi, tmp_path, "dedicated-cores", function="node_sums", scope="node")
    lines = [json.loads(line) for path in tmp_path.glob("stats.*") for line in path.read_text().splitlines()]
    assert sorted(r["iteration"] for r in lines) == list(range(4)) and {r["block"] for r in lines} == {-1}
    out = async_io.open(tmp_path / "out")
    for r in lines:
        assert r["keys"] == ["u@0", "u@1", "v@0", "v@1"]
        for key, total in r["sums"].items():
            name, b = key.split("@")
            assert total == float(np.array(out.read(name, r["iteration"], int(b))).sum())


def test_a_failing_python_plugin_is_reported_and_the_output_whole(mpi, tmp_path):
    result = run(mpi, tmp_path, "dedicated-cores", function="fails")
    assert result.stderr.count("ioloom-async: python plugin fails failed at iteration") == 4 * 2
    assert "RuntimeError: plugin failure at 3" in result.stderr
    assert async_io.open(tmp_path / "out").counters()["written_blocks"] == 4 * 2 * 2


@pytest.mark.parametrize("change,message", [
    (lambda t: t.replace("function: statistics", "function: nope"), "async_statistics.py has no function nope"),
    (lambda t: t.replace(str(SCRIPT), "/nonexistent/x.py"), "python plugins: /nonexistent/x.py:"),
    (lambda t: t.replace(f"python: {sys.executable}", "python: /bin/true"), "is not a python3.N interpreter"),
])
def test_python_plugin_mistakes_refused_on_every_rank(mpi, tmp_path, change, message):
    setup = Setup(tmp_path / "out", mode="dedicated-cores", variables=("u",), dims=(4, 4, 4), buffer=1 << 20)
    lines = [line for line in initialize(mpi, tmp_path, change(with_python_plugin(setup))) if "initialize" in line]
    assert len(lines) == 3 and all("initialize rc 1: rank 2: " in line and message in line for line in lines), lines


def test_library_links_no_python():
    for lib in (paths.build_dir() / "lib").glob("libioloom-async-*.so"):
        if lib.name != "libioloom-async-python.so":
            needed = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True, check=True).stdout
            assert "libpython" not in needed and "NEEDED" in needed, lib
