"""`ioloom replay` (docs/replay.md): a traced run replayed in a new directory, traced again, has the original's
bytes per file and calls per operation; per MPI on the demo program (MPI-IO replayed through its POSIX requests,
data sieving's locks and read-modify-write cycles in the original's cross-rank order), and on a POSIX and stdio
program with a forked child; gaps; bad input."""
from __future__ import annotations

import subprocess

from conftest import build_program
from ioloom import open_trace, paths
from ioloom.replay import run as replay_run
from ioloom.replay import script
from ioloom.replay.compare import differences, footprint, script_sequences

DEMO = paths.DEMO_SOURCE


def _traced(ioloom_cli, tmp_path, argv, env=None, cwd=None):
    trace = tmp_path / "trace"
    ioloom_cli("run", "-o", trace, "--", *argv, env=env, cwd=cwd)
    return trace


def _replayed(ioloom_cli, tmp_path, trace, *options):
    """Replays into tmp_path/replay, traced into tmp_path/replay-trace (both named relative to tmp_path)."""
    out = ioloom_cli("replay", "run", trace, "replay", "--trace", "replay-trace", *options, cwd=tmp_path)
    return out.stdout, tmp_path / "replay-trace"


def test_demo_replayed_per_rank_matches(mpi, ioloom_cli, tmp_path):
    """The original runs on one CPU: a rank granted a lock then often returns before the rank that released it
    has returned from its unlock, the timing that made this replay deadlock for 10 s and read other byte counts
    (docs/replay.md, "Order across processes")."""
    exe = mpi.compile(DEMO)
    run = tmp_path / "run"
    run.mkdir()
    one_cpu = ["taskset", "-c", "0"]
    trace = _traced(ioloom_cli, tmp_path, one_cpu + mpi.command(4, [exe, run / "strided.dat", "64", "4096"]),
                    mpi.env(), run)
    report, replay = _replayed(ioloom_cli, tmp_path, trace)
    assert f"4 ranks under {mpi.name}'s mpiexec" in report
    assert report.count(", 0 order waits given up") == 4
    assert "the replay matches" in report
    original, again = footprint(open_trace(trace)), footprint(open_trace(replay))
    assert differences(original, again) == []
    assert original.bytes["strided.dat"]["written"] >= 4 * 64 * 4096  # every rank's blocks, twice, and sieving
    if mpi.name == "mpich":
        assert original.calls["posix fcntl"] > 0  # ROMIO's data sieving: its locks are replayed too
    assert not any(call.startswith("mpiio") for call in again.calls)  # MPI-IO replayed through its POSIX requests
    # ... and counted as not made again, in the footprint and the report
    assert original.not_reproduced["mpiio MPI_File_write_at"] == 4 * 64 and not again.not_reproduced
    assert "not made again by a replay (docs/replay.md): " in report and "mpiio MPI_File_close 4" in report
    assert sorted(s.rank for s in open_trace(replay).streams) == [0, 1, 2, 3]


def test_posix_program_with_child_replayed_with_gaps(ioloom_cli, tmp_path):
    exe = build_program("replay_posix.c")
    run = tmp_path / "run"
    (run / "out").mkdir(parents=True)
    (run / "input.dat").write_bytes(bytes(range(256)) * 10)  # 2,560 bytes the program reads; the replay makes them
    trace = _traced(ioloom_cli, tmp_path, [exe, run])
    report, replay = _replayed(ioloom_cli, tmp_path, trace, "--gaps")
    assert "2 processes" in report and "1 existing before the run" in report and "the replay matches" in report
    out = ioloom_cli("replay", "write", trace, tmp_path / "as-mpiio", "--mpiio", check=False)  # no ranks: refused
    assert out.returncode == 2 and "not a trace of MPI ranks" in out.stderr and "Traceback" not in out.stderr
    original, again = footprint(open_trace(trace)), footprint(open_trace(replay))
    assert differences(original, again) == []
    assert original.bytes["input.dat"] == {"read": 2560, "written": 0}
    assert original.bytes["child.dat"] == {"read": 0, "written": 4000}
    assert {"stdio fprintf", "stdio fputc", "posix pwrite", "posix lseek"} <= set(again.calls)
    assert (tmp_path / "replay" / "out" / "step_2.dat").stat().st_size == (1 << 20) + 100
    # --gaps: the 300 ms sleep before the fork is waited again between the two calls around it
    events = open_trace(replay).events(["t_start", "op"]).to_pandas()
    reads = events[events.op == "fread"]
    assert events[events.op == "pwrite"].t_start.max() - reads.t_start.max() > 250e6


def test_the_comparison_sees_a_difference(ioloom_cli, tmp_path):
    """The check can fail: two runs that read inputs of different sizes differ, and it says how."""
    exe = build_program("replay_posix.c")
    traces = []
    for name in ("a", "b"):
        run = tmp_path / name
        (run / "out").mkdir(parents=True)
        (run / "input.dat").write_bytes(b"i" * (100 if name == "a" else 200))
        traces.append(_traced(ioloom_cli, tmp_path / name, [exe, run]))
    out = ioloom_cli("replay", "compare", *traces, check=False)
    assert out.returncode == 1
    assert "input.dat: original {'read': 100, 'written': 0}, replay {'read': 200, 'written': 0}" in out.stdout


def _edited_replay(tmp_path, trace, name, edit):
    """The replay of `trace` with the child's script (the process writing child.dat) changed by edit(its call
    lines), run traced; the replay's trace."""
    directory = tmp_path / name
    script.write(trace, directory)
    (child,) = [p for p in (directory / script.SCRIPTS).glob("*.ops") if "child.dat" in p.read_text()]
    lines = child.read_text().splitlines(keepends=True)
    writes = [i for i, line in enumerate(lines) if line.startswith("call pwrite ")]
    edit(lines, writes)
    child.write_text("".join(lines))
    done = replay_run.run(directory, tmp_path / f"{name}-trace")
    assert done.returncode == 0, done.stderr
    return tmp_path / f"{name}-trace"


def _swap(lines, writes):
    lines[writes[0]], lines[writes[1]] = lines[writes[1]], lines[writes[0]]


def _shift(lines, writes):
    word = lines[writes[-1]].split(" ")
    word[5] = str(int(word[5]) + 1)  # call NAME GAP HANDLE FILE OFFSET ...
    lines[writes[-1]] = " ".join(word)


def test_the_comparison_sees_a_call_reordered_or_shifted(ioloom_cli, tmp_path):
    """A replay whose child makes its two first writes in the other order, or its last one a byte further, moves
    the same bytes per file with the same calls; the comparison per process and call sees both, and says where."""
    exe = build_program("replay_posix.c")
    run = tmp_path / "run"
    (run / "out").mkdir(parents=True)
    (run / "input.dat").write_bytes(b"i" * 100)
    original = footprint(open_trace(_traced(ioloom_cli, tmp_path, [exe, run])))
    for name, edit, first in (("reordered", _swap, "call 2: original pwrite child.dat offset 0 "),
                              ("shifted", _shift, "call 5: original pwrite child.dat offset 3,000 ")):
        lines = differences(original, footprint(open_trace(_edited_replay(tmp_path, tmp_path / "trace", name,
                                                                          edit))))
        assert len(lines) == 1 and first in lines[0], (name, lines)
        assert lines[0].startswith("process ") and f" {2 if name == 'reordered' else 1} of 6 calls differ" in lines[0]


def test_bad_input(ioloom_cli, tmp_path):
    out = ioloom_cli("replay", "write", tmp_path / "nothing", tmp_path / "r", check=False)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    out = ioloom_cli("replay", "write", tmp_path / "nothing", tmp_path / "full", check=False)
    assert out.returncode == 2 and "not an empty directory" in out.stderr
    assert (tmp_path / "full" / "keep.txt").read_text() == "mine"
    script = tmp_path / "bad.ops"
    script.write_text("ioloom-replay 2 0 1\nfile 0 a.dat\ncall mkfifo 0 3 0 0 0 0 0\n")
    done = subprocess.run([paths.native_bin("ioloom-replay"), script], capture_output=True, text=True)
    assert done.returncode == 2
    assert "line 3: a call this replayer does not make (see --list-ops)" in done.stderr


def test_processes_sharing_a_rank_are_both_compared():
    """A child that inherits its rank's environment is a second "rank 0": it used to replace the first in the
    comparison, so one process's calls were never checked. The second is compared by its calls instead."""
    manifest = {"processes": [{"label": "rank 0", "script": "parent"}, {"label": "rank 0", "script": "child"}]}
    scripts = {"parent": "file 0 out/a\ncall pwrite - - 0 0 10 - 10\n",
               "child": "file 0 out/b\ncall pwrite - - 0 4096 20 - 20\n"}
    assert script_sequences(manifest, scripts) == {"rank 0": [("pwrite", "out/a", 0, 10, 10)],
                                                   "process 1": [("pwrite", "out/b", 4096, 20, 20)]}
