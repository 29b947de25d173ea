"""Streams are read and summarised range by range (`Stream.ranges`, `Options.range_rows`), so that a worker's
memory follows the range and not the stream. The ranges joined must be exactly the stream read whole, and the
analysis must not depend on the range size: checked here with ranges of a few events on real traces where
the carried state matters (threads writing at once, non-blocking calls completed later, data sieving with
its locks, repeated reads, strided writes)."""
from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest

from ioloom import open_trace
from ioloom.analysis import Options, analyse
from ioloom.analysis.synthetic import Builder

TINY = 17  # events per range: an MPI-IO call and its POSIX calls are cut apart often


def _traced(mpi, tmp_path, name: str, program: str, ranks: int, args, flags: tuple[str, ...] = ()):
    """The trace of `program` on `ranks` ranks; `args` may name DATA, a fresh directory for its files."""
    exe = mpi.compile(program, *flags)
    data = tmp_path / f"data-{name}"
    data.mkdir()
    out = tmp_path / f"trace-{name}"
    launch = mpi.command(ranks, [exe, *(str(a).replace("DATA", str(data)) for a in args)])
    # a flush interval of 0 seals a thread's buffer at every event it records: streams of many small chunks,
    # the unit a range is made of
    done = subprocess.run([sys.executable, "-m", "ioloom", "run", "-o", str(out), "--", *launch],
                          env=mpi.env({"IOLOOM_FLUSH_INTERVAL_MS": "0"}), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return out


@pytest.fixture(scope="module")
def traces(module_mpi, tmp_path_factory):
    """The traces, made once per MPI: the tests only read them."""
    mpi, tmp_path = module_mpi, tmp_path_factory.mktemp(f"ranges-{module_mpi.name}")
    return {"threads": _traced(mpi, tmp_path, "threads", "mpiio_threads.c", 2, ["DATA"], ("-pthread",)),
            "nonblocking": _traced(mpi, tmp_path, "nonblocking", "nonblocking_io.c", 2, ["DATA/file", 16, 8192]),
            **{mode: _traced(mpi, tmp_path, mode, "pattern_findings.c", 4, [mode, "DATA"])
               for mode in ("strided-view", "reread", "small-strided")}}


def _comparable(analysis) -> dict:
    out = analysis.to_json()
    del out["options"]  # range_rows differs, by design
    return out


def test_ranges_join_to_the_stream_read_whole(traces):
    trace = open_trace(traces["threads"])
    threads = max(len(set(s.read(["tid"]).column("tid").to_pylist())) for s in trace.streams)
    assert threads > 1, "the threads program must give a stream with several threads' chunks"
    most = 0
    for stream in trace.streams:
        whole = stream.read()
        for rows in (1, TINY, 500):
            parts = list(stream.ranges(None, rows))  # a range is at least one chunk of the stream file
            most = max(most, len(parts))
            joined = pa.concat_tables(parts).unify_dictionaries().combine_chunks()
            for name in whole.column_names:
                assert joined.column(name).to_pylist() == whole.column(name).to_pylist(), (rows, name)
    assert most >= threads, "each thread's chunk should come as a range of its own"


def test_the_analysis_does_not_depend_on_the_range_size(traces):
    for name, path in traces.items():
        whole = analyse(path, workers=1)
        ranged = analyse(path, Options(range_rows=TINY), workers=1)
        assert _comparable(ranged) == _comparable(whole), name
        ranges = max(len(list(s.ranges(["t_start"], TINY))) for s in open_trace(path).streams)
        assert ranges >= 3, f"{name}: too few ranges to test anything"


def test_calls_recorded_as_starting_after_their_posix_calls_keep_them():
    """A tracer whose MPI-IO and POSIX clocks disagree by a little can record a call as starting after the
    POSIX call it issued (ioloom 0.1's did, by about 200 ns); the call must still get its child in any range."""
    b = Builder()
    f = b.file("/data/out")
    for i in range(64):  # 192 events: ranges of each size below fall between a call and its POSIX call
        t = 1000 * i
        call = b.call(0, "mpiio", "MPI_File_write_at", t + 5, t + 900, f, 8 * i, 8)
        b.call(0, "posix", "pwrite", t, t + 800, f, 8 * i, 8, parent=call)  # 5 ns before its call
        b.plain_write(0, t + 950, t + 999, f, 8 * i, 8, mpi_op=None)  # the application's own
    whole = analyse(b.trace(), workers=1)
    assert whole.to_json()["bandwidth"]["write"]["bytes"] == 64 * 8
    for rows in (2, 7, 64):
        assert _comparable(analyse(b.trace(), Options(range_rows=rows), workers=1)) == _comparable(whole), rows
