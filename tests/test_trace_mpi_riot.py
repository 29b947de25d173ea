"""`ioloom bench riot`: the RIOT overhead study (Wright, Table A.2) runs untraced, POSIX-traced and fully traced,
checks that each traced run recorded every MPI-IO call it made, and reports medians over interleaved rounds with
intervals of the per-round (paired) changes that hold on a noisy machine, and draws them.
Small sizes here: the figures themselves are what the command prints, not what a test asserts."""
import json

import numpy as np
import pytest

from ioloom.bench import riot, stats

FUNCTIONS = {"MPI_File_write", "MPI_File_read", "MPI_File_write_all", "MPI_File_read_all", "MPI_File_write_at_all",
             "MPI_File_read_at_all"}


def test_riot_runs_three_configurations_and_checks_the_traces(mpi, ioloom_cli, tmp_path):
    (tmp_path / "work").mkdir()
    out = ioloom_cli("bench", "riot", "--json", "-n", "2", "--ops", "3", "--size", "64k", "--repeats", "3", "--quick",
                     "--mpi", mpi.name, "--dir", tmp_path / "work", "-o", tmp_path / "fig",
                     env=mpi.impl.base_env())
    report = json.loads(out.stdout)
    (run,) = report["runs"]
    assert run["mpi"] == mpi.name and set(run["functions"]) == FUNCTIONS
    # Each traced run was read back: full tracing saw 2 ranks x 3 calls of every function, POSIX-only none.
    assert {f: run["events"]["all"][f] for f in FUNCTIONS} == {f: 6 for f in FUNCTIONS}
    assert {f: run["events"]["posix"][f] for f in FUNCTIONS} == {f: 0 for f in FUNCTIONS}
    assert run["events"]["posix"]["posix"] > 0
    for function, figures in run["functions"].items():
        for config in ("none", "posix", "all"):
            rounds = figures[config]["rounds"]
            assert len(rounds) == 3 and all(s > 0 for s in rounds), (function, config)
            assert figures[config]["median"] == sorted(rounds)[1]
        change = figures["change_pct_all"]
        paired = [100 * (t / b - 1) for t, b in zip(figures["all"]["rounds"], figures["none"]["rounds"])]
        assert change["rounds"] == pytest.approx(paired) and change["median"] == pytest.approx(sorted(paired)[1])
        assert (change["low"], change["high"]) == pytest.approx((min(paired), max(paired)))
        assert change["confidence"] == 0.75  # 3 rounds: [min, max] covers the median with 1 - 2/8
        assert figures["thesis_change_pct"]["max"] >= figures["thesis_change_pct"]["min"] > 0
    assert list((tmp_path / "work").iterdir()) == [], "the test file and traces are removed"
    png = (tmp_path / "fig" / "riot.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    html = (tmp_path / "fig" / "riot.html").read_text()
    assert "plotly" in html.lower() and "fully traced: median and interval" in html and "read_at_all" in html


def test_riot_wants_ten_rounds_unless_quick(ioloom_cli, tmp_path):
    out = ioloom_cli("bench", "riot", "--repeats", "4", check=False)
    assert out.returncode == 2 and "--repeats 4" in out.stderr and "--quick" in out.stderr
    out = ioloom_cli("bench", "riot", "--dir", tmp_path / "absent", check=False)
    assert out.returncode == 2 and "is not a directory" in out.stderr


def test_a_disturbed_round_does_not_make_an_interval_overconfident():
    """Tracing that changes nothing, on a machine where one untraced and one traced round of several were
    disturbed: a mean with a bootstrap interval (what the command reported before) claims a large change; the
    median of the paired changes with its order-statistics interval includes no change, and says how confident
    it is."""
    rng = np.random.default_rng(1)
    base = list(1 + 0.01 * rng.standard_normal(12))
    traced = [b * (1 + 0.01 * rng.standard_normal()) for b in base]
    base[2] *= 0.5  # a disturbed untraced round ran fast, a traced one slow
    traced[7] *= 20
    change = riot.change_pct(base, traced)
    assert change["low"] < 0 < change["high"] and abs(change["median"]) < 3
    assert change["n"] == 12 and change["confidence"] >= 0.95
    four = riot.change_pct(base[:4], traced[:4])
    assert four["confidence"] == 0.875 and four["low"] == min(four["rounds"]) and four["high"] == max(four["rounds"])
    assert stats.median_interval([5.0])["confidence"] == 0.0


def test_riot_refuses_an_unknown_mpi(ioloom_cli):
    out = ioloom_cli("bench", "riot", "--mpi", "no-such-mpi", check=False)
    assert out.returncode != 0 and "no-such-mpi" in out.stderr
