"""The arithmetic of the analysis on traces built by hand, where every number is known in advance."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ioloom.analysis import Options, analyse
from ioloom.analysis.range_tables import union
from ioloom.analysis.synthetic import F_SETLKW, F_UNLCK, F_WRLCK, Builder

MiB = 1 << 20
S = 1_000_000_000  # ns per second


def _riot_job() -> Builder:
    """Rank 0: one 1 s MPI write with a 0.5 s POSIX write of 2 MiB under it; rank 1: 2 s with 1 s of POSIX."""
    b = Builder()
    f = b.file("/data/out")
    for rank, (t_mpi, t_posix) in enumerate(((1 * S, S // 2), (2 * S, 1 * S))):
        call = b.call(rank, "mpiio", "MPI_File_write_at", 0, t_mpi, f, rank * 2 * MiB, 2 * MiB)
        b.call(rank, "posix", "pwrite", 10, 10 + t_posix, f, rank * 2 * MiB, 2 * MiB, parent=call)
    return b


def test_riot_bandwidths_follow_the_thesis_definitions():
    bw = analyse(_riot_job().trace(), workers=1).to_json()["bandwidth"]["write"]
    assert bw["bytes"] == 4 * MiB
    assert bw["perceived_mpi_MBps"] == pytest.approx(2 / 1 + 2 / 2)       # sum_r B_r / T_r^MPI
    assert bw["effective_mpi_MBps"] == pytest.approx(4 / 3)               # sum B / sum T^MPI
    assert bw["effective_posix_MBps"] == pytest.approx(4 / 1.5)           # sum B / sum T^POSIX
    # the thesis's bound: perceived MPI <= N x effective POSIX
    assert bw["perceived_mpi_MBps"] <= 2 * bw["effective_posix_MBps"]


def test_posix_only_trace_uses_the_applications_own_calls():
    b = Builder()
    f = b.file("/data/x")
    b.plain_write(0, 0, 2 * S, f, 0, 8 * MiB, mpi_op=None)
    bw = analyse(b.trace(), workers=1).to_json()["bandwidth"]["write"]
    assert bw["perceived_mpi_MBps"] is None and bw["effective_mpi_MBps"] is None
    assert bw["effective_posix_MBps"] == pytest.approx(8 / (2 - 2e-9), rel=1e-6)


def test_darshan_size_bins_take_the_upper_bound_inclusive():
    b = Builder()
    f = b.file("/data/sizes")
    sizes = [100, 101, 1024, 1025, 10 << 10, 100 << 10, MiB, MiB + 1, 4 * MiB, 10 * MiB, 100 * MiB, 1 << 30,
             (1 << 30) + 1]
    offset = 0
    for i, size in enumerate(sizes):
        b.plain_write(0, i * 10, i * 10 + 5, f, offset, size, mpi_op=None)
        offset += size
    counters = analyse(b.trace(), workers=1).to_json()["darshan_counters"]
    hist = next(c for c in counters if c["layer"] == "posix")["size_histogram"]
    assert list(hist.values()) == [1, 2, 2, 1, 1, 2, 1, 1, 1, 1]
    assert hist["SIZE_WRITE_0_100"] == 1 and hist["SIZE_WRITE_1G_PLUS"] == 1


def test_sequential_consecutive_and_strides():
    b = Builder()
    f = b.file("/data/seq")
    # offsets: 0, 100 (consecutive), 300 (sequential, gap 100), 50 (backwards), 150 (consecutive)
    for i, off in enumerate((0, 100, 300, 50, 150)):
        b.plain_write(0, i * 10, i * 10 + 5, f, off, 100, mpi_op=None)
    c = analyse(b.trace(), workers=1).to_json()["darshan_counters"][0]
    assert (c["sequential"], c["consecutive"]) == (3, 2)
    assert {"stride": 0, "count": 2} in c["strides"] and {"stride": 100, "count": 1} in c["strides"]


def _strided_job(ranks: int, block: int, count: int, segmented: bool, file_per_rank: bool = False) -> Builder:
    b = Builder()
    for rank in range(ranks):
        f = b.file(f"/data/f{rank}" if file_per_rank else "/data/shared")
        for i in range(count):
            off = (rank * count + i) * block if segmented or file_per_rank else (i * ranks + rank) * block
            if file_per_rank:
                off = i * block
            t = (rank * count + i) * 100
            b.plain_write(rank, t, t + 50, f, off, block, mpi_op=None)
    return b


@pytest.mark.parametrize("segmented, per_rank, sharing, order", [
    (False, False, "N-1 strided (SFSA strided)", "strided"),
    (True, False, "N-1 segmented (SFSA non-strided)", "sequential"),
    (False, True, "N-N (MFWA)", "sequential"),
])
def test_pattern_classes(segmented, per_rank, sharing, order):
    patterns = analyse(_strided_job(4, 4096, 16, segmented, per_rank).trace(), workers=1).patterns
    assert {p["sharing"] for p in patterns} == {sharing}
    assert {p["order"] for p in patterns} == {order}
    if order == "strided":
        assert patterns[0]["stride"] == 4 * 4096 and patterns[0]["interleaved"]


def test_one_process_many_files_is_1_to_n():
    b = Builder()
    for i in range(3):
        b.plain_write(0, i * 10, i * 10 + 5, b.file(f"/data/part{i}"), 0, 4096, mpi_op=None)
    assert {p["sharing"] for p in analyse(b.trace(), workers=1).patterns} == {"1-N"}


def test_random_order():
    b = Builder()
    f = b.file("/data/random")
    rng = np.random.default_rng(1)
    for i, off in enumerate(rng.permutation(64) * 4096):
        b.plain_write(0, i * 10, i * 10 + 5, f, int(off), 4096, mpi_op=None)
    assert analyse(b.trace(), workers=1).patterns[0]["order"] == "random"


def test_misalignment_counts_requests_that_cross_a_stripe_they_need_not():
    b = Builder()
    f = b.file("/data/misaligned")
    # 1 MiB requests after a 4 KiB header: each touches two 1 MiB stripes; then 64 KiB inside one stripe
    for i in range(8):
        b.plain_write(0, i * 10, i * 10 + 5, f, 4096 + i * MiB, MiB, mpi_op=None)
    for i in range(8):
        b.plain_write(0, 100 + i * 10, 105 + i * 10, f, 16 * MiB + i * 65536, 65536, mpi_op=None)
    pattern = analyse(b.trace(), Options(stripe_size=MiB), workers=1).patterns[0]
    assert pattern["misaligned_requests"] == 8
    assert analyse(b.trace(), Options(stripe_size=4096), workers=1).patterns[0]["misaligned_requests"] == 0


def test_lock_wait_and_hold_times_and_fcntl_commands_that_are_not_locks():
    b = Builder()
    f = b.file("/data/locked")
    b.call(0, "posix", "fcntl", 0, 300, f, 0, 4096, ret=0, aux=F_SETLKW | F_WRLCK << 16)     # waits 300 ns
    b.call(0, "posix", "fcntl", 350, 360, f, 0, 0, ret=0, aux=5 | F_WRLCK << 16)             # F_GETLK: not a lock
    b.call(0, "posix", "fcntl", 370, 371, f, -1, 1, ret=0, aux=3)                             # F_GETFL
    b.call(0, "posix", "fcntl", 1300, 1400, f, 0, 4096, ret=0, aux=F_SETLKW | F_UNLCK << 16)  # held 1000 ns
    a = analyse(b.trace(), workers=1)
    assert a.lock_summary == [{"file_id": 0, "locks": 1, "ranks": 1, "wait_s": 300e-9, "held_s": 1000e-9,
                               "unreleased": 0}]


def test_data_sieving_decomposition_and_amplification():
    b = Builder()
    f = b.file("/data/sieved")
    b.sieved_write(0, 0, f, 0, 2 * MiB, 512 << 10)
    a = analyse(b.trace(), workers=1)
    out = a.to_json()
    op = out["crosslayer"][0]
    assert op["posix_ops"] == {"read": 4, "write": 4, "lock": 4, "unlock": 4, "other": 0}
    assert op["sieving_calls"] == 1
    split = op["time_split"]
    assert sum(v["share"] for v in split.values()) == pytest.approx(1)
    assert split["read"]["seconds"] == pytest.approx(4 * 999e-9)
    assert out["amplification"]["write"]["ratio"] == pytest.approx(1.0)
    assert out["bandwidth"]["read"]["mpi_bytes"] == 0


def test_collective_groups_ranks_and_finds_aggregators():
    b = Builder()
    f = b.file("/data/coll")
    for rank in range(4):
        call = b.call(rank, "mpiio", "MPI_File_write_all", 0, 1000, f, rank * MiB, MiB, coll_seq=7)
        if rank in (0, 2):  # two aggregators write everything
            b.call(rank, "posix", "pwrite", 10, 900, f, rank * MiB, 2 * MiB, parent=call)
    coll = analyse(b.trace(), workers=1).to_json()["collectives"]
    assert len(coll) == 1 and coll[0]["ranks"] == 4 and coll[0]["bytes"] == 4 * MiB
    assert coll[0]["aggregators"] == [{"rank": 0, "bytes": 2 * MiB}, {"rank": 2, "bytes": 2 * MiB}]


def test_redundant_reads_count_distinct_bytes():
    b = Builder()
    f = b.file("/data/input")
    for i in range(40):
        b.call(0, "posix", "pread", i * 10, i * 10 + 5, f, (i % 4) * 65536, 65536)
    a = analyse(b.trace(), workers=1)
    found = [x for x in a.findings if x.code == "redundant-reads"]
    assert found and found[0].evidence["counts"]["bytes_read"] == 40 * 65536
    assert found[0].evidence["counts"]["bytes_read_again"] == 36 * 65536
    assert found[0].evidence["counts"]["read_again_by_the_same_rank"] == 36 * 65536


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 500), st.integers(0, 80)), min_size=1, max_size=40))
def test_unique_bytes_matches_a_brute_force_union(intervals):
    code = np.array([g for g, _, _ in intervals], np.int64)
    start = np.array([s for _, s, _ in intervals], np.int64)
    end = start + np.array([n for _, _, n in intervals], np.int64)
    merged_code, merged_start, merged_end = union(code, start, end)
    assert (merged_start[1:] > merged_end[:-1])[merged_code[1:] == merged_code[:-1]].all()  # disjoint, not touching
    got = {g: int((merged_end - merged_start)[merged_code == g].sum()) for g in set(merged_code.tolist())}
    for g in set(code.tolist()):
        covered = set()
        for c, s, e in zip(code, start, end):
            if c == g:
                covered.update(range(s, e))
        assert got.get(g, 0) == len(covered)


def test_bandwidth_over_time_bins_merge_exactly():
    b = Builder()
    f = b.file("/data/t")
    b.plain_write(0, 0, 10, f, 0, 100, mpi_op=None)
    b.plain_write(0, 10 * S - 10, 10 * S, f, 100, 100, mpi_op=None)       # rank 0 spans 10 s: coarse bins
    b.plain_write(1, 5 * S, 5 * S + 10, f, 200, 100, mpi_op=None)         # rank 1: one instant: fine bins
    a = analyse(b.trace(), workers=1)
    assert int(a.timebins["bytes"].sum()) == 300
    assert a.bin_width_ns & (a.bin_width_ns - 1) == 0 and a.bin_width_ns * 2048 >= 10 * S


def test_trace_problems_and_dropped_events_are_reported():
    trace = _riot_job().trace()
    trace.problems.append("rank 3: stream truncated after 1200 events (chunk 5 of 6 unreadable)")
    trace.streams[0].info["dropped_events"] = 17
    summary = analyse(trace, workers=1).to_json()["summary"]
    assert summary["problems"] == ["rank 3: stream truncated after 1200 events (chunk 5 of 6 unreadable)"]
    assert summary["dropped_events"] == 17


def test_local_processes_give_the_same_result_as_one_process():
    trace = _strided_job(4, 4096, 32, segmented=False).trace()
    serial = analyse(trace, workers=1).to_json()
    parallel = analyse(trace, workers=2).to_json()
    assert parallel["summary"].pop("executor").startswith("local processes")
    serial["summary"].pop("executor")
    assert json.dumps(serial, sort_keys=True) == json.dumps(parallel, sort_keys=True)


def test_empty_trace_has_no_findings_and_a_json_result():
    out = analyse(Builder().trace(), workers=1).to_json()
    assert out["findings"] == [] and out["summary"]["events"] == 0
    json.dumps(out)
