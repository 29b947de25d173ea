"""`ioloom async` (info, advise, stress) and `ioloom bench async`, run as a user would."""
from __future__ import annotations

import json

import pytest

from ioloom import models
from ioloom.async_io.cli import advice


@pytest.mark.parametrize("compute,write,cores,mode", [
    (1.0, 0.3, 2, "helper-thread"),     # below Eq. 3.2's break-even W/C = 1/(N-1) = 100%, hidden by a thread
    (1.0, 1.2, 2, "dedicated-cores"),   # above it
    (1.0, 0.05, 24, "dedicated-cores"),  # 5% > 1/23 = 4.3% (the thesis's example)
    (1.0, 0.04, 24, "helper-thread"),
    (0.1, 0.5, 48, "dedicated-cores"),
])
def test_advice_follows_eq_3_2(compute, write, cores, mode):
    result = advice(compute, write, cores, None)
    assert result["mode"] == mode
    assert result["eq_3_2"]["worthwhile"] == models.dedicated_core(compute, write, cores).worthwhile


def test_advice_keeps_synchronous_when_no_writer_keeps_up():
    # The dedicated core would need 5 s per iteration (W_ded), longer than now: neither mode hides the writes.
    assert advice(1.0, 0.5, 2, 5.0)["mode"] == "synchronous"


def test_advise_command(ioloom_cli):
    out = json.loads(ioloom_cli("async", "advise", "--compute", "1", "--write", "0.05", "--cores-per-node", "24",
                                "--json").stdout)
    assert out["mode"] == "dedicated-cores" and out["eq_3_2"]["break_even_ratio"] == pytest.approx(1 / 23)
    bad = ioloom_cli("async", "advise", "--cores-per-node", "4", check=False)
    assert bad.returncode == 2 and "give --compute and --write" in bad.stderr


def test_stress_sample_has_no_hang(ioloom_cli):
    """A bounded sample of the randomised campaign (the command runs 1,000 as `--runs 1000`)."""
    out = json.loads(ioloom_cli("async", "stress", "--runs", "6", "--seed", "7", "--timeout", "60", "--json",
                                timeout=600).stdout)
    assert out["runs"] == 6 and out["hangs"] == 0 and out["failures"] == []


def test_bench_async_prints_each_mode(ioloom_cli, tmp_path):
    out = ioloom_cli("bench", "async", "--rounds", "1", "--quick", "--iterations", "3", "--compute", "0.02",
                     "--dims", "16,16,16", "--variables", "2", "--node-bandwidth", "2", "--json", timeout=600)
    report = json.loads(out.stdout)
    s = report["summary"]
    assert set(s) >= {"synchronous", "helper-thread", "dedicated-cores", "eq_3_2"}
    # 64 KiB per rank at 1 MiB/s per writer: the synchronous writes take about 60 ms; the others copy.
    assert s["synchronous"]["visible_median"]["median"] > 0.03
    for mode in ("helper-thread", "dedicated-cores"):
        assert s[mode]["visible_ratio"]["median"] < 0.5
    assert 0 <= s["dedicated-cores"]["idle_fraction"]["median"] <= 1
    refused = ioloom_cli("bench", "async", "--rounds", "2", check=False)
    assert refused.returncode == 2 and "--rounds 2" in refused.stderr
