"""ioloom bench coord on a bounded sample (one round, two offsets, small phases): the report's shape, the
uncoordinated small application hurt where A's phase covers it, interruption sparing it; the figures themselves
come from the benchmark command (docs/coord.md)."""
import json
import os
import subprocess
import sys

from ioloom import paths


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
