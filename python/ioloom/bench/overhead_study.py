"""`ioloom bench overhead-study`: the tracer's overhead in the shape of Wright's Table A.2 (RIOT, Appendix A).

Runs ioloom-bench's RIOT kernel (`--kernel riot`: --steps operations of -t bytes per rank for MPI_File_write,
read, write_all, read_all, write_at_all, read_at_all) untraced, tracing POSIX only, and tracing every layer,
interleaved, --repeats times; prints the time per call of each and the percentage change against untraced with
95% confidence intervals."""
from __future__ import annotations

import json
import math
import statistics
import tempfile
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from ioloom import mpi, paths
from ioloom.bench import app
from ioloom.bench.io import run_bench
from ioloom.run import traced_environment

MODES = ("untraced", "posix only", "everything")
# two-sided 95% Student t quantiles by degrees of freedom (1..30); beyond, the normal 1.96
T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
       2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t95(df: int) -> float:
    return T95[df - 1] if 1 <= df <= len(T95) else 1.96


def mode_environment(mode: str, impl: mpi.MpiImpl, trace: Path) -> dict[str, str]:
    """Untraced: nothing preloaded. POSIX only: the tracer with IOLOOM_LAYERS=posix. Everything: the MPI
    wrappers too, every layer."""
    if mode == "untraced":
        return {"LD_PRELOAD": ""}
    libs = [paths.native_lib("ioloom-trace")]
    layers = ["posix"]
    if mode == "everything":
        libs.insert(0, paths.native_lib(f"ioloom-trace-mpi-{impl.name}"))
        layers = ["posix", "stdio", "mpiio"]
    env = traced_environment(libs, trace, layers)
    return {k: env[k] for k in ("LD_PRELOAD", "IOLOOM_TRACE_DIR", "IOLOOM_LAYERS", "IOLOOM_SKIP_PROGRAMS")}


def per_call_us(result: dict, steps: int) -> dict[str, float]:
    """Mean over ranks of each rank's data time over its calls, per operation, in microseconds."""
    out = {}
    for phase in result["phases"]:
        ranks = phase["ranks"]
        out[phase["op"]] = 1e6 * sum(r["data"] for r in ranks) / len(ranks) / steps
    return out


def mean_ci(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% confidence interval."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, float("nan")
    return mean, t95(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))


def change_ci(base: list[float], other: list[float]) -> tuple[float, float]:
    """Percentage change of other's mean against base's, and its 95% half-width (first-order propagation)."""
    b, b_half = mean_ci(base)
    o, o_half = mean_ci(other)
    change = 100.0 * (o - b) / b
    half = 100.0 * math.sqrt(o_half ** 2 + (o / b * b_half) ** 2) / b
    return change, half


def study(impl: mpi.MpiImpl, ranks: int, steps: int, transfer: str, repeats: int, work: Path) -> dict:
    samples: dict[str, dict[str, list[float]]] = {mode: {} for mode in MODES}
    args = ["--kernel", "riot", "--steps", str(steps), "-t", transfer, "-o", str(work / "riot.dat"), "--json"]
    for repeat in range(repeats):
        for mode in MODES:
            env = mode_environment(mode, impl, work / f"trace-{mode.replace(' ', '-')}-{repeat}")
            for op, us in per_call_us(run_bench(impl, ranks, args, env=env, timeout=3600), steps).items():
                samples[mode].setdefault(op, []).append(us)
    rows = []
    for op, base in samples["untraced"].items():
        row = {"op": op, "untraced_us": mean_ci(base)}
        for mode in MODES[1:]:
            row[f"{mode}_us"] = mean_ci(samples[mode][op])
            row[f"{mode}_change_pct"] = change_ci(base, samples[mode][op])
        rows.append(row)
    return {"mpi": impl.name, "ranks": ranks, "steps": steps, "transfer": transfer, "repeats": repeats, "rows": rows}


def _cell(pair: tuple[float, float], digits: int = 1) -> str:
    mean, half = pair
    return f"{mean:,.{digits}f} ± {half:,.{digits}f}" if not math.isnan(half) else f"{mean:,.{digits}f}"


@app.command("overhead-study")
def command(
    mpi_name: str = typer.Option(None, "--mpi", help="MPI implementation (default: the first found)."),
    ranks: int = typer.Option(4, "-n", "--ranks", min=1, help="MPI ranks."),
    steps: int = typer.Option(100, "--steps", min=1, help="Operations per rank and function (Wright: 100)."),
    transfer: str = typer.Option("4m", "-t", "--transfer", help="Bytes per operation (Wright: 4 MB)."),
    repeats: int = typer.Option(5, "--repeats", min=2, help="Runs of each mode, interleaved."),
    directory: Path = typer.Option(None, "--dir", help="Where the test file goes (default: a temporary directory)."),
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
) -> None:
    """Table A.2 of Wright's thesis: time per MPI-IO call untraced, POSIX only and everything traced."""
    impl = mpi.by_name(mpi_name) if mpi_name else mpi.implementations()[0]
    with tempfile.TemporaryDirectory(prefix="ioloom-study-", dir=directory) as tmp:
        result = study(impl, ranks, steps, transfer, repeats, Path(tmp))
    if as_json:
        print(json.dumps(result, indent=2))
        return
    table = Table(title=f"tracing overhead (Wright Table A.2 shape): {impl.name}, {ranks} ranks, {steps} x {transfer} "
                        f"per rank and function, mean ± 95% CI over {repeats} runs")
    for column in ("function", "untraced µs/call", "POSIX only µs/call", "change %", "everything µs/call", "change %"):
        table.add_column(column, justify="left" if column == "function" else "right")
    for row in result["rows"]:
        table.add_row(row["op"], _cell(row["untraced_us"]), _cell(row["posix only_us"]),
                      _cell(row["posix only_change_pct"]), _cell(row["everything_us"]),
                      _cell(row["everything_change_pct"]))
    Console(width=150).print(table)
