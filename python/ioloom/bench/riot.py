"""`ioloom bench riot`: the overhead study of Wright's RIOT thesis (Appendix A, Table A.2) on ioloom's tracer.

Each rank performs --ops operations of --size bytes (100 x 4 MB in the thesis) with each of MPI_File_write, read,
write_all, read_all, write_at_all and read_at_all (ioloom-bench's riot kernel, native/bench/kernel_riot.c), under
three configurations: untraced, POSIX only (libioloom-trace.so, IOLOOM_LAYERS=posix) and everything (as
`ioloom run` traces: POSIX, stdio and the MPI wrappers). The configurations are interleaved repetition by
repetition, in a rotating order, so that drifts of the machine hit all three alike. Reported per function: the mean over repetitions of
the time the ranks spent in the data calls (mean over ranks, as the thesis's "average time"), its 95% confidence
interval, and the change from untraced to full tracing with a paired bootstrap 95% interval.

Every traced run's trace is read back and its MPI-IO events counted: a run whose events are missing would
measure nothing, and is reported as an error rather than as a figure.
"""
from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from ioloom import mpi, paths
from ioloom.bench import app
from ioloom.bench.io import run_bench
from ioloom.run import traced_environment

FUNCTIONS = ("MPI_File_write", "MPI_File_read", "MPI_File_write_all", "MPI_File_read_all", "MPI_File_write_at_all",
             "MPI_File_read_at_all")
CONFIGS = ("none", "posix", "all")
# Table A.2's "Change (%)" rows (full RIOT tracing against none) on Minerva (24, 48, 96 cores), Sierra (24, 48,
# 96) and BG/P (32, 64, 128), for the comparison printed beside our figures.
THESIS_CHANGE_PCT = {
    "MPI_File_write": (0.82, 0.21, 0.81, 1.35, 9.67, 12.63, 3.74, 11.95, 20.92),
    "MPI_File_write_all": (1.28, 1.92, 1.64, 3.70, 15.50, 2.29, 0.95, 0.42, 0.85),
    "MPI_File_write_at_all": (2.59, 4.16, 1.44, 3.57, 3.48, 8.14, 2.22, 2.77, 0.46),
    "MPI_File_read": (5.52, 2.37, 3.16, 32.11, 36.78, 62.98, 0.67, 0.13, 2.08),
    "MPI_File_read_all": (4.50, 1.22, 0.51, 8.43, 8.29, 19.56, 1.91, 0.37, 2.21),
    "MPI_File_read_at_all": (17.58, 1.78, 12.74, 2.21, 37.58, 18.96, 4.44, 4.47, 4.93),
}
# Two-sided 95% Student t quantiles by degrees of freedom (1..10); beyond, the normal 1.96 is close enough.
T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)


class RiotFailed(RuntimeError):
    """A traced run did not record what it should have: its figures would not measure tracing."""


def layers_of(config: str) -> list[str]:
    return {"posix": ["posix"], "all": ["posix", "stdio", "mpiio"]}.get(config, [])


def environment(config: str, impl: mpi.MpiImpl, trace_dir: Path) -> dict[str, str]:
    """What a configuration adds to the environment: nothing, or the preload `ioloom run` would set."""
    if config == "none":
        return {}
    libs = [paths.native_lib("ioloom-trace")]
    if "mpiio" in layers_of(config):
        libs.insert(0, paths.native_lib(f"ioloom-trace-mpi-{impl.name}"))
    env = traced_environment(libs, trace_dir, layers_of(config))
    return {key: env[key] for key in ("LD_PRELOAD", "IOLOOM_TRACE_DIR", "IOLOOM_LAYERS", "IOLOOM_SKIP_PROGRAMS")}


def data_times(result: dict) -> dict[str, float]:
    """Seconds in the data calls per function, mean over ranks, from one ioloom-bench JSON document."""
    return {phase["op"]: phase["time"]["data"]["mean"] for phase in result["phases"] if phase["op"] in FUNCTIONS}


def check_trace(config: str, trace_dir: Path, nranks: int, ops: int) -> dict[str, int]:
    """MPI-IO events per function in a traced run's trace; raises RiotFailed when they are not what was done."""
    from ioloom.trace import open_trace

    events = open_trace(trace_dir).events(["layer", "op"]).to_pandas()
    mpiio = events[events.layer.astype(str) == "mpiio"].op.astype(str).value_counts()
    counts = {function: int(mpiio.get(function, 0)) for function in FUNCTIONS}
    expected = nranks * ops if "mpiio" in layers_of(config) else 0
    wrong = {f: n for f, n in counts.items() if n != expected}
    if wrong:
        raise RiotFailed(f"the {config!r} run recorded {wrong} MPI-IO events where {expected} each were expected")
    posix = int((events.layer.astype(str) == "posix").sum())
    if posix == 0:
        raise RiotFailed(f"the {config!r} run recorded no POSIX event")
    return {**counts, "posix": posix}


def mean_ci(samples: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% confidence interval (Student t)."""
    import numpy as np

    values = np.asarray(samples, dtype=float)
    if len(values) < 2:
        return float(values.mean()), math.nan
    t = T95[len(values) - 2] if len(values) - 1 <= len(T95) else 1.96
    return float(values.mean()), float(t * values.std(ddof=1) / math.sqrt(len(values)))


def change_pct(base: list[float], traced: list[float], resamples: int = 4000) -> tuple[float, float, float]:
    """100 (mean traced - mean base) / mean base, and a paired bootstrap 95% interval over repetitions."""
    import numpy as np

    base_a, traced_a = np.asarray(base, dtype=float), np.asarray(traced, dtype=float)
    point = 100.0 * (traced_a.mean() - base_a.mean()) / base_a.mean()
    picks = np.random.default_rng(0).integers(0, len(base_a), size=(resamples, len(base_a)))
    boot = 100.0 * (traced_a[picks].mean(axis=1) - base_a[picks].mean(axis=1)) / base_a[picks].mean(axis=1)
    low, high = np.percentile(boot, [2.5, 97.5])
    return float(point), float(low), float(high)


def measure(impl: mpi.MpiImpl, nranks: int, ops: int, size: str, repeats: int, work: Path,
            progress=None) -> dict:
    """Runs the kernel repeats x 3 times (configurations interleaved) and returns the figures for one MPI."""
    samples = {config: {f: [] for f in FUNCTIONS} for config in CONFIGS}
    events = {}
    for rep in range(repeats):
        # The order rotates, so that no configuration always runs first (after the previous file's removal).
        for config in CONFIGS[rep % len(CONFIGS):] + CONFIGS[:rep % len(CONFIGS)]:
            trace_dir = work / f"{impl.name}-{config}-{rep}"
            args = ["--kernel", "riot", "-a", "mpiio", "-t", size, "--steps", str(ops), "-o", str(work / "riot.dat")]
            result = run_bench(impl, nranks, args, env=environment(config, impl, trace_dir))
            for function, seconds in data_times(result).items():
                samples[config][function].append(seconds)
            if config != "none":
                events[config] = check_trace(config, trace_dir, nranks, ops)
            if progress:
                progress(f"{impl.name} repetition {rep + 1}/{repeats}: {config} done")
    return {"mpi": impl.name, "events": events, "functions": {f: summarise(samples, f) for f in FUNCTIONS}}


def summarise(samples: dict, function: str) -> dict:
    figures = {}
    for config in CONFIGS:
        mean, half = mean_ci(samples[config][function])
        figures[config] = {"mean_s": mean, "ci95_s": half, "samples_s": samples[config][function]}
    for config in ("posix", "all"):
        point, low, high = change_pct(samples["none"][function], samples[config][function])
        figures[f"change_pct_{config}"] = {"mean": point, "ci95": [low, high]}
    thesis = sorted(THESIS_CHANGE_PCT[function])
    figures["thesis_change_pct"] = {"min": thesis[0], "median": thesis[len(thesis) // 2], "max": thesis[-1]}
    return figures


def print_tables(report: dict, console: Console) -> None:
    for run in report["runs"]:
        table = Table(title=f"{run['mpi']}: time (s) for {report['ops']} operations of {report['size']} per rank, "
                            f"{report['nranks']} ranks, mean of {report['repeats']} (95% CI)")
        for column in ("function", "none", "POSIX", "all", "change all (%)", "change POSIX (%)",
                       "thesis all (%) min/med/max"):
            table.add_column(column, justify="left" if column == "function" else "right")
        for function, f in run["functions"].items():
            def seconds(config):
                return f"{f[config]['mean_s']:.3f} ± {f[config]['ci95_s']:.3f}"

            def change(config):
                c = f[f"change_pct_{config}"]
                return f"{c['mean']:+.1f} [{c['ci95'][0]:+.1f}, {c['ci95'][1]:+.1f}]"
            t = f["thesis_change_pct"]
            table.add_row(function, seconds("none"), seconds("posix"), seconds("all"), change("all"), change("posix"),
                          f"{t['min']:.2f} / {t['median']:.2f} / {t['max']:.2f}")
        console.print(table)
        events = run["events"].get("all", {})
        console.print(f"  checked: every traced run recorded {report['nranks'] * report['ops']} events per function "
                      f"(full tracing: {events.get('posix', 0):,} POSIX events in the last run)")


@app.command("riot")
def command(
    nranks: int = typer.Option(4, "-n", "--ranks", min=1, help="MPI ranks."),
    ops: int = typer.Option(100, "--ops", min=1, help="Operations per function and rank (the thesis: 100)."),
    size: str = typer.Option("4m", "--size", help="Bytes per operation, k/m suffixes (the thesis: 4 MB)."),
    repeats: int = typer.Option(5, "--repeats", min=2, help="Repetitions of each configuration."),
    mpi_name: list[str] = typer.Option(None, "--mpi", help="MPI to use (repeatable); default: every one built."),
    directory: Path = typer.Option(None, "--dir", help="Where the test file and traces go (default: a temporary "
                                                       "directory, removed afterwards)."),
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
) -> None:
    """Wright's Table A.2 on ioloom: six MPI-IO functions untraced, POSIX-traced and fully traced."""
    try:
        impls = [mpi.by_name(name) for name in mpi_name] if mpi_name else mpi.implementations()
    except LookupError as err:
        typer.echo(f"ioloom bench riot: {err}", err=True)
        raise typer.Exit(2)
    if not impls:
        typer.echo("ioloom bench riot: no MPI implementation found; run `make build`", err=True)
        raise typer.Exit(2)
    console = Console(stderr=True)
    report = {"nranks": nranks, "ops": ops, "size": size, "repeats": repeats, "runs": []}
    with tempfile.TemporaryDirectory(prefix="ioloom-riot-", dir=directory) as tmp:
        try:
            for impl in impls:
                report["runs"].append(measure(impl, nranks, ops, size, repeats, Path(tmp),
                                              progress=None if as_json else console.log))
        except (RiotFailed, paths.NativeMissing) as err:
            typer.echo(f"ioloom bench riot: {err}", err=True)
            raise typer.Exit(1)
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        print_tables(report, Console(width=150))
