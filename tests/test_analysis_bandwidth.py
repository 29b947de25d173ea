"""The trace's bandwidths beside the IOR-like benchmark's own figures on the same run: ioloom-bench traced with
`ioloom run`, its printed JSON compared with the analysis of its trace. MPI-layer figures count the bytes the
program asked for, however much more MPI-IO moved underneath (read-modify-write under collective buffering),
and the amplification is a finding of its own.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import MpiRunner
from ioloom import paths
from ioloom.analysis import analyse
from ioloom.bench.io import parse_output

RANKS = 4
MiB = 1 << 20


def traced_bench(runner: MpiRunner, args: list[str], root, launcher_options: tuple[str, ...] = ()):
    """(the bench's JSON, the analysis of its trace) of one traced run of ioloom-bench."""
    program = paths.native_bin(f"ioloom-bench-{runner.name}")
    launch = runner.command(RANKS, [*launcher_options, program, *args, "-o", root / "bench.dat", "--json"])
    done = subprocess.run([sys.executable, "-m", "ioloom", "run", "-o", str(root / "trace"), "--", *launch],
                          env=runner.env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    result = parse_output(done.stdout)
    assert result is not None, done.stdout
    return result, analyse(root / "trace", workers=1)


def phase_of(result: dict, op: str) -> dict:
    """The bench's figures of its one phase `op` (bytes, effective_bw, raw_bw in B/s, per-rank times)."""
    return next(p for p in result["phases"] if p["op"] == op)


def romio(runner: MpiRunner) -> tuple[str, ...]:
    """Launcher options that give ROMIO (MPICH's only MPI-IO; Open MPI's romio321 component)."""
    return ("--mca", "io", "romio321") if runner.name == "openmpi" else ()


@pytest.mark.mpi
def test_mpi_figures_count_the_programs_bytes_under_read_modify_write(mpi, tmp_path):
    """Collective buffering forced on a strided pattern: the aggregator reads each call's whole extent, patches
    the ranks' pieces in and writes it back. The MPI figures stay on the bytes the program wrote."""
    args = ["-a", "mpiio", "-c", "-w", "-b", "1m", "-t", "256k", "-s", "4", "--hint", "romio_cb_write=enable"]
    result, a = traced_bench(mpi, args, tmp_path, romio(mpi))
    phase = phase_of(result, "write")
    bw, amp = a.bandwidth["write"], a.amplification["write"]
    assert bw["mpi_bytes"] == phase["bytes"] == RANKS * 4 * MiB
    assert amp["posix_bytes"] > bw["mpi_bytes"] and amp["read_modify_write"]["bytes_read"] > 0
    # Each rank's time in its MPI-IO writes is what the bench timed around them: the perceived MPI figure
    # (sum over ranks of bytes / time) is then near the bench's data-call bandwidth, not 3x it.
    raw = phase["raw_bw"] / MiB
    assert 0.6 * raw <= bw["perceived_mpi_MBps"] <= 1.6 * raw, (bw, raw)
    found = [f for f in a.findings if f.code == "io-amplification"]
    assert len(found) == 1 and found[0].evidence["counts"]["read_modify_write_reads"] > 0
    assert found[0].evidence["counts"]["posix_bytes_written"] > RANKS * 4 * MiB


@pytest.mark.mpi
def test_no_amplification_when_collective_pieces_tile_the_file(mpi, tmp_path):
    args = ["-a", "mpiio", "-c", "-w", "-b", "1m", "-t", "1m", "-s", "4", "--hint", "romio_cb_write=enable"]
    result, a = traced_bench(mpi, args, tmp_path, romio(mpi))
    assert a.amplification["write"]["ratio"] == pytest.approx(1.0)
    assert "io-amplification" not in {f.code for f in a.findings}


@pytest.mark.mpi
@pytest.mark.parametrize("api", ["posix", "mpiio"])
def test_aggregate_bandwidth_is_iors_on_the_same_run(mpi, tmp_path, api):
    """IOR's figure: bytes of all ranks / (latest close - earliest open). The bench prints it per phase; the
    trace of the same run gives it too, for a POSIX-only program as well (where RIOT's effective POSIX figure
    is a serial-equivalent one, about 1/N of it)."""
    args = ["-a", api, "-b", "1m", "-t", "256k", "-s", "4"]
    result, a = traced_bench(mpi, args, tmp_path)
    for op, direction in (("write", "write"), ("read", "read")):
        phase, bw = phase_of(result, op), a.bandwidth[direction]
        assert bw["aggregate_bytes"] == phase["bytes"] == RANKS * 4 * MiB
        ior = phase["bytes"] / phase["span"] / MiB
        assert bw["aggregate_MBps"] == pytest.approx(ior, rel=0.1), (op, bw, phase["span"])
        assert bw["aggregate_layers"] == [{"posix": "posix", "mpiio": "mpiio"}[api]]
        if op == "read":  # no buffer to fill: next to nothing is deducted from the span
            assert phase["effective_bw"] / MiB == pytest.approx(ior, rel=1e-3)
        assert bw["data_window_MBps"] >= bw["aggregate_MBps"]
