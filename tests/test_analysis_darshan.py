"""Darshan logs through PyDarshan: the example logs that ship with the pinned `darshan` package."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import darshan
import pytest

from ioloom.analysis import analyse
from ioloom.darshan_import import darshan_trace

LOGS = Path(darshan.__file__).parent / "examples" / "example_logs"
DXT_LOG = LOGS / "ior_hdf5_example.darshan"          # 4 ranks, IOR through HDF5, with DXT segments
COUNTERS_LOG = LOGS / "example.darshan"               # 2048 ranks, counters only


def _counter(log: Path, module: str, name: str) -> int:
    """A counter summed over records, read straight from PyDarshan (the independent expectation)."""
    report = darshan.DarshanReport(str(log), read_all=True)
    return int(report.records[module].to_df()["counters"][name].clip(lower=0).sum())


def test_dxt_segments_become_events_that_match_darshans_own_counters():
    result = analyse(darshan_trace(DXT_LOG), workers=1).to_json()
    layers = {(row["layer"], row["kind"]): row for row in result["layers"]}
    assert layers[("posix", "write")]["bytes"] == _counter(DXT_LOG, "POSIX", "POSIX_BYTES_WRITTEN")
    assert layers[("posix", "read")]["bytes"] == _counter(DXT_LOG, "POSIX", "POSIX_BYTES_READ")
    assert layers[("mpiio", "write")]["bytes"] == _counter(DXT_LOG, "MPI-IO", "MPIIO_BYTES_WRITTEN")
    assert result["summary"]["ranks"] == 4
    assert result["bandwidth"]["write"]["effective_mpi_MBps"] > 0
    assert any("cross-layer" in p for p in result["summary"]["problems"])


def test_counters_only_log_reports_its_modules_and_says_what_is_missing():
    trace = darshan_trace(COUNTERS_LOG)
    assert sum(s.read().num_rows for s in trace.streams) == 0
    assert any("no DXT trace segments" in p for p in trace.problems)
    modules = {m["module"]: m for m in trace.meta["darshan"]["modules"]}
    assert set(modules) >= {"POSIX", "MPI-IO", "STDIO"}
    assert modules["POSIX"]["bytes_written"] == _counter(COUNTERS_LOG, "POSIX", "POSIX_BYTES_WRITTEN")
    assert trace.meta["darshan"]["job"]["nprocs"] == 2048


def test_report_and_stats_take_a_darshan_log(tmp_path):
    cli = [sys.executable, "-m", "ioloom"]
    out = subprocess.run([*cli, "report", str(DXT_LOG), "-o", str(tmp_path / "r.html")], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    page = (tmp_path / "r.html").read_text()
    has_counters = "Darshan log" in page and "MPI-IO" in page
    assert has_counters
    stats = subprocess.run([*cli, "stats", str(COUNTERS_LOG), "--json"], capture_output=True, text=True, timeout=300)
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["darshan"]["job"]["nprocs"] == 2048


def test_a_file_that_is_not_a_darshan_log_gets_a_clear_error(tmp_path):
    bogus = tmp_path / "bogus.darshan"
    bogus.write_bytes(b"not a log at all" * 10)
    with pytest.raises(ValueError, match="not a readable Darshan log"):
        darshan_trace(bogus)
    out = subprocess.run([sys.executable, "-m", "ioloom", "stats", str(bogus)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2 and "darshan-parser" in out.stderr
