"""`ioloom run`: any command, MPI programs under both MPIs (the preload reaches every rank, launchers are not
traced), exit codes, layers, and refusals that say what to do."""
from __future__ import annotations

import itertools
import os
import time

import pytest

from ioloom import run
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
    """Every call of the goal (pwrite, pread, write, read, fwrite, fread, open+close, stat, lseek, and per MPI
    MPI_File_write_at, MPI_File_write_at_all, MPI_File_read_at, MPI_File_write, MPI_File_write_all and
    MPI_File_read), with median, min and max over interleaved rounds, the goal, and another tool's figures (given
    for one build only: the others show none)."""
    import json

    from ioloom import mpi as mpis
    from ioloom.bench.overhead import MPI_CALLS, POSIX_CALLS, _reader_line
    from test_trace_native import compile_program

    other = compile_program("trace_next_shim.c", "-shared", "-fPIC", "-ldl")  # another preloaded tool
    out = ioloom_cli("bench", "overhead", "--calls", "2000", "--rounds", "2", "--quick", "--compare",
                     f"shim@posix+stdio={other}", "--json")
    result = json.loads(out.stdout)
    calls = {(row["call"], row["build"]) for row in result["calls_overhead"]}
    assert {(call, "posix+stdio") for call in POSIX_CALLS} <= calls
    assert {(call, impl.name) for impl in mpis.implementations() for call in MPI_CALLS} <= calls
    assert {"open+close", "stat", "lseek", "write", "read", "fread"} <= {call for call, _ in calls}
    assert result["load"]["before"] and result["load"]["after"]
    assert result["cpu"] == sorted(os.sched_getaffinity(0))[-1]  # every run on one CPU unless --no-pin
    for row in result["calls_overhead"]:
        for figure in ("untraced_ns", "traced_ns"):
            assert 0 < row[figure]["min"] <= row[figure]["median"] <= row[figure]["max"]
        assert row["added_ns"]["min"] <= row["added_ns"]["median"] <= row["added_ns"]["max"]
        assert row["meets_goal"] == (row["added_ns"]["median"] <= result["goal_added_ns"])
        assert row["ratio"]["median"] > 0
        if row["build"] != "posix+stdio":
            assert row["others"] == {}
            continue
        theirs = row["others"]["shim"]
        assert theirs["less_than_theirs"] == (row["added_ns"]["median"] < theirs["added_ns"]["median"])
        assert theirs["ratio"]["median"] > 0
    # every traced call was written and decoded back: per round, 9 kinds of posix/stdio calls (open+close two
    # events each), and per MPI its 6 kinds of MPI-IO data calls with the pwrite/pread under each
    assert result["reader"]["events"] >= 2 * (10 * 2000 + 12 * 2000 * len(mpis.implementations()))
    assert 0 < result["reader"]["bytes_per_event"] <= 16
    traces = 2 * (1 + len(mpis.implementations()))  # one per round and build
    for step in ("open", "first_read", "read", "merged"):  # per trace, median [min, max]: no best-of
        figure = result["reader"][f"{step}_events_per_s"]
        assert len(figure["rounds"]) == traces and 0 < figure["min"] <= figure["median"] <= figure["max"], step
    assert f"events in {traces} traces" in _reader_line(result["reader"])  # what the text output prints


def test_overhead_probes_individual_pointer_reads_are_full(mpi, tmp_path):
    """The MPI probe's individual-pointer kinds, traced: 3000 reads (past two seeks back to the start) each read
    all 64 bytes asked for, at offsets within the 64 KiB file, as the writes before them wrote."""
    from ioloom.bench.overhead import probes, run_probe
    from ioloom.run import traced_environment
    from ioloom.trace import open_trace

    probe = next(p for p in probes() if p.label == mpi.name)
    env = probe.launch_env(traced_environment(probe.libs, tmp_path / "trace", ["mpiio"]))
    timed = run_probe(probe.argv(), tmp_path / "probe.dat", 3000, env, ("MPI_File_write", "MPI_File_read"))
    assert set(timed) == {"MPI_File_write", "MPI_File_read"} and min(timed.values()) > 0
    events = open_trace(tmp_path / "trace").events().to_pandas().astype({"op": str})
    for op in ("MPI_File_write", "MPI_File_read"):
        calls = events[events.op == op]
        assert len(calls) == 3000 and (calls.ret_bytes == 64).all(), op
        assert calls.offset.max() == 64 * 1023 and (calls.offset == 0).sum() == 3, op


def test_counted_runs_give_glibcs_malloc_a_large_cache():
    """Callgrind's runs add the large per-thread malloc cache to the tunables the caller set (Open MPI's per-call
    mallocs cost a number of instructions that depends on the heap's layout without it)."""
    from ioloom.bench.overhead import COUNTED_MALLOC, _counted_malloc

    assert _counted_malloc({"A": "1"}) == {"A": "1", "GLIBC_TUNABLES": COUNTED_MALLOC}
    mine = _counted_malloc({"GLIBC_TUNABLES": "glibc.malloc.check=3"})["GLIBC_TUNABLES"]
    assert mine == f"glibc.malloc.check=3:{COUNTED_MALLOC}" and COUNTED_MALLOC.startswith("glibc.malloc.tcache_count=")


def test_bench_overhead_counts_instructions_of_every_call(ioloom_cli):
    """`--instructions`: callgrind's count of what tracing adds, for every call of the goal (the plain build
    here; the MPI builds run the same code path per MPI call), and of what another tool adds: the shim counts
    pwrite and lseek, so it adds instructions to those and none to stat."""
    import json

    from ioloom.bench.overhead import POSIX_CALLS
    from test_trace_native import compile_program

    other = compile_program("trace_next_shim.c", "-shared", "-fPIC", "-ldl")
    out = ioloom_cli("bench", "overhead", "--build", "posix+stdio", "--calls", "1000", "--rounds", "1", "--quick",
                     "--instructions", "--instruction-calls", "1000", "--compare", f"shim={other}", "--json")
    counted = {row["call"]: row for row in json.loads(out.stdout)["instructions_per_call"]}
    assert set(counted) == set(POSIX_CALLS)
    for row in counted.values():
        assert 0 < row["untraced"] < row["traced"]
        assert 0 < row["added_without_encoding"] <= row["added"]
    assert counted["pwrite"]["others"]["shim"]["added"] > 0 and counted["lseek"]["others"]["shim"]["added"] > 0
    assert abs(counted["stat"]["others"]["shim"]["added"]) < 1
    bad = ioloom_cli("bench", "overhead", "--compare", "darshan", check=False)
    assert bad.returncode == 2 and "give NAME=LIBRARY" in bad.stderr
    elsewhere = ioloom_cli("bench", "overhead", "--compare", f"shim@no-such-build={other}", check=False)
    assert elsewhere.returncode == 2 and "no probe build named no-such-build" in elsewhere.stderr
    few = ioloom_cli("bench", "overhead", "--rounds", "3", check=False)
    assert few.returncode == 2 and "--quick" in few.stderr
    missing = ioloom_cli("bench", "overhead", "--build", "no-such-build", check=False)
    assert missing.returncode == 2 and "the builds here are posix+stdio" in missing.stderr
    elsewhere_cpu = ioloom_cli("bench", "overhead", "--cpu", "4095", check=False)
    assert elsewhere_cpu.returncode == 2 and "--cpu 4095: this process may run on CPUs" in elsewhere_cpu.stderr


def test_bench_overhead_runs_the_probe_on_the_cpu_given(tmp_path):
    """run_probe's `cpu`: the probe (here a program printing the CPUs it may use, as "name value") runs on that one
    CPU alone; without it, on every CPU its caller may use."""
    import sys

    from ioloom.bench.overhead import run_probe

    allowed = sorted(os.sched_getaffinity(0))
    show = [sys.executable, "-c", "import os; print('cpus', len(os.sched_getaffinity(0))); "
                                  "print('cpu', max(os.sched_getaffinity(0)))"]
    assert run_probe(show, tmp_path / "unused", 1, None, cpu=allowed[0]) == {"cpus": 1, "cpu": allowed[0]}
    assert run_probe(show, tmp_path / "unused", 1, None) == {"cpus": len(allowed), "cpu": allowed[-1]}


def test_bench_overhead_probes_take_turns_block_by_block(tmp_path):
    """run_in_turns: two probes (both traced here, to see when each call ran) run at once and take turns: sorted
    by time, their lseeks come in runs of one block each, alternately (the warm-up block, then each timed block),
    and each prints its ns per call of every timed block. A probe that fails ends the other at once, with one
    message."""
    import time

    from ioloom import paths
    from ioloom.bench.overhead import run_in_turns
    from ioloom.run import traced_environment
    from ioloom.trace import open_trace

    probe = [str(paths.native_bin("ioloom-overhead-probe")), str(tmp_path / "probe.dat"), "3000", "lseek"]
    env = traced_environment([paths.native_lib("ioloom-trace")], tmp_path / "trace", ["posix"])  # two streams
    timed = run_in_turns([(probe, env), (probe, env)], tmp_path, 3)
    assert [sorted(each) for each in timed] == [["lseek"], ["lseek"]]
    assert all(len(each["lseek"]) == 3 and min(each["lseek"]) > 0 for each in timed)
    times = []
    for side, stream in enumerate(open_trace(tmp_path / "trace").streams):
        events = stream.read().to_pandas().astype({"op": str})
        times += [(t, side) for t in events[events["op"] == "lseek"]["t_start"]]
    runs = [len(list(group)) for _, group in itertools.groupby(side for _, side in sorted(times))]
    assert runs == [1000] * 8  # the warm-up block and 3 timed blocks each, alternately
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=r"false .*failed \(exit 1\)"):
        run_in_turns([(probe, {}), (["false"], {})], tmp_path, 3)
    assert time.monotonic() - started < 30  # not the probe's wait for a turn that never comes


def test_bench_overhead_compares_a_tool_of_several_libraries(mpi, ioloom_cli, tmp_path):
    """`--compare NAME@BUILD=LIBRARY:LIBRARY` preloads both, in that order: another ioloom build for an MPI (its MPI
    wrappers, then its tracer: the wrappers alone trace no POSIX call) is timed beside the traced probe and writes
    its trace where the environment says; a list with a missing library is refused."""
    import json

    from ioloom import paths

    wrappers, tracer = paths.native_lib(f"ioloom-trace-mpi-{mpi.name}"), paths.native_lib("ioloom-trace")
    out = ioloom_cli("bench", "overhead", "--build", mpi.name, "--calls", "1000", "--rounds", "1", "--quick",
                     "--compare", f"again@{mpi.name}={wrappers}:{tracer}", "--json",
                     env={"IOLOOM_TRACE_DIR": str(tmp_path / "again"), "IOLOOM_LAYERS": "posix,mpiio"})
    rows = json.loads(out.stdout)["calls_overhead"]
    assert rows and all(set(row["others"]) == {"again"} for row in rows)
    layers = set(open_trace(tmp_path / "again").events().column("layer").to_pylist())
    assert {"mpiio", "posix"} <= {str(layer) for layer in layers}  # both libraries recorded
    missing = ioloom_cli("bench", "overhead", "--compare", f"again={tracer}:{tracer}.missing", check=False)
    assert missing.returncode == 2 and "several joined by ':'" in missing.stderr


def test_trace_with_a_timeout_kills_the_launch_and_says_so(tmp_path):
    """run.trace with a timeout (what the tests' fixtures pass): a launch still running then has its whole process
    group killed, a child it started in the background included, and TimeoutError names the command."""
    child = tmp_path / "child.pid"
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"sh -c .*: still running after 1 s; its process group was killed"):
        run.trace(["sh", "-c", f"sleep 60 & echo $! > {child}; wait"], tmp_path / "trace", [], [], {}, timeout=1)
    assert time.monotonic() - started < 10
    pid = int(child.read_text())
    for _ in range(50):  # the background sleep is gone (or a zombie awaiting its new parent) once the kill lands
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
        except FileNotFoundError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the launch's background child {pid} still runs")
