"""`ioloom report TRACE [-o report.html] [--json findings.json]`: the self-contained HTML report."""
from __future__ import annotations

import json
from pathlib import Path

import typer

from ioloom.stats_cli import QUIET_OPTION, SCHEDULER_HELP, STRIPE_OPTION, analyse_or_exit


def command(trace: Path = typer.Argument(..., help="Trace directory (ioloom run -o DIR) or a .darshan log."),
            output: Path = typer.Option(Path("report.html"), "-o", "--output", help="HTML file to write."),
            findings_json: Path = typer.Option(None, "--json", help="Also write the findings as JSON here."),
            stripe_size: int = STRIPE_OPTION,
            scheduler: str = typer.Option(None, "--scheduler", help=SCHEDULER_HELP),
            quiet: bool = QUIET_OPTION) -> None:
    """Write one HTML file (works offline) with the bandwidths, timelines, access maps and findings."""
    from ioloom import report

    analysis = analyse_or_exit(trace, stripe_size, scheduler, quiet)
    report.write(analysis, output, title=f"ioloom report: {trace.name}", subtitle=str(trace.resolve()))
    typer.echo(f"report: {output}")
    if findings_json:
        findings_json.write_text(json.dumps([f.to_json() for f in analysis.findings], indent=1))
        typer.echo(f"findings: {findings_json}")
    for problem in analysis.problems:
        typer.echo(f"ioloom: trace problem: {problem}", err=True)
