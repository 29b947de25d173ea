"""Findings, cross-layer decomposition and patterns on real programs traced as `ioloom run` traces them (run.trace)
under each MPI.

tests/programs/pattern_findings.c has one mode per behaviour; every mode is traced once per MPI (module
scope) and each test reads the analyses. A finding must fire where its cause is, and must not fire on the
clean and collective runs (nor data sieving under Open MPI's OMPIO, which does not sieve).
"""
from __future__ import annotations

import pytest

from conftest import MpiRunner
from ioloom.analysis import analyse

MODES = ("strided-view", "small-strided", "collective", "imbalance", "metadata", "reread", "misaligned",
         "lockwait", "clean", "stdio", "random", "rewrite", "bcast-input", "uneven", "independent", "blocking", "sync")
RANKS = 4
KiB, MiB = 1024, 1 << 20


def _trace(runner: MpiRunner, exe, mode: str, root, launcher_options: tuple[str, ...] = (), tag: str = ""):
    """The program in `mode` on RANKS ranks, traced as `ioloom run` traces it; the analysis of its trace."""
    data, out = root / f"data-{mode}", root / f"trace-{mode}{tag}"
    data.mkdir(exist_ok=True)
    runner.trace(RANKS, [*launcher_options, exe, mode, data], out, timeout=180)
    return analyse(out, workers=1)


@pytest.fixture(scope="module")
def runs(module_mpi, tmp_path_factory):
    """{mode: Analysis} for every mode under one MPI (plus 'romio': strided-view with ROMIO under Open MPI)."""
    runner = module_mpi
    exe = runner.compile("pattern_findings.c")
    root = tmp_path_factory.mktemp(f"findings-{runner.name}")
    out = {mode: _trace(runner, exe, mode, root) for mode in MODES}
    if runner.name == "openmpi":
        out["romio"] = _trace(runner, exe, "strided-view", root, ("--mca", "io", "romio321"), "-romio")
    out["mpi"] = runner.name
    out["again"] = lambda mode, attempt: _trace(runner, exe, mode, root, tag=f"-again{attempt}")
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
def test_well_behaved_runs_have_no_findings(runs):
    assert runs["clean"].findings == [], [f.message for f in runs["clean"].findings]
    # a short collective run may spend most of its file time in MPI_File_open, which non-data-time explains
    serious = [f for f in runs["collective"].findings if f.severity != "info"]
    assert serious == [], [f.message for f in serious]


@pytest.mark.mpi
def test_every_check_is_listed_with_its_thresholds(runs):
    checks = runs["clean"].to_json()["checks"]
    assert {code for c in checks for code in c["codes"]} >= {"stdio-heavy", "data-sieving", "non-data-time"}
    stdio = next(c for c in checks if c["codes"] == ["stdio-heavy"])
    assert stdio["thresholds"] == {"stdio_share": 0.1, "stdio_min_bytes": MiB} and stdio["drishti"] == ["S01"]
    assert stdio["fired"] == [] and all(not c["fired"] for c in checks)
    fired = next(c for c in runs["stdio"].to_json()["checks"] if c["codes"] == ["stdio-heavy"])
    assert fired["fired"] == ["stdio-heavy"]


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
def test_redundant_reads_by_the_same_rank(runs):
    f = _one(runs["reread"], "redundant-reads")
    assert f.evidence["counts"]["bytes_read"] == RANKS * 32 * 256 * KiB
    assert f.evidence["counts"]["read_again_by_the_same_rank"] == RANKS * 31 * 256 * KiB
    assert f.evidence["counts"]["bytes_read_again"] == RANKS * 32 * 256 * KiB - 256 * KiB  # 256 KiB distinct
    assert "redundant-reads" not in _codes(runs["clean"]) | _codes(runs["metadata"])


@pytest.mark.mpi
def test_redundant_reads_by_several_ranks(runs):
    """Every rank reads all of one 2 MiB input once: three of its four copies are redundant (Drishti P09)."""
    f = _one(runs["bcast-input"], "redundant-reads")
    counts = f.evidence["counts"]
    assert counts["bytes_read"] == RANKS * 2 * MiB and counts["bytes_read_again"] == (RANKS - 1) * 2 * MiB
    assert counts["read_again_by_the_same_rank"] == 0 and f.evidence["ranks"] == list(range(RANKS))
    assert "MPI_Bcast" in f.advice


@pytest.mark.mpi
def test_redundant_writes(runs):
    f = _one(runs["rewrite"], "redundant-writes")
    assert f.evidence["counts"]["bytes_written"] == RANKS * 4 * MiB
    assert f.evidence["counts"]["bytes_overwritten_at_least"] == RANKS * 3 * MiB
    for mode in ("clean", "collective", "strided-view", "uneven"):
        assert "redundant-writes" not in _codes(runs[mode]), mode


@pytest.mark.mpi
def test_stdio_heavy(runs):
    f = _one(runs["stdio"], "stdio-heavy")
    line = len("step 000000000 rank 0000 energy +1.000000000000e+00 ok\n")
    assert f.evidence["counts"]["stdio_bytes"] == f.evidence["counts"]["bytes"] == RANKS * 32768 * line
    assert f.evidence["counts"]["stdio_calls"] == RANKS * 32768 and "setvbuf" in f.advice
    for mode in ("clean", "collective", "metadata"):
        assert "stdio-heavy" not in _codes(runs[mode]), mode


@pytest.mark.mpi
def test_random_and_small_reads(runs):
    f = _one(runs["random"], "random-reads")
    assert f.evidence["counts"]["requests"] == RANKS * 1200
    assert 0.4 * RANKS * 1200 <= f.evidence["counts"]["random"] <= 0.6 * RANKS * 1200  # about half go backwards
    small = _one(runs["random"], "small-reads")
    assert small.evidence["counts"]["small_requests"] == RANKS * 1200
    for mode in ("clean", "imbalance", "bcast-input", "reread"):
        assert not {"random-reads", "random-writes"} & _codes(runs[mode]), mode


@pytest.mark.mpi
def test_shared_file_imbalance_and_no_mpiio(runs):
    f = _one(runs["uneven"], "shared-file-imbalance")
    assert f.evidence["counts"]["bytes_by_rank"] == {r: (r + 1) * MiB for r in range(RANKS)}
    assert f.evidence["counts"]["byte_spread_share"] == pytest.approx(3 / 10)
    assert "no-mpiio" in _codes(runs["uneven"])
    for mode in ("clean", "collective", "small-strided", "bcast-input"):
        assert "shared-file-imbalance" not in _codes(runs[mode]), mode
    for mode in ("clean", "collective", "imbalance"):  # no shared file, or MPI-IO used
        assert "no-mpiio" not in _codes(runs[mode]), mode


@pytest.mark.mpi
def test_independent_where_collective_would_serve(runs):
    f = _one(runs["independent"], "independent-writes")
    assert f.evidence["counts"]["independent_calls"] == f.evidence["counts"]["calls"] == 1024
    assert "MPI_File_write_all" in f.advice
    for mode in ("collective", "small-strided", "strided-view"):  # collective, or fewer than 1000 calls
        assert "independent-writes" not in _codes(runs[mode]), mode


@pytest.mark.mpi
def test_blocking_io_that_could_overlap(runs):
    f = _one(runs["blocking"], "blocking-mpiio")
    hidden = f.evidence["counts"]["could_hide_seconds"]
    assert {1, 2, 3} <= set(hidden)  # the ranks that waited in the collective for rank 0
    assert all(hidden[r] >= 0.3 for r in (1, 2, 3))  # 6 waits of 80 ms each
    assert "MPI_File_iwrite_at_all" in f.advice
    for mode in ("collective", "independent", "strided-view"):
        assert "blocking-mpiio" not in _codes(runs[mode]), mode


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


@pytest.mark.mpi
def test_sync_time_is_explained(runs):
    """Most of the file time in MPI_File_sync: the finding names the call and its seconds, with sync advice.
    On a machine loaded far past its cores, the 128 writes can be descheduled long enough to take as long as the
    syncs (seen at load 20 on 2 cores): the run is traced again, at most twice, before the finding must be there."""
    sync = runs["sync"]
    for attempt in range(2):
        if "non-data-time" in _codes(sync):
            break
        sync = runs["again"]("sync", attempt)
    f = _one(sync, "non-data-time")
    costs = f.evidence["counts"]["seconds_by_call"]
    assert "MPI_File_sync" in f.message and list(costs)[:3].count("MPI_File_sync") == 1
    assert costs["MPI_File_sync"] > 0 and f.evidence["counts"]["sync_seconds"] == pytest.approx(costs["MPI_File_sync"])
    fsync = f.evidence["counts"]["file_system_seconds"]["sync"]  # the fsync calls under MPI_File_sync
    assert 0 < fsync <= costs["MPI_File_sync"] and "waiting for other ranks" in f.message
    assert "stable storage" in f.advice and f.severity == "info"
    for mode in ("clean", "rewrite"):  # POSIX files opened once, never synced: the writes take the time
        assert "non-data-time" not in _codes(runs[mode]), mode
    # rank 0 syncs each of its 64 blocks: where the disk makes that long enough to be a finding (on a quiet VM
    # whose disk syncs in 0.5 ms it is not), the finding says it is sync time
    for fsyncs in (f for f in runs["imbalance"].findings if f.code == "non-data-time"):
        assert fsyncs.evidence["counts"]["sync_seconds"] > fsyncs.evidence["counts"]["metadata_seconds"]
