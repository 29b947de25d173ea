"""Progress of long work: `ioloom stats`, `report`, `export` and the container tools (cat, flatten, check,
recover) draw a progress bar when their output is a terminal (a pseudo-terminal here), and print none in pipes or
with --quiet; `container cat` none when its data goes to the terminal."""
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


@pytest.fixture(scope="module")
def container(tmp_path_factory):
    """A real container: dd writing 2 MiB through logfs."""
    root = tmp_path_factory.mktemp("container")
    (root / "mnt").mkdir()
    subprocess.run([sys.executable, "-m", "ioloom", "container", "run", "-m", str(root / "mnt"), "--", "dd",
                    "if=/dev/urandom", f"of={root / 'mnt' / 'data'}", "bs=64k", "count=32", "status=none"],
                   check=True, capture_output=True)
    return root / "mnt" / "data"


def on_terminal(argv: list[str], stdout=None) -> tuple[int, bytes]:
    """Run `ioloom argv` with a pseudo-terminal as stdin, stdout (unless given) and stderr; (exit status, all it
    drew)."""
    master, slave = pty.openpty()
    child = subprocess.Popen([sys.executable, "-m", "ioloom", *argv], stdin=slave, stdout=stdout or slave,
                             stderr=slave, close_fds=True)
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


CONTAINER = {"flatten": (["flatten", "{path}", "{tmp}/flat"], b"flatten "),
             "check": (["check", "{path}"], b"checking "), "recover": (["recover", "{path}"], b"recovering ")}


@pytest.mark.parametrize("name", sorted(CONTAINER))
def test_container_tools_show_progress_on_a_terminal_only(name, container, tmp_path):
    argv, bar = CONTAINER[name]
    argv = ["container", *(a.format(path=container, tmp=tmp_path) for a in argv)]
    status, drawn = on_terminal(argv)
    assert status == 0 and bar + str(container).encode()[:8] in drawn and b"MiB" in drawn, drawn[-400:]
    status, quiet = on_terminal([*argv, "--quiet"])
    assert status == 0 and bar not in quiet
    piped = subprocess.run([sys.executable, "-m", "ioloom", *argv], capture_output=True)
    assert piped.returncode == 0 and bar not in piped.stdout + piped.stderr


def test_container_cat_shows_progress_when_its_data_goes_elsewhere(container, tmp_path):
    with open(tmp_path / "out", "wb") as out:
        status, drawn = on_terminal(["container", "cat", str(container)], stdout=out)
    assert status == 0 and b"cat " in drawn and b"MiB" in drawn, drawn[-400:]
    assert (tmp_path / "out").stat().st_size == 2 << 20
    status, drawn = on_terminal(["container", "cat", str(container)])  # the data itself goes to the terminal
    assert status == 0 and b"cat " + str(container).encode()[:8] not in drawn
