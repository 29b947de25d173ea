"""Concurrent O_APPEND writers of one file through the layer (issue 15, shell redirection): several processes
appending lines at once keep every line whole and exactly once, in each process's order, as on a plain file (the
oracle)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ioloom.logfs import preload
from ioloom.logfs.format import Container, is_container

LINES = 300

BASH = ('while [ ! -e ../go ]; do :; done; '
        'for i in $(seq {n}); do echo "P{p} line $i of the appender" >> shared.log; done')

# Each writes its first line, then waits for the others' (files beside the directory): every handle is open and
# has appended before any goes on.
PYTHON = """
import glob, os, sys
p, n, appenders = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fd = os.open("shared.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
while not os.path.exists("../go"):
    pass
for i in range(1, n + 1):
    line = f"P{p} line {i} of the appender\\n".encode()
    assert os.write(fd, line) == len(line)
    if i == 1:
        open(f"../started-{p}", "w").close()
        while len(glob.glob("../started-*")) < appenders:
            pass
os.close(fd)
"""


def append_at_once(d: Path, env: dict[str, str], commands: list[list[str]]) -> None:
    """Starts every command in d, lets them go at once (the file ../go appears) and waits for all of them."""
    go = d.parent / "go"
    for f in [go, *d.parent.glob("started-*")]:
        f.unlink(missing_ok=True)
    procs = [subprocess.Popen(c, cwd=d, env={**os.environ, **env}, stderr=subprocess.PIPE, text=True)
             for c in commands]
    go.touch()
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err


def expected_lines(lines: list[str], appenders: int) -> None:
    """Every appender's lines there once each, whole and in its order (how they interleave is the scheduler's)."""
    for p in range(appenders):
        mine = [line for line in lines if line.startswith(f"P{p} ")]
        assert mine == [f"P{p} line {i} of the appender" for i in range(1, LINES + 1)], (p, len(mine))
    assert len(lines) == appenders * LINES


@pytest.mark.parametrize("appenders", [2, 4])
@pytest.mark.parametrize("how", ["bash", "python"])
def test_concurrent_appenders_lose_no_line(tmp_path, appenders, how):
    """Today's main kept a few hundred of 2 x 300 lines: each append went to the end its own handle knew."""
    def commands(p: int) -> list[str]:
        if how == "bash":
            return ["bash", "-c", BASH.format(n=LINES, p=p)]
        return [sys.executable, "-c", PYTHON, str(p), str(LINES), str(appenders)]

    plain, mnt = tmp_path / "plain", tmp_path / "mnt"
    for d, env in ((plain, {}), (mnt, preload.env({mnt: []}))):
        d.mkdir()
        append_at_once(d, env, [commands(p) for p in range(appenders)])
    expected_lines((plain / "shared.log").read_text().splitlines(), appenders)
    assert is_container(mnt / "shared.log")
    data = Container.open(mnt / "shared.log").read()
    assert len(data) == (plain / "shared.log").stat().st_size
    expected_lines(data.decode().splitlines(), appenders)


FORKED = """
import os
fd = os.open("shared.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
os.write(fd, b"parent first\\n")
kids = []
for p in range(3):
    pid = os.fork()
    if pid == 0:
        stream = os.fdopen(os.dup(fd), "a", buffering=1)
        for i in range(1, 101):
            if i % 2:
                stream.write(f"P{p} line {i} of the appender\\n")
            else:
                os.pwrite(fd, f"P{p} line {i} of the appender\\n".encode(), 0)  # O_APPEND: appends all the same
        stream.close()
        os._exit(0)
    kids.append(pid)
for i in range(1, 101):
    os.writev(fd, [b"P3 line ", f"{i} of the appender\\n".encode()])
for pid in kids:
    assert os.waitpid(pid, 0)[1] == 0
os.close(fd)
"""


def test_forked_children_append_through_the_inherited_descriptor(tmp_path):
    """Today's main: a child's first append, before its first write, skipped the parent's published lines (it
    still had the parent's writer id) and overwrote them; and the children's appends overwrote each other's."""
    plain, mnt = tmp_path / "plain", tmp_path / "mnt"
    for d, env in ((plain, {}), (mnt, preload.env({mnt: []}))):
        d.mkdir()
        subprocess.run([sys.executable, "-c", FORKED], cwd=d, env={**os.environ, **env}, check=True, timeout=60)
    plain_lines = (plain / "shared.log").read_text().splitlines()
    lines = Container.open(mnt / "shared.log").read().decode().splitlines()
    assert lines[0] == plain_lines[0] == "parent first"
    assert len(lines) == len(plain_lines) == 401
    for p in range(4):
        want = [f"P{p} line {i} of the appender" for i in range(1, 101)]
        assert [line for line in plain_lines if line.startswith(f"P{p} ")] == want
        assert [line for line in lines if line.startswith(f"P{p} ")] == want
