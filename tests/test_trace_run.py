"""`ioloom run`: any command, MPI programs under both MPIs (the preload reaches every rank, launchers are not
traced), exit codes, layers, and refusals that say what to do."""
from __future__ import annotations

from pathlib import Path

from ioloom.trace import open_trace


def test_mpi_program_every_rank_traced(mpi, ioloom_cli, tmp_path):
    """Under MPICH the MPI-IO name carries ROMIO's "ufs:" prefix (Open MPI's OMPIO refuses prefixes): the MPI
    events and the hints note name the same file as the POSIX calls."""
    exe = mpi.compile("trace_mpi_posix.c")
    target = tmp_path / "shared.dat"
    prefix = ["ufs:"] if mpi.name == "mpich" else []
    out = ioloom_cli("run", "-o", tmp_path / "trace", "--", *mpi.command(3, [exe, target, *prefix]), env=mpi.env())
    assert f"trace of 3 process(es) in {tmp_path / 'trace'}" in out.stderr
    assert "events:" in out.stderr and "bytes:" in out.stderr and "dropped: 0 events" in out.stderr
    trace = open_trace(tmp_path / "trace")
    assert sorted(s.rank for s in trace.streams) == [0, 1, 2], "one stream per rank, launchers not traced"
    files = dict(zip(trace.files.column("path").to_pylist(), trace.files.column("file_id").to_pylist()))
    shared = files[str(target)]
    for stream in trace.streams:
        ev = stream.read().to_pandas().astype({"op": str, "layer": str})
        writes = ev[(ev["op"] == "pwrite") & (ev["file_id"] == shared) & (ev["parent"] == -1)]
        assert sorted(writes["offset"]) == [(i * 3 + stream.rank) * 1000 for i in range(4)]
        assert (writes["ret_bytes"] == 1000).all()
        mpi_writes = ev[ev["op"] == "MPI_File_write_at"]
        if len(mpi_writes):  # the MPI-IO wrappers are built: the POSIX write under it carries its call id
            call = mpi_writes.iloc[0]
            assert call["file_id"] == shared and call["req_bytes"] == 500
            assert f"note.mpiio.hints:{target}" in stream.info, sorted(stream.info)
            inside = ev[(ev["parent"] == call["call_id"]) & (ev["layer"] == "posix")]
            assert inside["ret_bytes"].clip(lower=0)[inside["op"].str.contains("write")].sum() == 500
    assert target.stat().st_size == 100000 + 3 * 500


def test_exit_code_layers_and_shell_pipelines(ioloom_cli, tmp_path):
    out = ioloom_cli("run", "-o", tmp_path / "t", "--layers", "posix", "--", "sh", "-c",
                     f"printf 'abc' > {tmp_path}/f; cat {tmp_path}/f | wc -c; exit 3", check=False)
    assert out.returncode == 3 and out.stdout.strip() == "3"
    trace = open_trace(tmp_path / "t")
    layers = set(trace.events(["layer"]).column("layer").to_pylist())
    assert layers == {"posix", "process"}
    assert {s.info["layers"] for s in trace.streams} == {"posix"}


def test_refusals_say_what_to_do(ioloom_cli, tmp_path):
    bad = ioloom_cli("run", "--layers", "posix,hdf5", "--", "true", check=False)
    assert bad.returncode == 2 and "unknown layer(s) hdf5" in bad.stderr
    ioloom_cli("run", "-o", tmp_path / "t", "--", "true")
    again = ioloom_cli("run", "-o", tmp_path / "t", "--", "true", check=False)
    assert again.returncode == 2 and "already holds a trace" in again.stderr
    missing = ioloom_cli("run", "-o", tmp_path / "u", "--", "no-such-program-ioloom", check=False)
    assert missing.returncode == 2 and "command not found" in missing.stderr


def test_bench_overhead_reports_every_call_kind(ioloom_cli):
    import json

    from ioloom import mpi as mpis

    out = ioloom_cli("bench", "overhead", "--calls", "2000", "--repeats", "1", "--json")
    result = json.loads(out.stdout)
    calls = {(row["call"], row["build"]) for row in result["calls_overhead"]}
    assert {("pwrite", "posix+stdio"), ("pread", "posix+stdio"), ("fwrite", "posix+stdio")} <= calls
    assert {("MPI_File_write_at", impl.name) for impl in mpis.implementations()} <= calls
    for row in result["calls_overhead"]:
        assert row["untraced_ns"] > 0 and row["traced_ns"] > 0
    # every traced call was written and decoded back: 3 kinds of posix/stdio calls, and per MPI its
    # MPI_File_write_at calls with the pwrite under each
    assert result["reader"]["events"] >= 3 * 2000 + 2 * 2000 * len(mpis.implementations())
    assert 0 < result["reader"]["bytes_per_event"] <= 16
    assert result["reader"]["open_events_per_s"] > 0 and result["reader"]["events_per_s"] > 0
