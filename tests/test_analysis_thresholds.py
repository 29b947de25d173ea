"""Every threshold of the findings, tested just either side on traces built by hand (synthetic.Builder): a
trace exactly at the threshold fires the finding, one a byte, a nanosecond or a call short does not.

The cases are built from findings.T, so a changed threshold moves the traces with it; the documentation's
table of thresholds is checked against findings.Thresholds here too.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from ioloom.analysis import analyse
from ioloom.analysis.findings import CHECKS, T, Thresholds
from ioloom.analysis.synthetic import F_SETLKW, F_UNLCK, F_WRLCK, Builder

KiB, MiB = 1 << 10, 1 << 20
MS = 1_000_000  # ns
S = 1_000_000_000
SMALL = 4 * KiB  # under Options.small_request
BIG = 64 * KiB  # Options.small_request: not small


def _codes(b: Builder) -> set[str]:
    return {f.code for f in analyse(b.trace(), workers=1).findings}


def _posix_run(b: Builder, rank: int, path: str, sizes, t0: int = 0, op: str = "pwrite", offsets=None,
               step: int = 1000, layer: str = "posix") -> int:
    """POSIX (or stdio) calls of `sizes` one after the other from offset 0 (or `offsets`); returns the end time."""
    f, offset, t = b.file(path), 0, t0
    for i, size in enumerate(sizes):
        at = offsets[i] if offsets is not None else offset
        b.call(rank, layer, op, t, t + step // 2, f, at, size)
        offset, t = at + size, t + step
    return t


def stdio(stdio_bytes: int, other_bytes: int) -> Builder:
    b = Builder()
    _posix_run(b, 0, "/data/dump.txt", [stdio_bytes], op="fwrite", layer="stdio")
    if other_bytes:
        _posix_run(b, 0, "/data/field.bin", [other_bytes], t0=10_000)
    return b


def small_requests(small: int, big: int) -> Builder:
    b = Builder()
    _posix_run(b, 0, "/data/many", [SMALL] * small + [BIG] * big)
    return b


def random_writes(jumps: int, ops: int) -> Builder:
    """`ops` 1 MiB writes going forward, of which `jumps` go back to offset 0 (one random access each)."""
    b = Builder()
    back = set(range(1, ops)[::max(1, (ops - 1) // max(jumps, 1))][:jumps])
    offsets = [0 if i in back else i * MiB for i in range(ops)]
    _posix_run(b, 0, "/data/random", [MiB] * ops, offsets=offsets)
    return b


def accesses(op: str, spans) -> Builder:
    """(rank, offset, size) calls of `op` on one file, one after the other."""
    b = Builder()
    f = b.file("/data/file")
    for i, (rank, offset, size) in enumerate(spans):
        b.call(rank, "posix", op, i * 1000, i * 1000 + 500, f, offset, size)
    return b


def reads(spans) -> Builder:
    return accesses("pread", spans)


def writes(spans) -> Builder:
    return accesses("pwrite", spans)


def shared_bytes(a: int, b_: int) -> Builder:
    """Two ranks write a and b bytes of one file (segmented), in calls of the same duration."""
    b = Builder()
    f = b.file("/data/shared")
    b.call(0, "posix", "pwrite", 0, 10 * MS, f, 0, a)
    b.call(1, "posix", "pwrite", 0, 10 * MS, f, a, b_)
    return b


def shared_time(t0: int, t1: int) -> Builder:
    b = Builder()
    f = b.file("/data/shared")
    b.call(0, "posix", "pwrite", 0, t0, f, 0, MiB)
    b.call(1, "posix", "pwrite", 0, t1, f, MiB, MiB)
    return b


def non_data(meta_ns: int, data_ns: int) -> Builder:
    b = Builder()
    f = b.file("/data/out")
    b.call(0, "posix", "open", 0, meta_ns, f)
    if data_ns:
        b.call(0, "posix", "pwrite", meta_ns, meta_ns + data_ns, f, 0, MiB)
    return b


def rank_times(times_ns) -> Builder:
    b = Builder()
    for rank, t in enumerate(times_ns):
        b.call(rank, "posix", "pwrite", 0, t, b.file(f"/data/part.{rank}"), 0, MiB)
    return b


def metadata(calls: int) -> Builder:
    b = Builder()
    f = b.file("/data/meta")
    for i in range(calls):
        b.call(0, "posix", "stat", i * 1000, i * 1000 + 10, f)
    b.call(0, "posix", "pwrite", calls * 1000, calls * 1000 + 10, f, 0, SMALL)
    return b


def first_byte(before_ns: int, after_ns: int) -> Builder:
    b = Builder()
    f = b.file("/data/out")
    b.call(0, "posix", "open", 0, before_ns, f)
    b.call(0, "posix", "pwrite", before_ns, before_ns + after_ns, f, 0, MiB)
    return b


def locks(wait_ns: int, write_ns: int) -> Builder:
    """Two ranks each lock (waiting wait_ns), write (write_ns) and unlock their half of one file."""
    b = Builder()
    f = b.file("/data/locked")
    for rank in (0, 1):
        t = rank * S
        b.call(rank, "posix", "fcntl", t, t + wait_ns, f, rank * MiB, MiB, ret=0, aux=F_SETLKW | F_WRLCK << 16)
        b.call(rank, "posix", "pwrite", t + wait_ns, t + wait_ns + write_ns, f, rank * MiB, MiB)
        b.call(rank, "posix", "fcntl", t + wait_ns + write_ns + 1, t + wait_ns + write_ns + 2, f, rank * MiB, MiB,
               ret=0, aux=F_SETLKW | F_UNLCK << 16)
    return b


def misaligned(bad: int, requests: int) -> Builder:
    """`requests` 4 KiB writes going forward, `bad` of them straddling a 1 MiB stripe boundary."""
    b = Builder()
    offsets = [i * MiB + (MiB - 2 * KiB if i < bad else 0) for i in range(requests)]
    _posix_run(b, 0, "/data/misaligned", [SMALL] * requests, offsets=offsets)
    return b


def interleaved(small0: int, small1: int) -> Builder:
    """Two ranks' small POSIX writes interleaved block by block on one file."""
    b = Builder()
    f = b.file("/data/shared")
    for rank, count in ((0, small0), (1, small1)):
        for i in range(count):
            b.call(rank, "posix", "pwrite", i * 1000, i * 1000 + 500, f, (2 * i + rank) * SMALL, SMALL)
    return b


def no_mpiio(total: int) -> Builder:
    b = Builder()
    f = b.file("/data/shared")
    b.call(0, "posix", "pwrite", 0, 1000, f, 0, total // 2)
    b.call(1, "posix", "pwrite", 0, 1000, f, total // 2, total - total // 2)
    return b


def independent(indep: int, coll: int) -> Builder:
    """Two ranks write one file with `indep` independent and `coll` collective MPI-IO calls (each with its POSIX
    write), split between them."""
    b = Builder()
    f = b.file("/data/shared")
    for i in range(indep + coll):
        rank, t = i % 2, i * 1000
        op = "MPI_File_write_at" if i < indep else "MPI_File_write_at_all"
        b.plain_write(rank, t, t + 500, f, i * BIG, BIG, mpi_op=op, coll_seq=-1 if i < indep else (i - indep) // 2)
    return b


def blocking(write_ns: int, window_ns: int) -> Builder:
    """One rank: a blocking MPI-IO write at the start and one at the end of its window, nothing in between."""
    b = Builder()
    f = b.file("/data/ckpt")
    b.plain_write(0, 0, write_ns, f, 0, MiB, mpi_op="MPI_File_write_at")
    b.plain_write(0, window_ns - write_ns, window_ns, f, MiB, MiB, mpi_op="MPI_File_write_at")
    return b


def amplified(asked: int, moved: int) -> Builder:
    """One collective MPI-IO write asking `asked` bytes whose POSIX writes under it move `moved` bytes."""
    b = Builder()
    f = b.file("/data/amplified")
    call = b.call(0, "mpiio", "MPI_File_write_at_all", 0, 10 * MS, f, 0, asked, coll_seq=0)
    b.call(0, "posix", "pwrite", MS, 9 * MS, f, 0, moved, parent=call)
    return b


def _ns(seconds: float) -> int:
    return round(seconds * S)


R_MIN, SHARE = T.random_min, T.random_share
CASES = {
    # code: (trace at the threshold, traces just short of it)
    "stdio-heavy": (lambda: stdio(T.stdio_min_bytes, 9 * T.stdio_min_bytes),
                    [lambda: stdio(T.stdio_min_bytes, 9 * T.stdio_min_bytes + 1),  # share just under 10 %
                     lambda: stdio(T.stdio_min_bytes - 1, 0)]),                   # too few bytes
    "small-writes": (lambda: small_requests(T.small_requests_min, 9 * T.small_requests_min),
                     [lambda: small_requests(T.small_requests_min, 9 * T.small_requests_min + 1),
                      lambda: small_requests(T.small_requests_min - 1, 0)]),
    "random-writes": (lambda: random_writes(R_MIN, int(R_MIN / SHARE)),
                      [lambda: random_writes(R_MIN, int(R_MIN / SHARE) + 1),
                       lambda: random_writes(R_MIN - 1, R_MIN)]),
    "redundant-reads": (lambda: reads([(0, 0, MiB), (1, 0, MiB)]),                     # 1 MiB again, 50 %
                        [lambda: reads([(0, 0, MiB), (1, 1, MiB)]),                    # 1 MiB - 1 again
                         lambda: reads([(0, 0, MiB), (1, 0, MiB), (1, MiB, 1)])]),     # 1 MiB again, < 50 %
    "redundant-writes": (lambda: writes([(0, 0, MiB), (0, 0, MiB)]),
                         [lambda: writes([(0, 0, MiB), (0, 1, MiB)]),
                          lambda: writes([(0, 0, MiB), (0, 0, MiB), (0, MiB, 1)])]),
    "shared-file-imbalance": (lambda: shared_bytes(23 * 32 * KiB, 17 * 32 * KiB),      # spread 15 % of 1.25 MiB
                              [lambda: shared_bytes(23 * 32 * KiB - 2, 17 * 32 * KiB + 2),
                               lambda: shared_bytes(MiB - 1, 0 + 0)]),                 # under 1 MiB
    "non-data-time": (lambda: non_data(_ns(T.non_data_min_s), _ns(T.non_data_min_s)),   # 50 %, 0.1 s
                      [lambda: non_data(_ns(T.non_data_min_s), _ns(T.non_data_min_s) + 1),
                       lambda: non_data(_ns(T.non_data_min_s) - 1, 0)]),
    "rank-imbalance": (lambda: rank_times([_ns(0.1), _ns(0.1), int(_ns(0.1) * T.straggler_ratio)]),
                       [lambda: rank_times([_ns(0.1), _ns(0.1), int(_ns(0.1) * T.straggler_ratio) - 1]),
                        lambda: rank_times([_ns(0.01), _ns(0.01), _ns(0.01) + _ns(T.straggler_min_s) - 1])]),
    "metadata-storm": (lambda: metadata(T.metadata_min_ops), [lambda: metadata(T.metadata_min_ops - 1)]),
    "time-before-first-byte": (lambda: first_byte(_ns(T.first_byte_min_s), _ns(T.first_byte_min_s)),
                               [lambda: first_byte(_ns(T.first_byte_min_s) - 1, _ns(T.first_byte_min_s)),
                                lambda: first_byte(_ns(T.first_byte_min_s), _ns(T.first_byte_min_s) + 2)]),
    # wait / write = 0.1 is 0.02 s against 0.1 * 0.2 s, which floating point makes 0.020000000000000004: a ns over
    "lock-serialised-writes": (lambda: locks(10 * MS + 1, 100 * MS), [lambda: locks(10 * MS - 1, 100 * MS)]),
    "stripe-misalignment": (lambda: misaligned(T.misaligned_min, int(T.misaligned_min / T.misaligned_share)),
                            [lambda: misaligned(T.misaligned_min - 1, T.misaligned_min),
                             lambda: misaligned(T.misaligned_min, int(T.misaligned_min / T.misaligned_share) + 1)]),
    "small-strided-writes": (lambda: interleaved(T.small_writes_min // 2, T.small_writes_min // 2),
                             [lambda: interleaved(T.small_writes_min // 2, T.small_writes_min // 2 - 1)]),
    "no-mpiio": (lambda: no_mpiio(T.no_mpiio_min_bytes), [lambda: no_mpiio(T.no_mpiio_min_bytes - 1)]),
    # 2 MiB asked: 3 MiB moved is 1.5x and 1 MiB more; a byte less of either ratio or excess stays silent
    "io-amplification": (lambda: amplified(2 * MiB, 3 * MiB),
                         [lambda: amplified(2 * MiB, 3 * MiB - 1),
                          lambda: amplified(2 * MiB - 2, 3 * MiB - 3)]),
    "independent-writes": (lambda: independent(T.independent_min, T.independent_min),
                           [lambda: independent(T.independent_min, T.independent_min + 2),
                            lambda: independent(T.independent_min - 1, 0)]),
    "blocking-mpiio": (lambda: blocking(_ns(T.overlap_min_s) // 2, _ns(T.overlap_min_s / T.overlap_share)),
                       [lambda: blocking(_ns(T.overlap_min_s) // 2 - 1, _ns(T.overlap_min_s / T.overlap_share)),
                        lambda: blocking(_ns(T.overlap_min_s), _ns(2 * T.overlap_min_s / T.overlap_share) + 10)]),
}


def test_time_spread_on_a_shared_file_has_its_own_floor():
    floor = _ns(T.shared_imbalance_min_s)
    assert "shared-file-imbalance" in _codes(shared_time(2 * floor, floor))
    assert "shared-file-imbalance" not in _codes(shared_time(2 * floor - 1, floor))


@pytest.mark.parametrize("code", sorted(CASES))
def test_fires_at_the_threshold(code):
    at, _ = CASES[code]
    assert code in _codes(at())


@pytest.mark.parametrize("code,case", [(code, i) for code in sorted(CASES) for i in range(len(CASES[code][1]))])
def test_silent_just_short_of_it(code, case):
    assert code not in _codes(CASES[code][1][case]())


def test_lock_wait_becomes_critical_at_its_share():
    def severity(wait):
        return next(f.severity for f in analyse(locks(wait, 100 * MS).trace(), workers=1).findings
                    if f.code == "lock-serialised-writes")
    assert severity(50 * MS + 1) == "critical" and severity(50 * MS - 1) == "warning"


def test_metadata_time_of_one_rank_fires_whatever_its_share():
    limit = _ns(T.metadata_rank_s)
    assert "non-data-time" in _codes(non_data(limit, 100 * limit))
    assert "non-data-time" not in _codes(non_data(limit - 1, 100 * limit))


def test_every_check_has_a_threshold_case_or_none_to_test():
    codes = {code for check in CHECKS for code in check.codes if check.thresholds}
    tested = set(CASES) | {"small-reads", "random-reads", "independent-reads"}  # the same rules, other direction
    assert codes <= tested, codes - tested


def test_the_documented_table_is_the_code_table():
    """docs/analysis.md lists every threshold with its value, once."""
    doc = (Path(__file__).parents[1] / "docs" / "analysis.md").read_text()
    doc = doc[doc.index("Thresholds (`findings.Thresholds`):"):].split("\n\n")[1]
    rows = dict(re.findall(r"^\| `([a-z_]+)` \| ([^|]+?) \|", doc, re.M))
    for row in Thresholds().table():
        assert row["name"] in rows, row["name"]
        assert rows[row["name"]] == Thresholds().shown(row["name"]).split(" = ")[1], row["name"]
    assert set(rows) == {f["name"] for f in Thresholds().table()}
