"""`ioloom doctor`: is everything ioloom needs here, and if not, how to fix it."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from ioloom import mpi, paths

MAKE_BUILD = f"run `make build` in {paths.REPO_ROOT}"
INSTALL_DEPS = f"run `scripts/install-deps.sh` in {paths.REPO_ROOT} (as root)"


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True


def check_mpis() -> list[Check]:
    found = mpi.implementations()
    checks = [Check(f"MPI {impl.name}", True, f"{impl.version()} ({impl.mpicc}, {impl.mpiexec})") for impl in found]
    for name in {impl.name for impl in mpi.KNOWN} - {impl.name for impl in found}:
        checks.append(Check(f"MPI {name}", False, "compiler or launcher not found", INSTALL_DEPS))
    return checks


def check_builds() -> list[Check]:
    """What was built for each MPI: every product whose name ends in -<impl>."""
    build = paths.build_dir()
    products = sorted(p.name for d in ("lib", "bin") if (build / d).is_dir() for p in (build / d).iterdir()
                      if not p.name.endswith(".a"))
    checks = []
    for impl in mpi.implementations():
        mine = [p for p in products if p.removesuffix(".so").endswith(f"-{impl.name}")]
        checks.append(Check(f"built for {impl.name}", bool(mine), ", ".join(mine) or f"nothing in {build}", MAKE_BUILD))
    common = [p for p in products if not any(p.removesuffix(".so").endswith(f"-{i.name}") for i in mpi.KNOWN)]
    checks.append(Check("built, MPI-independent", bool(common), ", ".join(common) or f"nothing in {build}", MAKE_BUILD))
    return checks


def check_hdf5() -> Check:
    h5pcc = shutil.which("h5pcc")
    pkg = subprocess.run(["pkg-config", "--modversion", "hdf5-mpich"], capture_output=True, text=True) \
        if shutil.which("pkg-config") else None
    ok = bool(h5pcc and pkg and pkg.returncode == 0)
    detail = f"parallel HDF5 {pkg.stdout.strip()} (MPICH), {h5pcc}" if ok else "h5pcc or hdf5-mpich.pc not found"
    return Check("HDF5", ok, detail, INSTALL_DEPS)


def check_python() -> list[Check]:
    checks = []
    for requirement in metadata.requires("ioloom") or []:
        if "extra ==" in requirement:
            continue
        name, _, wanted = requirement.partition("==")
        try:
            have = metadata.version(name)
            checks.append(Check(f"python {name}", have == wanted, f"{have} (pinned {wanted})",
                                f"run `{paths.REPO_ROOT}/.venv/bin/pip install -e {paths.REPO_ROOT}`"))
        except metadata.PackageNotFoundError:
            checks.append(Check(f"python {name}", False, "not installed", MAKE_BUILD))
    return checks


def check_preload() -> Check:
    """Preloading works if a program started with the tracer in LD_PRELOAD runs and the loader says nothing."""
    try:
        lib = paths.native_lib("ioloom-trace")
    except paths.NativeMissing as missing:
        return Check("preloading", False, str(missing), MAKE_BUILD)
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
                 INSTALL_DEPS, required=False)


def run_checks() -> list[Check]:
    return [*check_mpis(), *check_builds(), check_hdf5(), *check_python(), check_preload(), check_trace_dir(),
            check_browser()]


def command(as_json: bool = typer.Option(False, "--json", help="Print the checks as JSON.")) -> None:
    """Check MPI implementations, built libraries, HDF5, Python packages, preloading and the trace directory."""
    checks = run_checks()
    if as_json:
        print(json.dumps([asdict(c) for c in checks], indent=2))
    else:
        table = Table("check", "", "detail", "fix", title=f"ioloom doctor ({paths.REPO_ROOT})")
        for c in checks:
            mark = "[green]ok[/]" if c.ok else ("[red]FAIL[/]" if c.required else "[yellow]warn[/]")
            table.add_row(c.name, mark, c.detail, "" if c.ok else c.fix)
        Console().print(table)
    if any(c.required and not c.ok for c in checks):
        raise typer.Exit(1)
