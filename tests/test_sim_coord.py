"""ioloom sim coord: ioloom coord's policies deciding per phase between simulated jobs (native/sim/coord.cpp and
python/ioloom/sim/coord.py). The decision the simulated coordinator takes at B's announcement matches the
thesis's rule on the analytic case (N_A = N_B, T_A = 4 T_B: interrupt iff dt < 3/4 T_A), and the simulated
jobs then do what the decision says."""
import json
import os
import subprocess
import sys

import pytest

from ioloom import paths
from ioloom.coord.policy import Policy
from ioloom.sim import coord

SCENARIO = coord.Scenario(coord.scenario_platform(None, targets=1, nodes=2), (16, 16),
                          ("-F -b 4m -t 256k -w", "-F -b 1m -t 256k -w"))


@pytest.fixture(scope="module")
def alone():
    return SCENARIO.alone()


def test_jobs_alone_are_four_to_one(alone):
    t_a, t_b = alone
    assert 3.8 < t_a / t_b < 4.2, alone


@pytest.mark.parametrize("fraction", [0.2, 0.5, 0.7, 0.8, 0.95])
def test_simulated_dynamic_interrupts_iff_dt_below_three_quarters_of_t_a(alone, fraction):
    """Eq. 6.5 with the thesis's rule (min_gain 0): B interrupts A iff dt < 3/4 T_A, else it waits for A."""
    t_a, t_b = alone
    _, _, decisions = SCENARIO.pair(fraction * t_a, Policy("dynamic", min_gain=0), alone)
    first, second = decisions
    assert (first["job"], first["decision"], second["job"]) == (0, "alone", 1)
    assert second["decision"] == ("interrupts" if fraction < 0.75 else "queued"), second


def test_simulated_jobs_follow_the_decision(alone):
    """At dt = T_A / 2 B shares the storage uncoordinated (I_B near 2), goes first interrupting A (I_B near 1,
    A's writes under way when it comes still sharing; A delayed by T_B) and waits for A under FCFS (I_B near
    (T_A / 2 + T_B) / T_B = 3)."""
    t_a, t_b = alone
    dt = t_a / 2
    free = SCENARIO.pair(dt, None, alone)
    first = SCENARIO.pair(dt, Policy("interrupt"), alone)
    queued = SCENARIO.pair(dt, Policy("fcfs"), alone)
    assert free[1] / t_b > 1.6 and first[1] / t_b < 1.35 and queued[1] / t_b > 2.6, (free, first, queued)
    assert first[0] == pytest.approx(t_a + t_b, rel=0.1) and queued[0] == pytest.approx(t_a, rel=0.05)


def test_sim_coord_command_prints_the_rows_as_json_and_plots_them(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(paths.REPO_ROOT / "python")}
    run = subprocess.run([sys.executable, "-m", "ioloom", "sim", "coord", "--ranks-a", "8", "--ranks-b", "8",
                          "--targets", "1", "--bench-a", "-F -b 2m -t 256k -w", "--bench-b", "-F -b 512k -t 256k -w",
                          "--points", "3", "--json", "-o", str(tmp_path)], capture_output=True, text=True, env=env,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    rows = json.loads(run.stdout)["rows"]
    assert json.loads((tmp_path / "coord.json").read_text())["rows"] == rows
    assert (tmp_path / "coord.html").stat().st_size > 10_000
    assert [r["policy"] for r in rows[:4]] == ["none", "fcfs", "interrupt", "dynamic"] and len(rows) == 12
    assert all(r["f_ratio"] == 1.0 for r in rows if r["policy"] == "none")
    bad = subprocess.run([sys.executable, "-m", "ioloom", "sim", "coord", "--bench-a", "-b x"], capture_output=True,
                         text=True, env=env, timeout=60)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


@pytest.mark.parametrize("traced", [False, True], ids=["benches", "traces"])
def test_sim_coord_names_the_first_bad_input_before_making_the_output(tmp_path, traced):
    """With and without traces, the same order: a bad platform is named before a bad metric, a bad metric before
    a bad --bench-a (read without traces only), each before -o is made or anything runs."""
    env = {**os.environ, "PYTHONPATH": str(paths.REPO_ROOT / "python")}
    jobs = ["--trace-a", str(tmp_path / "a"), "--trace-b", str(tmp_path / "b")] if traced else []

    def refused(*args: str) -> str:
        run = subprocess.run([sys.executable, "-m", "ioloom", "sim", "coord", *jobs, *args, "-o", str(tmp_path / "out"),
                              "--bench-a", "-b x"], capture_output=True, text=True, env=env, timeout=60)
        assert run.returncode == 2 and "Traceback" not in run.stderr and not (tmp_path / "out").exists(), run.stderr
        return " ".join(run.stderr.replace("│", " ").split())
    assert "cannot read platform file" in refused("-p", str(tmp_path / "none.toml"), "--metric", "bogus")
    assert "unknown metric 'bogus'" in refused("--metric", "bogus")
    if not traced:
        assert "size 'x'" in refused()
