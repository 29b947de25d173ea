"""How ioloom launches MPI ranks (ioloom.mpi.MpiImpl.launch_env): MPICH ranks on more ranks than cores yield their
core when they wait (libioloom-idle-yield preloaded after the caller's own preloads), in ioloom's own launches and
in `ioloom run -- mpiexec.mpich -n N`; launches that fit the cores, and Open MPI's, are left as they were."""
from __future__ import annotations

import os
import subprocess

import pytest

from conftest import MpiRunner
from ioloom import mpi, paths


def _mpich() -> mpi.MpiImpl:
    found = {impl.name: impl for impl in mpi.implementations()}
    if "mpich" not in found:
        pytest.skip("MPICH is not installed")
    return found["mpich"]


def _progress_sources(out: subprocess.CompletedProcess, nranks: int) -> set[str]:
    """Which object each rank's ucp_worker_progress came from (the probe's last word), every rank present."""
    lines = [line for line in out.stdout.splitlines() if "ucp_worker_progress from" in line]
    assert out.returncode == 0 and len(lines) == nranks, out.stdout + out.stderr
    assert all(f"sum {nranks * (nranks - 1) // 2} " in line for line in lines), out.stdout
    return {line.split()[-1] for line in lines}


def _run_probe(runner, nranks: int, extra: dict[str, str]) -> set[str]:
    probe = runner.compile("idle_yield_probe.c", "-ldl")
    out = subprocess.run(runner.impl.launch(nranks, [str(probe)]), capture_output=True, text=True, timeout=180,
                         env={**os.environ, **runner.impl.launch_env(nranks, extra)})
    return _progress_sources(out, nranks)


def test_oversubscribed_mpich_ranks_yield_and_keep_the_callers_preload():
    runner, nranks = MpiRunner(_mpich()), mpi.cpus() + 1
    logfs = str(paths.native_lib("ioloom-logfs"))
    env = runner.impl.launch_env(nranks, {"LD_PRELOAD": logfs})
    assert env["LD_PRELOAD"] == f"{logfs}:{paths.native_lib('ioloom-idle-yield')}"
    assert _run_probe(runner, nranks, {"LD_PRELOAD": logfs}) == {"libioloom-idle-yield.so"}


def test_mpich_ranks_that_fit_the_cores_poll_as_before():
    runner = MpiRunner(_mpich())
    assert "LD_PRELOAD" not in runner.impl.launch_env(mpi.cpus(), {})
    assert _run_probe(runner, min(2, mpi.cpus()), {}) == {"libucp.so.0"}


def test_open_mpi_launches_get_no_idle_yield():
    """Open MPI yields by itself when oversubscribed (mpi_yield_when_idle)."""
    openmpi = next(impl for impl in mpi.KNOWN if impl.name == "openmpi")
    assert openmpi.idle_yield(mpi.cpus() * 4) == []
    assert "LD_PRELOAD" not in openmpi.launch_env(mpi.cpus() * 4, {})


@pytest.mark.parametrize("argv, ranks", [(["mpiexec.mpich", "-n", "8", "prog", "-n", "3"], 8),
                                         (["mpiexec", "-np", "4", "prog"], 4), (["mpiexec", "prog"], 0),
                                         (["mpiexec", "-n"], 0), (["mpiexec", "-n", "x", "prog"], 0)])
def test_launched_ranks_reads_the_launchers_count(argv, ranks):
    assert mpi.launched_ranks(argv) == ranks


def test_ioloom_run_of_an_oversubscribed_mpich_launch_yields(ioloom_cli, tmp_path):
    runner, nranks = MpiRunner(_mpich()), mpi.cpus() + 1
    probe = runner.compile("idle_yield_probe.c", "-ldl")
    out = ioloom_cli("run", "-o", tmp_path / "trace", "--", *runner.impl.launch(nranks, [str(probe)]), timeout=300)
    assert _progress_sources(out, nranks) == {"libioloom-idle-yield.so"}
