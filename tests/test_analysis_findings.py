"""Findings, cross-layer decomposition and patterns on real programs traced with `ioloom run` under each MPI.

tests/programs/pattern_findings.c has one mode per behaviour; every mode is traced once per MPI (module
scope) and each test reads the analyses. A finding must fire where its cause is, and must not fire on the
clean and collective runs (nor data sieving under Open MPI's OMPIO, which does not sieve).
"""
from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import MpiRunner

from ioloom import mpi as mpi_impls
from ioloom.analysis import analyse

MODES = ("strided-view", "small-strided", "collective", "imbalance", "metadata", "reread", "misaligned",
         "lockwait", "clean")
RANKS = 4
KiB, MiB = 1024, 1 << 20


def _trace(runner: MpiRunner, exe, mode: str, root, launcher_options: tuple[str, ...] = (), tag: str = ""):
    """`ioloom run` the program in `mode` on RANKS ranks; the analysis of its trace."""
    data, out = root / f"data-{mode}", root / f"trace-{mode}{tag}"
    data.mkdir(exist_ok=True)
    launch = runner.command(RANKS, [*launcher_options, exe, mode, data])
    done = subprocess.run([sys.executable, "-m", "ioloom", "run", "-o", str(out), "--", *launch],
                          env=runner.env(), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"{mode}: {done.stdout}\n{done.stderr}"
    return analyse(out, workers=1)


@pytest.fixture(scope="module", params=[impl.name for impl in mpi_impls.implementations()])
def runs(request, tmp_path_factory):
    """{mode: Analysis} for every mode under one MPI (plus 'romio': strided-view with ROMIO under Open MPI)."""
    runner = MpiRunner(mpi_impls.by_name(request.param))
    exe = runner.compile("pattern_findings.c")
    root = tmp_path_factory.mktemp(f"findings-{runner.name}")
    out = {mode: _trace(runner, exe, mode, root) for mode in MODES}
    if runner.name == "openmpi":
        out["romio"] = _trace(runner, exe, "strided-view", root, ("--mca", "io", "romio321"), "-romio")
    out["mpi"] = runner.name
    return out


def _codes(analysis) -> set[str]:
    return {f.code for f in analysis.findings}


def _one(analysis, code: str):
    found = [f for f in analysis.findings if f.code == code]
    assert len(found) == 1, f"{code} not found once in {[f.code for f in analysis.findings]}"
    return found[0]


def _sieving_run(runs):
    """The run where ROMIO sieves: MPICH, or Open MPI with --mca io romio321."""
    return runs["romio"] if runs["mpi"] == "openmpi" else runs["strided-view"]


@pytest.mark.mpi
@pytest.mark.parametrize("mode", ["clean", "collective"])
def test_well_behaved_runs_have_no_findings(runs, mode):
    assert runs[mode].findings == [], [f.message for f in runs[mode].findings]


@pytest.mark.mpi
def test_data_sieving_fires_under_romio_with_its_evidence(runs):
    f = _one(_sieving_run(runs), "data-sieving")
    assert f.evidence["ranks"] == [0, 1, 2, 3]
    assert f.evidence["files"][0].endswith("/data-strided-view/shared")
    assert f.evidence["counts"]["sieved_calls"] == RANKS * 4  # every independent MPI_File_write
    assert f.evidence["counts"]["posix_reads_under_writes"] >= RANKS * 4
    assert "romio_ds_write=disable" in f.advice
    t0, t1 = f.evidence["window_s"]
    assert 0 <= t0 < t1


@pytest.mark.mpi
def test_data_sieving_does_not_fire_without_sieving(runs):
    assert "data-sieving" not in _codes(runs["collective"])
    if runs["mpi"] == "openmpi":  # OMPIO writes the same strided view without read-modify-write
        assert "data-sieving" not in _codes(runs["strided-view"])


@pytest.mark.mpi
def test_sieved_write_decomposes_into_lock_read_write_unlock(runs):
    a = _sieving_run(runs)
    write = next(c for c in a.to_json()["crosslayer"] if c["op"] == "MPI_File_write")
    ops = write["posix_ops"]
    assert ops["lock"] == ops["unlock"] >= write["calls"] and ops["read"] >= write["calls"] and ops["write"] > 0
    split = write["time_split"]
    assert sum(part["seconds"] for part in split.values()) == pytest.approx(write["seconds"], rel=1e-6)
    assert split["lock"]["seconds"] > 0 and split["read"]["seconds"] > 0
    # sieving reads what it then writes back: more POSIX bytes than the MPI-IO calls asked for
    assert write["posix_write_bytes"] > write["bytes"]
    assert a.amplification["write"]["ratio"] > 1
    calls = [c for c in a.to_json()["mpiio_calls"] if c["op"] == "MPI_File_write"]
    assert len(calls) == write["calls"] and all(c["sieving"] and c["posix_ops"]["lock"] >= 1 for c in calls)
    assert {c["rank"] for c in calls} == set(range(RANKS))


@pytest.mark.mpi
def test_collective_aggregators_move_exactly_the_bytes_asked(runs):
    colls = runs["collective"].to_json()["collectives"]
    assert len(colls) == 4  # four MPI_File_write_all, each one collective across the 4 ranks
    for c in colls:
        assert c["ranks"] == RANKS and c["bytes"] == RANKS * 256 * 4 * KiB
        moved = sum(g["bytes"] for g in c["aggregators"])
        assert moved == c["bytes"]
        assert 1 <= len(c["aggregators"]) <= RANKS


@pytest.mark.mpi
def test_small_strided_writes(runs):
    f = _one(runs["small-strided"], "small-strided-writes")
    assert f.evidence["counts"]["small_writes"] == RANKS * 200
    assert f.evidence["counts"]["stride"] == RANKS * 2 * KiB
    assert "collective" in f.advice and "log" in f.advice
    pattern = next(p for p in runs["small-strided"].patterns if p["processes"] > 1)
    assert pattern["sharing"] == "N-1 strided (SFSA strided)" and pattern["order"] == "strided"
    for mode in ("clean", "collective", "strided-view"):
        assert "small-strided-writes" not in _codes(runs[mode])


@pytest.mark.mpi
def test_lock_serialised_writes(runs):
    f = _one(runs["lockwait"], "lock-serialised-writes")
    assert f.evidence["counts"]["wait_seconds"] >= 0.3  # rank 0 held the lock 0.4 s
    assert f.evidence["counts"]["max_concurrent_holders"] == 1
    assert "lock-serialised-writes" not in _codes(runs["clean"]) | _codes(runs["collective"])


@pytest.mark.mpi
def test_rank_imbalance_names_the_straggler(runs):
    f = _one(runs["imbalance"], "rank-imbalance")
    assert f.evidence["ranks"] == [0]
    assert f.evidence["counts"]["bytes_by_rank"] == {0: 64 * MiB, 1: MiB, 2: MiB, 3: MiB}
    assert f.evidence["counts"]["slowest_seconds"] > 2 * f.evidence["counts"]["median_seconds"]
    patterns = runs["imbalance"].patterns
    assert {p["sharing"] for p in patterns} == {"N-N (MFWA)"} and len(patterns) == RANKS


@pytest.mark.mpi
def test_metadata_storm(runs):
    f = _one(runs["metadata"], "metadata-storm")
    assert f.evidence["counts"]["metadata_calls"] >= RANKS * 600 * 2  # open + fstat (+ close) per round
    assert len(f.evidence["ranks"]) == RANKS
    for mode in ("clean", "imbalance", "small-strided"):
        assert "metadata-storm" not in _codes(runs[mode])


@pytest.mark.mpi
def test_repeated_reads(runs):
    f = _one(runs["reread"], "repeated-reads")
    assert f.evidence["counts"]["distinct_bytes"] == RANKS * 256 * KiB
    assert f.evidence["counts"]["bytes_read"] == RANKS * 32 * 256 * KiB
    assert "repeated-reads" not in _codes(runs["clean"]) | _codes(runs["metadata"])


@pytest.mark.mpi
def test_stripe_misalignment_depends_on_the_stripe(runs):
    f = _one(runs["misaligned"], "stripe-misalignment")
    assert f.evidence["counts"]["misaligned_requests"] == RANKS * 8
    assert "stripe-misalignment" not in _codes(runs["clean"])  # the same 1 MiB writes, aligned


@pytest.mark.mpi
def test_time_before_first_byte(runs):
    f = _one(runs["lockwait"], "time-before-first-byte")
    assert set(f.evidence["ranks"]) == {1, 2, 3}  # rank 0 held the lock, the others waited for it
    assert all(s >= 0.25 for s in f.evidence["counts"]["seconds_before_first_byte"].values())
    for mode in ("clean", "collective", "metadata"):
        assert "time-before-first-byte" not in _codes(runs[mode])


@pytest.mark.mpi
def test_riot_bandwidths_on_a_real_trace(runs):
    bw = _sieving_run(runs).bandwidth["write"]
    assert bw["ranks"] == RANKS and bw["bytes"] > 0
    # POSIX calls run inside the MPI-IO calls, so their time is a part of it
    assert bw["effective_posix_MBps"] >= bw["effective_mpi_MBps"] > 0
    assert bw["perceived_mpi_MBps"] >= bw["effective_mpi_MBps"]
