"""Non-blocking MPI-IO in the analysis: bytes are counted at completion (MPI_Wait / MPI_Test events carry them
and point at their MPI_File_i* call), each call counts once, and an initiation is not an error."""
from __future__ import annotations

import subprocess
import sys

from ioloom.analysis import analyse

RANKS, BLOCKS, BLOCK = 2, 16, 8192


def test_nonblocking_bytes_counted_once_at_completion(mpi, tmp_path):
    exe = mpi.compile("nonblocking_io.c")
    launch = mpi.command(RANKS, [exe, tmp_path / "data", BLOCKS, BLOCK])
    done = subprocess.run([sys.executable, "-m", "ioloom", "run", "-o", str(tmp_path / "trace"), "--", *launch],
                          env=mpi.env(), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    layers = {(row["layer"], row["kind"]): row for row in analyse(tmp_path / "trace", workers=1).to_json()["layers"]}
    for kind in ("write", "read"):
        row = layers[("mpiio", kind)]
        assert row["bytes"] == RANKS * BLOCKS * BLOCK, (kind, row)
        assert row["ops"] == RANKS * BLOCKS, (kind, row)
        assert row["errors"] == 0, (kind, row)
