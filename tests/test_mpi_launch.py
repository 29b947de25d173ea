"""How ioloom launches MPI ranks (ioloom.mpi.MpiImpl.launch_env): MPICH ranks, at any rank count, and Open MPI ranks
on more ranks than cores give their core away when they wait (libioloom-idle-yield preloaded after the caller's own
preloads), in ioloom's own launches and in `ioloom run -- mpiexec.mpich -n N`; Open MPI launches that fit the cores
are left as they were."""
from __future__ import annotations

import dataclasses
import os
import subprocess

import pytest

from conftest import MpiRunner
from ioloom import mpi, paths


def _impl(name: str) -> mpi.MpiImpl:
    found = {impl.name: impl for impl in mpi.implementations()}
    if name not in found:
        pytest.skip(f"{name} is not installed")
    return found[name]


def _mpich() -> mpi.MpiImpl:
    return _impl("mpich")


def _progress_sources(out: subprocess.CompletedProcess, nranks: int) -> set[str]:
    """Which object each rank's progress call came from (the probe's last word), every rank present."""
    lines = [line for line in out.stdout.splitlines() if "progress from" in line]
    assert out.returncode == 0 and len(lines) == nranks, out.stdout + out.stderr
    assert all(f"sum {nranks * (nranks - 1) // 2} " in line for line in lines), out.stdout
    return {line.split()[-1] for line in lines}


def _run_probe(runner, nranks: int, extra: dict[str, str], progress: str = "ucp_worker_progress") -> set[str]:
    probe = runner.compile("idle_yield_probe.c", "-ldl")
    out = subprocess.run(runner.impl.launch(nranks, [str(probe), progress]), capture_output=True, text=True,
                         timeout=180,
                         env={**os.environ, **runner.impl.launch_env(nranks, extra)})
    return _progress_sources(out, nranks)


def test_oversubscribed_mpich_ranks_yield_and_keep_the_callers_preload():
    runner, nranks = MpiRunner(_mpich()), mpi.cpus() + 1
    logfs = str(paths.native_lib("ioloom-logfs"))
    env = runner.impl.launch_env(nranks, {"LD_PRELOAD": logfs})
    assert env["LD_PRELOAD"] == f"{logfs}:{paths.native_lib('ioloom-idle-yield')}"
    assert _run_probe(runner, nranks, {"LD_PRELOAD": logfs}) == {"libioloom-idle-yield.so"}


def test_mpich_ranks_that_fit_the_cores_sleep_too():
    """On a loaded machine MPICH's polling ranks wait for the other programs' time slices even when they fit the
    cores (docs/bench.md): its launches get the library at every rank count."""
    runner = MpiRunner(_mpich())
    assert runner.impl.launch_env(1, {})["LD_PRELOAD"] == str(paths.native_lib("ioloom-idle-yield"))
    assert _run_probe(runner, min(2, mpi.cpus()), {}) == {"libioloom-idle-yield.so"}


def test_oversubscribed_open_mpi_ranks_sleep_and_those_that_fit_poll():
    """Open MPI calls sched_yield when oversubscribed, which leaves a waiting rank runnable: its oversubscribed
    launches get the library (opal_progress); launches that fit the cores are left as they were."""
    runner = MpiRunner(_impl("openmpi"))
    assert "LD_PRELOAD" not in runner.impl.launch_env(mpi.cpus(), {})
    assert _run_probe(runner, mpi.cpus() + 1, {}, "opal_progress") == {"libioloom-idle-yield.so"}
    assert _run_probe(runner, min(2, mpi.cpus()), {}, "opal_progress") == {"libopen-pal.so.40"}


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


def test_direct_launches_name_their_rank_count_and_keep_their_preload(tmp_path):
    """launch_env has no default rank count (one left out silently meant no idle yield); a caller's own LD_PRELOAD
    goes in as `extra`: bench overhead's traced MPICH probe keeps the tracer and gets the library after it (set over
    launch_env's result, the tracer's preload was lost and the traced run wrote no trace). Launches under `ioloom run`
    take base_env, which preloads nothing: ioloom run adds the library from the command line's rank count."""
    from ioloom.bench import overhead

    impl = _mpich()
    with pytest.raises(TypeError):
        impl.launch_env()  # type: ignore[call-arg]
    assert "LD_PRELOAD" not in impl.base_env()
    idle = str(paths.native_lib("ioloom-idle-yield"))
    probe = next(p for p in overhead.probes() if p.impl == impl)
    variants = overhead._variants(probe, tmp_path / "trace", tmp_path, [])
    assert variants["traced"]["LD_PRELOAD"].split(":")[-1] == idle
    assert all(str(lib) in variants["traced"]["LD_PRELOAD"] for lib in probe.libs)
    assert variants["untraced"]["LD_PRELOAD"] == idle


def test_the_tests_direct_launches_take_the_library():
    runner = MpiRunner(_mpich())
    probe = runner.compile("idle_yield_probe.c", "-ldl")
    assert _progress_sources(runner.run(2, [probe, "ucp_worker_progress"]), 2) == {"libioloom-idle-yield.so"}


def test_build_compiles_once_per_directory_and_refuses_in_one_line(tmp_path):
    """MpiImpl.build, the one way ioloom's commands build a program (the demo for bench drishti, bench predict and
    sim calibrate --check): the demo built once into the directory; a missing source, a missing compiler and a
    source the compiler refuses each raise BuildFailed saying which; a source changed since is built again, and a
    failed build leaves no program."""
    impl = mpi.implementations()[0]
    exe = impl.build(paths.DEMO_SOURCE, tmp_path)
    assert exe == tmp_path / f"strided_mpiio-{impl.name}" and os.access(exe, os.X_OK)
    built = exe.stat().st_mtime_ns
    assert impl.build(paths.DEMO_SOURCE, tmp_path).stat().st_mtime_ns == built
    with pytest.raises(mpi.BuildFailed, match="is missing: the programs need a source checkout"):
        impl.build(tmp_path / "none.c", tmp_path)
    bad = tmp_path / "bad.c"
    bad.write_text("int main(void) { return 0; }\n")
    os.utime(impl.build(bad, tmp_path), (1, 1))  # the program older than its source: built again
    bad.write_text("int main(void) { return undeclared; }\n")
    with pytest.raises(mpi.BuildFailed, match=f"{impl.mpicc} could not build bad.c: .*error.*undeclared"):
        impl.build(bad, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith((".bad", "bad-"))) == [f"bad-{impl.name}"]
    with pytest.raises(mpi.BuildFailed, match="mpicc.none is not installed"):
        dataclasses.replace(impl, mpicc="mpicc.none").build(paths.DEMO_SOURCE, tmp_path / "elsewhere")
