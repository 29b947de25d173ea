"""`ioloom bench riot`: the overhead study of Wright's RIOT thesis (Appendix A, Table A.2) on ioloom's tracer.

Each rank performs --ops operations of --size bytes (100 x 4 MB in the thesis) with each of MPI_File_write, read,
write_all, read_all, write_at_all and read_at_all (ioloom-bench's riot kernel, native/bench/kernel_riot.c), under
three configurations: untraced, POSIX only (libioloom-trace.so, IOLOOM_LAYERS=posix) and everything (as
`ioloom run` traces: POSIX, stdio and the MPI wrappers). The configurations run once per round, in a rotating
order, so that drifts of the machine hit all three alike. Reported per function: the median over rounds of the
time the ranks spent in the data calls (mean over ranks, as the thesis's "average time"), and the change from
untraced to traced taken within each round (paired), as the median of those changes with a distribution-free
interval (order statistics, ioloom.bench.stats.median_interval) and the confidence it actually has: a mean with
a bootstrap interval over a few rounds was overconfident on a shared machine, where one disturbed round moves
the mean by far more than tracing does. `-o DIR` draws every round's changes with the medians and intervals.

Every traced run's trace is read back and its MPI-IO events counted: a run whose events are missing would
measure nothing, and is reported as an error rather than as a figure.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from ioloom import mpi, outputs, paths
from ioloom.bench import app
from ioloom.bench.io import run_bench
from ioloom.bench.stats import PUBLISHED_ROUNDS, median_interval, per_round, rounds_allowed, spread
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


def change_pct(base: list[float], traced: list[float]) -> dict:
    """The change from untraced to traced, in %, taken round by round (each traced run against the untraced run
    of its own round): the median change, its distribution-free interval and that interval's confidence, and
    every round's change."""
    changes = [100.0 * (r - 1) for r in per_round(traced, base)]
    return {**median_interval(changes), "rounds": changes}


def measure(impl: mpi.MpiImpl, nranks: int, ops: int, size: str, repeats: int, work: Path,
            progress=None) -> dict:
    """Runs the kernel repeats x 3 times (configurations interleaved) and returns the figures for one MPI."""
    samples: dict[str, dict[str, list[float]]] = {config: {f: [] for f in FUNCTIONS} for config in CONFIGS}
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
    figures = {config: spread(samples[config][function]) for config in CONFIGS}
    for config in ("posix", "all"):
        figures[f"change_pct_{config}"] = change_pct(samples["none"][function], samples[config][function])
    thesis = sorted(THESIS_CHANGE_PCT[function])
    figures["thesis_change_pct"] = {"min": thesis[0], "median": thesis[len(thesis) // 2], "max": thesis[-1]}
    return figures


def print_tables(report: dict, console: Console) -> None:
    for run in report["runs"]:
        table = Table(title=f"{run['mpi']}: time (s) for {report['ops']} operations of {report['size']} per rank, "
                            f"{report['nranks']} ranks, median \\[min, max] of {report['repeats']} interleaved rounds; "
                            "change: median of the per-round changes \\[interval] (its confidence)")
        for column in ("function", "none", "POSIX", "all", "change all (%)", "change POSIX (%)",
                       "thesis all (%) min/med/max"):
            table.add_column(column, justify="left" if column == "function" else "right", no_wrap=True)
        for function, f in run["functions"].items():
            t = f["thesis_change_pct"]
            table.add_row(function, *(_seconds(f, c) for c in ("none", "posix", "all")),
                          *(_change(f, c) for c in ("all", "posix")),
                          f"{t['min']:.2f} / {t['median']:.2f} / {t['max']:.2f}")
        console.print(table)
        events = run["events"].get("all", {})
        console.print(f"  checked: every traced run recorded {report['nranks'] * report['ops']} events per function "
                      f"(full tracing: {events.get('posix', 0):,} POSIX events in the last run)")


def _seconds(figures: dict, config: str) -> str:
    """A function's time in one configuration: median [min, max]."""
    f = figures[config]
    return f"{f['median']:.3f} [{f['min']:.3f}, {f['max']:.3f}]"


def _change(figures: dict, config: str) -> str:
    """A function's change in one configuration: median [interval] (confidence)."""
    c = figures[f"change_pct_{config}"]
    return f"{c['median']:+.1f} [{c['low']:+.1f}, {c['high']:+.1f}] ({100 * c['confidence']:.0f}%)"


def _points(run: dict, config: str):
    """(x position, per-round changes, median, low, high) per function, for one configuration of one MPI."""
    for x, f in enumerate(run["functions"].values()):
        c = f[f"change_pct_{config}"]
        yield x, c["rounds"], c["median"], c["low"], c["high"]


SHOWN = {"posix": ("POSIX traced", -0.15, "#1f77b4"), "all": ("fully traced", 0.15, "#d62728")}


def plot_png(report: dict, path: Path) -> None:
    """Every round's change per function (dots), the median (marker) and its interval (bar), beside the thesis's
    range of Table A.2 (grey), one panel per MPI (matplotlib, Agg)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = report["runs"]
    fig, axes = plt.subplots(len(runs), 1, figsize=(10, 4.2 * len(runs)), squeeze=False)
    for ax, run in zip(axes[:, 0], runs):
        for x, function in enumerate(FUNCTIONS):
            t = run["functions"][function]["thesis_change_pct"]
            ax.add_patch(matplotlib.patches.Rectangle((x - 0.35, t["min"]), 0.7, t["max"] - t["min"], color="0.88",
                                                      label="thesis (Table A.2) range" if x == 0 else None))
        for config, (label, shift, colour) in SHOWN.items():
            for x, rounds, median, low, high in _points(run, config):
                ax.scatter([x + shift] * len(rounds), rounds, s=9, color=colour, alpha=0.35)
                ax.errorbar([x + shift], [median], yerr=[[median - low], [high - median]], fmt="o", color=colour,
                            capsize=4, label=label if x == 0 else None)
        ax.axhline(0, color="0.3", linewidth=0.8)
        ax.set_yscale("symlog", linthresh=20)  # linear within ±20%, so that a disturbed round does not flatten the rest
        ax.set_xticks(range(len(FUNCTIONS)), [f.removeprefix("MPI_File_") for f in FUNCTIONS])
        ax.set_ylabel("change in data-call time (%, symlog)")
        ax.set_title(f"{run['mpi']}: {report['nranks']} ranks, {report['ops']} x {report['size']}, "
                     f"{report['repeats']} interleaved rounds (dots: rounds; bars: median and its interval)",
                     fontsize=9)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_html(report: dict, path: Path) -> None:
    """The same figure as plot_png, self-contained HTML (plotly)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots
    runs = report["runs"]
    fig = make_subplots(rows=len(runs), cols=1, subplot_titles=[r["mpi"] for r in runs])
    names = [f.removeprefix("MPI_File_") for f in FUNCTIONS]
    for row, run in enumerate(runs, start=1):
        thesis = [run["functions"][f]["thesis_change_pct"] for f in FUNCTIONS]
        fig.add_trace(go.Bar(x=names, y=[t["max"] - t["min"] for t in thesis], base=[t["min"] for t in thesis],
                             marker_color="lightgrey", name="thesis (Table A.2) range", showlegend=row == 1),
                      row=row, col=1)
        for config, (label, _, colour) in SHOWN.items():
            points = list(_points(run, config))
            fig.add_trace(go.Box(x=[names[x] for x, rounds, *_ in points for _ in rounds],
                                 y=[v for _, rounds, *_ in points for v in rounds], name=f"{label}: rounds",
                                 boxpoints="all", marker_color=colour, showlegend=row == 1), row=row, col=1)
            fig.add_trace(go.Scatter(x=[names[x] for x, *_ in points], y=[m for *_, m, _, _ in points], mode="markers",
                                     marker={"color": colour, "symbol": "diamond", "size": 10},
                                     error_y={"type": "data", "symmetric": False,
                                              "array": [h - m for *_, m, _, h in points],
                                              "arrayminus": [m - lo for *_, m, lo, _ in points]},
                                     name=f"{label}: median and interval", showlegend=row == 1), row=row, col=1)
        fig.update_yaxes(title_text="change in data-call time (%)", row=row, col=1)
    fig.update_layout(title=f"ioloom bench riot: tracing's cost per MPI-IO function, {report['repeats']} interleaved "
                            "rounds", boxmode="group", height=420 * len(runs) + 100, width=1000)
    outputs.save_figure(fig, path)


@app.command("riot")
def command(
    nranks: int = typer.Option(4, "-n", "--ranks", min=1, help="MPI ranks."),
    ops: int = typer.Option(100, "--ops", min=1, help="Operations per function and rank (the thesis: 100)."),
    size: str = typer.Option("4m", "--size", help="Bytes per operation, k/m suffixes (the thesis: 4 MB)."),
    repeats: int = typer.Option(PUBLISHED_ROUNDS, "--repeats", min=2,
                                help="Interleaved rounds (each configuration once per round); fewer than 10 only "
                                     "with --quick."),
    quick: bool = typer.Option(False, "--quick", help="Allow fewer than 10 rounds, for a quick look."),
    mpi_name: list[str] = typer.Option(None, "--mpi", help="MPI to use (repeatable); default: every one built."),
    directory: Path = typer.Option(None, "--dir", help="Where the test file and traces go (default: a temporary "
                                                       "directory, removed afterwards)."),
    output: Path = typer.Option(None, "-o", "--output", help="Also write riot.json, riot.png and riot.html (every "
                                                             "round's change, medians, intervals) here."),
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
) -> None:
    """Wright's Table A.2 on ioloom: six MPI-IO functions untraced, POSIX-traced and fully traced."""
    too_few = rounds_allowed(repeats, quick, "--repeats")
    if directory and not directory.is_dir():
        too_few = f"--dir {directory} is not a directory; give an existing, writable one"
    if too_few:
        typer.echo(f"ioloom bench riot: {too_few}", err=True)
        raise typer.Exit(2)
    try:
        impls = [mpi.by_name(name) for name in mpi_name] if mpi_name else mpi.implementations()
    except LookupError as err:
        typer.echo(f"ioloom bench riot: {err}", err=True)
        raise typer.Exit(2) from None
    if not impls:
        typer.echo("ioloom bench riot: no MPI implementation found; run `make build`", err=True)
        raise typer.Exit(2)
    if output:
        output.mkdir(parents=True, exist_ok=True)  # before the runs: a bad -o must not cost them
    console = Console(stderr=True)
    runs: list[dict] = []
    report = {"nranks": nranks, "ops": ops, "size": size, "repeats": repeats, "runs": runs}
    with tempfile.TemporaryDirectory(prefix="ioloom-riot-", dir=directory) as tmp:
        try:
            for impl in impls:
                runs.append(measure(impl, nranks, ops, size, repeats, Path(tmp),
                                              progress=None if as_json else console.log))
        except (RiotFailed, paths.NativeMissing) as err:
            typer.echo(f"ioloom bench riot: {err}", err=True)
            raise typer.Exit(1) from None
    if output:
        outputs.save_json(report, output / "riot.json")
        plot_png(report, output / "riot.png")
        plot_html(report, output / "riot.html")
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        print_tables(report, Console(width=200))
        if output:
            print(f"wrote {output / 'riot.png'}, {output / 'riot.html'}, {output / 'riot.json'}")
