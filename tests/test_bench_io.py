"""ioloom-bench under both MPIs: the files it writes match the pattern's arithmetic byte for byte, --verify
catches a corrupted byte, bad parameters are refused before any I/O, the JSON figures are consistent."""
from __future__ import annotations

import json
import mmap
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import build_program
from ioloom import mpi as mpi_impls
from ioloom import paths
from ioloom.bench import io as bench_io
from ioloom.bench import pattern

VECTORS = json.loads((paths.REPO_ROOT / "docs" / "bench-pattern-vectors.json").read_text())["vectors"]
NRANKS = 3  # odd, so that an offset formula confusing ranks and segments shows
BLOCK, TRANSFER, SEGMENTS = 256 << 10, 64 << 10, 5

# one run per pattern, each through a different backend, so every backend and layout is exercised once
RUNS = {
    "strided": ["-a", "mpiio", "-c", "-z"],  # shuffled transfers, still matched collective calls
    "contiguous": ["-a", "posix", "--wait", "5"],
    "fpp": ["-a", "mpiio", "-z"],
    "nfiles": ["-a", "posix", "-e"],
}


def _run(mpi, tmp_path: Path, name: str, args: list[str], env: dict[str, str] | None = None) -> dict:
    return bench_io.run_bench(mpi.impl, NRANKS, ["-b", str(BLOCK), "-t", str(TRANSFER), "-s", str(SEGMENTS),
                                                 "-o", str(tmp_path / name), *args], env)


@pytest.mark.mpi
def test_every_pattern_writes_what_its_arithmetic_says(mpi, tmp_path):
    for name, args in RUNS.items():
        result = _run(mpi, tmp_path, name, ["--pattern", name, "-w", "-r", "-C", "--ranks-per-node", "1",
                                             "--verify", "-k", *args])
        files = pattern.file_names(str(tmp_path / name), name, NRANKS, SEGMENTS)
        assert sorted(str(p) for p in tmp_path.glob(f"{name}*")) == sorted(files), name
        size = pattern.file_size(name, NRANKS, BLOCK, SEGMENTS)
        for index, file in enumerate(files):
            data = np.fromfile(file, dtype=np.uint8)
            assert data.size == size, (name, file)
            expected = pattern.expected_file(name, NRANKS, BLOCK, SEGMENTS, index)
            bad = np.flatnonzero(data != expected)
            assert bad.size == 0, f"{name}: {file} differs from the oracle first at offset {bad[:1]}"
        _check_figures(result, name)


def _check_figures(result: dict, name: str) -> None:
    total = NRANKS * SEGMENTS * BLOCK
    assert result["nranks"] == NRANKS and result["params"]["pattern"] == name
    assert result["params"]["shift"] == 1  # --ranks-per-node 1: -C reads the next rank's data
    assert [p["op"] for p in result["phases"]] == ["write", "read"]
    for phase in result["phases"]:
        assert phase["bytes"] == total and phase["errors"] == 0
        assert [r["bytes"] for r in phase["ranks"]] == [SEGMENTS * BLOCK] * NRANKS
        assert [r["calls"] for r in phase["ranks"]] == [SEGMENTS * BLOCK // TRANSFER] * NRANKS
        assert 0 < phase["effective_bw"] <= phase["raw_bw"]  # effective counts open..close, raw data calls only
        for stats in phase["time"].values():
            assert stats["min"] <= stats["mean"] <= stats["max"]
        # IOR's time: the latest close minus the earliest open over ranks, less the idle time every rank had
        span = max(r["end"] for r in phase["ranks"]) - min(r["end"] - r["total"] for r in phase["ranks"])
        assert phase["span"] == pytest.approx(span, rel=1e-6)
        assert span >= max(r["total"] for r in phase["ranks"]) - 1e-6  # two clocks: MPI_Wtime, the wall clock
        idle = min(r["wait"] + r["prep"] for r in phase["ranks"])
        assert phase["effective_bw"] == pytest.approx(total / (span - idle), rel=1e-6)
    if "--wait" in RUNS[name]:  # 5 ms before every data call but the first of each rank
        calls = SEGMENTS * BLOCK // TRANSFER
        assert all(r["wait"] >= (calls - 1) * 0.005 for r in result["phases"][0]["ranks"])
    assert result["verify"] == {"enabled": True, "errors": 0}


@pytest.mark.mpi
def test_pattern_vectors_match_the_program(mpi, tmp_path):
    """docs/bench-pattern-vectors.json, checked against the Python oracle and a file the C program wrote
    (this run also prints the program's own text table)."""
    program = paths.native_bin(f"ioloom-bench-{mpi.name}")
    out = mpi.run(NRANKS, [program, "-b", str(BLOCK), "-t", str(TRANSFER), "-s", str(SEGMENTS), "-F", "-w", "-k",
                           "-o", tmp_path / "v"])
    out = mpi.run(NRANKS, [program, "-b", str(BLOCK), "-t", str(TRANSFER), "-s", str(SEGMENTS), "-F", "-w", "-k",
                           "-o", tmp_path / "v"])  # again: files ioloom-bench wrote may be replaced
    header, columns, write_row = out.stdout.splitlines()[:3]
    assert f"{NRANKS} ranks" in header and "pattern fpp" in header
    assert columns.split()[:4] == ["op", "rep", "eff", "MiB/s"]
    assert write_row.split()[:2] == ["write", "0"] and float(write_row.split()[2]) > 0
    for v in VECTORS:
        offsets = np.arange(v["offset"], v["offset"] + 8, dtype=np.uint64)
        assert pattern.expected_bytes(offsets, v["writer"]).tobytes().hex() == v["bytes"]
        with open(f"{tmp_path / 'v'}.{v['writer']:08d}", "rb") as f:
            f.seek(v["offset"])
            assert f.read(8).hex() == v["bytes"]


@pytest.mark.mpi
def test_verify_reports_the_offset_of_a_corrupted_byte(mpi, tmp_path):
    _run(mpi, tmp_path, "c", ["-F", "-w", "-k"])
    victim, offset = f"{tmp_path / 'c'}.00000001", 3 * TRANSFER + 1234
    with open(victim, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ 0x40]))
    with pytest.raises(bench_io.BenchFailed) as failed:
        # -C with one rank per node: rank 0 reads rank 1's file, so the report comes from rank 0; no -k
        _run(mpi, tmp_path, "c", ["-F", "-r", "-C", "--ranks-per-node", "1", "--verify"])
    assert failed.value.returncode == 3
    assert f"rank 0: verify: {victim} offset {offset}: read 0x{byte ^ 0x40:02x}, expected 0x{byte:02x}" \
        in failed.value.stderr
    assert failed.value.result["verify"]["errors"] == 1
    assert [p["errors"] for p in failed.value.result["phases"]] == [1]
    # the evidence stays without -k (as IOR's -K), and the report says so
    assert len(list(tmp_path.glob("c.*"))) == NRANKS
    assert any("1 bytes that differ" in n and "kept for inspection" in n for n in failed.value.result["notes"])


@pytest.mark.mpi
def test_ior_letters_people_script_with(mpi, tmp_path):
    """IOR's -K -G -R -W -d -N -v -O summaryFormat=JSON work; -x -D -f and the other -O are refused naming ours."""
    program = paths.native_bin(f"ioloom-bench-{mpi.name}")
    out = mpi.run(2, [program, "-b", "64k", "-t", "16k", "-w", "-W", "-K", "-G", "7", "-d", "0.2", "-N", "2", "-v",
                      "-O", "summaryFormat=JSON", "-o", tmp_path / "ior"])
    result = bench_io.parse_output(out.stdout)  # JSON without --json
    assert [p["op"] for p in result["phases"]] == ["write", "read"] and result["verify"] == {"enabled": True,
                                                                                             "errors": 0}
    assert result["params"]["delay_s"] == 0.2 and any(n.startswith("-G 7") for n in result["notes"])
    begins = [p["time"]["open"] for p in result["phases"]]
    assert all(b["max"] < 0.2 for b in begins)  # the delay comes before the phase's clock starts
    text = mpi.run(2, [program, "-b", "64k", "-t", "16k", "-v", "-o", tmp_path / "v"]).stdout
    assert text.count("    rank ") == 4  # -v: every rank of both phases
    cases = [(["-x"], "-x (IOR's single transfer attempt) is not supported"),
             (["-D", "30"], "choose -s for the length of run"), (["-f", "script"], "ioloom bench sweep CONFIG.toml"),
             (["-N", "5"], "launch that many instead"), (["-O", "summaryFile=x"], "-O summaryFile=x: only")]
    for argv, words in cases[:2] if mpi.name == "openmpi" else cases:  # a failed Open MPI launch takes seconds
        out = mpi.run(2, [program, *argv, "-o", tmp_path / "x"], check=False)
        assert out.returncode == 2 and words in out.stderr, (argv, out.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.mpi
def test_notes_reach_ioloom_bench_io_and_access_bandwidth_holds_when_ranks_outnumber_cpus(ioloom_cli, tmp_path):
    """-C on one node reads every rank's own data: `ioloom bench io` shows the program's note. With more ranks
    than CPUs, raw bandwidth (ranks' data times as if concurrent) is flagged and access bandwidth is measured."""
    cpus = len(os.sched_getaffinity(0))
    out = ioloom_cli("bench", "io", "-n", str(cpus + 1), "-C", "-b", "64k", "-t", "16k", "-s", "2", "-i", "3",
                     "-o", tmp_path / "c")
    assert "every rank reads its own data" in out.stdout and f"{cpus + 1} ranks shared {cpus} CPUs" in out.stdout
    out = ioloom_cli("bench", "io", "-n", str(cpus + 1), "--json", "-b", "64k", "-t", "16k", "-o", tmp_path / "c")
    result = json.loads(out.stdout)
    assert result["oversubscribed"] and result["node"] == {"ranks": cpus + 1, "cpus": cpus}
    for phase in result["phases"]:
        window = max(r["data_end"] for r in phase["ranks"]) - min(r["data_begin"] for r in phase["ranks"])
        assert phase["access_bw"] == pytest.approx(phase["bytes"] / window, rel=1e-6)
        assert phase["access_bw"] <= phase["raw_bw"]  # the span holds every rank's data calls
    for s in result["summary"]:
        assert s["access_bw"]["min"] <= s["access_bw"]["median"] <= s["access_bw"]["max"]
    assert not any("shared" in n for n in bench_io.run_bench(None, 1, ["-o", tmp_path / "one"])["notes"])


@pytest.mark.mpi
def test_a_write_nobody_checks_costs_no_pattern_filling(mpi, tmp_path):
    """Without --verify or -k the bytes are never checked, so no transfer is refilled with its pattern (IOR's
    default writes one buffer too): under CPU contention that work slowed the phase beyond the deducted prep. A
    preloaded counter (tests/programs/pwrite_contents.c) sees what each rank's pwrite calls wrote: one buffer for
    all its transfers, and with -k (kept for a later check) each transfer's own pattern. (Comparing the prep time
    with the data time instead failed once at load about 20: a preemption inside one transfer's prep.)"""
    shim = build_program("pwrite_contents.c", "-shared", "-fPIC", "-ldl")
    transfers = BLOCK // TRANSFER * SEGMENTS
    for name, args, different in (("q", ["-w"], 1), ("k", ["-w", "-k"], transfers)):
        seen = tmp_path / f"{name}.contents"
        _run(mpi, tmp_path, name, args, {"LD_PRELOAD": str(shim), "PWRITE_CONTENTS_SIZE": str(TRANSFER),
                                         "PWRITE_CONTENTS_OUT": str(seen)})
        assert seen.read_text().splitlines() == [f"{different} {transfers}"] * NRANKS, name
    head = np.fromfile(tmp_path / "k", dtype=np.uint8, count=16)
    assert np.array_equal(head, pattern.expected_bytes(np.arange(16, dtype=np.uint64), 0))


REFUSED = [
    (["-b", "1m", "-t", "2m"], "-t/--transfer-size"),
    (["-b", "1000k", "-t", "64k"], "is not a multiple of -t/--transfer-size"),
    (["--hint", "romio_cb_write"], "--hint 'romio_cb_write': expected KEY=VALUE"),
    (["-a", "posix", "-c"], "-c/--collective"),
    (["-w", "--verify"], "--verify checks the bytes read"),
    (["-s", "0"], "-s/--segments"),
    (["-w", "--reads", "2"], "--reads repeats the read phase"),
]


@pytest.mark.mpi
def test_impossible_parameters_are_refused_before_any_io(mpi, tmp_path):
    program = paths.native_bin(f"ioloom-bench-{mpi.name}")
    cases = [(args + ["-o", str(tmp_path / "x")], words) for args, words in REFUSED]
    (tmp_path / "held" / "d.00000001").mkdir(parents=True)  # what cannot be read is not known to be ours
    cases.append((["-w", "-F", "-o", str(tmp_path / "held" / "d")], "d.00000001 exists and cannot be read"))
    cases += [(["-o", "/proc/ioloom-bench-test/x"], "-o/--output /proc/ioloom-bench-test/x: directory"),
              (["-o", "/proc/x"], "is not writable"),
              (["-o", str(tmp_path / "missing" / "x")], "does not exist"),
              (["-r", "-o", str(tmp_path / "absent")], "-r without -w reads existing files")]
    (tmp_path / "one.00000000").write_bytes(bytes(1 << 20))  # rank 1's file of -F is missing
    cases.append((["-r", "-F", "-o", str(tmp_path / "one")], f"{tmp_path / 'one'}.00000001 does not exist"))
    # user data is never replaced: a file at the path ioloom-bench would write that it did not write itself
    for user_file in ("mine.00000001", "bt.btio"):
        (tmp_path / user_file).write_bytes(b"precious user data")
    cases += [(["-w", "-F", "-o", str(tmp_path / "mine")], f"{tmp_path / 'mine'}.00000001 exists and was not written"),
              (["--kernel", "btio", "-o", str(tmp_path / "bt")], f"{tmp_path / 'bt.btio'} exists and was not written"),
              (["-o", str(tmp_path)], "is a directory")]
    if mpi.name == "openmpi":  # the checks are MPI-independent; Open MPI takes a second per failed launch
        cases = cases[:1] + cases[-8:-7] + cases[-3:-2] + [
            (["-a", "hdf5", "-o", str(tmp_path / "x")], "HDF5 needs the MPICH build")]
    for argv, words in cases:
        out = mpi.run(2, [program, *argv], check=False)
        assert out.returncode == 2, (argv, out.stderr)
        assert words in out.stderr and "nothing was written" in out.stderr, (argv, out.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bt.btio", "held", "mine.00000001", "one.00000000"]
    assert [p.name for p in (tmp_path / "held").iterdir()] == ["d.00000001"]
    assert (tmp_path / "mine.00000001").read_bytes() == (tmp_path / "bt.btio").read_bytes() == b"precious user data"


@pytest.mark.mpi
def test_hdf5_backend_and_flash_kernel(mpi, tmp_path):
    if mpi.name != "mpich":
        pytest.skip("parallel HDF5 on Debian is built against MPICH")
    result = _run(mpi, tmp_path, "h", ["-a", "hdf5", "-c", "-w", "-r", "--verify", "-k",
                                       "--hint", "romio_cb_write=enable", "--ranks-per-node", "1"])
    data = NRANKS * SEGMENTS * BLOCK
    size = (tmp_path / "h").stat().st_size
    assert data < size < data + 64 * 1024  # the dataset plus HDF5's metadata
    assert result["verify"]["errors"] == 0 and result["hints"]["romio_cb_write"] == "enable"
    # one emulated node per rank: ROMIO is asked for, and uses, one collective-buffering aggregator per node
    assert result["params"]["emulated_nodes"] == NRANKS and result["hints"]["cb_nodes"] == str(NRANKS)
    assert result["hints"]["romio_aggregator_list"].split() == [str(r) for r in range(NRANKS)]

    cells, variables, blocks = 8, 3, 2
    flash = bench_io.run_bench(mpi.impl, NRANKS, ["--kernel", "flash", "--cells", str(cells), "--variables",
                                                  str(variables), "--blocks", str(blocks), "-o", str(tmp_path / "f"),
                                                  "-k"])
    cube, corner, all_blocks = cells ** 3, (cells + 1) ** 3, NRANKS * blocks
    # per block: the variables, then coordinates and block size (3 doubles each) and the refine level (an int)
    expected = {"checkpoint": all_blocks * (variables * cube * 8 + 6 * 8 + 4), "plot_cnt": all_blocks * 4 * cube * 4,
                "plot_crn": all_blocks * 4 * corner * 4}
    assert [p["op"] for p in flash["phases"]] == list(expected)
    for name, data in expected.items():
        assert flash["params"][f"{name}_data_bytes"] == data
        assert data < (tmp_path / f"f.{name}").stat().st_size < data + 64 * 1024, name
        phase = next(p for p in flash["phases"] if p["op"] == name)
        assert phase["bytes"] == data
        # one H5Dwrite per variable, plus the three metadata datasets of the checkpoint
        assert phase["calls"] == NRANKS * (variables + 3 if name == "checkpoint" else 4)


@pytest.mark.mpi
def test_btio_and_riot_kernels(mpi, tmp_path):
    grid, steps = 12, 3
    bt = bench_io.run_bench(mpi.impl, 4, ["--kernel", "btio", "--cells", str(grid), "--steps", str(steps),
                                          "--verify", "-k", "-o", str(tmp_path / "b")])
    values = np.fromfile(tmp_path / "b.btio", dtype=np.float64)
    # every value is its own index in the file: steps of (x, y, z, component) in C order
    assert values.size == steps * grid ** 3 * 5
    assert np.array_equal(values, np.arange(values.size, dtype=np.float64))
    assert [p["op"] for p in bt["phases"]] == ["write", "read"] and bt["verify"]["errors"] == 0
    assert all(p["calls"] == 4 * steps for p in bt["phases"])  # one collective call per step and rank

    ops = 10
    riot = bench_io.run_bench(mpi.impl, 2, ["--kernel", "riot", "--steps", str(ops), "-t", "256k", "--verify",
                                            "-o", str(tmp_path / "r")])
    assert [p["op"] for p in riot["phases"]] == ["MPI_File_write", "MPI_File_read", "MPI_File_write_all",
                                                 "MPI_File_read_all", "MPI_File_write_at_all",
                                                 "MPI_File_read_at_all"]
    assert all(p["bytes"] == 2 * ops * (256 << 10) and p["calls"] == 2 * ops and p["errors"] == 0
               for p in riot["phases"])
    assert all(0 < bench_io.time_per_call(p) < p["time"]["data"]["max"] for p in riot["phases"])
    assert not (tmp_path / "r.riot").exists()  # removed without -k


@pytest.mark.mpi
def test_cli_prints_the_table_and_json(ioloom_cli, tmp_path):
    out = ioloom_cli("bench", "io", "-n", "2", "-b", "64k", "-t", "16k", "-s", "2", "-o", tmp_path / "t",
                     "--per-rank")
    assert "effective" in out.stdout and "per rank" in out.stdout and "write" in out.stdout
    out = ioloom_cli("bench", "io", "-n", "2", "--json", "--dir", tmp_path, "-o", "relative", "-b", "64k", "-t",
                     "16k", "-k")
    result = json.loads(out.stdout)
    assert result["phases"][0]["bytes"] == 2 * (64 << 10) and result["params"]["path"] == f"{tmp_path}/relative"
    assert (tmp_path / "relative").stat().st_size == 2 * (64 << 10)
    if "mpich" in [i.name for i in mpi_impls.implementations()]:  # HDF5 picks the MPICH build by itself
        out = ioloom_cli("bench", "io", "-n", "2", "--json", "-a", "hdf5", "-o", tmp_path / "h", "-b", "64k",
                         "-t", "16k")
        assert json.loads(out.stdout)["mpi"] == "mpich"
    refused = ioloom_cli("bench", "io", "-n", "2", "-b", "64k", "-t", "1m", check=False)
    assert refused.returncode == 2 and "-t/--transfer-size" in refused.stderr


@pytest.mark.mpi
def test_reads_repeats_the_read_phase_and_the_summary_takes_every_one(mpi, tmp_path):
    """--reads N: N read phases after the write, each timed apart; the summary's median is over all of them."""
    result = _run(mpi, tmp_path, "reads", ["-a", "posix", "--reads", "3"])
    reads = [p for p in result["phases"] if p["op"] == "read"]
    assert [p["op"] for p in result["phases"]] == ["write", "read", "read", "read"]
    assert all(p["bytes"] == NRANKS * SEGMENTS * BLOCK for p in reads) and result["params"]["reads"] == 3
    assert bench_io.summary(result, "read")["effective_bw"]["median"] == pytest.approx(
        np.median([p["effective_bw"] for p in reads]))


@pytest.mark.mpi
def test_restarted_read_runs_in_its_own_launch(mpi, tmp_path):
    """--restart-read: the write launch keeps the files, the read launch verifies them and removes them."""
    result = bench_io.run_restarted(mpi.impl, 2, ["-b", "64k", "-t", "16k", "-s", "2", "-w", "-r", "--verify",
                                                  "-o", str(tmp_path / "r")])
    assert [p["op"] for p in result["phases"]] == ["write", "read"] and result["verify"] == {"enabled": True,
                                                                                             "errors": 0}
    assert all(p["bytes"] == 2 * 2 * (64 << 10) for p in result["phases"])
    assert list(tmp_path.iterdir()) == []


def test_eviction_empties_the_page_cache_of_every_file_under_a_directory(disk_tmp_path):
    """evict_page_cache: files just written (dirty, then cached) below a directory leave the page cache, files
    elsewhere stay; a page the eviction cannot drop (mapped by this process) is an error, not a silent cached read."""
    (disk_tmp_path / "run" / "container").mkdir(parents=True)
    written = [disk_tmp_path / "run" / "a", disk_tmp_path / "run" / "container" / "log", disk_tmp_path / "elsewhere"]
    for path in written:
        path.write_bytes(os.urandom(1 << 20))
    assert bench_io.cached_bytes(written) == 3 << 20
    record = bench_io.evict_page_cache([disk_tmp_path / "run"])
    assert record == {"files": 2, "bytes": 2 << 20, "cached_before": 2 << 20, "cached_after": 0}
    assert bench_io.cached_bytes(written[:2]) == 0 and bench_io.cached_bytes(written[2:]) == 1 << 20
    with open(written[2], "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as mapped:
        assert len(mapped[::4096]) == 256  # a byte of every page read: each page mapped into this process
        with pytest.raises(bench_io.EvictionFailed, match="1048576 bytes of 1 files"):
            bench_io.evict_page_cache([written[2]])


def test_sync_file_refuses_what_is_not_a_regular_file(tmp_path):
    """A FIFO is refused at once, in words (opened waiting, it would block for a writer for ever); run in a child so
    that a blocked open fails the test instead of hanging it."""
    os.mkfifo(tmp_path / "fifo")
    code = ("import sys\nfrom ioloom.bench import io\n"
            "try:\n    io.sync_file(io.Path(sys.argv[1]))\nexcept OSError as err:\n    print(err.strerror)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "fifo")], capture_output=True, text=True,
                         timeout=30)
    assert out.stdout.strip() == "not a regular file", out.stdout + out.stderr


def test_cache_note_warns_when_reads_fit_in_memory():
    def result(read_bytes: int, drop_caches: bool | None = None) -> dict:
        doc = {"phases": [{"op": "write", "bytes": read_bytes}, {"op": "read", "bytes": read_bytes}]}
        return doc if drop_caches is None else {**doc, "restarted": {"drop_caches": drop_caches}}
    memory = bench_io.available_memory()
    assert memory > 0
    assert "--drop-caches" in bench_io.cache_note(result(1 << 20))
    assert "--drop-caches" in bench_io.cache_note(result(1 << 20, drop_caches=False))
    assert bench_io.cache_note(result(1 << 20, drop_caches=True)) is None
    assert bench_io.cache_note(result(2 * memory)) is None
    assert bench_io.cache_note({"phases": [{"op": "write", "bytes": 1}]}) is None
