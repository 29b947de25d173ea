"""`ioloom bench replay CONFIG`: runs a replay written out as a bench configuration (`ioloom replay config`,
docs/replay.md "As a bench configuration") for some rounds, each in a new directory, and prints its time beside
the original's; `--check` first traces one more round and holds it to the original's bytes per file and calls
per operation."""
from __future__ import annotations

import re
import shutil
import statistics
import tempfile
from pathlib import Path

import typer

from ioloom.bench import app
from ioloom.bench.stats import load_average

# The replayer's line per process (native/replay/main.c).
SUMMARY = re.compile(r"process (\d+): (\d+) calls replayed, (\d+) with another outcome than recorded, "
                     r"(\d+) order waits given up, in ([0-9.]+) s")


def one_round(where: Path, manifest: dict, scripts: dict[str, str], gaps: bool, trace: Path | None = None):
    """Runs the replay once in a new directory under `where`, removed after: (seconds of its slowest process,
    calls with another outcome, waits given up), or a one-line error."""
    from ioloom.replay.run import ReplayError, run
    from ioloom.replay.script import place

    directory = Path(tempfile.mkdtemp(prefix="replay-", dir=where))
    try:
        place(directory, manifest, scripts)
        done = run(directory, trace, gaps)
    except ReplayError as e:
        return str(e)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    lines = [SUMMARY.search(line) for line in done.stderr.splitlines()]
    found = [m for m in lines if m]
    if done.returncode != 0 or len(found) != len(manifest["processes"]):
        return f"the replay exited {done.returncode}: {done.stderr.strip()[-400:]}"
    return (max(float(m[5]) for m in found), sum(int(m[3]) for m in found), sum(int(m[4]) for m in found))


def _check(where: Path, manifest: dict, scripts: dict[str, str], gaps: bool, original) -> list[str]:
    """Traces one round and compares it with the original's footprint: the differences (empty: it matches)."""
    from ioloom.replay.compare import differences, footprint
    from ioloom.stats_cli import load_or_exit

    traced = Path(tempfile.mkdtemp(prefix="replay-trace-", dir=where))
    try:
        result = one_round(where, manifest, scripts, gaps, traced / "trace")
        if isinstance(result, str):
            return [result]
        return differences(original, footprint(load_or_exit(traced / "trace"), manifest["level"]))
    finally:
        shutil.rmtree(traced, ignore_errors=True)


def _summary(rows: list[float]) -> str:
    return f"{statistics.median(rows):.4f} s median [{min(rows):.4f}, {max(rows):.4f}]"


@app.command("replay")
def replay_command(config: Path = typer.Argument(..., help="A replay configuration (`ioloom replay config`)."),
                   directory: Path = typer.Option(None, "--dir", help="Where the rounds run, each in a new "
                                                  "directory removed after (default: the system's temporary "
                                                  "directory)."),
                   rounds: int = typer.Option(10, "--rounds", min=1, help="Timed rounds."),
                   gaps: bool = typer.Option(False, "--gaps", help="Wait the recorded time between calls."),
                   check: bool = typer.Option(False, "--check", help="First trace one more round (not timed) and "
                                              "hold it to the original's bytes per file and calls per "
                                              "operation.")) -> None:
    """Run a replay configuration: its time per round (the slowest process, first call to last) against the
    original's, and with --check whether its trace matches the original's."""
    from ioloom.replay.compare import MATCHES, not_reproduced
    from ioloom.replay.config import ConfigError, load

    try:
        manifest, scripts, original = load(config)
    except ConfigError as e:
        typer.echo(f"ioloom: {e}", err=True)
        raise typer.Exit(2) from None
    where = directory or Path(tempfile.gettempdir())
    if not where.is_dir():
        typer.echo(f"ioloom: --dir {where}: not a directory; give an existing one", err=True)
        raise typer.Exit(2)
    moved = {way: sum(b[way] for b in original.bytes.values()) for way in ("read", "written")}
    typer.echo(f"{config}: replay of {manifest['trace']}: {sum(p['calls'] for p in manifest['processes']):,} "
               f"calls, {len(manifest['processes'])} processes{' under ' + manifest['mpi'] if manifest['mpi'] else ''}"
               f", {len(manifest['files'])} files, {moved['written']:,} B written, {moved['read']:,} B read")
    if check:
        lines = _check(where, manifest, scripts, gaps, original)
        typer.echo("check: " + (MATCHES if not lines else f"{len(lines)} differences"))
        for line in lines:
            typer.echo(f"  {line}")
        if missing := not_reproduced(original):
            typer.echo(f"  {missing}")
        if lines:
            raise typer.Exit(1)
    _timed(where, manifest, scripts, gaps, rounds)


def _timed(where: Path, manifest: dict, scripts: dict[str, str], gaps: bool, rounds: int) -> None:
    before = load_average()
    results = [one_round(where, manifest, scripts, gaps) for _ in range(rounds)]
    failed = next((r for r in results if isinstance(r, str)), None)
    if failed:
        typer.echo(f"ioloom: {failed}", err=True)
        raise typer.Exit(1)
    seconds = [r[0] for r in results]
    original = manifest["span_ns"] / 1e9
    typer.echo(f"original: {original:.4f} s (its slowest process, first replayed call to last; from the trace)")
    typer.echo(f"replay{' with gaps' if gaps else ''}, {rounds} rounds: {_summary(seconds)}, "
               f"{statistics.median(seconds) / original if original else float('nan'):.2f} x the original; "
               f"calls with another outcome {sum(r[1] for r in results)}, order waits given up "
               f"{sum(r[2] for r in results)}")
    typer.echo(f"load average (1, 5, 15 min): {before} before, {load_average()} after")
