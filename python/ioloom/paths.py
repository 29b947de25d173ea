"""Where ioloom's native build products and traces live."""
import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


class NativeMissing(FileNotFoundError):
    """A native library or program has not been built."""


def build_dir() -> Path:
    """The CMake build directory (override with IOLOOM_BUILD_DIR)."""
    return Path(os.environ.get("IOLOOM_BUILD_DIR", REPO_ROOT / "build" / "native"))


def _built(path: Path) -> Path:
    if not path.exists():
        raise NativeMissing(f"{path.name} is not built (looked in {path.parent}); run `make build` in {REPO_ROOT}")
    return path


def native_lib(name: str) -> Path:
    """Path of build/native/lib/lib<name>.so, e.g. native_lib('ioloom-trace')."""
    return _built(build_dir() / "lib" / f"lib{name}.so")


def native_bin(name: str) -> Path:
    """Path of build/native/bin/<name>, e.g. native_bin('ioloom-bench-mpich')."""
    return _built(build_dir() / "bin" / name)


def trace_root() -> Path:
    """Where `ioloom run` writes traces unless told otherwise (IOLOOM_TRACE_DIR, else ./ioloom-traces)."""
    return Path(os.environ.get("IOLOOM_TRACE_DIR", Path.cwd() / "ioloom-traces"))
