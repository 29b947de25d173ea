"""`ioloom bench predict`: the predictor (docs/predict.md) on CM1-, GTC-, Nek5000- and LAMMPS-like programs traced
for real, and on Debian's LAMMPS (`lmp`, Open MPI) running the Lennard-Jones melt with dumps and restarts, beside
Omnisc'IO's figures in Dorier's thesis (Tables 7.6, 7.7, 7.8).

Each kernel of `ioloom-predict-kernels-<mpi>` (native/predict/) runs under `ioloom run` on --ranks ranks, --steps
output steps apart by --compute-ms of computation; `ioloom predict` then runs over the trace, and rank 0's figures
are printed (the thesis reports rank 0: where every rank writes, all ranks behave alike). The CM1 kernels need
HDF5, so the MPICH build (the default). The model's cost is the CPU time the Python model took per operation on
rank 0 (learning and scoring, the trace's reading left out), with the load average it ran under.

With --stacks N the programs run with the predictor inside the tracer (IOLOOM_PREDICT=1, IOLOOM_STACKS=N): the
symbols are call stacks of N frames (and the file), and the tracer's own symbol accuracy is printed beside.
--cost measures what that adds per call instead (predict_cost.py).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import NamedTuple

import typer

from ioloom import mpi, paths
from ioloom.bench import app, stats
from ioloom.shown import shown


class ThesisRow(NamedTuple):
    """A kernel's row of the thesis (Tables 7.6-7.8: Omnisc'IO's figures), the report's "thesis" in these keys."""
    row: str
    hit_ratio_pct: float
    offset_contiguous_pct: float
    offset_accuracy_pct: float
    time_error_s: float
    time_error_immediate_reaccess_s: float


THESIS = {
    "cm1-posix": ThesisRow("CM1 (POSIX)", 84.6, 47.4, 92.2, 0.197, 0.735),
    "cm1-gzip": ThesisRow("CM1 (Gzip)", 79.5, 53.2, 83.0, 0.199, 0.791),
    "cm1-mpiio": ThesisRow("CM1 (MPI-I/O)", 96.0, 72.7, 98.0, 0.060, 0.406),
    "gtc": ThesisRow("GTC", 100.0, 99.9, 100.0, 0.001, 0.006),
    "nek5000": ThesisRow("Nek5000", 98.6, 99.4, 99.7, 0.012, 0.049),
    "lammps": ThesisRow("LAMMPS", 99.4, 99.9, 100.0, 0.000, 0.003),
}
# a -stress kernel is harsher than the thesis describes the application (native/predict/), beside the same row;
# Debian's LAMMPS is the application itself
THESIS |= {f"{name}-stress": thesis._replace(row=f"{thesis.row} (stress)") for name, thesis in list(THESIS.items())
           if name in ("gtc", "nek5000", "lammps")}
THESIS["lammps-debian"] = THESIS["lammps"]._replace(row="LAMMPS (Debian's lmp)")
# LAMMPS's Lennard-Jones melt example (examples/melt), smaller, with an atom dump every 25 steps and a restart
# file every 125.
MELT = """units lj
atom_style atomic
lattice fcc 0.8442
region box block 0 8 0 8 0 8
create_box 1 box
create_atoms 1 box
mass 1 1.0
velocity all create 3.0 87287 loop geom
pair_style lj/cut 2.5
pair_coeff 1 1 1.0 1.0 2.5
neighbor 0.3 bin
neigh_modify every 20 delay 0 check no
fix 1 all nve
dump 1 all atom 25 dump.melt
restart 125 restart.*.bin
thermo 50
run 500
"""


class KernelFailed(RuntimeError):
    """A kernel's traced run failed: its figures would measure nothing."""


def gtc_limits(impl: mpi.MpiImpl) -> tuple[int, int] | str:
    """The most ranks and steps the gtc kernel runs (those of GTC's measured run, native/predict/gtc_counts.h, as
    the kernels' binary prints them), or why it cannot run (built without a Fortran compiler)."""
    done = subprocess.run([str(paths.native_bin(f"ioloom-predict-kernels-{impl.name}")), "--gtc-limits"],
                          capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        return done.stderr.strip().removeprefix("ioloom-predict-kernels: ")
    ranks, steps = (int(word) for word in done.stdout.split())
    return ranks, steps


def gtc_refusal(impl: mpi.MpiImpl, ranks: int, steps: int) -> str | None:
    """Why the gtc kernel would refuse `ranks` ranks of `steps` steps, else None."""
    limits = gtc_limits(impl)
    if isinstance(limits, str):
        return f"the gtc kernel cannot run: {limits} (install gfortran and rebuild)"
    most_ranks, most_steps = limits
    if ranks > most_ranks or steps > most_steps:
        return (f"the gtc kernel replays GTC's measured run of {most_ranks} ranks and {most_steps} snapshots: "
                f"give --ranks {most_ranks} or fewer and --steps {most_steps} or fewer (asked {ranks} and {steps})")
    return None


def symbols_env(stacks: int) -> dict[str, str]:
    """The tracer's settings for call-stack symbols of `stacks` frames and its model (none for 0)."""
    return {"IOLOOM_PREDICT": "1", "IOLOOM_STACKS": str(stacks)} if stacks else {}


def trace_kernel(impl: mpi.MpiImpl, kernel: str, nranks: int, steps: int, compute_ms: int, work: Path,
                 stacks: int = 0, env: dict[str, str] | None = None, tag: str = "") -> Path:
    """Runs one kernel under `ioloom run` (with the tracer's settings `env`; `tag` names the run apart from other
    runs of the kernel); the trace directory."""
    binary = paths.native_bin(f"ioloom-predict-kernels-{impl.name}")
    out = work / f"{kernel}{tag}-files"
    out.mkdir(parents=True)
    return run_traced(impl, f"{kernel}{tag}", [str(binary), kernel, str(out), str(steps), str(compute_ms)], nranks,
                      work, out, stacks, env)


def trace_debian_lammps(nranks: int, work: Path, stacks: int = 0, steps: int = 500) -> Path | None:
    """Runs Debian's `lmp` on the melt example for `steps` time steps under `ioloom run`; None when it is not
    installed."""
    lmp = shutil.which("lmp")
    if lmp is None:
        return None
    impl = mpi.detect([lmp]) or mpi.by_name("openmpi")
    out = work / "lammps-debian-files"
    out.mkdir(parents=True)
    (out / "in.melt").write_text(MELT.replace("run 500", f"run {steps}"))
    argv = [lmp, "-in", "in.melt", "-log", "log.lammps", "-screen", "none"]
    return run_traced(impl, "lammps-debian", argv, nranks, work, out, stacks)


def run_traced(impl: mpi.MpiImpl, name: str, argv: list[str], nranks: int, work: Path, cwd: Path,
               stacks: int = 0, env: dict[str, str] | None = None) -> Path:
    trace = work / f"{name}-trace"
    command = [sys.executable, "-m", "ioloom", "run", "-o", str(trace), "--", *impl.launch(nranks, argv)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=cwd,
                          env={**os.environ, **impl.base_env(), **symbols_env(stacks), **(env or {})})
    if done.returncode != 0:
        why = next((line for line in done.stderr.splitlines() if "ioloom" in line), done.stderr.strip()[-300:])
        raise KernelFailed(f"{name} exited {done.returncode} under ioloom run: {why}")
    return trace


def predict_rank0(trace: Path) -> dict:
    from ioloom.predict.cli import analyse
    from ioloom.predict.model import Options

    figures = analyse(trace, Options(), rank=0)
    if not figures or figures[0]["operations"] < 2:
        raise KernelFailed(f"{trace}: rank 0 recorded no I/O operations to predict")
    return figures[0]


def fold_figures(trace: Path, work: Path) -> dict:
    """The trace folded (docs/trace-format.md, "Folded traces"), exactly and with times in microseconds: bytes
    per event of the trace, of each folded file, and of its parts (events read back identical is tested, not
    measured here)."""
    from ioloom import open_trace
    from ioloom.trace import folded

    loaded = open_trace(trace)
    events = max(loaded.meta["events"], 1)
    out = {"events": loaded.meta["events"],
           "trace_bytes_per_event": sum(p.stat().st_size for p in trace.glob("*.ioloom")) / events}
    for name, quantum in (("exact", 1), ("times_us", 1000)):
        path = work / f"{trace.name}-{name}.ioloom-folded"
        header = folded.write(loaded, path, quantum)
        parts = {part: sum(s["sections"][part][1] for s in header["streams"]) / events
                 for part in ("shapes", "grammar", "times")}
        total = path.stat().st_size / events
        out[name] = {"bytes_per_event": total, "times": parts["times"], "structure": total - parts["times"]}
    return out


def print_folded(report: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Folded traces (ioloom export --format folded): bytes per event, all ranks; structure = "
                        "everything but the times (shapes, grammar, header)")
    for column in ("application", "events", "trace", "folded, exact", "structure", "times",
                   "folded, times in us", "its times"):
        table.add_column(column, justify="left" if column == "application" else "right")
    for kernel, figures in report["kernels"].items():
        f = figures.get("folded")
        if f:
            table.add_row(THESIS[kernel].row, f"{f['events']:,}", f"{f['trace_bytes_per_event']:.2f}",
                          f"{f['exact']['bytes_per_event']:.2f}", f"{f['exact']['structure']:.3f}",
                          f"{f['exact']['times']:.2f}", f"{f['times_us']['bytes_per_event']:.2f}",
                          f"{f['times_us']['times']:.2f}")
    Console(width=180).print(table)


def _row(kernel: str, f: dict) -> list[str]:
    row, hit, contiguous, offsets, time_error, immediate = THESIS[kernel]
    # as computed (metrics.pct: two decimals), not rounded again to the thesis's one: 99.948 is not its 100.0
    pct = {key: shown(f[key], ".2f") for key in ("symbol_accuracy_pct", "hit_ratio_pct", "offset_accuracy_pct",
                                                 "offset_contiguous_pct")}
    return [row, f"{f['operations']:,}", str(f["symbols"]), pct["symbol_accuracy_pct"],
            f"{pct['hit_ratio_pct']} ({hit:.1f})",
            f"{pct['offset_accuracy_pct']} ({offsets:.1f})",
            f"{pct['offset_contiguous_pct']} ({contiguous:.1f})",
            f"{f['time_error_s']:.4f} ({time_error:.3f})",
            f"{f['time_error_immediate_reaccess_s']:.4f} ({immediate:.3f})",
            str(f["grammar_size"][-1][1]), f"{f['model_us_per_op']:.0f}",
            shown(f["online"]["symbol_accuracy_pct"], ".1f") if f.get("online") else "-",
            f"{met(f['hit_ratio_pct'], hit)}, {met(f['offset_accuracy_pct'], offsets)}"]


def met(ours: float | None, thesis: float) -> str:
    """Whether a figure (two decimals) is at least the thesis's: "yes"; "to 0.1%" when it is under it by 0.04 or
    less (so that, whatever its third decimal, it rounds to the thesis's figure at the thesis's rounding "to closest
    0.1%": 99.96 to 100.0, where 99.95 may be 99.948); else how far under it is."""
    if ours is None:
        return "-"
    if ours >= thesis:
        return "yes"
    return "to 0.1%" if ours - thesis >= -0.04 - 1e-9 else f"no ({ours - thesis:+.2f})"


def print_table(report: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"ioloom predict on rank 0, {report['ranks']} ranks; kernels: {report['steps']} steps, "
                        f"{report['compute_ms']} ms apart; Debian's LAMMPS: {report['lammps_steps']:,} steps "
                        f"({report['mpi']}; load average {report['load']}): ours (Omnisc'IO's in the thesis, Tables "
                        "7.6-7.8); met: at least the thesis's figure, or equal to it at its rounding (to 0.1%)")
    for column in ("application", "ops", "symbols", "symbols right %", "hit ratio %", "offsets right %",
                   "contiguous %", "time error s", "immediate reaccess s", "grammar",
                   "Python CPU us/op (one run)", "tracer's symbols right %", "met: hit ratio, offsets"):
        table.add_column(column, justify="left" if column == "application" else "right")
    for kernel, figures in report["kernels"].items():
        table.add_row(*_row(kernel, figures))
    Console(width=180).print(table)
    contexts = ", ".join(sorted({f["context"] for f in report["kernels"].values()}))
    frames = f"; here of {report['stacks']} frames" if report["stacks"] else ""
    typer.echo(f"Context symbols: {contexts} (Omnisc'IO used call stacks{frames}). The thesis ran 512 cores "
               "(Nek5000: 32) on Grid'5000; these are synthetic programs on one machine.")


@app.command("predict")
def command(ranks: int = typer.Option(4, "--ranks", "-n", min=1,
                                     help="MPI ranks of each kernel (gtc: at most 4, those of GTC's measured run; "
                                          "fewer replay its ranks 0..n-1)."),
            steps: int = typer.Option(30, "--steps", min=2,
                                      help="Output steps of each kernel (gtc: at most 300, the snapshots of GTC's "
                                           "measured run)."),
            compute_ms: int = typer.Option(20, "--compute-ms", min=0, help="Computation between output steps."),
            kernels: str = typer.Option(",".join(THESIS), "--kernels",
                                        help=f"Comma-separated, among {', '.join(THESIS)}."),
            mpi_name: str = typer.Option("mpich", "--mpi", help="MPI build of the kernels (CM1 needs mpich: HDF5)."),
            lammps_steps: int = typer.Option(25_000, "--lammps-steps", min=125,
                                             help="Time steps of Debian's LAMMPS (a dump every 25, a restart file "
                                                  "every 125; the thesis does not give its run's length)."),
            stacks: int = typer.Option(0, "--stacks", min=0, max=8,
                                       help="Run the predictor in the tracer, with call stacks of this many frames "
                                            "as symbols (0: operation+file symbols, the model offline only)."),
            cost: bool = typer.Option(False, "--cost", help="Instead, measure what the predictor in the tracer "
                                                            "adds per call (needs valgrind)."),
            rounds: int = typer.Option(stats.PUBLISHED_ROUNDS, "--rounds", min=1, help="--cost: interleaved rounds."),
            quick: bool = typer.Option(False, "--quick", help=f"--cost: allow fewer than {stats.PUBLISHED_ROUNDS} "
                                                              "rounds."),
            loop_steps: int = typer.Option(2000, "--loop-steps", min=0,
                                           help="With --fold-quanta, also trace ioloom-predict-loop (a file per step, "
                                                "13 calls) this many steps, unfolded and folded (0: not)."),
            fold_quanta: str = typer.Option("1,1000,1000000", "--fold-quanta", metavar="Q,...",
                                            help="Also trace the demo and each kernel folded in the tracer at these "
                                                 "time resolutions (ns; '' for none)."),
            as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON.")) -> None:
    """Hit ratio, offsets and times of the predictor on synthetic CM1/GTC/Nek5000/LAMMPS, beside the thesis."""
    if cost:
        _cost(sorted({1, stacks or 3}), rounds, quick, as_json)
        return
    chosen = [k.strip() for k in kernels.split(",") if k.strip()]
    unknown = [k for k in chosen if k not in THESIS]
    if unknown or not chosen:
        typer.echo(f"ioloom: unknown kernel {', '.join(unknown) or '(none given)'}; choose among "
                   f"{', '.join(THESIS)}", err=True)
        raise typer.Exit(2)
    quanta = _quanta(fold_quanta)
    impl = mpi.by_name(mpi_name)
    refusal = gtc_refusal(impl, ranks, steps) if "gtc" in chosen else None
    if refusal:
        typer.echo(f"ioloom: {refusal}", err=True)
        raise typer.Exit(2)
    figures: dict[str, dict] = {}  # per kernel
    tracer_fold: dict[str, dict] = {}  # per program traced folded
    with tempfile.TemporaryDirectory(prefix="ioloom-bench-predict-") as work:
        for kernel in chosen:
            if kernel == "lammps-debian":
                trace = trace_debian_lammps(ranks, Path(work), stacks, lammps_steps)
                if trace is None:
                    typer.echo("ioloom: lammps-debian skipped: Debian's LAMMPS (lmp) is not installed; "
                               "apt-get install lammps (scripts/install-deps.sh does)", err=True)
                    continue
            else:
                trace = trace_kernel(impl, kernel, ranks, steps, compute_ms, Path(work), stacks)
            figures[kernel] = {**predict_rank0(trace), "thesis": THESIS[kernel]._asdict(),
                               "folded": fold_figures(trace, Path(work))}
            if quanta and kernel != "lammps-debian":
                tracer_fold[THESIS[kernel].row] = _folded_in_tracer(
                    trace, quanta, partial(trace_kernel, impl, kernel, ranks, steps, compute_ms, Path(work), stacks))
        if quanta:
            _fold_demo(impl, ranks, quanta, Path(work), tracer_fold)
        if quanta and loop_steps:
            from ioloom.bench.predict_fold import trace_loop
            tracer_fold[f"ioloom-predict-loop, {loop_steps:,} steps (one process)"] = _folded_in_tracer(
                trace_loop(loop_steps, Path(work), None, ""), quanta,
                lambda env, tag: trace_loop(loop_steps, Path(work), env, tag))
    report = {"mpi": impl.name, "ranks": ranks, "steps": steps, "compute_ms": compute_ms, "stacks": stacks,
              "loop_steps": loop_steps, "lammps_steps": lammps_steps, "kernels": figures, "fold_quanta": quanta,
              "tracer_fold": tracer_fold, "load": " ".join(f"{x:.1f}" for x in os.getloadavg())}
    if as_json:
        typer.echo(json.dumps(report, indent=1))
    else:
        print_table(report)
        print_folded(report)
        if quanta:
            from ioloom.bench.predict_fold import print_fold
            print_fold(report)


def _quanta(text: str) -> list[int]:
    """--fold-quanta: time resolutions in ns, each 1 to 10^9."""
    try:
        quanta = [int(q) for q in text.split(",") if q.strip()]
    except ValueError:
        quanta = [0]
    if any(not 1 <= q <= 10 ** 9 for q in quanta):
        typer.echo(f"ioloom: --fold-quanta {text!r}: give time resolutions in ns, 1 to 10^9, comma-separated",
                   err=True)
        raise typer.Exit(2)
    return quanta


def _folded_in_tracer(unfolded: Path, quanta: list[int], run: Callable[[dict[str, str] | None, str], Path]) -> dict:
    """The program traced folded at each quantum (run(env, tag) traces it), beside its unfolded trace."""
    from ioloom.bench.predict_fold import fold_env, stream_parts, unfolded_bytes

    return {"unfolded": unfolded_bytes(unfolded),
            "quanta": [stream_parts(run(fold_env(q), f"-fold{q}")) for q in quanta]}


def _fold_demo(impl: mpi.MpiImpl, ranks: int, quanta: list[int], work: Path, tracer_fold: dict[str, dict]) -> None:
    """The demo's program (scripts/demo.sh) traced unfolded and folded at each quantum, into `tracer_fold`."""
    try:
        exe = str(impl.build(paths.DEMO_SOURCE, work))
    except mpi.BuildFailed as err:
        typer.echo(f"ioloom: the demo's program was not built ({err}): its row is left out", err=True)
        return

    def run(env: dict[str, str] | None, tag: str) -> Path:
        out = work / f"demo{tag}-files"
        out.mkdir()
        return run_traced(impl, f"demo{tag}", [exe, str(out / "strided.dat"), "64", "4096"], ranks, work, out,
                          0, env)
    tracer_fold["demo (strided MPI-IO)"] = _folded_in_tracer(run(None, ""), quanta, run)


def _cost(frames: list[int], rounds: int, quick: bool, as_json: bool) -> None:
    from ioloom.bench import predict_cost

    too_few = stats.rounds_allowed(rounds, quick, "--rounds")
    if too_few:
        typer.echo(f"ioloom: {too_few}", err=True)
        raise typer.Exit(2)
    load_before = " ".join(f"{x:.1f}" for x in os.getloadavg())
    try:
        report = predict_cost.measure(frames, rounds, 200_000, 20)
    except (RuntimeError, subprocess.CalledProcessError) as err:
        typer.echo(f"ioloom bench predict: {' '.join(str(err).split())}", err=True)
        raise typer.Exit(1) from None
    report["load"] = f"{load_before} before, {' '.join(f'{x:.1f}' for x in os.getloadavg())} after"
    if as_json:
        typer.echo(json.dumps(report, indent=1))
    else:
        predict_cost.print_cost(report)
