"""`ioloom bench predict --cost`: what the predictor inside the tracer (IOLOOM_STACKS, IOLOOM_PREDICT) adds per call
(issue 18's goal: at most 1 us; Omnisc'IO took about 20 us), beside tracing alone.

Two figures per setting, each against the traced run without symbols:
- instructions added per learnt call on the program's thread (callgrind; the difference of runs of S and 3 S steps
  cancels start-up and exit) on ioloom-predict-loop, a loop of 13 calls of 11 to 13 stack symbols per step;
- CPU ns added per call (median, min and max over interleaved rounds) on `bench overhead`'s probe for pwrite,
  fwrite (one call site: one symbol, the grammar's cheapest case, one run) and open+close (two symbols in turn).
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ioloom import paths
from ioloom.bench import stats
from ioloom.bench.overhead import _thread_instructions, run_probe
from ioloom.run import traced_environment

GOAL_NS = 1000
CALLS_PER_STEP = 13  # ioloom-predict-loop: fopen, fprintf, 7 fwrite, fclose, open, pwrite, close
KINDS = ("pwrite", "fwrite", "open+close")


def settings(frames: list[int]) -> dict[str, dict[str, str]]:
    """The variants measured: symbols without the model (first depth), then the model with each depth."""
    return {f"stacks {frames[0]}": {"IOLOOM_STACKS": str(frames[0])},
            **{f"predict, stacks {n}": {"IOLOOM_PREDICT": "1", "IOLOOM_STACKS": str(n)} for n in frames}}


def _env(work: Path, extra: dict[str, str]) -> dict[str, str]:
    return {**traced_environment([paths.native_lib("ioloom-trace")], work / "trace", ["posix", "stdio"]),
            "IOLOOM_BACKGROUND_ENCODE": "0", **extra}


def instructions(work: Path, frames: list[int], steps: int) -> dict[str, float]:
    """Instructions added per learnt call on ioloom-predict-loop, per setting."""
    loop, out = paths.native_bin("ioloom-predict-loop"), work / "loop-files"

    def per_run(extra: dict[str, str]) -> float:
        counts = []
        for n in (steps, 3 * steps):
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            counts.append(_thread_instructions([str(loop), str(out), str(n)], _env(work, extra), work)[0])
        return (counts[1] - counts[0]) / (2 * steps * CALLS_PER_STEP)

    traced = per_run({})
    return {label: round(per_run(extra) - traced, 1) for label, extra in settings(frames).items()}


def nanoseconds(work: Path, frames: list[int], rounds: int, calls: int) -> dict[str, dict[str, dict]]:
    """CPU ns added per call of each kind, per setting: paired with the traced run of the same round, the
    variants' order turning round by round."""
    probe = [str(paths.native_bin("ioloom-overhead-probe"))]
    variants = [("traced", {}), *settings(frames).items()]
    times: dict[str, dict[str, list[float]]] = {}
    for index in range(rounds):
        for label, extra in variants[index % len(variants):] + variants[:index % len(variants)]:
            for kind, ns in run_probe(probe, work / "probe.dat", calls, _env(work, extra), KINDS).items():
                times.setdefault(label, {}).setdefault(kind, []).append(ns)
    base = times.pop("traced")
    return {label: {kind: stats.spread([t - b for t, b in zip(per_kind[kind], base[kind], strict=True)])
                    for kind in KINDS} for label, per_kind in times.items()}


def measure(frames: list[int], rounds: int, calls: int, steps: int) -> dict:
    if not shutil.which("valgrind"):
        raise RuntimeError("--cost needs valgrind (apt-get install valgrind) for its instruction counts")
    with tempfile.TemporaryDirectory(prefix="ioloom-predict-cost-") as tmp:
        work = Path(tmp)
        return {"goal_ns": GOAL_NS, "rounds": rounds, "calls": calls, "steps": steps,
                "instructions_per_call": instructions(work, frames, steps),
                "ns_per_call": nanoseconds(work, frames, rounds, calls)}


def print_cost(report: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"added per call by the predictor in the tracer, beside tracing alone (goal <= "
                        f"{report['goal_ns']} ns; load average {report['load']})")
    table.add_column("setting", justify="left")
    table.add_column(f"instructions, loop of {CALLS_PER_STEP} calls (callgrind)", justify="right")
    for kind in KINDS:
        pair = " (a pair of calls)" if "+" in kind else ""
        table.add_column(f"{kind}{pair} ns: median \\[min, max] of {report['rounds']}", justify="right")
    for label, added in report["instructions_per_call"].items():
        cells = [f"{s['median']:.0f} \\[{s['min']:.0f}, {s['max']:.0f}]" for s in report["ns_per_call"][label].values()]
        table.add_row(label, f"{added:,.0f}", *cells)
    Console(width=160).print(table)
