"""Offsets of calls at the current position (read, write, their vector forms, sendfile, copy_file_range, lseek),
which the tracer follows per open file description instead of asking the kernel on every call: compared with
the kernel's own answers over seeded random call sequences with dup'ed descriptors, fresh and O_APPEND opens, a
fork (both processes keep using the descriptions they share) and threads; and with logfs underneath, whose
lseek answers for its containers."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import pytest

from ioloom import paths
from ioloom.logfs import preload
from ioloom.trace import open_trace
from test_trace_native import compile_program, shimmed_env, traced_env

AT_POSITION = {"read", "__read_chk", "write", "readv", "writev", "preadv2", "pwritev2", "lseek", "copy_file_range",
               "sendfile"}


def logged(prefix: Path) -> pd.DataFrame:
    """The program's own record: per process and thread, each call's descriptor and where it took place."""
    frames = []
    for log in prefix.parent.glob(prefix.name + ".*"):
        part = pd.read_csv(log, sep=" ", names=["tid", "op", "fd", "offset"])
        part["pid"] = int(log.suffix[1:])
        frames.append(part)
    return pd.concat(frames, ignore_index=True)


def traced(trace_dir: Path, data: Path) -> pd.DataFrame:
    trace = open_trace(trace_dir)
    assert trace.problems == [], trace.problems
    files = trace.files.to_pandas()
    ids = files[files["path"] == str(data)]["file_id"].tolist()
    events = trace.events().to_pandas().astype({"op": str})
    events = events[events["file_id"].isin(ids) & events["op"].isin(AT_POSITION)].sort_values(["pid", "tid", "t_start"],
                                                                                            kind="stable")
    events["op"] = events["op"].replace({"sendfile": "copy", "copy_file_range": "copy", "__read_chk": "read"})
    return events.rename(columns={"handle": "fd"})


def compare(trace_dir: Path, data: Path, prefix: Path) -> int:
    """Asserts the trace's offsets equal the program's, call by call, thread by thread; returns the calls."""
    expected, got = logged(prefix), traced(trace_dir, data)
    assert sorted(expected.groupby(["pid", "tid"]).groups) == sorted(got.groupby(["pid", "tid"]).groups)
    for key, want in expected.groupby(["pid", "tid"], sort=False):
        have = got[(got["pid"] == key[0]) & (got["tid"] == key[1])]
        want_rows = list(want[["op", "fd", "offset"]].itertuples(index=False, name=None))
        have_rows = list(have[["op", "fd", "offset"]].itertuples(index=False, name=None))
        mismatch = next((i for i, (a, b) in enumerate(zip(want_rows, have_rows)) if a != b), None)
        assert mismatch is None and len(want_rows) == len(have_rows), (
            f"pid {key[0]} tid {key[1]}: call {mismatch}: the program saw {want_rows[mismatch:mismatch + 3]}, "
            f"the trace says {have_rows[mismatch:mismatch + 3]}" if mismatch is not None else "lengths differ")
    return len(expected)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_tracked_offsets_equal_the_kernels_answers(tmp_path, seed):
    exe = compile_program("trace_positions.c", "-ldl")
    data, prefix = tmp_path / "pos.dat", tmp_path / "log"
    subprocess.run([str(exe), str(data), str(seed), "900", str(prefix)], check=True, timeout=120,
                   env=traced_env(tmp_path / "trace"))
    assert compare(tmp_path / "trace", data, prefix) > 500


def test_tracked_offsets_equal_logfs_answers(tmp_path):
    """With logfs below the tracer, positions are logical offsets in the container, which only logfs's lseek
    knows (the kernel sees the container's directory)."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    exe = compile_program("trace_positions.c", "-ldl")
    data, prefix = mount / "pos.dat", tmp_path / "log"
    env = traced_env(tmp_path / "trace", LSEEK_FROM=str(preload.library()),
                     **preload.env({mount: []}, preload_first=str(paths.native_lib("ioloom-trace"))))
    subprocess.run([str(exe), str(data), "5", "600", str(prefix)], check=True, timeout=120, env=env)
    assert data.is_dir(), "the file is a container: logfs served it"
    assert compare(tmp_path / "trace", data, prefix) > 300


def test_sequential_reads_and_writes_ask_the_kernel_nothing(tmp_path):
    """dd writing then reading a file of its own, 2000 blocks each: the tracer asks lseek (which a tool
    preloaded after it would see) not once per call but not at all, and the offsets are still exact."""
    data = tmp_path / "out"
    counts = tmp_path / "shim"
    env = {**shimmed_env(tmp_path / "trace"), "SHIM_COUNTS": str(counts)}
    subprocess.run(["sh", "-c", f"dd if=/dev/zero of={data} bs=64 count=2000 && dd if={data} of=/dev/null bs=64"],
                   env=env, capture_output=True, timeout=60, check=True)
    lines = counts.read_text().splitlines()
    asked = sum(int(line.split()[2]) for line in lines if line.endswith(" lseek"))
    assert len(lines) >= 4 and asked <= 2, lines  # both dd (and sh when it does not exec the last)
    events = traced(tmp_path / "trace", data)
    for op in ("write", "read"):
        moves = events[(events["op"] == op) & (events["offset"] >= 0)]
        assert moves["offset"].tolist() == [64 * i for i in range(len(moves))] and len(moves) >= 2000


def shim_saw(counts: Path, call: str) -> int:
    """How many `call`s reached trace_next_shim.c, summed over the processes that wrote to `counts`."""
    return sum(int(line.split()[2]) for line in counts.read_text().splitlines() if line.endswith(f" {call}"))


@pytest.mark.parametrize("kind", ["vectors", "sendfile", "copy_file_range", "stdio"])
def test_sequential_vectors_copies_and_streams_ask_nothing(tmp_path, kind):
    """2000 rounds of sequential calls of one kind (tests/programs/trace_sequential.c): readv and writev, sendfile
    and copy_file_range at both descriptors' positions, and the stdio family (fwrite, fputs, fputc, putc, fprintf,
    fread, fgets, fgetc, getc). The tracer asks neither lseek nor ftello (which a tool preloaded after it would see)
    on any of them, only after the program's own seek; every call's offset is where the one before it ended."""
    exe = compile_program("trace_sequential.c")
    data, counts = tmp_path / "data", tmp_path / "shim"
    rounds = 2000
    subprocess.run([str(exe), kind, str(data), str(rounds)], check=True, timeout=60,
                   env={**shimmed_env(tmp_path / "trace"), "SHIM_COUNTS": str(counts)})
    # the program's own lseek (vectors), rewind's (stdio: the tracer learns where the stream stands)
    assert shim_saw(counts, "lseek") <= 1 and shim_saw(counts, "ftello") <= 1, counts.read_text()
    trace = tmp_path / "trace"
    if kind == "stdio":
        events = traced_stdio(trace, data)
        runs = [events[events["op"].str.contains("put|write|print")], events[events["op"].str.contains("get|read")]]
    elif kind == "vectors":
        events = traced(trace, data)
        runs = [events[events["op"] == "writev"], events[events["op"] == "readv"]]
    else:  # the destination's side of each copy, and the source's
        runs = [traced(trace, data), traced(trace, Path(f"{data}.src"))]
        runs = [events[events["op"] == "copy"] for events in runs]
    for calls in runs:
        offsets, moved = calls["offset"].tolist(), calls["ret_bytes"].tolist()
        assert len(offsets) >= rounds and offsets[0] == 0, offsets[:3]
        assert offsets[1:] == [at + n for at, n in zip(offsets, moved)][:-1]


STDIO_DATA = {"fprintf", "fwrite", "fputs", "fputc", "putc", "fread", "fgets", "getc", "fgetc"}


def traced_stdio(trace_dir: Path, data: Path) -> pd.DataFrame:
    """The stdio events on `data` in time order, fortified names (__fprintf_chk) as the plain ones."""
    trace = open_trace(trace_dir)
    files = trace.files.to_pandas()
    ids = files[files["path"] == str(data)]["file_id"].tolist()
    events = trace.events().to_pandas().astype({"op": str})
    events = events[events["file_id"].isin(ids) & (events["layer"] == "stdio")].sort_values("t_start", kind="stable")
    events["op"] = events["op"].str.removeprefix("__").str.removesuffix("_chk")
    return events[events["op"].isin(STDIO_DATA)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_stream_offsets_equal_ftell_through_flushes_and_inline_calls(tmp_path, seed):
    """fprintf, fwrite, fputs, fputc, fread, fgets, getc, fgetc on one stream, with fflush (of the stream and of
    all streams), glibc's inline putc_unlocked/getc_unlocked (crossing buffer ends), ungetc and fscanf between
    them: every recorded call's offset is where libc's ftello says the stream stood."""
    exe = compile_program("trace_stdio_positions.c", "-ldl")
    data, log = tmp_path / "stream.dat", tmp_path / "log"
    subprocess.run([str(exe), str(data), str(seed), "3000", str(log)], check=True, timeout=120,
                   env=traced_env(tmp_path / "trace"))
    want = [(call, int(offset)) for call, offset in (line.split() for line in log.read_text().splitlines())]
    events = traced_stdio(tmp_path / "trace", data)
    have = [(op, int(offset)) for op, offset in events[events["op"].isin(STDIO_DATA)][["op", "offset"]].values]
    assert len(want) > 1000 and len(have) == len(want)
    mismatch = next((i for i, (a, b) in enumerate(zip(want, have)) if a != b), None)
    assert mismatch is None, (f"call {mismatch}: ftello said {want[mismatch:mismatch + 3]}, "
                              f"the trace {have[mismatch:mismatch + 3]}")


def a_dat_scenario(tmp_path, scenario: str):
    """Runs trace_scenarios.c's `scenario` traced in tmp_path/w; a.dat's rows of the file table and every event."""
    exe = compile_program("trace_scenarios.c")
    (tmp_path / "w").mkdir()
    subprocess.run([str(exe), scenario, str(tmp_path / "w")], check=True, timeout=60, env=traced_env(tmp_path / "t"))
    trace = open_trace(tmp_path / "t")
    files = trace.files.to_pandas()
    return files[files["path"] == str(tmp_path / "w" / "a.dat")], trace.events().to_pandas().astype({"op": str})


def test_a_path_removed_or_replaced_is_another_file(tmp_path):
    """Opening a path again reuses what the thread learnt of it (no fstat) only while the process has removed
    or renamed nothing: after remove() (which unlinks inside libc) and after a rename over it, the path names a
    new file, with its own id and (device, inode)."""
    a, events = a_dat_scenario(tmp_path, "renamed")
    opens = events[(events["op"] == "open") & events["file_id"].isin(a["file_id"])]
    assert len(opens) == 6 and a["ino"].nunique() == 3
    assert opens["file_id"].tolist()[::2] == opens["file_id"].tolist()[1::2]  # the same file twice in a row
    assert opens["file_id"].nunique() == 3


def test_a_path_stat_again_after_another_process_replaced_it_is_another_file(tmp_path):
    """A stat of the path this thread named last reuses its file's id only when the stat finds the same (device,
    inode): after a child process renamed another file over it (this process removed and renamed nothing), the two
    stats that follow name a new file."""
    a, events = a_dat_scenario(tmp_path, "restat")
    stats = events[(events["op"] == "stat") & events["file_id"].isin(a["file_id"])].sort_values("t_start")
    ids = stats["file_id"].tolist()
    assert len(ids) == 4 and ids[0] == ids[1] and ids[2] == ids[3] and ids[1] != ids[2], ids
    assert a["ino"].nunique() == 2


def test_a_trajectory_written_in_order_is_sequential(tmp_path, ioloom_cli):
    """Issue 13: a dump written strictly in order with fprintf and fflush (and an inline putc_unlocked) had its
    offsets -1 after the first flush and was classified random; every offset is known now and the file is
    sequential."""
    import json

    exe = compile_program("trajectory.c")
    data = tmp_path / "dump.lammpstrj"
    subprocess.run([str(exe), str(data), "200"], check=True, timeout=60, env=traced_env(tmp_path / "trace"))
    events = traced_stdio(tmp_path / "trace", data)
    assert len(events) == 200 * 51 and (events["offset"] >= 0).all()
    assert (events["offset"] + events["ret_bytes"]).iloc[-1] + 1 == data.stat().st_size  # the last inline '\n'
    stats = json.loads(ioloom_cli("stats", tmp_path / "trace", "--json").stdout)
    pattern = next(p for p in stats["patterns"] if p["path"] == str(data))
    assert pattern["order"] == "sequential", pattern
