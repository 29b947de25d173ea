"""ioloom bench coord on a bounded sample (one round, two offsets, small phases): the report's shape, the
uncoordinated small application hurt where A's phase covers it, interruption sparing it; the figures themselves
come from the benchmark command (docs/coord.md)."""
import json
import os
import subprocess
import sys

import coord_support
from ioloom import paths
from ioloom.coord import log

coordinator = coord_support.coordinator  # the fixture


def test_bench_coord_quick_sample(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(paths.REPO_ROOT / "python")}
    run = subprocess.run([sys.executable, "-m", "ioloom", "bench", "coord", "--quick", "--rounds", "1", "--points",
                          "3", "--pair", "small", "--bandwidth", "1e9", "--big-bytes", "400000000", "--small-bytes",
                          "40000000", "--chunk", "2000000", "--json", "-o", str(tmp_path)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert json.loads((tmp_path / "coord.json").read_text())["rows"] == report["rows"]
    assert (tmp_path / "coord.html").stat().st_size > 10_000
    rows = {(r["dt"], r["policy"]): r for r in report["rows"]}
    assert sorted({dt for dt, _ in rows}) == [-0.04, 0.18, 0.4]
    assert {p for _, p in rows} == {"none", "fcfs", "interrupt", "dynamic"}
    # B (1 core, 0.04 s alone) starting while A (8 cores, 0.4 s) writes: uncoordinated, B gets 1/9 of the
    # bandwidth; interrupting A, B writes at once
    hurt, spared = rows[(0.18, "none")]["i_b"]["median"], rows[(0.18, "interrupt")]["i_b"]["median"]
    assert hurt >= 2.0 and spared < hurt / 2, (hurt, spared)
    assert rows[(0.18, "none")]["f_ratio"]["median"] == 1.0
    assert report["rounds"] == 1 and "->" in report["load"]


def test_bench_coord_refuses_too_few_rounds_without_quick():
    env = {**os.environ, "PYTHONPATH": str(paths.REPO_ROOT / "python")}
    run = subprocess.run([sys.executable, "-m", "ioloom", "bench", "coord", "--rounds", "3"], capture_output=True,
                         text=True, env=env)
    assert run.returncode == 2 and "at least 10 interleaved" in run.stderr


def test_bench_program_under_ioloom_run_is_interrupted_for_a_small_one(tmp_path, coordinator):
    """Two unmodified ioloom-bench runs under `ioloom run --coord` on the emulated storage: B (small) starting while A
    (big) writes is done first under interruption, A told to wait and B never; uncoordinated, no client reached a
    coordinator and B, sharing the storage with A, takes at least twice its time alone (about 8 times on a quiet
    machine). Nothing load can make false is asserted (load makes every run slower, never faster, so B's time under
    interruption, 0.03 s quiet, stretched at load 11, is not compared with its uncoordinated one); B's twice its
    time alone is one load can also make true, so it fails only on a machine quiet enough; the first writes are
    planned 6 s after the spawn (the bench's 3 s: `ioloom run` and MPI's start-up, about 1 s quiet, can outlast them
    under load, and a late A would make B the earlier phase)."""
    from ioloom.bench import coord as bench
    options = {"program": "bench", "storage": "emulated", "bandwidth": 2e8, "chunk": 500_000, "margin": 6.0}
    apps = [("A", 80_000_000, 8, 0.0), ("B", 5_000_000, 1, 0.1)]   # alone: 0.4 s and 0.025 s
    b_alone = 5_000_000 / options["bandwidth"]

    def counters(name):
        return log.read(tmp_path / f"run-{name}" / "coord.jsonl")
    a, b = bench.run_apps(tmp_path, apps, options, coordinator("interrupt"))
    assert b["start"] - a["start"] > 0.05 and b["start"] + b["t"] < a["start"] + a["t"], (a, b)
    assert max(r["waits"] for r in counters("A")) >= 1 and max(r["waits"] for r in counters("B")) == 0
    assert max(r["bytes"] for r in counters("B")) == 5_000_000
    a, b_free = bench.run_apps(tmp_path, apps, options, None)
    assert all(r["lost"] for r in counters("A") + counters("B"))
    assert a["start"] < b_free["start"] + b_free["t"] and b_free["start"] < a["start"] + a["t"], (a, b_free)  # overlap
    assert b_free["t"] >= 2 * b_alone, (a, b_free)


def test_bench_coord_refuses_local_storage_for_the_writer():
    env = {**os.environ, "PYTHONPATH": str(paths.REPO_ROOT / "python")}
    run = subprocess.run([sys.executable, "-m", "ioloom", "bench", "coord", "--storage", "local"],
                         capture_output=True, text=True, env=env)
    assert run.returncode == 2 and "--storage local needs --program bench" in run.stderr
