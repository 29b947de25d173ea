"""`ioloom predict TRACE` on a program traced for real: figures, main loop and the bad inputs (docs/predict.md)."""
from __future__ import annotations

import json
import sys

LOOP = """
import os, sys, time
out = sys.argv[1]
for i in range(60):
    fd = os.open(f"{out}/step_{i:04d}.dat", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for j in range(24):
        os.write(fd, b"x" * 65536)
    os.pwrite(fd, b"h" * 512, 24 * 65536 + 4096)  # a header past a hole, as HDF5 writes its metadata
    os.close(fd)
    time.sleep(0.002)
"""


def test_predict_a_traced_loop(ioloom_cli, tmp_path):
    script, out = tmp_path / "loop.py", tmp_path / "out"
    script.write_text(LOOP)
    out.mkdir()
    ioloom_cli("run", "-o", tmp_path / "trace", "--", sys.executable, script, out)
    report = ioloom_cli("predict", tmp_path / "trace").stdout
    assert "operation+file: the trace records no call stacks" in report
    assert ("main loop                       repeat 60 x: open64 step_#.dat, 24 x write step_#.dat 64 KiB, "
            "pwrite64 step_#.dat 512 B, close step_#.dat") in report
    figures = json.loads(ioloom_cli("predict", tmp_path / "trace", "--json").stdout)["processes"]
    assert len(figures) == 1
    figures = figures[0]
    # 60 x 27 operations of the loop, after the interpreter's own start-up reads
    assert figures["operations"] > 60 * 27
    assert figures["symbol_accuracy_last_window_pct"] == 100
    assert figures["offset_accuracy_pct"] > figures["offset_contiguous_pct"]  # the header's jump is learnt
    assert figures["hit_ratio_pct"] > 90
    assert figures["transitions_distant"] >= 1  # close -> open, across the sleep
    assert figures["time_error_s"] < figures["time_error_immediate_reaccess_s"]
    sizes = [size for _, size in figures["grammar_size"]]
    assert sizes[-1] < 200 and sizes[-1] < figures["operations"] / 5


def test_grammar_cap_is_reported(ioloom_cli, tmp_path):
    ioloom_cli("run", "-o", tmp_path / "trace", "--", sys.executable, "-c", "import json, csv, email")
    report = ioloom_cli("predict", tmp_path / "trace", "--grammar-cap", "16").stdout
    assert "grammar cap reached: the last" in report


def test_bad_inputs_are_one_line(ioloom_cli, tmp_path):
    missing = ioloom_cli("predict", tmp_path / "nothing", check=False)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "ioloom run -o" in missing.stderr
    (tmp_path / "empty").mkdir()
    empty = ioloom_cli("predict", tmp_path / "empty", check=False)
    assert empty.returncode == 2 and empty.stderr.count("\n") == 1 and "Traceback" not in empty.stderr
    ioloom_cli("run", "-o", tmp_path / "trace", "--", "true")
    no_rank = ioloom_cli("predict", tmp_path / "trace", "--rank", "7", check=False)
    assert no_rank.returncode == 2 and "--rank" in no_rank.stderr
