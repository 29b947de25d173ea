"""`ioloom stats TRACE [--json]`: the metrics of a trace, as tables or as JSON."""
from __future__ import annotations

import json
from pathlib import Path

import typer

from ioloom.progress import QUIET_OPTION
from ioloom.shown import shown

STRIPE_OPTION = typer.Option(1 << 20, "--stripe-size", min=1,
                             help="Stripe size in bytes that requests are checked against (misalignment).")
SCHEDULER_HELP = "Run the analysis map on this Dask scheduler (tcp://host:port) instead of local processes."


def _fail(message: str) -> None:
    typer.echo(f"ioloom: {message}", err=True)
    raise typer.Exit(2)


def load_or_exit(trace: Path):
    """The trace, or a one-line error that says what to do when nothing in it can be read (a missing path, a file
    that is not a trace, a stream of a format version this ioloom does not read): never an empty result."""
    from ioloom.analysis import load

    try:
        loaded = load(trace)
    except (FileNotFoundError, ValueError) as err:
        _fail(str(err))
    if not loaded.streams and "darshan" not in loaded.meta:  # a Darshan log without DXT still has its counters
        why = "; ".join(loaded.problems[:2]) + (f" (and {len(loaded.problems) - 2} more)"
                                                 if len(loaded.problems) > 2 else "")
        _fail(f"{trace}: no readable trace stream ({why or 'no events'}); give the directory `ioloom run -o DIR` "
              "wrote, or trace the program again")
    return loaded


def analyse_or_exit(trace: Path, stripe_size: int, scheduler: str | None, quiet: bool = False):
    """Analyse, turning a missing or unreadable input into a one-line error that says what to do; progress on
    a terminal unless `quiet`."""
    from ioloom import progress
    from ioloom.analysis import Options, analyse

    loaded = load_or_exit(trace)
    try:
        with progress.events(progress.trace_events(loaded), f"analysing {trace.name}", quiet) as advance:
            return analyse(loaded, Options(stripe_size=stripe_size), scheduler=scheduler, progress=advance)
    except (ConnectionError, ValueError) as err:
        _fail(str(err))


def _fmt(value) -> str:
    return shown(value, ",.2f")


def _layers_table(io: dict):
    """Darshan's job summary per module: each layer's files, bytes and seconds on the application's files."""
    from rich.table import Table

    from ioloom.analysis.metrics import human_bytes

    own = io["application"]
    left_out = [f"{io[key]['files']} {what} ({human_bytes(io[key]['write_bytes'])} written, "
                f"{human_bytes(io[key]['read_bytes'])} read)"
                for key, what in (("system_files", "system and MPI-runtime files"), ("logfs_files", "logfs files"))
                if io[key]["files"]]
    table = Table(title=f"I/O per layer: the program wrote {human_bytes(own['write_bytes'])} and read "
                        f"{human_bytes(own['read_bytes'])} of its files",
                  caption="not counted: " + "; ".join(left_out) if left_out else None)
    for col in ("layer", "files", "calls", "read", "written", "data s", "other s"):
        table.add_column(col, justify="right")
    for r in io["layers"]:
        layer = r["layer"] if r["issued_by"] == "application" else f"{r['layer']} via MPI-IO"
        table.add_row(layer, str(r["files"]), f"{r['ops']:,}", human_bytes(r["read_bytes"]),
                      human_bytes(r["write_bytes"]), f"{r['read_s'] + r['write_s']:.4f}", f"{r['other_s']:.4f}")
    return table


def _print(result: dict) -> None:
    from rich.console import Console
    from rich.markup import escape  # paths and messages may hold [brackets], which rich would take as markup
    from rich.table import Table

    from ioloom.analysis.metrics import human_bytes

    console = Console()
    s = result["summary"]
    darshan = s.get("darshan")
    events = (f"{s['events']:,} events" if not darshan else "counters only (no DXT events)" if darshan["counters_only"]
              else f"{s['events']:,} events (partial: DXT kept {darshan['dxt_segments']:,} of "
                   f"{darshan['operations_counted']:,} operations counted)" if darshan["dxt_partial"]
              else f"{s['events']:,} DXT events")
    console.print(f"[bold]{'Darshan log: ' if darshan else ''}{s['processes']} processes ({s['ranks']} MPI ranks), "
                  f"{events}, {s['files']} files, {s['duration_s']:.3f} s[/bold]  (analysed in {s['executor']})")
    for problem in s["problems"]:
        console.print(f"[red]trace problem:[/red] {escape(problem)}")
    if s["dropped_events"]:
        console.print(f"[yellow]{s['dropped_events']} events were dropped by the tracer[/yellow]")
    console.print(_layers_table(result["io"]))
    bw = Table(title="Bandwidth, MB/s (MB = 1024^2 bytes; docs/analysis.md)")
    bw.add_column("figure")
    for direction in result["bandwidth"]:
        bw.add_column(direction, justify="right")
    figures = result["bandwidth"].values()
    bw.add_row("bytes moved", *(human_bytes(b["aggregate_bytes"]) for b in figures))
    for label, key in (("aggregate (IOR)", "aggregate_MBps"), ("data window", "data_window_MBps"),
                       ("perceived MPI", "perceived_mpi_MBps"), ("effective MPI", "effective_mpi_MBps"),
                       ("effective POSIX", "effective_posix_MBps")):
        bw.add_row(label, *(_fmt(b[key]) for b in figures))
    console.print(bw)
    if result["patterns"]:  # one file a paragraph: a path folds at any width, never cut to nothing
        console.print("[bold]Access patterns[/bold]")
    for p in result["patterns"]:
        stride = "" if p["stride"] is None else f", stride {p['stride']:,} bytes"
        console.print(f"  {escape(p['path'])}\n      {p['sharing']}, {p['order']}{stride}; {p['requests']:,} calls, "
                      f"{p['small_requests']:,} small, {p['misaligned_requests']:,} misaligned", overflow="fold")
    if "darshan" in result:
        modules = Table(title="Darshan log: counters per module")
        columns = [c for c in result["darshan"]["modules"][0]] if result["darshan"]["modules"] else []
        for col in columns:
            modules.add_column(col, justify="right")
        for row in result["darshan"]["modules"]:
            modules.add_row(*(f"{row[c]:,.6g}" if isinstance(row[c], (int, float)) else str(row[c]) for c in columns))
        console.print(modules)
    for f in result["findings"]:
        console.print(f"[bold]{f['severity'].upper()}[/bold] {f['code']}: {escape(f['message'])}\n"
                      f"    advice: {escape(f['advice'])}")
    if not result["findings"]:
        checks = Table(title=f"No findings: none of the {len(result['checks'])} checks matched")
        for col in ("check", "looks for", "fires at or above"):
            checks.add_column(col, overflow="fold")
        for c in result["checks"]:
            checks.add_row(", ".join(c["codes"]), c["looks_for"], "\n".join(c["thresholds_shown"]) or "any")
        console.print(checks)


def command(trace: Path = typer.Argument(..., help="Trace directory (ioloom run -o DIR) or a .darshan log."),
            as_json: bool = typer.Option(False, "--json", help="Print the full result as JSON."),
            stripe_size: int = STRIPE_OPTION,
            scheduler: str = typer.Option(None, "--scheduler", help=SCHEDULER_HELP),
            quiet: bool = QUIET_OPTION) -> None:
    """Metrics of a trace: bytes, operations and time per layer, file and rank; bandwidths; patterns; findings."""
    result = analyse_or_exit(trace, stripe_size, scheduler, quiet).to_json()
    if as_json:
        typer.echo(json.dumps(result, indent=1))
    else:
        _print(result)
