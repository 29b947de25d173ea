"""The prediction interface used by the simulator (python/ioloom/sim/phases.py, announce.py; docs/sim.md,
"Predicted phases"): real programs traced with `ioloom run` and replayed by the engine, their I/O phases announced
to ioloom coord's policies as the predictor foresaw them at each phase's first operation, beside oracle
announcements; and `ioloom sim run --trace --phases`. The programs loop over steps of 256 KiB writes to one file,
a sleep before each step (a phase each).

The figures are checked on the traced runs made regular (`regular`): every gap between two calls shorter than the
programs' shortest sleep is at most HELD, as on an idle machine. The machine's other load holds the traced process
now and then; a hold of 100 us before a step's last write puts the next step's predicted time 1.4% off (the
halving average of the time per operation weighs the last step by 1/2), and one of 1 ms splits a phase, so the
start-up reads' phases (their lengths are the history the grammar of lengths learns from) vary from run to run."""
import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

from ioloom.coord.policy import Policy
from ioloom.sim import announce, coord, engine, platform, workload
from ioloom.sim.phases import replay_phases

LOOP = """
import os, sys, time
path, steps, pauses, kib = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(","), int(sys.argv[4])
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
block, offset = b"x" * (kib << 10), 0
for writes, pause in zip(steps, pauses):
    time.sleep(float(pause))
    for _ in range(int(writes)):
        os.pwrite(fd, block, offset)
        offset += len(block)
time.sleep(0.01)  # the close is a phase of its own, which writes nothing
os.close(fd)
"""
PROGRAMS = {  # steps of writes, each after a sleep (s), and the KiB of each write
    "a": ([8] * 6, [0.03] * 6, 256),
    # a long pause after three steps; 960 KiB a step is no multiple of A's writes, so no choice is a tie
    "b": ([3] * 10, [0.02] * 3 + [0.3] + [0.02] * 6, 320),
    "longer": ([8] * 5 + [16], [0.03] * 6, 256),  # the last step twice as long: mispredicted
}


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    work = tmp_path_factory.mktemp("sim-announce")
    (work / "loop.py").write_text(LOOP)
    runs = [subprocess.Popen([sys.executable, "-m", "ioloom", "run", "-o", f"trace-{name}", "--", sys.executable,
                              "loop.py", f"{name}.dat", ",".join(map(str, steps)), ",".join(map(str, pauses)),
                              str(kib)], cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            for name, (steps, pauses, kib) in PROGRAMS.items()]  # at once: their times are made regular
    for run in runs:
        _, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
    return {name: work / f"trace-{name}" for name in PROGRAMS}


SLEPT = 0.008  # s: shorter than the programs' shortest sleep (10 ms before the close)
HELD = 20e-6  # s: longer than the interpreter takes between two writes of a step on an idle machine (1-8 us)


def regular(w: workload.Workload) -> workload.Workload:
    """A traced run of one process as on an idle machine: each gap shorter than SLEPT at most HELD, the sleeps
    kept; on the traced clock, each call keeps its time and starts its gap after the previous one's end."""
    assert w.recorded is not None and not w.ops["rank"].any()  # one process's replayed trace
    ops = w.ops.copy()
    ops["gap"] = np.where(ops["gap"] < SLEPT, np.minimum(ops["gap"], HELD), ops["gap"])
    took = w.recorded[:, 1] - w.recorded[:, 0]
    ends = np.cumsum(ops["gap"] + took)
    return dataclasses.replace(w, ops=ops, recorded=np.stack([ends - took, ends], axis=1))


class RegularScenario(announce.TraceScenario):
    """The traces' runs made regular (`regular`), then replayed and announced as `ioloom sim coord` does."""

    def job(self, trace):
        return regular(super().job(trace))


def test_regular_keeps_the_calls_and_sleeps_and_holds_no_more_than_held(traces):
    w = workload.from_trace(platform.load(None), traces["b"])
    r = regular(w)
    assert all(np.array_equal(r.ops[key], w.ops[key]) for key in ("kind", "file", "offset", "length"))
    slept = w.ops["gap"] >= SLEPT
    assert slept.sum() >= 11 and np.array_equal(r.ops["gap"][slept], w.ops["gap"][slept])  # 10 steps and the close
    assert r.ops["gap"][~slept].max() <= HELD
    assert np.allclose(r.recorded[1:, 0] - r.recorded[:-1, 1], r.ops["gap"][1:], rtol=0, atol=1e-9)
    assert np.allclose(r.recorded[:, 1] - r.recorded[:, 0], w.recorded[:, 1] - w.recorded[:, 0], rtol=0, atol=1e-9)


@pytest.fixture(scope="module")
def scenario(traces):
    return RegularScenario(coord.scenario_platform(None, targets=1, nodes=2), (traces["a"], traces["b"]))


def _writing(s: announce.TraceScenario, job: int) -> list[announce.Announcement]:
    return [a for a in s.announced.values() if a.job == job]


def test_looped_program_later_phases_are_announced_with_their_lengths(scenario):
    """Each step is a phase that writes 2 MiB (A) or 960 KiB (B); once two steps are seen, the predictor said each
    later step's length and bytes right at its first operation and its time alone within 1%. Before, the lengths
    come from the interpreter's start-up reads (phases of their own): the first step follows them, and the second's
    time per operation still holds theirs."""
    a, b = _writing(scenario, 0), _writing(scenario, 1)
    assert [p.written for p in a] == [8 << 18] * 6 and [p.written for p in b] == [960 << 10] * 10
    assert [p.operations for p in a] == [8] * 6
    assert all(p.verdict == "exact" and p.predicted_operations == p.operations for p in a[2:]), a
    assert all(p.verdict == "exact" for p in b[4:]), [(p.phase, p.verdict, p.predicted_operations) for p in b]
    assert all(p.said("predicted") == (p.predicted_written, p.predicted_t_alone) for p in a[2:])
    assert all(p.said("oracle") == (p.written, p.t_alone) for p in a + b)


def _met(decisions: list[dict]) -> set[tuple[int, int]]:
    """The phases (job, phase) that met another: announced while another was in the order, or in it then."""
    current: dict[str, tuple[int, int]] = {}
    met = set()
    for d in decisions:
        current[f"job{d['job']}"] = (d["job"], d["phase"])
        if len(d["order"]) > 1:
            met |= {current[name] for name in d["order"]}
    return met


def test_dynamic_decides_as_with_oracle_announcements_where_predictions_are_exact(scenario):
    """At offsets where every phase that met another (in the coordinator's order together) was predicted exactly,
    dynamic (the thesis's rule, min_gain 0) decides every announcement as under oracle announcements, and the runs end
    alike; some offset has such meetings (B's first steps before A starts, A's first during B's long pause)."""
    exact = {key for key, a in scenario.announced.items() if a.verdict == "exact"}
    checked = 0
    for i in range(7):
        dt = -0.05 * (i + 1)
        oracle = scenario.pair(dt, Policy("dynamic", min_gain=0), "oracle")
        met = _met(oracle[2])
        if not met or not met <= exact:
            continue
        predicted = scenario.pair(dt, Policy("dynamic", min_gain=0), "predicted")
        assert announce.unlike(predicted[2], oracle[2]) == 0, (dt, predicted[2], oracle[2])
        assert predicted[:2] == pytest.approx(oracle[:2], rel=1e-3)
        checked += 1
    assert checked >= 1


def test_mispredicted_phase_is_reported(traces, tmp_path, ioloom_cli):
    """The last step writes twice as much as the steps before: announced with the earlier steps' length, bytes
    and time, reported mispredicted in the output and in the JSON (coord.json: the same document as --json,
    tests/test_sim_coord.py)."""
    text = ioloom_cli("sim", "coord", "--trace-a", traces["a"], "--trace-b", traces["longer"], "--targets", "1",
                      "--points", "2", "-o", tmp_path).stdout
    report = json.loads((tmp_path / "coord.json").read_text())
    last = [a for a in report["announcements"] if a["job"] == 1][-1]
    assert (last["operations"], last["predicted_operations"], last["written"], last["predicted_written"]) == \
        (16, 8, 16 << 18, 8 << 18)
    assert last["verdict"] == "mispredicted length, bytes, time" and last["predicted_t_alone"] < 0.6 * last["t_alone"]
    assert [r["policy"] for r in report["rows"][:5]] == ["none", "fcfs", "interrupt", "dynamic", "dynamic"]
    assert [r["announce"] for r in report["rows"][:5]] == ["-", "any", "any", "oracle", "predicted"]
    assert len(report["rows"]) == 10  # fcfs and interrupt once per offset: they place alike whatever is announced
    assert "dynamic" in (tmp_path / "coord.html").read_text()  # the Δ-graphs beside coord.json
    assert "mispredicted length, bytes, time" in text and "decided unlike oracle" in text


def test_sim_coord_trace_options_refused_alone(traces, ioloom_cli):
    bad = ioloom_cli("sim", "coord", "--trace-a", traces["a"], check=False)
    assert bad.returncode == 2 and "--trace-b" in bad.stderr and "Traceback" not in bad.stderr
    missing = ioloom_cli("sim", "coord", "--trace-a", traces["a"], "--trace-b", traces["a"] / "nowhere",
                         check=False)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr


def test_sim_run_trace_phases(traces, ioloom_cli, tmp_path):
    """`sim run --trace --phases`: per rank the phases traced and simulated (the same operations), each step's
    end predicted on the simulated clock, from the third step on within 5% of the step's simulated time (the
    halving average of the time per operation has by then forgotten the start-up's reads). The storage is one
    100 MB/s target written through, so a step takes about 21 ms, far above the gaps between its writes (at most
    HELD, which the simulator replays). The figures on the run made regular (`regular`), the CLI's text on the
    trace."""
    platform_file = tmp_path / "slow.toml"
    platform_file.write_text("[servers]\ncount = 1\n[targets]\ncount = 1\nwrite_bandwidth = 1e8\n"
                             "[cache]\ndirty_limit = 0\n")
    slow = platform.load(platform_file)
    w = regular(workload.from_trace(slow, traces["a"]))
    [rank] = replay_phases(w, engine.run(slow, w).times)
    assert rank["same_phases"] and sum(p["operations"] for p in rank["list"]) <= rank["operations"]
    steps = [p for p in rank["list"] if p["written"] == 8 << 18]
    assert len(steps) == 6 and all(p["predicted_operations"] == 8 for p in steps[2:])
    for p in steps[2:]:
        took = p["simulated_end_s"] - p["simulated_start_s"]
        assert abs(p["predicted_end_s"] - p["simulated_end_s"]) < 0.05 * took, p
    text = ioloom_cli("sim", "run", "--trace", traces["a"], "-p", platform_file, "--phases").stdout
    assert "I/O phases per rank" in text and "rank 0:" in text and "(the same operations as traced)" in text
    refused = ioloom_cli("sim", "run", "--phases", check=False)
    assert refused.returncode == 2 and "--phases needs --trace" in refused.stderr
