"""The MPI implementations on this machine: how to compile for them, launch them, and recognise them.

Open MPI and MPICH have different ABIs, so every MPI-dependent ioloom library exists once per
implementation and ioloom must know which one a program uses.
"""
from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ioloom import paths


@dataclass(frozen=True)
class MpiImpl:
    name: str  # "openmpi" or "mpich": the suffix of ioloom's per-MPI build products
    mpicc: str
    mpifort: str | None
    mpiexec: str
    launchers: tuple[str, ...]  # real file names of its launcher, after symlinks are resolved
    sonames: tuple[str, ...]  # shared libraries a program linked against it needs

    def launch(self, nranks: int, argv: list[str]) -> list[str]:
        """A launch command that works as root, with more ranks than cores, on loopback only."""
        if self.name == "openmpi":
            extra = ["--oversubscribe", "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo"]
        else:
            extra = ["-iface", "lo"]
        return [self.mpiexec, "-n", str(nranks), *extra, *argv]

    def base_env(self) -> dict[str, str]:
        """What any run of this MPI's launcher needs on top of the caller's environment, whatever it launches: Open
        MPI refuses root without two settings. A launch made under `ioloom run` takes this alone (ioloom run
        preloads the launch's libraries itself, run.launcher_libraries, from the rank count on its command line);
        a launch made directly takes launch_env(nranks)."""
        if self.name == "openmpi" and os.geteuid() == 0:
            return {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
        return {}

    def launch_env(self, nranks: int, extra: dict[str, str] | None = None) -> dict[str, str]:
        """Environment a direct launch of `nranks` ranks (1 for a program run as a singleton) needs on top of the
        caller's, with the caller's own additions (`extra`) in it: base_env(), and idle_yield(nranks) preloaded
        after the caller's LD_PRELOAD (extra's, else this process's). The rank count has no default: a launch that
        left it out got no idle yield. A caller setting its own LD_PRELOAD gives it in `extra`, not over the
        result (which would drop the library)."""
        env = {**(extra or {}), **self.base_env()}
        libs = self.idle_yield(nranks)
        if libs:
            first = env.get("LD_PRELOAD", os.environ.get("LD_PRELOAD", ""))
            env["LD_PRELOAD"] = ":".join([first, *map(str, libs)] if first else map(str, libs))
        return env

    def idle_yield(self, nranks: int) -> list[Path]:
        """What makes this launch's waiting ranks give their core away, when it needs it: libioloom-idle-yield.so
        (native/launch) sleeps briefly when a progress call finds nothing (docs/ARCHITECTURE.md, "Launching MPI").
        MPICH's ch4:ucx waits by polling and never yields, at any rank count: with more ranks than cores each
        collective step waits for the spinning ranks' time slices, and on a loaded machine ranks that fit the cores
        poll against the other programs' work, so every MPICH launch gets it. Open MPI polls when its ranks fit the
        cores and calls sched_yield when oversubscribed (mpi_yield_when_idle), which leaves a waiting rank runnable:
        it gets the library when oversubscribed."""
        if self.name == "mpich" or nranks > cpus():
            return [paths.native_lib("ioloom-idle-yield")]
        return []

    def build(self, source: Path, directory: Path) -> Path:
        """`source` (C) compiled with this MPI's mpicc -O2 into directory/<its stem>-<this MPI's name>, again only
        when the source is newer than the program (written under another name and renamed, so an interrupted
        build leaves none); BuildFailed, saying why in one line, when the source or the compiler is missing or the
        compiler fails."""
        exe = directory / f"{source.stem}-{self.name}"
        if not source.is_file():
            raise BuildFailed(f"{source} is missing: the programs need a source checkout of ioloom")
        if exe.exists() and exe.stat().st_mtime >= source.stat().st_mtime:
            return exe
        if not shutil.which(self.mpicc):
            raise BuildFailed(f"{self.mpicc} is not installed (scripts/install-deps.sh installs it)")
        building = exe.with_name(f".{exe.name}.{os.getpid()}")
        done = subprocess.run([self.mpicc, "-O2", "-o", str(building), str(source)], capture_output=True, text=True)
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines() or ["no message"]
            first_error = next((line for line in lines if "error" in line), lines[-1])
            raise BuildFailed(f"{self.mpicc} could not build {source.name}: {first_error.strip()}")
        return building.replace(exe)

    def version(self) -> str:
        """First line the launcher prints about its version."""
        out = subprocess.run([self.mpiexec, "--version"], capture_output=True, text=True, timeout=30,
                             env={**os.environ, **self.base_env()})
        lines = [" ".join(line.split()) for line in (out.stdout + out.stderr).splitlines() if line.strip()]
        return next((line for line in lines if "version" in line.lower()), lines[0] if lines else "")


class BuildFailed(RuntimeError):
    """A program MpiImpl.build could not build: why, in one line."""


def cpus() -> int:
    """The cores this process may run on (its affinity mask), where ioloom's launches put their ranks."""
    return len(os.sched_getaffinity(0))


def launched_ranks(argv: list[str]) -> int:
    """The rank count an mpiexec command line asks for (`-n N` or `-np N`), 0 if it names none."""
    counts = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg in ("-n", "-np")]
    return int(counts[0]) if counts and counts[0].isdigit() else 0


KNOWN = (
    MpiImpl("openmpi", "mpicc.openmpi", "mpifort.openmpi", "mpiexec.openmpi",
            ("orterun", "mpirun.openmpi", "mpiexec.openmpi", "prterun"), ("libmpi.so.40",)),
    MpiImpl("mpich", "mpicc.mpich", "mpifort.mpich", "mpiexec.mpich",
            ("mpiexec.hydra", "mpiexec.mpich", "mpirun.mpich"), ("libmpich.so.12",)),
)


PYTHON = re.compile(r"python[0-9.]*")  # names of Python interpreters, whose MPI is their mpi4py's


def implementations() -> list[MpiImpl]:
    """The MPIs whose compiler and launcher are both installed."""
    found = []
    for impl in KNOWN:
        if shutil.which(impl.mpicc) and shutil.which(impl.mpiexec):
            fort = impl.mpifort if impl.mpifort and shutil.which(impl.mpifort) else None
            found.append(dataclasses.replace(impl, mpifort=fort))
    return found


class MpiNotFound(LookupError):
    """The MPI implementation asked for is not installed."""


def by_name(name: str) -> MpiImpl:
    for impl in implementations():
        if impl.name == name:
            return impl
    known = ", ".join(i.name for i in implementations()) or "none"
    raise MpiNotFound(f"MPI implementation {name!r} is not installed here (found: {known}); name one of those, or "
                      "run `make build` to install both")


def chosen(name: str | None) -> MpiImpl | None:
    """The MPI named (MpiNotFound if it is not installed); without a name MPICH when present (Debian's parallel
    HDF5 is built for it), else the first MPI found, else None."""
    if name:
        return by_name(name)
    found = {i.name: i for i in implementations()}
    return found.get("mpich") or next(iter(found.values()), None)


def launcher_impl(program: str) -> MpiImpl | None:
    path = shutil.which(program)
    if not path:
        return None
    real = Path(path).resolve().name
    return next((impl for impl in KNOWN if real in impl.launchers or Path(program).name in impl.launchers), None)


def _elf(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def _ldd_impl(path: str) -> MpiImpl | None:
    """The MPI whose library an ELF file needs (directly or through its dependencies)."""
    try:
        out = subprocess.run(["ldd", path], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return next((impl for impl in KNOWN if any(so in out for so in impl.sonames)), None)


def _resolve(arg: str) -> str | None:
    path = shutil.which(arg) if "/" not in arg else None
    return path or (arg if os.path.isfile(arg) else None)


def _shebang_python(path: str) -> str | None:
    """The Python interpreter a script names on its #! line (`#!/usr/bin/env python3` included)."""
    try:
        with open(path, "rb") as f:
            line = f.readline(256).decode(errors="replace")
    except OSError:
        return None
    words = line[2:].split() if line.startswith("#!") else []
    words = words[1:] if words and Path(words[0]).name == "env" else words
    return _resolve(words[0]) if words and PYTHON.fullmatch(Path(words[0]).name) else None


def _mpi4py_extension(python: str) -> str | None:
    """The compiled MPI module of the mpi4py that `python` would import (found without importing it, which
    would start MPI), or None."""
    probe = ("import glob, importlib.util as u, os; s = u.find_spec('mpi4py'); "
             "print(next(iter(glob.glob(os.path.join(s.submodule_search_locations[0], 'MPI*.so'))), '') if s else '')")
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    try:
        out = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=30, env=env).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.strip() or None


def _linked(arg: str) -> tuple[MpiImpl, str] | None:
    """(MPI, the file that links it) for one argument: an ELF program linked against an MPI, or a Python
    interpreter (or a script whose #! line names one) whose mpi4py is."""
    path = _resolve(arg)
    if not path:
        return None
    python = path if _elf(path) and PYTHON.fullmatch(Path(path).name) else _shebang_python(path)
    if python:
        extension = _mpi4py_extension(python)
        impl = _ldd_impl(extension) if extension else None
        return (impl, extension) if impl and extension else None
    impl = _ldd_impl(path) if _elf(path) else None
    return (impl, path) if impl else None


@dataclass(frozen=True)
class Detected:
    """Which MPI a command uses. `program`: the MPI the program itself links (the first argument that links
    one), with the file that showed it; `launcher`: the MPI whose launcher starts the command."""
    launcher: MpiImpl | None
    program: MpiImpl | None
    evidence: str | None

    @property
    def impl(self) -> MpiImpl | None:
        """The program's own MPI decides (the wrappers must match the library the program loads); the
        launcher's only when the program's cannot be found."""
        return self.program or self.launcher

    def disagreement(self) -> str | None:
        if not (self.launcher and self.program) or self.launcher == self.program:
            return None
        return (f"the launcher is {self.launcher.name}'s but {self.evidence} links {self.program.name} "
                f"({', '.join(self.program.sonames)}): loading ioloom's {self.program.name} wrappers; a program "
                f"started by another MPI's launcher usually runs every process as its own one-rank job")


def examine(argv: list[str]) -> Detected:
    """The launcher argv starts with (if any) and the MPI of the first argument that links one."""
    if not argv:
        return Detected(None, None, None)
    found = next((hit for hit in map(_linked, argv) if hit), None)
    return Detected(launcher_impl(argv[0]), found[0] if found else None, found[1] if found else None)


def detect(argv: list[str]) -> MpiImpl | None:
    """Which MPI's wrappers a command needs (see Detected.impl)."""
    return examine(argv).impl
