"""What the report says a run moved, on real programs: every layer's bytes (MPI-IO, stdio, POSIX), per file,
equal to the files' sizes, whichever layers the program mixed; bandwidth over time drawn from every bin of the
run. Each program is traced with `ioloom run` under each MPI.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import MpiRunner
from ioloom import paths
from ioloom.analysis import analyse

EXAMPLE = paths.DEMO_SOURCE
RANKS = 4
OUTPUTS = ("traj.bin", "dump.0.txt", "dump.1.txt", "dump.2.txt", "dump.3.txt", "log.thermo", "restart.bin",
           "checksum")


def traced(runner: MpiRunner, argv: list, out: Path, env: dict | None = None, run_options: tuple = ()):
    """`ioloom run [run_options]` argv on RANKS ranks; the analysis of its trace."""
    launch = runner.command(RANKS, argv)
    done = subprocess.run([sys.executable, "-m", "ioloom", "run", "-o", str(out), *map(str, run_options), "--",
                           *launch],
                          env=runner.env(env), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return analyse(out, workers=1)


@pytest.fixture(scope="module")
def mixed(module_mpi, tmp_path_factory):
    """The LAMMPS-like program (MPI-IO trajectory, fprintf dumps and log, fwrite restart, write() checksum), traced
    once per MPI: the tests only read its files and its analysis."""
    mpi, tmp_path = module_mpi, tmp_path_factory.mktemp(f"mixed-{module_mpi.name}")
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


def test_report_headline_counts_stdio_beside_mpiio(mixed):
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


def test_bandwidth_over_time_is_zero_where_nothing_moved(mpi, tmp_path):
    """ioloom-bench with --wait: every rank idles 400 ms between its transfers (Boito's TMP). The plot covers
    the run in bins chosen from its length, is zero in the pauses (no value held over them) and its bins hold
    every byte written."""
    from ioloom import open_trace, paths
    from ioloom.report.figures import bandwidth_over_time

    program = paths.native_bin(f"ioloom-bench-{mpi.name}")
    target = tmp_path / "tmp.dat"
    a = traced(mpi, [program, "-a", "posix", "-w", "-b", "1m", "-t", "256k", "--wait", "400", "-o", target],
               tmp_path / "trace")
    span = int(a.processes["t_last"].max() - a.processes["t_first"].min())
    assert 256 <= span / a.bin_width_ns <= 2 * 256 + 1
    trace = open_trace(tmp_path / "trace")
    files = trace.files.to_pandas()
    events = trace.events().to_pandas()
    writes = events[(events.file_id == files.file_id[files.path == str(target)].iloc[0]) & (events.ret_bytes > 0)
                    & events.op.str.contains("write")]
    assert writes.ret_bytes.sum() == RANKS * (1 << 20)
    assert a.timebins["bytes"].sum() == pytest.approx(RANKS * (1 << 20))
    ends = np.sort(writes.t_end.to_numpy())
    starts = np.sort(writes.t_start.to_numpy())
    pauses = [(ends[i], starts[i + 1]) for i in range(len(ends) - 1) if starts[i + 1] - ends[i] > 0.2e9]
    assert len(pauses) >= 2, "the ranks' transfers should be 400 ms apart"
    drawn = next(t for t in bandwidth_over_time(a).data if t.name == "POSIX write")
    x, y = np.asarray(drawn.x), np.asarray(drawn.y)
    for t0, t1 in pauses:
        inside = (x * 1e9 >= t0 + a.bin_width_ns) & (x * 1e9 + a.bin_width_ns <= t1)
        assert inside.any() and (y[inside] == 0).all(), "a pause is drawn as zero, bin by bin"
    assert x[0] * 1e9 <= a.processes["t_first"].min() and x[-1] * 1e9 >= a.processes["t_last"].max() - a.bin_width_ns


def test_over_logfs_the_split_is_whole_and_logfs_files_are_its_own(mpi, tmp_path):
    """The demo under `ioloom run --logfs`: the trace holds the program's logical calls and logfs's physical
    ones on its logs beneath them. The time split of every MPI-IO operation stays within its calls' time,
    logfs's logs and journals are not the program's files, and OMPIO's lock probe files are the runtime's."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    a = traced(mpi, [mpi.compile(EXAMPLE), mount / "strided.dat", 64, 4096], tmp_path / "trace",
               run_options=("--logfs", mount))
    result = a.to_json()
    for op in result["crosslayer"]:
        shares = {part: v["share"] for part, v in op["time_split"].items()}
        assert all(0 <= share <= 1 for share in shares.values()), (op["op"], shares)
        assert sum(shares.values()) == pytest.approx(1)
    io = result["io"]
    assert [f["path"] for f in io["files"]] == [str(mount / "strided.dat")]
    assert io["logfs_files"]["files"] >= 3 * RANKS  # a log, a record journal and an index per rank
    assert io["logfs_files"]["write_bytes"] >= 2 * RANKS * 64 * 4096  # every logical byte written, once a log's
    assert _layer(io, "mpiio")["write_bytes"] == 2 * RANKS * 64 * 4096
    assert all(lock["unreleased"] == 0 for lock in result["locks"])
    assert not any(".locktest." in f["path"] for f in result["patterns"] + io["files"])
