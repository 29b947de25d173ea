"""The column-wise DXT import against PyDarshan's own readers, on the example logs of the pinned `darshan` package.

ioloom reads DXT segments straight from darshan-util's records (PyDarshan's reader makes a dict per segment);
these tests hold it to what PyDarshan itself returns for the same log, segment by segment, and to the
independent counters Darshan keeps per file (operations and bytes).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import darshan
import pyarrow.compute as pc
import pytest

from ioloom.analysis import analyse
from ioloom.darshan_import import darshan_trace

LOGS = Path(darshan.__file__).parent / "examples" / "example_logs"
DXT_LOGS = ("dxt.darshan", "ior_hdf5_example.darshan")  # 1 process POSIX (7623 segments); 4 ranks POSIX + MPI-IO
MODULES = {"posix": ("DXT_POSIX", "POSIX", "POSIX"), "mpiio": ("DXT_MPIIO", "MPI-IO", "MPIIO")}


def _events(log: str):
    trace = darshan_trace(LOGS / log)
    return trace, trace.events().to_pandas().astype({"op": str, "layer": str})


@pytest.fixture(scope="module")
def reports():
    return {log: darshan.DarshanReport(str(LOGS / log), read_all=True) for log in DXT_LOGS}


@pytest.mark.parametrize("log", DXT_LOGS)
def test_every_segment_is_the_one_pydarshan_reads(reports, log):
    trace, events = _events(log)
    names = trace.files.to_pandas().set_index("file_id")["path"]
    ours = events.assign(path=events["file_id"].map(names), kind=events["op"].str.contains("write").map(
        {True: "write", False: "read"}))
    expected = []
    for layer, (dxt, _, _) in MODULES.items():
        if dxt not in reports[log].modules:
            continue
        for record in reports[log].records[dxt].to_df():
            for kind in ("write", "read"):
                for seg in record[f"{kind}_segments"].itertuples(index=False):
                    expected.append((layer, kind, int(record["rank"]), reports[log].name_records[record["id"]],
                                     int(seg.offset), int(seg.length), int(seg.start_time * 1e9),
                                     int(seg.end_time * 1e9)))
    got = list(ours[["layer", "kind", "rank", "path", "offset", "req_bytes", "t_start", "t_end"]].itertuples(
        index=False, name=None))
    assert len(expected) > 100 and sorted(got) == sorted(expected)
    assert (events["ret_bytes"] == events["req_bytes"]).all() and (events["pid"] == events["rank"]).all()


@pytest.mark.parametrize("log", DXT_LOGS)
def test_operation_and_byte_totals_match_darshans_counters(reports, log):
    _, events = _events(log)
    for layer, (dxt, module, prefix) in MODULES.items():
        if dxt not in reports[log].modules:
            continue
        counters = reports[log].records[module].to_df()["counters"].clip(lower=0)
        for kind, ops, nbytes in (("write", "WRITES", "BYTES_WRITTEN"), ("read", "READS", "BYTES_READ")):
            mine = events[(events["layer"] == layer) & events["op"].str.contains(kind)]
            calls = counters.filter(regex=rf"^{prefix}_((INDEP|COLL|SPLIT|NB)_)?{ops}$").to_numpy().sum()
            assert len(mine) == calls, (layer, kind)
            assert int(mine["req_bytes"].sum()) == int(counters[f"{prefix}_{nbytes}"].sum()), (layer, kind)


def test_dictionary_columns_hold_only_the_values_present():
    trace, _ = _events("dxt.darshan")  # POSIX only: no MPI-IO layer or op may appear in the dictionaries
    table = trace.events()
    assert sorted(pc.unique(table.column("layer")).to_pylist()) == ["posix"]
    assert set(table.column("layer").combine_chunks().dictionary.to_pylist()) == {"posix"}
    assert set(table.column("op").combine_chunks().dictionary.to_pylist()) == {"read", "write"}


def test_a_truncated_log_says_so_instead_of_advising_dxt(tmp_path):
    data = (LOGS / "dxt.darshan").read_bytes()
    cut = tmp_path / "cut.darshan"
    cut.write_bytes(data[:len(data) * 9 // 10])  # the DXT region is the log's last
    trace = darshan_trace(cut)
    assert any(p.startswith("DXT_POSIX: darshan-util could not read the log") and "truncated or damaged" in p
               for p in trace.problems), trace.problems
    assert not any("DXT_ENABLE_IO_TRACE" in p for p in trace.problems)  # the job did record DXT
    assert trace.meta["darshan"]["modules"]  # the counters before the damage are still reported


# Logs written by Darshan 3.5.0's runtime here (tests/vectors/darshan/README.md says how).
VECTORS = Path(__file__).parent / "vectors" / "darshan"


def _stats(log: Path) -> str:
    out = subprocess.run([sys.executable, "-m", "ioloom", "stats", str(log)], capture_output=True, text=True,
                         env={**os.environ, "COLUMNS": "200"}, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_partial_dxt_log_says_how_much_is_missing():
    """dd wrote 100,000 blocks; DXT kept the first 65,532 (its 2 MiB buffer), the counters count them all."""
    trace = darshan_trace(VECTORS / "dd-partial-dxt.darshan")
    coverage = {(c["module"], c["direction"]): (c["segments"], c["operations"])
                for c in trace.meta["darshan"]["dxt_coverage"]}
    assert coverage[("DXT_POSIX", "writes")] == (65532, 100000)
    assert any("65,532 write segments of the 100,000 POSIX writes" in p and "34.5% missing" in p
               for p in trace.problems), trace.problems
    summary = analyse(trace, workers=1).summary()
    assert summary["darshan"]["dxt_partial"] and summary["events"] == 65532
    assert "65,532 events (partial: DXT kept 65,532 of 100,000 operations counted)" in _stats(
        VECTORS / "dd-partial-dxt.darshan")


def test_a_complete_dxt_log_is_not_called_partial():
    trace = darshan_trace(VECTORS / "mpich-collective-dxt.darshan")
    assert all(c["segments"] == c["operations"] for c in trace.meta["darshan"]["dxt_coverage"])
    assert not any("missing" in p for p in trace.problems)


@pytest.mark.parametrize("log", ["mpich-collective-dxt.darshan", "mpich-collective-counters.darshan"])
def test_mpiio_opens_and_shared_records_count_every_rank(log):
    """4 ranks open one file with MPI_File_open (collective): Darshan keeps one shared record (rank -1) whose
    MPIIO_COLL_OPENS is 4; there is no MPIIO_OPENS counter."""
    darshan_meta = darshan_trace(VECTORS / log).meta["darshan"]
    modules = {m["module"]: m for m in darshan_meta["modules"]}
    assert modules["MPI-IO"]["opens"] == 4
    assert {(f["module"], f["ranks"]) for f in darshan_meta["files"]} == {("MPI-IO", 4), ("POSIX", 4)}


def test_a_counters_only_log_reports_its_job_not_zero_processes():
    log = VECTORS / "mpich-collective-counters.darshan"
    summary = analyse(log, workers=1).summary()
    assert summary["processes"] == summary["ranks"] == 4 and summary["darshan"]["counters_only"]
    assert summary["files"] == 1 and summary["duration_s"] > 0
    headline = _stats(log).splitlines()[0]
    assert headline.startswith("Darshan log: 4 processes (4 MPI ranks), counters only (no DXT events), 1 files")


def test_a_log_of_a_newer_darshan_names_the_format_instead_of_damage():
    """Darshan after 3.5.0 writes DXT_POSIX records of format 2 (segments carry a thread id); PyDarshan 3.5.0's
    darshan-util refuses them. The import says which format and what reads it, keeps the counters, and does
    not call the log truncated or damaged."""
    trace = darshan_trace(VECTORS / "dd-dxt-newer-format.darshan")
    assert any(p.startswith("DXT_POSIX: the log's records are format 2, written by a Darshan newer than the "
                            f"installed PyDarshan {darshan.__version__}") for p in trace.problems), trace.problems
    assert not any("truncated or damaged" in p or "missing" in p for p in trace.problems), trace.problems
    posix = next(m for m in trace.meta["darshan"]["modules"] if m["module"] == "POSIX")
    assert posix["writes"] == 16 and posix["bytes_written"] == 16 * 4096
