"""Property: any sequence of writes, reads, seeks, truncates, syncs and reopens gives byte-identical results on a
plain file and on a logfs container (one preloaded driver process serves every generated sequence)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ioloom.logfs import preload

DRIVER = Path(__file__).parent / "programs" / "logfs_ops.py"

offsets = st.integers(0, 3 * 4096)
data = st.binary(min_size=0, max_size=600).map(bytes.hex)
ops = st.one_of(
    st.tuples(st.just("write"), data),
    st.tuples(st.just("pwrite"), offsets, data),
    st.tuples(st.just("writev"), st.lists(data, min_size=1, max_size=4)),
    st.tuples(st.just("preadv"), offsets, st.lists(st.integers(0, 2000), min_size=1, max_size=4)),
    st.tuples(st.just("read"), st.integers(0, 5000)),
    st.tuples(st.just("pread"), offsets, st.integers(0, 5000)),
    st.tuples(st.just("seek"), st.integers(-100, 9000), st.sampled_from([os.SEEK_SET, os.SEEK_CUR, os.SEEK_END])),
    st.tuples(st.just("truncate"), st.integers(0, 2 * 4096)),
    st.tuples(st.just("fsync")),
    st.tuples(st.just("reopen"), st.booleans()),
)


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    proc = subprocess.Popen([sys.executable, str(DRIVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, **preload.env()})
    yield proc, tmp_path_factory.mktemp("logfs-prop")
    proc.stdin.close()
    proc.wait(timeout=30)


def run(driver, sequence, name):
    proc, where = driver
    plain, container = where / f"{name}.plain", where / f"{name}.lf"
    proc.stdin.write(json.dumps([str(plain), f"logfs:{container}", sequence]) + "\n")
    proc.stdin.flush()
    reply = proc.stdout.readline()
    assert reply, "the preloaded driver died"
    return json.loads(reply)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=st.lists(ops, min_size=1, max_size=30))
def test_container_behaves_like_a_file(driver, sequence):
    direct, through = run(driver, [list(op) for op in sequence], "seq")
    assert through == direct


def test_overlaps_and_truncates_by_hand(driver):
    """A case the generator might take long to find: overwrite, shrink, grow past a hole, overwrite again."""
    sequence = [["pwrite", 0, "aa" * 100], ["pwrite", 50, "bb" * 10], ["truncate", 55], ["pwrite", 70, "cc"],
                ["pwrite", 54, "dd" * 3], ["truncate", 200], ["pread", 0, 300], ["reopen", True], ["write", "ee"]]
    direct, through = run(driver, sequence, "hand")
    assert through == direct
    content = bytes.fromhex(through[-1])
    assert content[50:54] == b"\xbb" * 4 and content[54:57] == b"\xdd" * 3 and content[57:70] == bytes(13)
    assert len(content) == 201 and content[-1:] == b"\xee"


def test_dense_strided_records_by_hand(driver):
    """Many small records of one strided pattern in a window (a read then resolves its own range, lf_read.c), one
    write across dozens of them (the overlap sweep on that range), reads straddling records and holes, before and
    after a reopen."""
    sequence = [["pwrite", 24 * i, f"{i:02x}" * 10] for i in range(60)]
    sequence += [["pwrite", 105, "cd" * 300], ["pread", 0, 1500], ["pread", 95, 30], ["pread", 1400, 60],
                 ["reopen", False], ["pread", 0, 1500], ["pread", 406, 17], ["pread", 1420, 100]]
    direct, through = run(driver, sequence, "dense")
    assert through == direct
    content = bytes.fromhex(through[-1])
    assert content[24:34] == b"\x01" * 10 and content[34:48] == bytes(14) and content[105:405] == b"\xcd" * 300
    assert len(content) == 24 * 59 + 10
