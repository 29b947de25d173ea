"""ioloom probe: campaigns on real directories and on simulated targets whose correlation is known, the store's
atomic appends and its documented columns, the report's figures and page, the advice and the simulator's
background load taken from a store, and bad input through the command line."""
from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
import tomllib

import pytest

from ioloom import paths
from ioloom.probe import analysis, store
from ioloom.sim import platform


def ioloom(*args, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "ioloom", *map(str, args)], capture_output=True, text=True,
                         timeout=timeout, env={**os.environ, "PYTHONPATH": str(paths.REPO_ROOT / "python")})
    if check:
        assert out.returncode == 0, out.stderr
    return out


def one_line_error(out: subprocess.CompletedProcess, *words: str) -> None:
    """Refused with status 2 in one line naming `words`, no traceback."""
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    for word in words:
        assert word in lines[0], lines[0]


def option_refused(out: subprocess.CompletedProcess, option: str) -> None:
    """Refused by the option parser (status 2, click's usage box) naming the option."""
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert option in out.stderr, out.stderr


def test_docs_list_every_store_column():
    doc = (paths.REPO_ROOT / "docs" / "probe.md").read_text()
    for name, (_, meaning) in store.COLUMNS.items():
        assert f"| `{name}` | {meaning} |" in doc, name
    assert f"`format` = `{store.FORMAT}`, `version` = `{store.VERSION}`" in doc


@pytest.fixture
def shm_dir():
    """A directory on tmpfs (/dev/shm), beside the test's own on the local disk."""
    import tempfile
    with tempfile.TemporaryDirectory(dir="/dev/shm", prefix="ioloom-probe-") as d:
        yield pathlib.Path(d)


def test_directory_campaign_appends_each_round_and_reports(tmp_path, shm_dir):
    a, b = tmp_path / "a", shm_dir
    a.mkdir()
    out = tmp_path / "store"
    ioloom("probe", "run", a, b, "-o", out, "-n", 2, "-r", "256K,1M", "-w", "1,2", "--volume", "1M", "--fsync",
           "both", "-q")
    assert sorted(p.name.split("-")[-1] for p in out.iterdir()) == ["000000.parquet", "000001.parquet"]
    frame = store.load(out)
    assert len(frame) == 2 * 2 * 2 * 2 * 2       # rounds x targets x requests x writers x fsync
    assert (frame["bytes"] == (1 << 20) * frame["writers"]).all()
    assert (frame["throughput"] == frame["bytes"] / frame["seconds"]).all()
    assert (frame["slowest_writer_seconds"] <= frame["seconds"] + 1e-9).all()
    assert not list(a.iterdir()) and not list(b.iterdir())   # every probe file removed
    doc = json.loads(ioloom("probe", "report", out, "--json").stdout)
    assert doc["config"] == {"request_bytes": 1 << 20, "writers": 1, "fsync": True}
    assert {t["target"] for t in doc["targets"]} == {str(a), str(b)}
    assert all(t["samples"] == 2 and t["best_request"] in (1 << 18, 1 << 20) for t in doc["targets"])
    page = tmp_path / "probe.html"
    ioloom("probe", "report", out, "-o", page)
    text = page.read_text()
    for anchor in ("summary", "time", "correlation", "requests", "advice"):
        assert f'<section id="{anchor}">' in text
    assert "Plotly.newPlot" in text and "<script src=" not in text   # self-contained
    ids = re.findall(r'<(?:section|div) id="([^"]+)"', text)
    assert len(ids) == len(set(ids))   # a plot whose id was a section's was drawn into the section


def test_an_interrupted_campaign_keeps_every_earlier_round(tmp_path):
    target, out = tmp_path / "t", tmp_path / "store"
    target.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "ioloom", "probe", "run", str(target), "-o", str(out), "-n", "50",
                             "-i", "0.3", "-r", "1M", "--volume", "1M", "-q"],
                            env={**os.environ, "PYTHONPATH": str(paths.REPO_ROOT / "python")})
    deadline = time.time() + 120
    while time.time() < deadline and len(list(out.glob("round-*.parquet"))) < 2:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    rounds = len(list(out.glob("round-*.parquet")))
    assert rounds >= 2
    assert sorted(store.load(out)["round"].unique()) == list(range(rounds))


def test_a_full_target_stops_the_campaign_in_one_line_and_keeps_the_store(tmp_path, small_fs):
    full, out = small_fs("1m"), tmp_path / "store"
    ioloom("probe", "run", tmp_path, "-o", out, "-r", "1M", "--volume", "1M", "-q")
    failed = ioloom("probe", "run", full, "-o", out, "-r", "1M", "--volume", "4M", check=False)
    one_line_error(failed, str(full), "No space left", "earlier rounds are kept")
    assert not list(full.iterdir())
    assert len(store.load(out)) == 1


SIM_BUILT = (paths.build_dir() / "bin" / "ioloom-sim").exists()


def sim_campaign(tmp_path, shared: float):
    plat = tmp_path / f"platform-{shared}.toml"
    plat.write_text("[clients]\nnodes = 8\n[servers]\ncount = 2\nbandwidth = 1e10\n[targets]\ncount = 8\n"
                    f"[background]\nmodes = [[1.0, 1], [0.3, 1]]\nperiod = 1.0\nshared = {shared}\n")
    out = tmp_path / f"store-{shared}"
    ioloom("probe", "run", *[f"sim:{t}" for t in range(8)], "--sim", plat, "-o", out, "-n", 30, "-i", 2, "-r", "4M",
           "--volume", "32M", "-q")
    return store.load(out)


@pytest.mark.skipif(not SIM_BUILT, reason="ioloom-sim is not built (Debian: libsimgrid-dev)")
def test_simulated_targets_of_one_server_are_recovered_as_one_cluster(tmp_path):
    """Targets 0-3 and 4-7 sit on two servers whose load they share (background.shared = 1: r = 1 in the load):
    the report must find exactly those two groups, |r| >= 0.4 within and below it across, and the two load modes
    in each target's distribution. Without sharing, no group."""
    s = analysis.summarise(sim_campaign(tmp_path, 1.0))
    assert sorted(map(sorted, s.clusters)) == [[f"sim:{t}" for t in range(4)], [f"sim:{t}" for t in range(4, 8)]]
    r = s.correlation
    assert r.loc["sim:0", "sim:3"] >= 0.4 and r.loc["sim:4", "sim:7"] >= 0.4
    assert abs(r.loc["sim:0", "sim:4"]) < 0.4
    assert (s.per_target["modes"] >= 2).all()
    independent = analysis.summarise(sim_campaign(tmp_path, 0.0))
    assert independent.clusters == []


def write_rows(out, medians: dict[str, list[float]]) -> None:
    for number in range(len(next(iter(medians.values())))):
        store.append(out, "hand", number, [
            {"campaign": "hand", "round": number, "time_ns": 10**18 + number * 10**9, "host": "h", "target": t,
             "kind": "dir", "request_bytes": 1 << 22, "writers": 1, "fsync": True, "bytes": 1 << 22,
             "seconds": (1 << 22) / v[number], "throughput": v[number], "slowest_writer_seconds": (1 << 22) / v[number]}
            for t, v in medians.items()])


def test_advice_leaves_slow_targets_out_and_spreads_correlated_ones(tmp_path):
    """x1 and x2 move together, y1 and y2 move together (opposite phases), slow is a quarter of the others."""
    up, down = [400e6, 100e6, 380e6, 120e6, 410e6, 90e6], [100e6, 400e6, 110e6, 390e6, 95e6, 420e6]
    out = tmp_path / "store"
    write_rows(out, {"x1": up, "x2": [v * 1.01 for v in up], "y1": down, "y2": [v * 0.99 for v in down],
                     "slow": [60e6, 50e6, 55e6, 61e6, 52e6, 58e6]})
    s = analysis.summarise(store.load(out))
    assert s.slow == ["slow"]
    assert sorted(map(sorted, s.clusters)) == [["x1", "x2"], ["y1", "y2"]]
    order = analysis.preferred_targets(s)
    assert "slow" not in order and len(order) == 4
    group = {"x1": "x", "x2": "x", "y1": "y", "y2": "y"}
    assert all(group[a] != group[b] for a, b in zip(order, order[1:]))   # consecutive chunks never in one group
    doc = json.loads(ioloom("advise", "striping", "--probe", out, "--targets", 4, "--writers", 2,
                            "--bytes-per-writer", "256MiB", "--request-size", "4MiB", "--json").stdout)
    assert doc["placement"]["value"] == order
    plan = [(p["writer"], p["chunk"], p["target"]) for p in doc["plan"]]
    assert plan[:4] == [(0, j, order[j % 4]) for j in range(4)]
    assert "slow" in doc["placement"]["reason"]


def test_background_modes_become_a_platform_the_simulator_takes(tmp_path):
    out = tmp_path / "store"
    write_rows(out, {"a": [100e6, 30e6, 100e6, 30e6, 95e6, 28e6], "b": [50e6, 50e6, 16e6, 49e6, 15e6, 50e6]})
    text = ioloom("probe", "background", out).stdout
    doc = tomllib.loads(text)
    p = platform.from_dict(doc)
    assert p["background.modes"] == [[0.3, 5], [1.0, 7]]   # a: 3 near 0.3 of its best, b: 2 (16 and 15 of 50)


def test_bad_input_is_one_line(tmp_path):
    one_line_error(ioloom("probe", "run", tmp_path / "missing", "-o", tmp_path / "s", check=False),
                   "not a directory")
    one_line_error(ioloom("probe", "run", "sim:x", "-o", tmp_path / "s", check=False), "sim:N")
    option_refused(ioloom("probe", "run", tmp_path, "-o", tmp_path / "s", "--fsync", "maybe", check=False), "--fsync")
    option_refused(ioloom("probe", "run", tmp_path, "-o", tmp_path / "s", "-w", "0", check=False), "--writers")
    one_line_error(ioloom("probe", "report", tmp_path, check=False), "holds no measurement")
    (tmp_path / "round-x-000000.parquet").write_bytes(b"PAR1 not really")
    one_line_error(ioloom("probe", "report", tmp_path, check=False), "round-x-000000.parquet")
    if SIM_BUILT:
        one_line_error(ioloom("probe", "run", "sim:480", "-o", tmp_path / "s2", check=False), "sim:480")
    assert not re.search(r"round-.*\.tmp", " ".join(os.listdir(tmp_path)))
