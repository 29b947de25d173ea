"""`ioloom bench analyse` end to end on a small trace: it generates a real trace of about the requested
size, reports the figures for ioloom and the baseline. (Figures are printed, not asserted: not a timed test.)"""
from __future__ import annotations

import re
import subprocess
import sys

import pytest


@pytest.mark.mpi
def test_bench_analyse_generates_and_reports(tmp_path):
    out = subprocess.run([sys.executable, "-m", "ioloom", "bench", "analyse", "--events", "40000", "--ranks", "2",
                          "--dir", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    events = int(re.search(r"trace: ([\d,]+) events", out.stdout).group(1).replace(",", ""))
    assert 40_000 <= events <= 44_000  # N/2 MPI-IO writes, each with its POSIX write, plus start-up calls
    for name in ("ioloom report (full)", "baseline: one pandas frame"):
        line = next(line for line in out.stdout.splitlines() if line.startswith(name))
        assert re.search(r"[\d.]+ s .* M events/s  peak +[\d.]+ GiB", line)
    assert list(tmp_path.iterdir()) == []  # the generated trace is removed unless --keep
