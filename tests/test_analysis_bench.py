"""`ioloom bench analyse` end to end on a small trace: it generates a real trace of about the requested
size, reports the figures for ioloom and the baseline, and shows its steps on a terminal only (not in pipes, not
with --quiet). (Figures are printed, not asserted: not a timed test.)"""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from test_progress import on_terminal

STEPS = ("generating the trace", "timing ioloom report", "timing the baseline")


@pytest.mark.mpi
def test_bench_analyse_generates_and_reports_with_progress_on_a_terminal_only(tmp_path):
    status, drawn = on_terminal(["bench", "analyse", "--events", "40000", "--ranks", "2", "--dir", str(tmp_path),
                                 "--keep"])
    text = drawn.decode(errors="replace")
    assert status == 0 and all(step in text for step in STEPS) and "KiB" in text, text[-600:]
    events = int(re.search(r"trace: ([\d,]+) events", text).group(1).replace(",", ""))
    assert 40_000 <= events <= 44_000  # N/2 MPI-IO writes, each with its POSIX write, plus start-up calls
    (kept,) = tmp_path.iterdir()
    trace = kept / "trace"
    out = subprocess.run([sys.executable, "-m", "ioloom", "bench", "analyse", "--trace", str(trace), "--dir",
                          str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    for name in ("ioloom report (full)", "baseline: one pandas frame"):
        line = next(line for line in out.stdout.splitlines() if line.startswith(name))
        assert re.search(r"[\d.]+ s .* M events/s  peak +[\d.]+ GiB", line)
    assert not any(step in out.stdout + out.stderr for step in STEPS)  # no progress in pipes
    status, drawn = on_terminal(["bench", "analyse", "--trace", str(trace), "--dir", str(tmp_path), "--quiet"])
    assert status == 0 and not any(step.encode() in drawn for step in STEPS) and b"ioloom report (full)" in drawn
    assert list(tmp_path.iterdir()) == [kept]  # a run's own directory is removed unless --keep
