"""`ioloom bench coord-predict`: two unmodified programs whose I/O phases repeat, coordinated under `dynamic` with
and without the tracer's predictor announcing their phases (docs/coord.md, "What the predictor gives"). Each
program is a loop (LOOP below) of steps of writes, a pause before each step, the steps' sizes following a pattern;
it runs under `ioloom run --coord` on the emulated storage of `bench coord` (proportional sharing by bytes). A
(--a-cores, default 8) writes big phases, B (1 core) small ones, both started at once. Per round, interleaved in
alternating orders: uncoordinated (`none`: no coordinator at the address), `dynamic` with each phase announced
as without the predictor (the previous phase's bytes, the rate at its call site) and `dynamic` with
IOLOOM_PREDICT=1 (the predictor's bytes and end). Figures: each program's run time (its first write's planned
start to its last write's end), f = N_A T_A + N_B T_B as a ratio to the uncoordinated run of the same round, and
the share of each program's phases announced with the bytes they wrote (docs/bench.md: medians with min and
max). A run that is not a policy's (a program lost its coordinator, or passed its wait bound) is run again, at most
RETRIES times, then the bench stops, saying so in one line; the report counts the runs run again."""
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import typer

from ioloom import outputs, units
from ioloom.bench import app
from ioloom.bench.coord import Coordinators, RunRefused, coord_run, data_row, emulated_storage, run_together
from ioloom.bench.stats import load_average, per_round, rounds_allowed, spread

# One program: `python LOOP PATH STEPS PAUSE KIB`, STEPS the comma-separated writes of each step (a phase each).
LOOP = """
import os, sys, time
path, steps, pause, kib = sys.argv[1], sys.argv[2].split(","), float(sys.argv[3]), int(sys.argv[4])
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
block, offset = b"x" * (kib << 10), 0
for writes in steps:
    time.sleep(pause)
    for _ in range(int(writes)):
        os.pwrite(fd, block, offset)
        offset += len(block)
os.close(fd)
"""
IDLE = 0.05  # seconds without a write that end a phase: under both pauses
RETRIES = 2  # times a refused run (its coordinator lost, or past its wait bound) is run again before the bench stops
CONDITIONS = ("none", "dynamic", "dynamic+predict")


def loop_command(work: Path, name: str, steps: list[int], pause: float, kib: int, address: str | None,
                 predict: bool, cores: int = 1, start_at: float = 0.0,
                 bandwidth: float = 0.0) -> tuple[list[str], dict]:
    """coord_run of the loop (work/loop.py) writing work/NAME.dat; its first write at start_at (0: at once); with a
    bandwidth, on the emulated storage work/storage."""
    program = [sys.executable, str(work / "loop.py"), str(work / f"{name}.dat"), ",".join(map(str, steps)),
               str(pause), str(kib)]
    argv, env = coord_run(work, name, address, program, cores, start_at, IDLE)
    env["IOLOOM_PREDICT"] = "1" if predict else "0"
    if bandwidth:
        env.update(emulated_storage(work, bandwidth))
    return argv, env


def run_pair(work: Path, options: dict, address: str | None, predict: bool) -> dict:
    """Both programs at once, coordinated at `address` (None: not); per program its run time from the planned start,
    the share of its phases announced with the bytes they wrote (right) and the share announced with the
    predictor's bytes (predicted). A run that is not a policy's is refused (bench coord's data_row)."""
    start = time.monotonic() + options["margin"]
    programs = {"A": (options["a_steps"], options["a_pause"], options["a_kib"], options["a_cores"]),
                "B": (options["b_steps"], options["b_pause"], options["b_kib"], 1)}
    run_together(work, {name: loop_command(work, name, steps, pause, kib, address, predict, cores, start,
                                           options["bandwidth"])
                        for name, (steps, pause, kib, cores) in programs.items()}, "the loop")
    out = {}
    for name in programs:
        row = data_row(work / f"run-{name}", address is not None)
        right = [a["bytes"] == a["bytes_written"] for a in row["announced"]]
        predicted = [a["bytes_from"] == "predictor" for a in row["announced"]]
        out[name] = {"t": row["last_end"] - start, "right": sum(right) / len(right),
                     "predicted": sum(predicted) / len(predicted)}
    return out


def run_again_if_refused(work: Path, options: dict, address: str | None, predict: bool, retried: list[str]) -> dict:
    """run_pair, a refused run run again up to RETRIES times (each refusal's line appended to `retried`); refused
    once more, RunRefused saying so in one line."""
    for _ in range(RETRIES):
        try:
            return run_pair(work, options, address, predict)
        except RunRefused as refused:
            retried.append(str(refused))
    try:
        return run_pair(work, options, address, predict)
    except RunRefused as refused:
        raise RunRefused(f"{refused}; the same run refused {RETRIES + 1} times in a row") from None


def one_round(work: Path, options: dict, coords: Coordinators, flip: bool, retried: list[str]) -> dict:
    """Each condition once, in alternating orders: {condition: run_pair's}."""
    runs = {}
    for condition in reversed(CONDITIONS) if flip else CONDITIONS:
        address = coords.addresses["dynamic"] if condition != "none" else None
        runs[condition] = run_again_if_refused(work, options, address, condition.endswith("predict"), retried)
    return runs


def summarise(rounds: list[dict], cores: int) -> list[dict]:
    """Per condition: T_A, T_B, f / f_none and the shares of phases announced right and with the predictor's
    bytes, medians [min, max]."""
    def f(run: dict) -> float:
        return cores * run["A"]["t"] + run["B"]["t"]
    return [{"condition": c, "t_a": spread([r[c]["A"]["t"] for r in rounds]),
             "t_b": spread([r[c]["B"]["t"] for r in rounds]),
             "f_ratio": spread(per_round([f(r[c]) for r in rounds], [f(r["none"]) for r in rounds])),
             "right_a": spread([r[c]["A"]["right"] for r in rounds]),
             "right_b": spread([r[c]["B"]["right"] for r in rounds]),
             "predicted_a": spread([r[c]["A"]["predicted"] for r in rounds]),
             "predicted_b": spread([r[c]["B"]["predicted"] for r in rounds])} for c in CONDITIONS]


def print_report(report: dict) -> None:
    o = report["options"]
    print(f"A: {o['a_cores']} cores, steps {o['a_steps']} x {o['a_kib']} KiB, {o['a_pause']} s apart; B: 1 core, "
          f"steps {o['b_steps']} x {o['b_kib']} KiB, {o['b_pause']} s apart; {o['bandwidth'] / 1e6:.0f} MB/s "
          f"emulated; {report['rounds']} rounds; load {report['load_before']} -> {report['load_after']}; "
          f"{len(report['retried'])} refused runs run again (at most {RETRIES} times each)")
    print(f"{'condition':>16} {'T_A s':>22} {'T_B s':>22} {'f / f_none':>22} {'A right':>6} {'B right':>7}")
    for r in report["rows"]:
        cells = [f"{r[k]['median']:.3f} [{r[k]['min']:.3f}, {r[k]['max']:.3f}]" for k in ("t_a", "t_b", "f_ratio")]
        print(f"{r['condition']:>16} {cells[0]:>22} {cells[1]:>22} {cells[2]:>22} {r['right_a']['median']:7.0%} "
              f"{r['right_b']['median']:7.0%}")


def _steps(text: str, name: str, repeats: int) -> list[int]:
    return units.numbers(text, name) * repeats


@app.command("coord-predict")
def command(rounds: int = typer.Option(10, min=1, help="Interleaved rounds."),
            a_steps: str = typer.Option("8,8,16", help="A's pattern of writes per step."),
            b_steps: str = typer.Option("3,3,3,12", help="B's pattern of writes per step."),
            repeats: int = typer.Option(4, min=1, help="Times each pattern runs."),
            a_kib: int = typer.Option(2048, min=1, help="KiB of each of A's writes."),
            b_kib: int = typer.Option(256, min=1, help="KiB of each of B's writes."),
            a_pause: float = typer.Option(0.1, min=IDLE * 1.5, help="Seconds before each of A's steps."),
            b_pause: float = typer.Option(0.08, min=IDLE * 1.5, help="Seconds before each of B's steps."),
            a_cores: int = typer.Option(8, min=1, help="A's cores (N_A)."),
            bandwidth: float = typer.Option(5e8, min=1e6, help="The emulated storage's bytes/s."),
            margin: float = typer.Option(2.0, min=0.5, help="Seconds from starting both to their first write."),
            quick: bool = typer.Option(False, "--quick", help="Allow fewer than 10 rounds (not for publishing)."),
            output: Path = typer.Option(None, "-o", "--output", help="Also write coord-predict.json here."),
            as_json: bool = typer.Option(False, "--json", help="Print the report as JSON.")) -> None:
    """Two looping programs under dynamic, with and without the predictor announcing their phases."""
    if why := rounds_allowed(rounds, quick, "--rounds"):
        raise typer.BadParameter(why)
    options = {"a_steps": _steps(a_steps, "--a-steps", repeats), "b_steps": _steps(b_steps, "--b-steps", repeats),
               "a_kib": a_kib, "b_kib": b_kib, "a_pause": a_pause, "b_pause": b_pause, "a_cores": a_cores,
               "bandwidth": bandwidth, "margin": margin}
    if output:
        output.mkdir(parents=True, exist_ok=True)  # a bad -o is refused before the runs, not after them
    with tempfile.TemporaryDirectory(prefix="ioloom-coord-predict-") as tmp:
        work = Path(tmp)
        (work / "loop.py").write_text(LOOP)
        coords = Coordinators(work, "core-seconds", 0.05, bandwidth, ("dynamic",))
        before = load_average()
        retried: list[str] = []
        try:
            samples = [one_round(work, options, coords, k % 2 == 1, retried) for k in range(rounds)]
        finally:
            coords.close()
    report = {"options": options | {"a_steps": a_steps, "b_steps": b_steps, "repeats": repeats}, "rounds": rounds,
              "load_before": before, "load_after": load_average(), "rows": summarise(samples, a_cores),
              "retried": retried, "samples": samples}
    if output:
        outputs.save_json(report, output / "coord-predict.json")
    if as_json:
        print(json.dumps(report, indent=1))
        return
    print_report(report)
