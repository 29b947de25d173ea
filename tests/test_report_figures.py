"""What the report's plots show, as a user reads them (issue 13: screenshots of the demo, a stdio-heavy run, a
run with no findings, LAMMPS and a Darshan log in headless Chromium): no plot of the MPI runtime's files beside a
table of the program's, no 'concurrent writes' of a file one rank wrote, calls of microseconds visible on a
run of seconds, one colour and a legend per layer and direction, read collectives that read, a partial
Darshan log's bytes said to be partial, a counters-only log's bytes from its counters and no 'No findings'
where no check could run."""
from __future__ import annotations

from pathlib import Path

from ioloom.analysis import analyse
from ioloom.analysis.metrics import human_bytes
from ioloom.analysis.synthetic import F_SETLKW, F_UNLCK, F_WRLCK, Builder
from ioloom.report import _mbps, figures, render, two_phase

DARSHAN = Path(__file__).parent / "vectors" / "darshan"
SECOND = 1_000_000_000


def _locks(path: str):
    """Rank 0 locks, writes and unlocks a range of `path`."""
    b = Builder()
    f = b.file(path)
    b.call(0, "posix", "fcntl", 0, 10, f, 0, 4096, ret=0, aux=F_SETLKW | F_WRLCK << 16)
    b.call(0, "posix", "pwrite", 20, 30, f, 0, 4096)
    b.call(0, "posix", "fcntl", 40, 50, f, 0, 4096, ret=0, aux=F_SETLKW | F_UNLCK << 16)
    return analyse(b.trace(), workers=1)


def test_locks_of_the_mpi_runtime_are_not_drawn_beside_no_locks_of_the_program():
    """OMPIO's lock probes on FILE.locktest.N are the runtime's: the table says no lock, so must the plot."""
    probe = _locks("/data/out.locktest.0")
    assert figures.lock_timeline(probe) is None
    assert "No record locks were taken." in render(probe)
    assert figures.lock_timeline(_locks("/data/out")) is not None


def _writes(paths: list[str]):
    """Rank r writes 4 KiB to paths[r % len(paths)] at r seconds, for 1 µs."""
    b = Builder()
    for rank in range(4):
        f = b.file(paths[rank % len(paths)])
        t = rank * SECOND
        b.call(rank, "posix", "pwrite", t, t + 1000, f, rank * 4096, 4096)
    return analyse(b.trace(), workers=1)


def test_concurrent_writes_are_drawn_only_on_a_file_two_ranks_wrote():
    own_files = _writes([f"/data/out.{r}" for r in range(4)])
    assert figures.concurrent_writes(own_files) is None
    assert "No file was written by two ranks or more" in render(own_files)
    assert figures.concurrent_writes(_writes(["/data/shared"])) is not None


def test_calls_of_a_microsecond_are_visible_on_a_run_of_seconds():
    fig = figures.concurrent_writes(_writes(["/data/shared"]))
    span = 3 + 1e-6  # seconds from the first write's start to the last one's end
    assert min(fig.data[0].x) >= span / figures.VISIBLE * 0.999
    assert "1.0 µs" in fig.data[0].hovertext[0]  # the call's own time


def test_sizes_and_bandwidth_leave_out_system_files_and_share_colours_and_legend():
    b = Builder()
    lib, out = b.file("/usr/lib/libfoo.so"), b.file("/data/out")
    for i in range(8):
        b.call(0, "posix", "pread", i * 100, i * 100 + 10, lib, i * 64, 64)
        b.call(0, "stdio", "fwrite", i * 100 + 20, i * 100 + 30, out, i * 100, 100)
        b.call(0, "posix", "pwrite", i * 100 + 40, i * 100 + 50, out, 4096 + i * 8192, 8192)
    a = analyse(b.trace(), workers=1)
    sizes, bandwidth = figures.size_histograms(a), figures.bandwidth_over_time(a)
    colours = {trace.name: trace.marker.color for trace in sizes.data}
    assert set(colours) == {"stdio write", "POSIX write"}  # not the library's reads
    assert {trace.name: trace.line.color for trace in bandwidth.data} == colours
    assert len(set(colours.values())) == 2
    assert sizes.layout.showlegend and bandwidth.layout.showlegend


def test_a_read_collective_that_skipped_two_phase_read_its_parts():
    ranks = {"aggregators": [{"rank": r, "bytes": 4096} for r in range(4)]}
    assert two_phase({**ranks, "op": "MPI_File_read_at_all"}, {"cb_nodes": "1"}) == \
        "skipped: 4 ranks read their own parts (cb_nodes=1)"
    assert two_phase({**ranks, "op": "MPI_File_write_all"}, {"cb_nodes": "1"}) == \
        "skipped: 4 ranks wrote their own parts (cb_nodes=1)"


def test_a_partial_darshan_log_says_its_bytes_are_those_of_the_segments_kept():
    page = render(analyse(DARSHAN / "dd-partial-dxt.darshan"))
    assert "written by the program (POSIX); in the DXT segments kept, of 6.10 MiB in Darshan&#x27;s counters" in page


def test_a_bandwidth_under_one_mb_per_second_is_not_zero():
    assert _mbps(0.000798) == "0.000798"
    assert _mbps(0.0) == "0.0" and _mbps(2391.04) == "2,391.0" and _mbps(None) == "–"


def test_a_counters_only_darshan_log_gives_its_bytes_and_says_no_check_could_run():
    analysis = analyse(DARSHAN / "mpich-collective-counters.darshan")
    page = render(analysis)
    modules = {m["module"]: m for m in analysis.to_json()["darshan"]["modules"]}
    written = human_bytes(modules["MPI-IO"]["bytes_written"])
    assert f'{written}</div><div class="k">written by the program (Darshan&#x27;s counters: MPI-IO)' in page
    assert "No check could run" in page and "No findings" not in page
