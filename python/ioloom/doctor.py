"""`ioloom doctor`: is everything ioloom needs here, and if not, how to fix it."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from importlib import metadata

import typer
from packaging.requirements import Requirement
from rich.console import Console
from rich.table import Table

from ioloom import __version__, mpi, paths

# What each MPI's compiler, launcher and headers come in (Debian); the MPI-dependent parts are built for it only
# when they are there at build time.
MPI_PACKAGES = {"openmpi": "openmpi-bin libopenmpi-dev", "mpich": "mpich libmpich-dev"}
INSTALL_PYTHON = (f"run `scripts/install-python.sh` in {paths.REPO_ROOT}" if paths.in_source_tree() else
                  "pip install --force-reinstall ioloom (it installs the versions it needs)")


def install_hint(packages: str) -> str:
    if paths.in_source_tree():
        return f"run `scripts/install-deps.sh` in {paths.REPO_ROOT} (as root)"
    return f"as root: apt-get install {packages}"


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True


def add_mpi_hint(name: str) -> str:
    """How to add an MPI later: its packages, then a rebuild, which builds the MPI-dependent parts for it too (in a
    source tree, once CMake has looked for MPIs again)."""
    configure = f"`cmake {paths.build_dir()}` (to find it), " if paths.in_source_tree() else ""
    return f"{install_hint(MPI_PACKAGES[name])}, then {configure}{paths.rebuild_hint()}"


def check_mpis() -> list[Check]:
    """Every MPI found; one is needed, each missing one is a warning saying how to add it."""
    found = mpi.implementations()
    checks = [Check(f"MPI {impl.name}", True, f"{impl.version()} ({impl.mpicc}, {impl.mpiexec})") for impl in found]
    for name in sorted({impl.name for impl in mpi.KNOWN} - {impl.name for impl in found}):
        checks.append(Check(f"MPI {name}", False, "compiler or launcher not found", add_mpi_hint(name),
                            required=not found))
    return checks


def check_builds() -> list[Check]:
    """What was built, for each MPI (every product whose name ends in -<impl>) and for all."""
    build = paths.build_dir()
    products = sorted(p.name for d in ("lib", "bin") if (build / d).is_dir() for p in (build / d).iterdir()
                      if not p.name.endswith(".a"))
    checks = []
    for impl in mpi.implementations():
        mine = [p for p in products if p.removesuffix(".so").endswith(f"-{impl.name}")]
        checks.append(Check(f"built for {impl.name}", bool(mine), ", ".join(mine) or f"nothing in {build}",
                            add_mpi_hint(impl.name)))
    common = [p for p in products if not any(p.removesuffix(".so").endswith(f"-{i.name}") for i in mpi.KNOWN)]
    checks.append(Check("built, MPI-independent", bool(common), ", ".join(common) or f"nothing in {build}",
                        paths.rebuild_hint()))
    return checks


def check_hdf5() -> Check:
    h5pcc = shutil.which("h5pcc")
    pkg = subprocess.run(["pkg-config", "--modversion", "hdf5-mpich"], capture_output=True, text=True) \
        if shutil.which("pkg-config") else None
    version = pkg.stdout.strip() if pkg and pkg.returncode == 0 else ""
    ok = bool(h5pcc and version)
    detail = f"parallel HDF5 {version} (MPICH), {h5pcc}" if ok else \
        "h5pcc or hdf5-mpich.pc not found (needed by `ioloom bench io -a hdf5` and the FLASH-IO kernel)"
    return Check("HDF5", ok, detail, f"{install_hint('libhdf5-mpich-dev hdf5-tools')}, then {paths.rebuild_hint()}",
                 required=False)


def check_python() -> list[Check]:
    """Every package ioloom needs to run is installed, in the range it declares."""
    try:
        requirements = [Requirement(text) for text in metadata.requires("ioloom") or []]
    except metadata.PackageNotFoundError:
        return [Check("python packages", False, "ioloom is not installed in this Python", INSTALL_PYTHON,
                      required=False)]
    checks = []
    for req in requirements:
        if req.marker and not req.marker.evaluate({"extra": ""}):
            continue  # an extra's (tests): not needed to run
        try:
            have = metadata.version(req.name)
            checks.append(Check(f"python {req.name}", req.specifier.contains(have, prereleases=True),
                                f"{have} (wanted {req.specifier})", INSTALL_PYTHON))
        except metadata.PackageNotFoundError:
            checks.append(Check(f"python {req.name}", False, "not installed", INSTALL_PYTHON))
    return checks


def check_preload() -> Check:
    """Preloading works if a program started with the tracer in LD_PRELOAD runs and the loader says nothing."""
    try:
        lib = paths.native_lib("ioloom-trace")
    except paths.NativeMissing as missing:
        return Check("preloading", False, str(missing), paths.rebuild_hint())
    env = {**os.environ, "LD_PRELOAD": str(lib), "IOLOOM_TRACE_DIR": tempfile.mkdtemp(prefix="ioloom-doctor-")}
    try:
        out = subprocess.run(["/bin/true"], env=env, capture_output=True, text=True, timeout=30)
    finally:
        shutil.rmtree(env["IOLOOM_TRACE_DIR"], ignore_errors=True)
    ok = out.returncode == 0 and "LD_PRELOAD" not in out.stderr
    return Check("preloading", ok, f"LD_PRELOAD={lib.name}: " + ("works" if ok else out.stderr.strip()[:200]),
                 "a setuid program or a static binary cannot be preloaded; check the loader message above")


def check_trace_dir() -> Check:
    root = paths.trace_root()
    probe = root if root.exists() else next(p for p in [root, *root.parents] if p.exists())
    ok = os.access(probe, os.W_OK)
    return Check("trace directory", ok, f"{root} ({'writable' if ok else 'not writable'})",
                 "set IOLOOM_TRACE_DIR to a writable directory, or pass -o DIR to `ioloom run`")


def check_browser() -> Check:
    browser = shutil.which("chromium")
    return Check("browser", bool(browser), browser or "chromium not found (used to test the HTML report)",
                 install_hint("chromium"), required=False)


def run_checks() -> list[Check]:
    return [*check_mpis(), *check_builds(), check_hdf5(), *check_python(), check_preload(), check_trace_dir(),
            check_browser()]


def command(as_json: bool = typer.Option(False, "--json", help="Print the checks as JSON.")) -> None:
    """Check MPI implementations, built libraries, HDF5, Python packages, preloading and the trace directory."""
    checks = run_checks()
    if as_json:
        print(json.dumps([asdict(c) for c in checks], indent=2))
    else:
        title = f"ioloom doctor ({__version__}; native build: {paths.build_dir()})"
        table = Table("check", "", "detail", "fix", title=title)
        for c in checks:
            mark = "[green]ok[/]" if c.ok else ("[red]FAIL[/]" if c.required else "[yellow]warn[/]")
            table.add_row(c.name, mark, c.detail, "" if c.ok else c.fix)
        Console().print(table)
    if any(c.required and not c.ok for c in checks):
        raise typer.Exit(1)
