"""ioloom run --coord with the tracer's predictor (IOLOOM_PREDICT=1): the preloaded client announces each phase
with the bytes and the end the predictor's phase interface gives (native/predict/phase.h, ioloom_predict_phase;
docs/coord.md, "What the predictor gives"), falling back to the previous phase's bytes without it. Real programs:
Python loops (`ioloom bench coord-predict`'s) whose steps of writes (a phase each, a pause before) follow a pattern
of sizes."""
import json
import os
import subprocess
import sys

import pytest

import coord_support
from ioloom import paths
from ioloom.bench.coord import RunRefused
from ioloom.bench.coord_predict import LOOP, RETRIES, loop_command, run_again_if_refused, run_pair
from ioloom.coord import log

coordinator = coord_support.coordinator  # the fixture

STEPS = [8, 8, 16] * 6  # 2:1: the previous phase's size is wrong at two phases of three


def run_loop(tmp_path, address, name, predict, steps=STEPS, pause=0.15, kib=256, storage=False):
    """`ioloom run --coord` of the bench's loop, a phase ending after 0.05 s without a write; with `storage`, each
    write also takes its time on an emulated storage of 500 MB/s shared by the programs run so."""
    (tmp_path / "loop.py").write_text(LOOP)
    argv, env = loop_command(tmp_path, name, steps, pause, kib, address, predict, bandwidth=5e8 if storage else 0.0)
    env["PYTHONPATH"] = str(paths.REPO_ROOT / "python")
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, tmp_path / f"run-{name}"


def finished(proc, out) -> list[dict]:
    """The announcements of the run's phases (coord.jsonl, by the names the preload writes: those of version 1's
    fields in their order); `ioloom run`'s line counts those announced with the predictor's bytes."""
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    phases = [a for row in log.read(out / "coord.jsonl") for a in row["announced"]]
    assert phases and all(tuple(p) == log.V1_ANNOUNCED for p in phases), phases
    predicted = sum(p["bytes_from"] == "predictor" for p in phases)
    assert (f"{predicted} phases announced with the predictor's bytes" in err) == (predicted > 0), err
    return phases


def test_phases_are_announced_with_the_predicted_bytes(tmp_path, coordinator):
    """With the predictor, every phase after the first is announced with the bytes and end it predicts, and
    revised with its end after two writes; from the fifth phase on (the pattern 8, 8, 16 seen once whole) the
    bytes are those the phase writes. Without it, the previous phase's bytes (wrong at two phases of three) and
    the time from the rate of the phase before at the same call site."""
    address = coordinator("dynamic")
    predicted = finished(*run_loop(tmp_path, address, "predicted", predict=True))
    unpredicted = finished(*run_loop(tmp_path, address, "unpredicted", predict=False))
    writes = [steps << 18 for steps in STEPS]
    assert [p["bytes_written"] for p in predicted] == writes and [p["bytes_written"] for p in unpredicted] == writes
    assert all(p["bytes_from"] == p["seconds_from"] == p["revised_from"] == "predictor" for p in predicted[1:]), \
        predicted
    assert [p["bytes"] for p in predicted[4:]] == writes[4:], predicted
    assert [p["bytes_from"] for p in unpredicted[1:]] == ["previous"] * (len(STEPS) - 1), unpredicted
    assert [p["bytes"] for p in unpredicted[1:]] == writes[:-1]  # the previous phase's
    assert unpredicted[0]["seconds_from"] == "none", unpredicted
    assert {p["seconds_from"] for p in unpredicted[1:]} == {"history"}, unpredicted


def test_two_programs_announced_by_prediction_under_dynamic(tmp_path, coordinator):
    """Two programs of different patterns write at once to one emulated storage under dynamic: each, with the
    predictor, announces its phases with the bytes they write once its pattern was seen whole and began again. A
    phase told to wait keeps
    its place in the predictor's phases (its waits are no gap), however long it waits."""
    address = coordinator("dynamic")
    b_pattern = [3, 3, 3, 6]
    b_steps = b_pattern * 4
    a = run_loop(tmp_path, address, "a", predict=True, storage=True)
    b = run_loop(tmp_path, address, "b", predict=True, steps=b_steps, pause=0.1, kib=320,
                 storage=True)
    for phases, steps, period, kib in ((finished(*a), STEPS, 3, 256), (finished(*b), b_steps, len(b_pattern), 320)):
        writes = [n * kib << 10 for n in steps]
        assert [p["bytes_written"] for p in phases] == writes, phases
        assert [p["bytes"] for p in phases[period + 1:]] == writes[period + 1:], phases


def test_bench_coord_predict_prints_each_condition(tmp_path):
    """`ioloom bench coord-predict` (one quick round, each pattern twice): the three conditions, the uncoordinated
    one the baseline of f, and each program's phases announced with the predictor's bytes under dynamic+predict
    alone. How many are announced right is the benchmark's figure (docs/coord.md), not asserted here: on a quiet
    machine 5 of B's 8 phases with the predictor against 4 without, but a program descheduled for over 0.05 s
    mid-step (seen at load 7-8) splits a phase, and the shares with it."""
    env = {**os.environ, "PYTHONPATH": str(paths.REPO_ROOT / "python")}
    out = subprocess.run([sys.executable, "-m", "ioloom", "bench", "coord-predict", "--rounds", "1", "--quick",
                          "--repeats", "2", "--margin", "1", "--json", "-o", str(tmp_path)],
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert json.loads((tmp_path / "coord-predict.json").read_text()) == report
    rows = {r["condition"]: r for r in report["rows"]}
    assert list(rows) == ["none", "dynamic", "dynamic+predict"] and rows["none"]["f_ratio"]["median"] == 1.0
    for program in ("a", "b"):
        assert rows["none"][f"predicted_{program}"]["max"] == rows["dynamic"][f"predicted_{program}"]["max"] == 0
        assert rows["dynamic+predict"][f"predicted_{program}"]["min"] > 0, rows["dynamic+predict"]


def test_run_pair_refuses_a_run_that_lost_its_coordinator(tmp_path):
    """A pair told to coordinate where no coordinator listens writes on (the client is fail-open), counted lost:
    the bench refuses the run, saying so, rather than count its times as dynamic's; the same pair run
    uncoordinated (no address) is measured."""
    (tmp_path / "loop.py").write_text(LOOP)
    options = {"a_steps": [2, 2], "b_steps": [1, 1], "a_pause": 0.1, "b_pause": 0.1, "a_kib": 64, "b_kib": 64,
               "a_cores": 2, "bandwidth": 5e8, "margin": 1.0}
    refused = r"^run-A: the program lost its coordinator \(and wrote on\): the run is not a policy's, refused"
    with pytest.raises(RuntimeError, match=refused):
        run_pair(tmp_path, options, str(tmp_path / "nobody.sock"), predict=False)
    pair = run_pair(tmp_path, options, None, predict=False)
    assert set(pair) == {"A", "B"} and all(0.1 < run["t"] < 60 and 0 <= run["right"] <= 1 for run in pair.values())


def test_a_refused_run_is_run_again_a_bounded_number_of_times(tmp_path, coordinator):
    """`bench coord-predict` runs a refused run (its coordinator lost) again rather than stop its campaign: with a
    coordinator started at the address after the first refusal, the second run is measured; with none ever, the
    run is refused RETRIES + 1 times, then the bench stops, saying so in one line."""
    (tmp_path / "loop.py").write_text(LOOP)
    options = {"a_steps": [2], "b_steps": [1], "a_pause": 0.1, "b_pause": 0.1, "a_kib": 64, "b_kib": 64,
               "a_cores": 2, "bandwidth": 5e8, "margin": 0.5}
    address = str(tmp_path / "late.sock")

    class StartTheCoordinator(list):
        def append(self, line):  # a refusal: the coordinator starts before the run is run again
            super().append(line)
            coordinator("dynamic", address=address)
    retried = StartTheCoordinator()
    pair = run_again_if_refused(tmp_path, options, address, False, retried)
    assert len(retried) == 1 and "lost its coordinator" in retried[0] and set(pair) == {"A", "B"}, retried
    retried = []
    refused = rf"^run-A: the program lost its coordinator .*; the same run refused {RETRIES + 1} times in a row$"
    with pytest.raises(RunRefused, match=refused):
        run_again_if_refused(tmp_path, options, str(tmp_path / "nobody.sock"), False, retried)
    assert len(retried) == RETRIES and all("lost its coordinator" in line for line in retried), retried
