"""`ioloom report TRACE [-o report.html] [--json findings.json]`: the self-contained HTML report."""
from __future__ import annotations

from pathlib import Path

import typer

from ioloom import outputs
from ioloom.stats_cli import QUIET_OPTION, SCHEDULER_HELP, STRIPE_OPTION, analyse_or_exit


def _predicted(trace: Path, limit: int, processes: int):
    """The predictor's figures for the report's first processes (docs/predict.md, "In the HTML report")."""
    from ioloom.predict.cli import analyse_trace
    from ioloom.predict.model import Options
    from ioloom.report import Predicted
    from ioloom.stats_cli import load_or_exit

    loaded = load_or_exit(trace)
    return Predicted(analyse_trace(loaded, Options(), limit=limit, processes=processes), limit, len(loaded.streams))


def _asynchronous(trace: Path) -> dict | None:
    """libioloom-async's hidden and visible I/O time, when the trace has its layer (docs/async.md, "Traced")."""
    from ioloom.async_io.traced import from_trace
    from ioloom.stats_cli import load_or_exit

    return from_trace(load_or_exit(trace)) if trace.is_dir() else None


def command(trace: Path = typer.Argument(..., help="Trace directory (ioloom run -o DIR) or a .darshan log."),
            output: Path = typer.Option(Path("report.html"), "-o", "--output", help="HTML file to write."),
            findings_json: Path = typer.Option(None, "--json", help="Also write the findings as JSON here."),
            stripe_size: int = STRIPE_OPTION,
            scheduler: str = typer.Option(None, "--scheduler", help=SCHEDULER_HELP),
            quiet: bool = QUIET_OPTION,
            predict_ops: int = typer.Option(2_000, "--predict-ops", min=0,
                                            help="Operations per process the prediction section learns (the "
                                                 "first ones); 0: no prediction section."),
            predict_processes: int = typer.Option(8, "--predict-processes", min=1,
                                                  help="Processes the prediction section shows (the first ones).")
            ) -> None:
    """Write one HTML file (works offline) with the bandwidths, timelines, access maps, findings and the
    prediction of each process's I/O."""
    from ioloom import report

    analysis = analyse_or_exit(trace, stripe_size, scheduler, quiet)
    predicted = _predicted(trace, predict_ops, predict_processes) if predict_ops else None
    report.write(analysis, output, title=f"ioloom report: {trace.name}", subtitle=str(trace.resolve()),
                 predicted=predicted, asynchronous=_asynchronous(trace))
    typer.echo(f"report: {output}")
    if findings_json:
        outputs.save_json([f.to_json() for f in analysis.findings], findings_json)
        typer.echo(f"findings: {findings_json}")
    for problem in analysis.problems:
        typer.echo(f"ioloom: trace problem: {problem}", err=True)
