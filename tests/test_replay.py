"""`ioloom replay` (docs/replay.md): a traced run replayed in a new directory, traced again, has the original's
bytes per file and calls per operation; per MPI on the demo program (MPI-IO replayed through its POSIX requests,
data sieving's locks and read-modify-write cycles in the original's cross-rank order), and on a POSIX and stdio
program with a forked child; gaps; bad input."""
from __future__ import annotations

import subprocess

from ioloom import open_trace, paths
from ioloom.replay.compare import differences, footprint

DEMO = paths.DEMO_SOURCE
PROGRAMS = paths.REPO_ROOT / "tests" / "programs"


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
    assert sorted(s.rank for s in open_trace(replay).streams) == [0, 1, 2, 3]


def _posix_program(tmp_path):
    exe = tmp_path / "replay_posix"
    subprocess.run(["gcc", "-O2", "-o", exe, PROGRAMS / "replay_posix.c"], check=True)
    return exe


def test_posix_program_with_child_replayed_with_gaps(ioloom_cli, tmp_path):
    exe = _posix_program(tmp_path)
    run = tmp_path / "run"
    (run / "out").mkdir(parents=True)
    (run / "input.dat").write_bytes(bytes(range(256)) * 10)  # 2,560 bytes the program reads; the replay makes them
    trace = _traced(ioloom_cli, tmp_path, [exe, run])
    report, replay = _replayed(ioloom_cli, tmp_path, trace, "--gaps")
    assert "2 processes" in report and "1 existing before the run" in report and "the replay matches" in report
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
    exe = _posix_program(tmp_path)
    traces = []
    for name in ("a", "b"):
        run = tmp_path / name
        (run / "out").mkdir(parents=True)
        (run / "input.dat").write_bytes(b"i" * (100 if name == "a" else 200))
        traces.append(_traced(ioloom_cli, tmp_path / name, [exe, run]))
    out = ioloom_cli("replay", "compare", *traces, check=False)
    assert out.returncode == 1
    assert "input.dat: original {'read': 100, 'written': 0}, replay {'read': 200, 'written': 0}" in out.stdout


def test_bad_input(ioloom_cli, tmp_path):
    out = ioloom_cli("replay", "write", tmp_path / "nothing", tmp_path / "r", check=False)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    out = ioloom_cli("replay", "write", tmp_path / "nothing", tmp_path / "full", check=False)
    assert out.returncode == 2 and "not an empty directory" in out.stderr
    assert (tmp_path / "full" / "keep.txt").read_text() == "mine"
    script = tmp_path / "bad.ops"
    script.write_text("ioloom-replay 1 0 1\nfile 0 a.dat\ncall mkfifo 0 3 0 0 0 0 0\n")
    done = subprocess.run([paths.native_bin("ioloom-replay"), script], capture_output=True, text=True)
    assert done.returncode == 2
    assert "line 3: a call this replayer does not make (see --list-ops)" in done.stderr
