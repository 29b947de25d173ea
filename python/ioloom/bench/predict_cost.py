"""`ioloom bench predict --cost`: what the predictor inside the tracer (IOLOOM_STACKS, IOLOOM_PREDICT) adds per call
(issue 18's goal: at most 1 us; Omnisc'IO took about 20 us), beside tracing alone.

Two figures per setting, each against the traced run without symbols:
- instructions added per learnt call on the program's thread (callgrind; the difference of runs of S and 3 S steps
  cancels start-up and exit) on ioloom-predict-loop, a loop of 13 calls of 11 to 13 stack symbols per step;
- CPU ns added per call (median, min and max over interleaved rounds) on `bench overhead`'s probe for pwrite,
  fwrite (one call site: one symbol, the grammar's cheapest case, one run) and open+close (two symbols in turn).
Stacks deeper than one frame are measured on both programs built as they are (without frame pointers) and built
with frame pointers (-fno-omit-frame-pointer), each against its own build traced alone: on x86-64 the tracer walks
both by DWARF rules, elsewhere it walks the frame records of the second and falls back to backtrace() on the first.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ioloom import paths
from ioloom.bench import stats
from ioloom.bench.overhead import callgrind_per_call, run_probe, valgrind_missing
from ioloom.run import traced_environment

GOAL_NS = 1000
CALLS_PER_STEP = 13  # ioloom-predict-loop: fopen, fprintf, 7 fwrite, fclose, open, pwrite, close
KINDS = ("pwrite", "fwrite", "open+close")


FRAME_POINTERS = ", frame pointers"  # the label's suffix of the settings run on the builds with frame pointers


def settings(frames: list[int]) -> dict[str, dict[str, str]]:
    """The variants measured: symbols without the model (first depth), then the model with each depth, and each
    depth above one again on the builds with frame pointers."""
    model = {n: {"IOLOOM_PREDICT": "1", "IOLOOM_STACKS": str(n)} for n in frames}
    return {f"stacks {frames[0]}": {"IOLOOM_STACKS": str(frames[0])},
            **{f"predict, stacks {n}": env for n, env in model.items()},
            **{f"predict, stacks {n}{FRAME_POINTERS}": env for n, env in model.items() if n > 1}}


def _build(label: str) -> str:
    """The suffix of the programs' build a setting runs on."""
    return "-fp" if label.endswith(FRAME_POINTERS) else ""


def _env(work: Path, extra: dict[str, str]) -> dict[str, str]:
    return {**traced_environment([paths.native_lib("ioloom-trace")], work / "trace", ["posix", "stdio"]),
            "IOLOOM_BACKGROUND_ENCODE": "0", **extra}


def instructions(work: Path, frames: list[int], steps: int) -> dict[str, float]:
    """Instructions added per learnt call on ioloom-predict-loop, per setting."""
    out = work / "loop-files"

    def fresh_output() -> None:
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()

    def per_run(extra: dict[str, str], build: str) -> float:
        loop = paths.native_bin(f"ioloom-predict-loop{build}")
        per_step, _ = callgrind_per_call([str(loop), str(out)], [], _env(work, extra), work, steps,
                                         prepare=fresh_output)
        return per_step / CALLS_PER_STEP

    traced = {build: per_run({}, build) for build in ("", "-fp")}
    return {label: round(per_run(extra, _build(label)) - traced[_build(label)], 1)
            for label, extra in settings(frames).items()}


def nanoseconds(work: Path, frames: list[int], rounds: int, calls: int) -> dict[str, dict[str, dict]]:
    """CPU ns added per call of each kind, per setting: paired with the traced run of the same round, the
    variants' order turning round by round."""
    variants = [("traced", {}), (f"traced{FRAME_POINTERS}", {}), *settings(frames).items()]
    times: dict[str, dict[str, list[float]]] = {}
    for index in range(rounds):
        for label, extra in variants[index % len(variants):] + variants[:index % len(variants)]:
            probe = [str(paths.native_bin(f"ioloom-overhead-probe{_build(label)}"))]
            for kind, ns in run_probe(probe, work / "probe.dat", calls, _env(work, extra), KINDS).items():
                times.setdefault(label, {}).setdefault(kind, []).append(ns)
    base = {build: times.pop(f"traced{suffix}") for build, suffix in (("", ""), ("-fp", FRAME_POINTERS))}
    return {label: {kind: stats.spread([t - b for t, b in zip(per_kind[kind], base[_build(label)][kind],
                                                               strict=True)])
                    for kind in KINDS} for label, per_kind in times.items()}


def measure(frames: list[int], rounds: int, calls: int, steps: int) -> dict:
    missing = valgrind_missing("--cost")
    if missing:
        raise RuntimeError(f"{missing} for its instruction counts")
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
