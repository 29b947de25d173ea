"""Progress of long work: `ioloom stats`, `report` and `export` draw a progress bar when their output is a
terminal (a pseudo-terminal here), and print none in pipes or with --quiet."""
from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

COMMANDS = {"stats": ["stats", "{trace}"], "report": ["report", "{trace}", "-o", "{tmp}/r.html"],
            "export": ["export", "{trace}", "-f", "csv", "-o", "{tmp}/csv"]}
BAR = {"stats": b"analysing trace", "report": b"analysing trace", "export": b"exporting trace"}


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    """A real trace: dd writing 2,000 blocks through the tracer."""
    root = tmp_path_factory.mktemp("progress")
    subprocess.run([sys.executable, "-m", "ioloom", "run", "-o", str(root / "trace"), "--", "dd", "if=/dev/zero",
                    f"of={root / 'out'}", "bs=4k", "count=2000", "status=none"], check=True, capture_output=True)
    return root / "trace"


def on_terminal(argv: list[str]) -> tuple[int, bytes]:
    """Run `ioloom argv` with a pseudo-terminal as stdin, stdout and stderr; (exit status, all it drew)."""
    master, slave = pty.openpty()
    child = subprocess.Popen([sys.executable, "-m", "ioloom", *argv], stdin=slave, stdout=slave, stderr=slave,
                             close_fds=True)
    os.close(slave)
    drawn = b""
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        drawn += chunk
    os.close(master)
    return child.wait(timeout=300), drawn


def _argv(name: str, trace, tmp_path, *extra: str) -> list[str]:
    return [a.format(trace=trace, tmp=tmp_path) for a in COMMANDS[name]] + list(extra)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_progress_on_a_terminal_only(name, trace, tmp_path):
    status, drawn = on_terminal(_argv(name, trace, tmp_path))
    assert status == 0 and BAR[name] in drawn and b"events" in drawn, drawn[-400:]
    status, quiet = on_terminal(_argv(name, trace, tmp_path, "--quiet"))
    assert status == 0 and BAR[name] not in quiet
    piped = subprocess.run([sys.executable, "-m", "ioloom", *_argv(name, trace, tmp_path)], capture_output=True)
    assert piped.returncode == 0 and BAR[name] not in piped.stdout + piped.stderr
