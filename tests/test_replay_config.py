"""A replay written out as a bench configuration (`ioloom replay config`, `ioloom bench replay`; docs/replay.md
"As a bench configuration"): one file that runs anywhere without the trace, is timed over rounds, and whose
check holds the replay's trace to the original's bytes per file and calls per operation; the check fails when
they differ; bad input."""
from __future__ import annotations

import subprocess
import tomllib

from conftest import build_program
from ioloom.replay.compare import MATCHES


def _configuration(ioloom_cli, tmp_path):
    exe = build_program("replay_posix.c")
    run = tmp_path / "run"
    (run / "out").mkdir(parents=True)
    (run / "input.dat").write_bytes(b"i" * 2560)
    ioloom_cli("run", "-o", tmp_path / "trace", "--", exe, run)
    config = tmp_path / "replay.toml"
    out = ioloom_cli("replay", "config", tmp_path / "trace", config)
    assert "2 processes" in out.stdout and f"ioloom bench replay {config}" in out.stdout
    return config


def test_configuration_runs_without_the_trace_and_is_checked(ioloom_cli, tmp_path):
    config = _configuration(ioloom_cli, tmp_path)
    moved = tmp_path / "elsewhere.toml"
    config.rename(moved)
    subprocess.run(["rm", "-r", tmp_path / "trace", tmp_path / "run"], check=True)  # self-contained
    raw = tomllib.loads(moved.read_text())
    assert raw["original"]["bytes"]["input.dat"] == {"read": 2560, "written": 0}
    assert raw["manifest"]["initial_sizes"] == {"input.dat": 2560}
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    out = ioloom_cli("bench", "replay", moved, "--rounds", "2", "--check", "--dir", scratch)
    assert f"check: {MATCHES}" in out.stdout
    assert "replay, 2 rounds: " in out.stdout and " s median [" in out.stdout
    assert "calls with another outcome 0, order waits given up 0" in out.stdout
    assert "load average" in out.stdout
    assert list(scratch.iterdir()) == []  # every round's directory removed
    # the check can fail: the same configuration holding another byte count for the input
    moved.write_text(moved.read_text().replace('"input.dat" = {"read" = 2560', '"input.dat" = {"read" = 2561'))
    out = ioloom_cli("bench", "replay", moved, "--rounds", "1", "--check", check=False)
    assert out.returncode == 1
    assert "input.dat: original {'read': 2561, 'written': 0}, replay {'read': 2560, 'written': 0}" in out.stdout


def test_bad_input(ioloom_cli, tmp_path):
    for text, says in (("not = [toml", "is not valid TOML"),
                       ("ioloom_replay_bench = 7\n", "not a replay configuration of version 2"),
                       ("ioloom_replay_bench = 1\n", "not a replay configuration of version 2"),
                       ("ioloom_replay_bench = 2\n[manifest]\nversion = 2\n", "missing or mismatched parts")):
        bad = tmp_path / "bad.toml"
        bad.write_text(text)
        out = ioloom_cli("bench", "replay", bad, check=False)
        assert out.returncode == 2 and says in out.stderr and len(out.stderr.strip().splitlines()) == 1
        assert "Traceback" not in out.stderr
    keep = tmp_path / "keep.toml"
    keep.write_text("mine")
    out = ioloom_cli("replay", "config", tmp_path / "no-trace", keep, check=False)
    assert out.returncode == 2 and "exists" in out.stderr and keep.read_text() == "mine"
