"""The complete C and Python examples of docs/async.md work as printed: the C program, built against each MPI's
libioloom-async with the page's configuration, writes an output the page's Python code reads and checks."""
from __future__ import annotations

import re

import pytest

from ioloom import paths

PAGE = (paths.REPO_ROOT / "docs" / "async.md").read_text()


def block(language: str) -> str:
    """The page's first fenced block in that language."""
    return re.search(rf"```{language}\n(.*?)```", PAGE, re.S).group(1)


@pytest.mark.parametrize("mode", ["dedicated-cores", "helper-thread"])
def test_documented_examples(mpi, tmp_path, monkeypatch, mode):
    source = tmp_path / "example.c"
    source.write_text(block("c"))
    lib = paths.build_dir() / "lib"
    exe = mpi.compile(source, f"-I{paths.REPO_ROOT / 'native' / 'async'}", f"-L{lib}", f"-lioloom-async-{mpi.name}",
                      f"-Wl,-rpath,{lib}")
    (tmp_path / "cm1.yaml").write_text(block("yaml").replace("mode: dedicated-cores", f"mode: {mode}"))
    mpi.run(4, [exe, "cm1.yaml"], cwd=tmp_path, timeout=120)
    monkeypatch.chdir(tmp_path)
    exec(compile(block("python"), "docs/async.md", "exec"), {})  # noqa: S102  (the page's example, as printed)
