"""Failures: a writer killed (SIGKILL) in the middle of writing, then `ioloom container recover`; a full file
system (a 1 MiB tmpfs) gives the program ENOSPC and leaves a container that checks clean."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from ioloom.logfs import preload
from ioloom.logfs.format import Container

BLOCK = 40000                           # not a multiple of a page: records end anywhere in the log

WRITER = r"""
import os, sys
writers, me = int(sys.argv[2]), int(sys.argv[3])
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
i = 0
while True:
    block = i * writers + me             # N-1 strided among the writers
    os.pwrite(fd, bytes([block % 251 + 1]) * {block}, block * {block})
    i += 1
    if i == 64:
        os.fsync(fd)                     # the first 64 blocks are published; the rest only logged
        print("synced", flush=True)
""".replace("{block}", str(BLOCK))


@pytest.mark.parametrize("writers", [1, 3])
def test_killed_writers_then_recover(tmp_path, ioloom_cli, writers):
    """With 3 writers in one log (fan-out per node, 1 MiB chunks), their chunks interleave in the log."""
    path = tmp_path / "c"
    env = {**os.environ, **preload.env(fanout="node", chunk="1M")}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, f"logfs:{path}", str(writers), str(me)],
                              stdout=subprocess.PIPE, text=True, env={**env, "PMI_RANK": str(me)})
             for me in range(writers)]
    assert all(p.stdout.readline().strip() == "synced" for p in procs)
    time.sleep(0.05)                     # they keep writing: the kills land mid-stream
    for proc in procs:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert len(list(path.glob("log.*"))) == 1
    published = Container.open(path).size
    assert published >= 64 * writers * BLOCK
    before = ioloom_cli("container", "check", path, check=False)
    assert before.returncode == 1 and "not in any index" in before.stdout
    ioloom_cli("container", "recover", path)
    assert "OK" in ioloom_cli("container", "check", path).stdout
    data = Container.open(path).read()
    assert len(data) > published and len(data) % BLOCK == 0   # every intact record back, no torn one
    present = {w: [] for w in range(writers)}
    for b in range(len(data) // BLOCK):
        got = data[b * BLOCK:(b + 1) * BLOCK]
        if got != bytes(BLOCK):                                # zeros: a block its writer never reached
            assert got == bytes([b % 251 + 1]) * BLOCK, f"block {b}"
            present[b % writers].append(b // writers)
    for w, blocks in present.items():                          # each writer's blocks: all of a prefix
        assert len(blocks) >= 64 and blocks == list(range(len(blocks))), f"writer {w}"


FILLER = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
done = 0
try:
    while True:
        done += os.write(fd, bytes([done // 65536 % 251 + 1]) * 65536)
except OSError as e:
    print(e.errno, done)
os.close(fd)
"""


def test_full_disk_gives_enospc_and_a_consistent_container(small_fs, ioloom_cli):
    path = small_fs("1m") / "c"
    out = subprocess.run([sys.executable, "-c", FILLER, f"logfs:{path}"], capture_output=True, text=True,
                         env={**os.environ, **preload.env()}, timeout=60)
    assert out.returncode == 0, out.stderr
    errno, written = map(int, out.stdout.split())
    assert errno == 28 and 0 < written < 1 << 20                      # ENOSPC, after what fit
    assert "OK" in ioloom_cli("container", "check", path).stdout    # no recover needed
    data = Container.open(path).read()
    assert len(data) == written                                      # every acknowledged byte, nothing more
    assert all(data[i] == i // 65536 % 251 + 1 for i in range(0, written, 4096))
