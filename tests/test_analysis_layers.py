"""What the report says a run moved, on real programs: every layer's bytes (MPI-IO, stdio, POSIX), per file,
equal to the files' sizes, whichever layers the program mixed; bandwidth over time drawn from every bin of the
run. Each program is traced with `ioloom run` under each MPI.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import MpiRunner

from ioloom.analysis import analyse

EXAMPLE = Path(__file__).parent.parent / "examples" / "strided_mpiio.c"
RANKS = 4
OUTPUTS = ("traj.bin", "dump.0.txt", "dump.1.txt", "dump.2.txt", "dump.3.txt", "log.thermo", "restart.bin",
           "checksum")


def traced(runner: MpiRunner, argv: list, out: Path, env: dict | None = None):
    """`ioloom run` argv on RANKS ranks; the analysis of its trace."""
    launch = runner.command(RANKS, argv)
    done = subprocess.run([sys.executable, "-m", "ioloom", "run", "-o", str(out), "--", *launch],
                          env=runner.env(env), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return analyse(out, workers=1)


@pytest.fixture
def mixed(mpi, tmp_path):
    """The LAMMPS-like program (MPI-IO trajectory, fprintf dumps and log, fwrite restart, write() checksum)."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "in.script").write_text("units lj\natom_style atomic\nrun 20\n")
    return data, traced(mpi, [mpi.compile("mpiio_stdio_dumps.c"), data, 20, 300], tmp_path / "trace")


def _layer(io: dict, layer: str, issued_by: str = "application") -> dict:
    return next(r for r in io["layers"] if r["layer"] == layer and r["issued_by"] == issued_by)


def test_every_layer_counts_and_totals_equal_the_file_sizes(mixed):
    data, analysis = mixed
    io = analysis.to_json()["io"]
    size = {name: (data / name).stat().st_size for name in OUTPUTS}
    stdio_outputs = sum(size[n] for n in OUTPUTS if n not in ("traj.bin", "checksum"))
    assert _layer(io, "mpiio")["write_bytes"] == size["traj.bin"]
    assert _layer(io, "stdio")["write_bytes"] == stdio_outputs
    assert _layer(io, "stdio")["read_bytes"] == RANKS * (data / "in.script").stat().st_size
    assert _layer(io, "posix")["write_bytes"] == size["checksum"]
    assert _layer(io, "posix", "MPI-IO")["write_bytes"] == size["traj.bin"]  # the same bytes, one layer down
    assert io["application"]["write_bytes"] == sum(size.values())
    assert io["application"]["layers"] == ["mpiio", "stdio", "posix"]
    per_file = {Path(f["path"]).name: f for f in io["files"]}
    assert {name: per_file[name]["write_bytes"] for name in OUTPUTS} == size
    assert per_file["traj.bin"]["layers"] == "mpiio" and per_file["dump.0.txt"]["layers"] == "stdio"
    assert io["system_files"]["files"] > 0  # the MPI runtime's files: named as left out, not silently dropped


def test_report_headline_counts_stdio_beside_mpiio(mixed, tmp_path):
    from ioloom.analysis.metrics import human_bytes
    from ioloom.report import render

    data, analysis = mixed
    page = render(analysis)
    total = sum((data / name).stat().st_size for name in OUTPUTS)
    assert f"{human_bytes(total)}</div><div class=\"k\">written by the program (MPI-IO + stdio + POSIX)" in page
    assert "system and MPI-runtime files" in page and str(data / "dump.3.txt") in page


def test_demo_layers_equal_what_it_wrote_and_read(mpi, tmp_path):
    """The README's demo writes its file twice (strided view, then block by block) and reads it once."""
    exe = mpi.compile(EXAMPLE)
    target = tmp_path / "strided.dat"
    io = traced(mpi, [exe, target, 64, 4096], tmp_path / "trace").to_json()["io"]
    size = target.stat().st_size
    assert size == RANKS * 64 * 4096
    mpiio = _layer(io, "mpiio")
    assert (mpiio["write_bytes"], mpiio["read_bytes"]) == (2 * size, size)
    assert io["application"] == {"read_bytes": size, "write_bytes": 2 * size, "layers": ["mpiio"]}
    assert [f["path"] for f in io["files"]] == [str(target)]
