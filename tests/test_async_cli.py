"""`ioloom async` (info, check, advise, stress) and `ioloom bench async`, run as a user would."""
from __future__ import annotations

import json

import pytest

from ioloom import models, mpi, paths
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


def test_check_loads_the_library_of_the_mpi_ioloom_chooses(tmp_path, ioloom_cli):
    """`ioloom async check` without --mpi loads libioloom-async of mpi.chosen's MPI (MPICH when installed: its build
    has the hdf5 formats), not of the first MPI found (Open MPI); a build holding only that library is enough.
    Without any MPI it says so in one line."""
    impl = mpi.chosen(None)
    if impl is None:
        pytest.skip("no MPI installed")
    lib = tmp_path / "build" / "lib"
    lib.mkdir(parents=True)
    (lib / f"libioloom-async-{impl.name}.so").symlink_to(paths.native_lib(f"ioloom-async-{impl.name}"))
    config = tmp_path / "c.yaml"
    config.write_text(f"name: c\nmode: dedicated-cores\nranks_per_node: 3\nbuffer: 1048576\n"
                      f"writer: {{directory: {tmp_path / 'out'}, format: hdf5-shared}}\n"
                      "layouts: {tile: {type: float64, dimensions: [4, 4]}}\nvariables: {u: {layout: tile}}\n")
    build = {"IOLOOM_BUILD_DIR": str(tmp_path / "build")}
    assert ioloom_cli("async", "check", config, "--clients", "4", env=build).stdout == f"{config}: fine for 4 clients\n"
    alone = ioloom_cli("async", "check", config, "--clients", "4", env={**build, "PATH": str(tmp_path)}, check=False)
    assert alone.returncode == 2 and alone.stderr.startswith("ioloom: no MPI implementation found"), alone.stderr
    assert alone.stderr.count("\n") == 1


def test_advise_command(ioloom_cli):
    out = json.loads(ioloom_cli("async", "advise", "--compute", "1", "--write", "0.05", "--cores-per-node", "24",
                                "--json").stdout)
    assert out["mode"] == "dedicated-cores" and out["eq_3_2"]["break_even_ratio"] == pytest.approx(1 / 23)
    out = json.loads(ioloom_cli("async", "advise", "--compute", "1", "--write", "0.5", "--cores-per-node", "4",
                                "--p-max", "200", "--p-idle", "100", "--json").stdout)
    assert out["energy"] == {"synchronous": pytest.approx(1.5 * 200), "dedicated-cores": pytest.approx(4 / 3 * 200)}
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
    # The bandwidth model without variability: every synchronous write takes about the same time.
    assert 0 <= s["synchronous"]["visible_std"]["median"] < s["synchronous"]["visible_median"]["median"] / 2
    for mode in ("helper-thread", "dedicated-cores"):
        assert s[mode]["visible_ratio"]["median"] < 0.5
    assert 0 <= s["dedicated-cores"]["idle_fraction"]["median"] <= 1
    refused = ioloom_cli("bench", "async", "--rounds", "2", check=False)
    assert refused.returncode == 2 and "--rounds 2" in refused.stderr


def test_crossing_interpolates_where_dedicated_starts_to_pay():
    from ioloom.bench.async_kernel import crossing

    def point(ratio, run_ratio):
        return {"measured_ratio": ratio, "run_ratio": {"median": run_ratio}}
    # Between W/C 1.0 (ratio 1.1) and 2.0 (0.7): a quarter of the way.
    assert crossing([point(2.0, 0.7), point(0.5, 1.3), point(1.0, 1.1)]) == pytest.approx(1.25)
    assert crossing([point(0.5, 1.3), point(1.0, 1.1)]) is None


def test_bench_async_break_even_sweep(ioloom_cli):
    """The sweep's two points, with --sleep: compute and the modelled storage (the writers' bandwidth limit) both
    sleep, so the machine's load stretches neither, and a single round compares the points (with a busy compute,
    which the load stretches, the order of the run ratios flipped once at load 7)."""
    out = ioloom_cli("bench", "async", "--rounds", "1", "--quick", "--iterations", "4", "--compute", "0.1",
                     "--dims", "8,8,8", "--variables", "1", "--break-even", "--multiples", "0.5,2", "--sleep",
                     "--json", timeout=600)
    sweep = json.loads(out.stdout)["break_even"]
    assert sweep["predicted"] == pytest.approx(1.0)  # 1/(N-1) with N = 2
    low, high = sweep["points"]
    # The synchronous runs' writes take at least what the bandwidth limit aims at (W/C 0.5 and 2; the load can only
    # make them longer).
    assert 0.5 * 0.95 < low["measured_ratio"] < high["measured_ratio"] and high["measured_ratio"] > 2 * 0.95
    # Writes at half the break-even: giving up a core costs; at twice it: the dedicated core wins.
    assert low["run_ratio"]["median"] > high["run_ratio"]["median"]
