"""`ioloom probe`: run measurement campaigns on storage targets and report what they deliver (docs/probe.md).
Heavy modules are imported inside the commands, so `ioloom probe --help` stays quick."""
from __future__ import annotations

import json
from pathlib import Path

import typer

from ioloom import units

app = typer.Typer(help="Measure what each storage target delivers over time, and which targets move together "
                       "(docs/probe.md).", no_args_is_help=True)
STORE = typer.Option(..., "--store", "-o", help="The probe store (a directory of Parquet files; created if new, "
                                                "appended to otherwise).")


@app.command("run")
def run_command(targets: list[str] = typer.Argument(..., help="Targets: directories, ost:N@DIR (Lustre), "
                                                    "sim:N (a simulated target; see --sim)."),
                store: Path = STORE,
                requests: str = typer.Option("1M,4M,16M,64M", "--requests", "-r", help="Request sizes."),
                writers: str = typer.Option("1", "--writers", "-w", help="Writer counts, e.g. 1,4 (single and "
                                            "concurrent writers; each writes its own file)."),
                volume: str = typer.Option("64M", "--volume", help="Bytes each writer writes (at least one "
                                           "request)."),
                sync: str = typer.Option("on", "--fsync", help="on, off or both: fsync before the clock stops "
                                         "(off measures the page cache as much as the target)."),
                rounds: int = typer.Option(1, "--rounds", "-n", min=1, help="Rounds of measurements."),
                interval: float = typer.Option(0.0, "--interval", "-i", min=0.0, help="Seconds between the starts "
                                               "of two rounds (simulated targets: simulated seconds)."),
                sim: Path | None = typer.Option(None, "--sim", help="Platform file of the simulated targets "
                                                   "(default: ioloom sim's documented defaults)."),
                seed: int = typer.Option(1, "--seed", help="Seed of each round's measurement order."),
                quiet: bool = typer.Option(False, "--quiet", "-q", help="Print nothing per round.")) -> None:
    """Run a campaign: ROUNDS rounds, INTERVAL seconds apart, each measuring every target at every request size,
    writer count and fsync setting, appended to the store as soon as the round ends."""
    from ioloom.probe import campaign
    from ioloom.probe import targets as target_mod

    if sync not in ("on", "off", "both"):
        raise typer.BadParameter(f"on, off or both (got {sync!r})", param_hint="--fsync")
    plan = campaign.Plan([target_mod.parse(t) for t in targets], units.sizes(requests, "--requests"),
                         units.numbers(writers, "--writers"),
                         {"on": [True], "off": [False], "both": [True, False]}[sync],
                         units.size(volume, "--volume"), rounds, interval, seed, sim)

    def report(number: int, rows: list[dict]) -> None:
        if not quiet:
            best = max(r["throughput"] for r in rows) / 1e6 if rows else 0.0
            typer.echo(f"round {number + 1}/{rounds}: {len(rows)} measurements, best {best:,.1f} MB/s", err=True)
    plan_id = campaign.run(plan, store, report)
    typer.echo(f"campaign {plan_id}: {rounds} round(s) in {store}")


@app.command("report")
def report_command(store: Path = typer.Argument(..., help="The probe store."),
                   output: Path | None = typer.Option(None, "--output", "-o", help="Write the HTML page here."),
                   as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON.")) -> None:
    """Per-target distributions, best request sizes, the correlation matrix and its clusters, multimodality;
    a table on the terminal, JSON, or an HTML page."""
    from ioloom.probe import analysis, page
    from ioloom.probe import store as store_mod

    frame = store_mod.load(store)
    s = analysis.summarise(frame)
    if output is not None:
        from ioloom.outputs import save

        typer.echo(str(save(page.render(frame, s, str(store)), output)))
    if as_json:
        r = s.correlation
        print(json.dumps({"config": s.config, "targets": s.per_target.reset_index().to_dict("records"),
                          "correlation": {"targets": list(r.columns),
                                          "r": [[None if v != v else round(float(v), 4) for v in row]
                                                for row in r.to_numpy()]},
                          "clusters": s.clusters, "slow": s.slow, "preferred": analysis.preferred_targets(s),
                          "background_modes": analysis.background_modes(frame, s.config)}, indent=2, default=float))
    elif output is None:
        _print_table(s)


def _print_table(s) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"targets ({s.config['request_bytes']} B requests, {s.config['writers']} writer(s), "
                        f"fsync {'on' if s.config['fsync'] else 'off'})")
    for column in ("target", "samples", "median MB/s", "min", "max", "CV", "modes", "best request"):
        table.add_column(column, justify="right", overflow="fold")
    for target, r in s.per_target.iterrows():
        table.add_row(str(target), str(int(r["samples"])), f"{r['median'] / 1e6:,.1f}", f"{r['min'] / 1e6:,.1f}",
                      f"{r['max'] / 1e6:,.1f}", f"{r['cv']:.2f}", str(int(r["modes"])), str(int(r["best_request"])))
    console = Console()
    console.print(table)
    for group in s.clusters:
        console.print(f"move together (r >= 0.4): {', '.join(group)}", markup=False)
    if s.slow:
        console.print(f"slow (median below half the best): {', '.join(s.slow)}", markup=False)


@app.command("background")
def background_command(store: Path = typer.Argument(..., help="The probe store.")) -> None:
    """Print the store's measured variability as the [background] section of an `ioloom sim` platform file."""
    from ioloom.probe import analysis
    from ioloom.probe import store as store_mod

    frame = store_mod.load(store)
    modes = analysis.background_modes(frame)
    print("[background]  # from ioloom probe: share of each target's best, pooled")
    print("modes = [" + ", ".join(f"[{left}, {weight}]" for left, weight in modes) + "]")
