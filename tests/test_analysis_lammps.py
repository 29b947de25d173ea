"""Debian's LAMMPS (`lmp`, linked to Open MPI) running examples/lammps-melt.in under `ioloom run`: a trajectory
through MPI-IO, a text dump, restarts and a data file through stdio, the log. What the report says the program
wrote, per layer and per file, equals the sizes of the files it left (issue 13: the headline counted only the
MPI-IO file once MPI-IO was used)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ioloom import mpi
from ioloom.analysis import analyse
from ioloom.analysis.metrics import human_bytes
from ioloom.report import render

EXAMPLE = Path(__file__).parent.parent / "examples" / "lammps-melt.in"
MPIIO_OUTPUT = "traj.mpiio.lammpstrj"


@pytest.fixture(scope="module")
def melt(tmp_path_factory):
    """(the run's directory, the files it wrote, their analysis); 2 ranks under lmp's own MPI."""
    lmp = shutil.which("lmp")
    if lmp is None:
        pytest.skip("Debian's LAMMPS (package lammps, scripts/install-deps.sh) is not installed")
    impl = mpi.detect([lmp])
    assert impl is not None, "lmp should link an MPI ioloom knows"
    run = tmp_path_factory.mktemp("lammps")
    shutil.copy(EXAMPLE, run / "in.melt")
    argv = impl.launch(2, [lmp, "-in", "in.melt", "-log", "log.lammps", "-screen", "none"])
    done = subprocess.run([sys.executable, "-m", "ioloom", "run", "-o", str(run / "trace"), "--", *argv], cwd=run,
                          env={**os.environ, **impl.base_env()}, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    written = {p.name: p.stat().st_size for p in run.iterdir() if p.is_file() and p.name != "in.melt"}
    return run, written, analyse(run / "trace", workers=1)


def _layer(io: dict, layer: str, issued_by: str = "application") -> dict:
    return next(r for r in io["layers"] if r["layer"] == layer and r["issued_by"] == issued_by)


def test_every_layer_and_file_equals_what_lammps_wrote(melt):
    run, written, analysis = melt
    assert {MPIIO_OUTPUT, "dump.melt.txt", "melt.data", "final.restart", "log.lammps"} <= set(written)
    io = analysis.to_json()["io"]
    assert io["application"]["write_bytes"] == sum(written.values())
    assert io["application"]["layers"][:2] == ["mpiio", "stdio"]
    assert _layer(io, "mpiio")["write_bytes"] == written[MPIIO_OUTPUT]
    assert _layer(io, "posix", "MPI-IO")["write_bytes"] == written[MPIIO_OUTPUT]  # the same bytes, one layer down
    assert _layer(io, "stdio")["write_bytes"] == sum(written.values()) - written[MPIIO_OUTPUT]
    assert _layer(io, "stdio")["read_bytes"] == (run / "in.melt").stat().st_size  # rank 0 reads the input
    per_file = {Path(f["path"]).name: f["write_bytes"] for f in io["files"] if f["write_bytes"]}
    assert per_file == written


def test_the_headline_counts_every_layer(melt):
    _, written, analysis = melt
    assert (f"{human_bytes(sum(written.values()))}</div><div class=\"k\">written by the program (MPI-IO + stdio)"
            in render(analysis))
