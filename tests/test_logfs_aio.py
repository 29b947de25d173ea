"""POSIX aio on logfs containers (native/logfs/lf_aio.c): one C program (tests/programs/logfs_aio.c) does
aio_write/aio_read/aio_fsync, aio_error/aio_return/aio_suspend/aio_cancel, a refused priority, SIGEV_SIGNAL and
SIGEV_THREAD notifications and lio_listio (LIO_WAIT, LIO_NOWAIT, a LIO_WAIT list whose transfers fail) on a plain
file (the oracle: glibc's own aio) and on a file inside a logfs mount; what it prints and the file's bytes must be
the same. A lio_listio mixing a container with a plain file is not served: counted at exit and passed through to
glibc."""
from __future__ import annotations

import os
import subprocess

from conftest import build_program
from ioloom.logfs import preload
from ioloom.logfs.format import Container, is_container


def test_aio_on_a_container_does_what_glibc_does_on_a_plain_file(tmp_path):
    exe = build_program("logfs_aio.c", "-pthread")
    outs = []
    for root, env in ((tmp_path / "plain", {}), (tmp_path / "mnt", preload.env({tmp_path / "mnt": []}))):
        root.mkdir()
        out = subprocess.run([exe, root / "data"], env={**os.environ, **env}, capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, out.stdout + out.stderr
        outs.append(out.stdout.splitlines())
    plain, layer = outs
    assert layer == plain
    for line in ("aio_write signal: signal 1 asyncio 1 value 42 own pid 1",
                 "lio_listio nowait: signal 1 asyncio 1 value 7 own pid 1", "lio read bytes: AAAABBBB",
                 "bad priority aio_error: EINVAL", "aio_fsync bad op submitted: -1 EINVAL", "aio_cancel done: 1",
                 "attr still joinable: 1", "thread from the attr joined: 1", "thread notification: value 9",
                 "lio_listio wait failing submitted: -1 EIO", "lio failing write: error 0 return 2",
                 "lio failing read on write-only: error EBADF return -1",
                 "lio failing negative offset: error EINVAL return -1"):
        assert line in plain
    assert is_container(tmp_path / "mnt" / "data")
    expected = (tmp_path / "plain" / "data").read_bytes()
    assert expected.startswith(b"hello aio world!AAAABBBB") and expected.endswith(b"ok") and len(expected) == 56
    assert Container.open(tmp_path / "mnt" / "data").read() == expected


def test_a_list_mixing_a_container_and_a_plain_file_is_counted_and_passed_through(tmp_path):
    """glibc's thread does the whole list past the layer: the plain file's entry is written, the container's
    fails EBADF (a known gap, docs/logfs-format.md), and the exit report counts it."""
    exe = build_program("logfs_aio.c", "-pthread")
    (tmp_path / "mnt").mkdir()
    out = subprocess.run([exe, tmp_path / "mnt" / "data", tmp_path / "other"],
                         env={**os.environ, **preload.env({tmp_path / "mnt": []})}, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.splitlines()[-1] == "mixed list: file EBADF other 0"
    assert "ioloom-logfs: 1 other call(s) on containers could not be served" in out.stderr
    assert (tmp_path / "other").read_bytes() == b"mixed"
