"""One stream summarised in parts (ranges of its chunks, on different Dask workers) and joined in order gives
what one worker reading the whole stream gives (issue 13: scale past one process's stream). Real traces
where the carried state matters: threads whose chunks straddle the cuts, non-blocking requests in flight
across them, record locks held over them, repeated reads, files opened, written and closed in phases; parts
of a few dozen events, so cuts fall inside MPI-IO calls and must be found and joined."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from distributed import LocalCluster

from ioloom import open_trace
from ioloom.analysis import Options, analyse
from ioloom.analysis.executor import StreamFile, plan_parts
from ioloom.analysis.partition import bad_cuts, summarise_part

RANGE = 17  # events per range
PART = 40  # events per part, at least


def _traced(mpi, tmp_path, name: str, program: str, ranks: int, args, flags: tuple[str, ...] = ()):
    """The trace of `program` on `ranks` ranks (0: without MPI), in chunks of few events (a flush interval of
    0): `args` may name DATA, a directory for its files."""
    exe = mpi.compile(program, *flags)
    data = tmp_path / f"data-{name}"
    data.mkdir(exist_ok=True)
    out = tmp_path / f"trace-{name}"
    argv = [exe, *(str(a).replace("DATA", str(data)) for a in args)]
    launch = mpi.command(ranks, argv) if ranks else argv
    done = subprocess.run([sys.executable, "-m", "ioloom", "run", "-o", str(out), "--", *launch],
                          env=mpi.env({"IOLOOM_FLUSH_INTERVAL_MS": "0"}), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return out


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as c:
        yield c


def _comparable(analysis) -> str:
    out = analysis.to_json()
    del out["options"]  # range_rows and split_rows differ, by design
    out["summary"].pop("executor")
    return json.dumps(out, sort_keys=True)


@pytest.mark.parametrize("mpi", ["mpich"], indirect=True)
def test_a_stream_in_parts_gives_the_whole_stream_result(mpi, tmp_path, cluster):
    traces = {"locks": _traced(mpi, tmp_path, "locks", "lock_phases.c", 0, ["DATA"]),
              "threads": _traced(mpi, tmp_path, "threads", "mpiio_threads.c", 2, ["DATA"], ("-pthread",)),
              "nonblocking": _traced(mpi, tmp_path, "nonblocking", "nonblocking_io.c", 2, ["DATA/file", 100, 4096])}
    options = Options(range_rows=RANGE, split_rows=PART)
    for name, path in traces.items():
        streams = StreamFile.of(open_trace(path))
        parts = [plan_parts(s, RANGE, PART) for s in streams]
        assert min(map(len, parts)) >= 5, f"{name}: {list(map(len, parts))} parts"
        if name == "nonblocking":  # requests in flight across cuts: those parts are joined before
            assert bad_cuts([summarise_part(p, options) for p in parts[0]])
        whole = analyse(path, options, workers=1)
        split = analyse(path, options, scheduler=cluster.scheduler_address)
        assert _comparable(split) == _comparable(whole), name


@pytest.mark.parametrize("path, runtime", [
    ("/scratch/out.dat.locktest.3", True),          # OMPIO's lock probe at every MPI_File_open
    ("/scratch/out.dat-2983034881-41234.lock", True),  # its lockedfile component's shared file pointer
    ("/scratch/out.dat", False), ("/scratch/out.lock", False), ("/scratch/run-2024.lock", False),
    ("/scratch/-1-2.lock", False), ("/scratch/a-1-2.lock/data", False)])
def test_ompio_lock_files_are_the_runtimes(path, runtime):
    """Both files OMPIO makes beside a program's file are the MPI runtime's, as logfs keeps them plain files
    (tests/test_logfs_mpi.py::test_ompio_lock_files_stay_plain_files): the pointer's NAME-JOBID-PID.lock was
    counted as the program's data file. Names merely like them are the program's."""
    assert Options().is_system(path) is runtime
