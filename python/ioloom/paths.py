"""Where ioloom's native build products and traces live.

The native libraries and programs are looked for in one directory, with lib/ and bin/ inside:
- IOLOOM_BUILD_DIR, when set;
- in a source tree (this package imported from python/ioloom of a checkout), its build/native, which `make build`
  fills (the editable install of scripts/install-python.sh builds nothing);
- otherwise ioloom/native inside the installed package, which `pip install` filled (pyproject.toml).
"""
import json
import os
from importlib import metadata
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
# The checkout this package was imported from, if it was (see in_source_tree); tests and `make` live there.
REPO_ROOT = PACKAGE_DIR.parents[1]
# the demo's program (scripts/demo.sh: 4 ranks writing 64 strided blocks of 4 KiB each through MPI-IO)
DEMO_SOURCE = REPO_ROOT / "examples" / "strided_mpiio.c"


class NativeMissing(FileNotFoundError):
    """A native library or program has not been built."""


def in_source_tree() -> bool:
    """Whether this package runs from a checkout (its native sources beside it) rather than an installed copy."""
    return (REPO_ROOT / "native" / "CMakeLists.txt").is_file()


def build_dir() -> Path:
    """The directory holding lib/ and bin/ of the native build (override with IOLOOM_BUILD_DIR)."""
    if "IOLOOM_BUILD_DIR" in os.environ:
        return Path(os.environ["IOLOOM_BUILD_DIR"])
    return REPO_ROOT / "build" / "native" if in_source_tree() else PACKAGE_DIR / "native"


def installed_from() -> str:
    """What `pip install` was given for this copy (a path or URL recorded by pip, PEP 610), else the name."""
    try:
        direct = metadata.distribution("ioloom").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        direct = None
    url = json.loads(direct)["url"] if direct else ""
    return url.removeprefix("file://") if url and not url.endswith(".whl") else "ioloom"


def rebuild_hint() -> str:
    """How to build the native parts again (after installing an MPI, say), for the way this copy was installed:
    the MPI-dependent ones are built for every MPI whose development package is installed at build time."""
    if in_source_tree():
        return f"run `make build` in {REPO_ROOT}"
    origin = installed_from()
    no_binary = " --no-binary ioloom" if origin == "ioloom" else ""
    return f"rebuild ioloom: pip install --force-reinstall --no-deps --no-cache-dir{no_binary} {origin}"


def _built(path: Path) -> Path:
    if not path.exists():
        raise NativeMissing(f"{path.name} is not built (looked in {path.parent}); {rebuild_hint()}")
    return path


def native_lib(name: str) -> Path:
    """Path of lib/lib<name>.so in the build directory, e.g. native_lib('ioloom-trace')."""
    return _built(build_dir() / "lib" / f"lib{name}.so")


def native_bin(name: str) -> Path:
    """Path of bin/<name> in the build directory, e.g. native_bin('ioloom-bench-mpich')."""
    return _built(build_dir() / "bin" / name)


def trace_root() -> Path:
    """Where `ioloom run` writes traces unless told otherwise (IOLOOM_TRACE_DIR, else ./ioloom-traces)."""
    return Path(os.environ.get("IOLOOM_TRACE_DIR", Path.cwd() / "ioloom-traces"))
