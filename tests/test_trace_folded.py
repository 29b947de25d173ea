"""Folded traces (docs/trace-format.md, "Folded traces"): `ioloom export --format folded` writes a trace folded by
the predictor's grammar that `open_trace` reads back with every event identical, column for column; the structure
of a loop costs under a byte per event; a time quantum rounds the times and nothing else; damaged files are
refused in one line."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ioloom import open_trace
from ioloom.trace import folded
from test_predict_cli import LOOP

VECTORS = Path(__file__).parent / "vectors" / "trace"


def _same_events(a, b) -> bool:
    x, y = a.events(), b.events()
    return x.num_rows == y.num_rows and all(x.column(c).to_pylist() == y.column(c).to_pylist()
                                            for c in x.column_names)


def _parts(header: dict, events: int) -> dict[str, float]:
    return {part: sum(s["sections"][part][1] for s in header["streams"]) / events
            for part in ("shapes", "grammar", "times")}


@pytest.mark.parametrize("vector", ["mixed.ioloom", "strided.ioloom", "crafted.ioloom"])
def test_shared_vectors_read_back_identical(vector, tmp_path):
    """MPI-IO, POSIX, stdio and process events of the tracer's vectors (call ids, parents, collectives, a
    damaged stream's readable events): the folded trace holds the same streams, files, events and problems."""
    original = open_trace(VECTORS / vector)
    folded.write(original, tmp_path / folded.NAME)
    again = open_trace(tmp_path)
    assert again.meta["folded"] == "1.0"
    assert _same_events(original, again)
    assert again.files.equals(original.files) and again.problems == original.problems
    assert [(s.pid, s.rank, s.info) for s in again.streams] == [(s.pid, s.rank, s.info) for s in original.streams]
    assert again.streams[0].read(["offset", "op"]).column_names == ["offset", "op"]


@pytest.fixture(scope="module")
def loop_trace(tmp_path_factory):
    root = tmp_path_factory.mktemp("folded-loop")
    (root / "loop.py").write_text(LOOP)
    (root / "out").mkdir()
    subprocess.run([sys.executable, "-m", "ioloom", "run", "-o", str(root / "trace"), "--", sys.executable,
                    str(root / "loop.py"), str(root / "out")], check=True, capture_output=True, timeout=180)
    return root


def test_a_traced_loop_folds_exactly_and_small(loop_trace, ioloom_cli):
    out = ioloom_cli("export", loop_trace / "trace", "--format", "folded", "-o", loop_trace / "exact")
    assert str(loop_trace / "exact" / folded.NAME) in out.stdout and "per event" in out.stderr
    original, again = open_trace(loop_trace / "trace"), open_trace(loop_trace / "exact")
    assert _same_events(original, again)
    header = folded.write(original, loop_trace / "check.ioloom-folded")
    events = original.meta["events"]
    parts = _parts(header, events)
    assert parts["shapes"] + parts["grammar"] < 1.0  # the loop's structure: under a byte per event
    # the whole file, exact times: 5.13 bytes per event measured, 3.84 of them the times (the machine's noise at
    # the clock's resolution: docs/predict.md, "What the goal asks, and what exact folding reaches"); all else 1.29
    whole = (loop_trace / "exact" / folded.NAME).stat().st_size / events
    assert whole - parts["times"] < 1.5 and whole < 7.0
    assert (loop_trace / "exact" / folded.NAME).stat().st_size < sum(
        p.stat().st_size for p in (loop_trace / "trace").glob("*.ioloom"))
    # any ioloom command reads the folded trace as the trace
    predicted = ioloom_cli("predict", loop_trace / "exact").stdout
    assert "repeat 60 x: open64 step_#.dat, 24 x write step_#.dat 64 KiB" in predicted


def test_a_time_quantum_rounds_the_times_only(loop_trace, ioloom_cli):
    ioloom_cli("export", loop_trace / "trace", "-f", "folded", "-o", loop_trace / "us", "--time-quantum-ns", "1000")
    original, rounded = open_trace(loop_trace / "trace").events(), open_trace(loop_trace / "us").events()
    for column in original.column_names:
        a, b = original.column(column).to_pylist(), rounded.column(column).to_pylist()
        if column in ("t_start", "t_end"):
            assert all(y == x - x % 1000 for x, y in zip(a, b))
        else:
            assert a == b, column
    assert open_trace(loop_trace / "us").meta["time_quantum_ns"] == [1000]


def test_damaged_folded_traces_are_refused_in_one_line(loop_trace, ioloom_cli, tmp_path):
    whole = (loop_trace / "exact" / folded.NAME).read_bytes()
    cases = {"cut": whole[: len(whole) // 2], "version": whole[:8] + b"\x09\x00" + whole[10:],
             "header": whole[:20] + b"\xff" * 8 + whole[28:]}
    for name, data in cases.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / folded.NAME).write_bytes(data)
        out = ioloom_cli("stats", tmp_path / name, check=False)
        assert out.returncode == 2 and "Traceback" not in out.stderr, (name, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1, (name, out.stderr)
    assert "folded trace version 9" in ioloom_cli("stats", tmp_path / "version", check=False).stderr
