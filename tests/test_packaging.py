"""`pip install ioloom` as a user does it: the sdist, and the wheel built from it, carry the native libraries and
programs inside the package (built for every MPI found), and the installed copy finds them there: `ioloom doctor`
passes and `ioloom run` traces an MPI program, run from a directory outside the source tree."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from ioloom import mpi as mpi_impls
from ioloom import paths
from ioloom.trace import open_trace

pytestmark = pytest.mark.slow


def run(*argv, **kwargs) -> subprocess.CompletedProcess:
    out = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=900, **kwargs)
    assert out.returncode == 0, f"{' '.join(map(str, argv))}: exit {out.returncode}\n{out.stdout}\n{out.stderr}"
    return out


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """The sdist, and the wheel `python -m build` makes from it (the native code compiled once, from the sdist)."""
    for module in ("build", "scikit_build_core", "hatchling"):
        pytest.importorskip(module, reason="the test extra is not installed: run scripts/install-python.sh")
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, paths.REPO_ROOT)
    return out


@pytest.fixture(scope="module")
def venv(dist, tmp_path_factory) -> Path:
    """A new virtual environment with the wheel installed. Its dependencies are this environment's packages (a
    path entry, so no download); `pip check` holds them to the ranges the wheel declares."""
    env = tmp_path_factory.mktemp("venv")
    run(sys.executable, "-m", "venv", env)
    (wheel,) = dist.glob("ioloom-*.whl")
    run(env / "bin" / "python", "-m", "pip", "install", "--no-deps", "--disable-pip-version-check", wheel)
    site = Path(run(env / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
                .stdout.strip())
    (site / "ioloom-test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run(env / "bin" / "python", "-m", "pip", "check", "--disable-pip-version-check")
    return env


def user_env() -> dict[str, str]:
    """A user's environment: nothing pointing at the source tree."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "IOLOOM_BUILD_DIR")}


def test_sdist_holds_the_sources_and_the_wheel_the_built_code(dist):
    (sdist,) = dist.glob("ioloom-*.tar.gz")
    (wheel,) = dist.glob("ioloom-*.whl")
    assert wheel.name.endswith("-py3-none-linux_x86_64.whl"), wheel.name
    import tarfile
    import zipfile
    sources = {Path(name).relative_to(Path(name).parts[0]).as_posix() for name in tarfile.open(sdist).getnames()
               if len(Path(name).parts) > 1}
    assert {"native/CMakeLists.txt", "native/trace/writer.c", "scripts/ioloom_backend.py", "LICENSE"} <= sources
    built = set(zipfile.ZipFile(wheel).namelist())
    expected = {"ioloom/native/lib/libioloom-trace.so", "ioloom/native/lib/libioloom-logfs.so",
                "ioloom/native/lib/libioloom-trace-decode.so", "ioloom/report/template.html"}
    for impl in mpi_impls.implementations():
        expected |= {f"ioloom/native/lib/libioloom-trace-mpi-{impl.name}.so",
                     f"ioloom/native/bin/ioloom-bench-{impl.name}"}
    assert expected <= built, sorted(expected - built)
    assert not any(name.startswith(("tests/", "build/")) for name in built)


def test_installed_copy_finds_its_own_build(venv, tmp_path):
    where = run(venv / "bin" / "python", "-c", "from ioloom import paths; print(paths.build_dir(), "
                "paths.in_source_tree())", cwd=tmp_path, env=user_env()).stdout.split()
    assert Path(where[0]).is_relative_to(venv) and where[1] == "False", where
    out = subprocess.run([venv / "bin" / "ioloom", "doctor", "--json"], capture_output=True, text=True, cwd=tmp_path,
                         env=user_env(), timeout=300)
    checks = {c["name"]: c for c in json.loads(out.stdout)}
    assert out.returncode == 0, [c for c in checks.values() if not c["ok"]]
    for impl in mpi_impls.implementations():
        assert f"libioloom-trace-mpi-{impl.name}.so" in checks[f"built for {impl.name}"]["detail"]
    assert checks["preloading"]["ok"] and checks["python numpy"]["ok"]


def test_installed_copy_traces_an_mpi_program(venv, mpi, tmp_path):
    exe = mpi.compile("trace_mpi_posix.c")
    target = tmp_path / "shared.dat"
    prefix = ["ufs:"] if mpi.name == "mpich" else []
    out = run(venv / "bin" / "ioloom", "run", "-o", tmp_path / "trace", "--", *mpi.command(2, [exe, target, *prefix]),
              cwd=tmp_path, env={**user_env(), **mpi.impl.base_env()})
    assert f"trace of 2 process(es) in {tmp_path / 'trace'}" in out.stderr, out.stderr
    trace = open_trace(tmp_path / "trace")
    ops = set(trace.events(["op"]).column("op").to_pylist())
    assert {"pwrite", "MPI_File_write_at"} <= ops, "the package's tracer and its MPI wrappers were preloaded"


def test_installed_copy_says_how_to_add_an_mpi(venv, tmp_path):
    """With MPICH out of sight, doctor still passes on Open MPI alone and says how to add MPICH: its packages, then
    the reinstall that builds the MPI-dependent parts for it too."""
    if "openmpi" not in {impl.name for impl in mpi_impls.implementations()}:
        pytest.skip("needs Open MPI")
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("mpicc.openmpi", "mpiexec.openmpi", "mpifort.openmpi", "pkg-config"):
        (tools / tool).symlink_to(f"/usr/bin/{tool}")
    out = subprocess.run([venv / "bin" / "ioloom", "doctor", "--json"], capture_output=True, text=True, cwd=tmp_path,
                         env={**user_env(), "PATH": str(tools)}, timeout=300)
    checks = {c["name"]: c for c in json.loads(out.stdout)}
    assert out.returncode == 0, [c for c in checks.values() if c["required"] and not c["ok"]]
    mpich = checks["MPI mpich"]
    assert not mpich["ok"] and not mpich["required"]
    assert "apt-get install mpich libmpich-dev" in mpich["fix"], mpich
    assert "pip install --force-reinstall --no-deps --no-cache-dir" in mpich["fix"], mpich
