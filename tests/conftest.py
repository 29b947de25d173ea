"""Shared test harness: real MPI programs under every MPI implementation found here."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from ioloom import mpi as mpi_impls
from ioloom import paths, run

PROGRAMS = Path(__file__).parent / "programs"
COMPILED = paths.REPO_ROOT / "build" / "tests"


def build_program(source: str | Path, *flags: str, compiler: str | None = None, under: str = "") -> Path:
    """tests/programs/<source> (or a path) built with `compiler -O2` (gcc, gfortran for Fortran) and flags, once:
    the executable (or, with -shared, the library) is kept under build/tests/<under>, named by a digest of the
    compiler, the flags, the source and the C sources and headers in its -I directories (a program may include
    one), so a change to any of them builds it again. Every test program is built here."""
    source = Path(source) if Path(source).is_absolute() else PROGRAMS / source
    compiler = compiler or ("gfortran" if source.suffix in (".f90", ".f") else "gcc")
    included = [p for flag in flags if flag.startswith("-I") for p in sorted(Path(flag[2:]).glob("*.[ch]"))]
    text = b"".join(p.read_bytes() for p in [source, *included])
    key = hashlib.sha256(text + " ".join((compiler, *flags)).encode()).hexdigest()[:12]
    exe = COMPILED / under / f"{source.stem}-{key}"
    if not exe.exists():
        exe.parent.mkdir(parents=True, exist_ok=True)
        tmp = exe.with_suffix(".tmp")
        subprocess.run([compiler, "-O2", "-o", str(tmp), str(source), *flags], check=True)
        tmp.rename(exe)
    return exe


@dataclass
class MpiRunner:
    """One MPI implementation, with helpers to compile and launch test programs under it."""
    impl: mpi_impls.MpiImpl

    @property
    def name(self) -> str:
        return self.impl.name

    def compile(self, source: str | Path, *flags: str, compiler: str | None = None) -> Path:
        """tests/programs/<source> (or a path) built with this implementation's mpicc (mpifort for Fortran)."""
        fortran = Path(source).suffix in (".f90", ".f")
        return build_program(source, *flags, compiler=compiler or (self.impl.mpifort if fortran else self.impl.mpicc),
                             under=self.name)

    def command(self, nranks: int, argv: list[str | Path]) -> list[str]:
        return self.impl.launch(nranks, [str(a) for a in argv])

    def trace(self, nranks: int, argv: list[str | Path], out: Path, timeout: float) -> None:
        """argv on nranks ranks traced into out as `ioloom run -o OUT -- LAUNCH` traces it (run.trace: the same
        libraries, layers and environment), from this process: no Python started and no summary read per run; a
        launch still running after timeout seconds is killed (TimeoutError)."""
        launch = self.command(nranks, argv)
        layers = list(run.LAYERS)
        code = run.trace(launch, out, layers, run.libraries(launch, layers), self.impl.base_env(), timeout)
        assert code == 0, f"{self.name}: {' '.join(launch)} exit {code} (its output is in the captured output)"

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of a launch made under `ioloom run`, which preloads the launch's own libraries
        (MpiImpl.base_env); run()'s direct launches take MpiImpl.launch_env."""
        return {**os.environ, **self.impl.base_env(), **(extra or {})}

    def run(self, nranks: int, argv: list[str | Path], env: dict[str, str] | None = None, timeout: float = 180,
            check: bool = True, cwd: str | Path | None = None) -> subprocess.CompletedProcess:
        """Launch argv on nranks ranks; on failure the assertion shows what MPI printed."""
        out = subprocess.run(self.command(nranks, argv), env={**os.environ, **self.impl.launch_env(nranks, env)},
                             capture_output=True, text=True, timeout=timeout, cwd=cwd)
        if check:
            assert out.returncode == 0, f"{self.name} exit {out.returncode}\n{out.stdout}\n{out.stderr}"
        return out


def _implementations() -> list[mpi_impls.MpiImpl]:
    found = mpi_impls.implementations()
    if not found:
        pytest.exit("no MPI implementation found: run `make build` (it installs Open MPI and MPICH)", returncode=2)
    return found


MPI_NAMES = [impl.name for impl in mpi_impls.implementations()] or ["none"]


def _runner(name: str) -> MpiRunner:
    return MpiRunner(next((i for i in _implementations() if i.name == name), None))


@pytest.fixture(params=MPI_NAMES)
def mpi(request) -> MpiRunner:
    """Each test that takes `mpi` runs once per MPI implementation installed."""
    return _runner(request.param)


@pytest.fixture(scope="module", params=MPI_NAMES)
def module_mpi(request) -> MpiRunner:
    """`mpi` for a module-scoped fixture: a program traced once per MPI, and the trace read by several tests."""
    return _runner(request.param)


@pytest.fixture(scope="session")
def logfs_shim() -> Path:
    """tests/programs/logfs_next_shim.c: a preloaded tool that counts the calls logfs's code makes."""
    return build_program("logfs_next_shim.c", "-shared", "-fPIC", "-ldl")


@pytest.fixture
def ioloom_cli():
    """Run the ioloom command line as a user would, in a subprocess."""
    def run(*args: str | Path, check: bool = True, env: dict[str, str] | None = None, cwd=None,
            timeout: float = 600) -> subprocess.CompletedProcess:
        out = subprocess.run([sys.executable, "-m", "ioloom", *map(str, args)], capture_output=True, text=True,
                             env={**os.environ, **(env or {})}, cwd=cwd, timeout=timeout)
        if check:
            assert out.returncode == 0, \
                f"ioloom {' '.join(map(str, args))} exit {out.returncode}\n{out.stdout}\n{out.stderr}"
        return out
    return run


@pytest.fixture
def small_fs(tmp_path):
    """small_fs(size) mounts a tmpfs of `size` (e.g. "64k") and returns its path: a real disk that fills up. Skips
    where mounting needs a right the user lacks (CI runs as root); each mount is detached at the end, even if a
    process still holds it."""
    mounts: list[Path] = []

    def mount(size: str) -> Path:
        where = tmp_path / f"small-{len(mounts)}"
        where.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                              capture_output=True, text=True)
        if done.returncode:
            pytest.skip(f"cannot mount a {size} tmpfs here (needs root): {done.stderr.strip()}")
        mounts.append(where)
        return where
    yield mount
    for where in mounts:
        subprocess.run(["umount", "--lazy", str(where)], check=True)


@pytest.fixture
def disk_tmp_path(tmp_path):
    """A fresh directory on a file system that drops pages on posix_fadvise(DONTNEED): tmp_path, or, where the
    temporary directory is a tmpfs (which keeps its pages), one under the build directory; skips if both are."""
    def on_tmpfs(path: Path) -> bool:
        kind = subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True, check=True)
        return kind.stdout.strip() == "tmpfs"
    if not on_tmpfs(tmp_path):
        yield tmp_path
        return
    (paths.REPO_ROOT / "build").mkdir(exist_ok=True)
    if on_tmpfs(paths.REPO_ROOT / "build"):
        pytest.skip("the temporary directory and the build directory are both tmpfs: nothing can be evicted")
    with tempfile.TemporaryDirectory(dir=paths.REPO_ROOT / "build", prefix="disk-tmp-") as where:
        yield Path(where)
