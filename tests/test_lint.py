"""The tree is clean under the project's linters, as configured: ruff and mypy (pyproject.toml) over the Python,
clang-format (.clang-format) over native/ and tests/programs/. The tools are the pinned ones of the test extra
(constraints.txt), run from the environment running the tests, so every checkout formats and checks the same way."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ioloom import paths

ROOT = paths.REPO_ROOT
BIN = Path(sys.executable).parent  # the environment of the test extra (scripts/install-python.sh)
NATIVE_SUFFIXES = (".c", ".h", ".cpp", ".hpp")


def _tool(name: str) -> str:
    found = BIN / name
    if not found.exists():
        pytest.fail(f"{name} is not installed in {BIN}; install the test extra: pip install -c constraints.txt "
                    f"-e '.[test]'")
    return str(found)


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing():
    out = _run([_tool("ruff"), "check", "--no-cache", "--output-format", "concise"])
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_finds_nothing():
    out = _run([_tool("mypy")])  # files and settings from [tool.mypy]
    assert out.returncode == 0, out.stdout + out.stderr


def c_sources() -> list[str]:
    listed = _run(["git", "ls-files", "native", "tests/programs"]).stdout.split()
    return [name for name in listed if name.endswith(NATIVE_SUFFIXES)]


def test_native_code_is_formatted():
    sources = c_sources()
    assert len(sources) > 50  # the listing found the tree (git ls-files from the checkout)
    out = _run([_tool("clang-format"), "--dry-run", "--Werror", *sources])
    unformatted = sorted({line.split(":")[0] for line in out.stderr.splitlines() if ": error:" in line})
    assert out.returncode == 0, f"not formatted as .clang-format says (run clang-format -i on them): {unformatted}"


def test_the_checks_can_fail(tmp_path):
    """Each tool reports what it is there to catch, so a clean run above means a clean tree."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\n\ndef f(x: int) -> str:\n    return x\n")
    assert _run([_tool("ruff"), "check", "--no-cache", "--isolated", str(bad)]).returncode == 1  # F401
    assert _run([_tool("mypy"), "--no-incremental", str(bad)]).returncode == 1  # int returned as str
    c = tmp_path / "bad.c"
    c.write_text("int  f( void ){return 1;}\n")
    assert _run([_tool("clang-format"), f"--style=file:{ROOT / '.clang-format'}", "--dry-run", "--Werror",
                 str(c)]).returncode != 0
