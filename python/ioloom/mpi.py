"""The MPI implementations on this machine: how to compile for them, launch them, and recognise them.

Open MPI and MPICH have different ABIs, so every MPI-dependent ioloom library exists once per
implementation and ioloom must know which one a program uses.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


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

    def launch_env(self) -> dict[str, str]:
        """Environment a launch needs on top of the caller's (Open MPI refuses root without these)."""
        if self.name == "openmpi" and os.geteuid() == 0:
            return {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
        return {}

    def version(self) -> str:
        """First line the launcher prints about its version."""
        out = subprocess.run([self.mpiexec, "--version"], capture_output=True, text=True, timeout=30,
                             env={**os.environ, **self.launch_env()})
        lines = [" ".join(line.split()) for line in (out.stdout + out.stderr).splitlines() if line.strip()]
        return next((line for line in lines if "version" in line.lower()), lines[0] if lines else "")


KNOWN = (
    MpiImpl("openmpi", "mpicc.openmpi", "mpifort.openmpi", "mpiexec.openmpi",
            ("orterun", "mpirun.openmpi", "mpiexec.openmpi", "prterun"), ("libmpi.so.40",)),
    MpiImpl("mpich", "mpicc.mpich", "mpifort.mpich", "mpiexec.mpich",
            ("mpiexec.hydra", "mpiexec.mpich", "mpirun.mpich"), ("libmpich.so.12",)),
)


def implementations() -> list[MpiImpl]:
    """The MPIs whose compiler and launcher are both installed."""
    found = []
    for impl in KNOWN:
        if shutil.which(impl.mpicc) and shutil.which(impl.mpiexec):
            fort = impl.mpifort if impl.mpifort and shutil.which(impl.mpifort) else None
            found.append(dataclasses.replace(impl, mpifort=fort))
    return found


def by_name(name: str) -> MpiImpl:
    for impl in implementations():
        if impl.name == name:
            return impl
    known = ", ".join(i.name for i in implementations()) or "none"
    raise LookupError(f"MPI implementation {name!r} is not installed here (found: {known})")


def _launcher_impl(program: str) -> MpiImpl | None:
    path = shutil.which(program)
    if not path:
        return None
    real = Path(path).resolve().name
    return next((impl for impl in KNOWN if real in impl.launchers or Path(program).name in impl.launchers), None)


def _linked_impl(program: str) -> MpiImpl | None:
    path = shutil.which(program) or (program if os.path.isfile(program) else None)
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"\x7fELF":
                return None
        out = subprocess.run(["ldd", path], capture_output=True, text=True, timeout=30).stdout
    except OSError:
        return None
    return next((impl for impl in KNOWN if any(so in out for so in impl.sonames)), None)


def detect(argv: list[str]) -> MpiImpl | None:
    """Which MPI a command uses: the launcher it starts with, else the first argument linked against an MPI."""
    if not argv:
        return None
    impl = _launcher_impl(argv[0])
    if impl is None:
        impl = next((found for found in map(_linked_impl, argv) if found), None)
    return impl
