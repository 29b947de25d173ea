"""`ioloom replay`: write a traced run's I/O as replay scripts, run them (traced or not), and check a replay's
trace against the original's (docs/replay.md)."""
from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(help="Replay a trace's I/O in a new directory and check the replay against the original.",
                  no_args_is_help=True)


def _empty_or_exit(directory: Path) -> None:
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        typer.echo(f"ioloom: {directory}: not an empty directory; a replay is written into a new one", err=True)
        raise typer.Exit(2)


MPIIO_HELP = ("Replay an MPI trace's MPI-IO calls as MPI-IO calls (each by its own name, on MPI_BYTE at the recorded "
              "byte offsets), leaving their POSIX requests to the MPI library; without it they are replayed through "
              "their POSIX requests. The POSIX and stdio calls made outside MPI-IO are replayed either way.")


def _level(mpiio: bool) -> str:
    return "mpiio" if mpiio else "posix"


def _built(make, *args):
    """A replay written by `make` (script.write, config.write), or exit 2 when the trace cannot be replayed at the
    level asked."""
    from ioloom.replay.script import LevelError

    try:
        return make(*args)
    except LevelError as e:
        typer.echo(f"ioloom: {e}", err=True)
        raise typer.Exit(2) from None


def _summary(where: Path, manifest: dict) -> None:
    calls = sum(p["calls"] for p in manifest["processes"])
    how = f"ranks under {manifest['mpi']}'s mpiexec" if manifest["mpi"] else "processes"
    level = ", MPI-IO as MPI-IO" if manifest["level"] == "mpiio" else ""
    typer.echo(f"replay of {manifest['trace']} written to {where}{level}: {calls:,} calls, "
               f"{len(manifest['processes'])} {how}, {len(manifest['files'])} files "
               f"(originally under {manifest['root']}), {len(manifest['initial_sizes'])} existing before the run")
    if manifest["left_out"]:
        left = ", ".join(f"{op} {n:,}" for op, n in manifest["left_out"].items())
        typer.echo(f"  left out (not replayable: see docs/replay.md): {left}")
    if manifest.get("opens_alone"):
        typer.echo("  MPI-IO opens made alone (MPI_COMM_SELF), their communicator in doubt: "
                   f"{manifest['opens_alone']:,} (see docs/replay.md)")


@app.command("write")
def write_command(trace: Path = typer.Argument(..., help="A trace directory (`ioloom run -o DIR`)."),
                  directory: Path = typer.Argument(..., help="A new directory for the replay."),
                  mpiio: bool = typer.Option(False, "--mpiio", help=MPIIO_HELP)) -> None:
    """Write the replay scripts of a trace, one per process (run them with `ioloom replay run`)."""
    from ioloom.replay.script import write

    _empty_or_exit(directory)
    _summary(directory, _built(write, trace, directory, _level(mpiio)))


@app.command("config")
def config_command(trace: Path = typer.Argument(..., help="A trace directory (`ioloom run -o DIR`)."),
                   out: Path = typer.Argument(..., help="The configuration file to write (TOML; a new file)."),
                   mpiio: bool = typer.Option(False, "--mpiio", help=MPIIO_HELP)) -> None:
    """Write a trace's replay as a bench configuration: one file that `ioloom bench replay` runs and checks."""
    from ioloom.replay.config import write

    if out.exists() or not out.parent.is_dir():
        typer.echo(f"ioloom: {out}: " + ("exists; the configuration is written to a new file" if out.exists() else
                                         "its directory does not exist"), err=True)
        raise typer.Exit(2)
    manifest = _built(write, trace, out, _level(mpiio))
    _summary(out, manifest)
    typer.echo(f"  run it with: ioloom bench replay {out} [--rounds N] [--gaps] [--check]")


@app.command("run")
def run_command(trace: Path = typer.Argument(..., help="A trace directory (`ioloom run -o DIR`)."),
                directory: Path = typer.Argument(..., help="A new directory the replay runs in."),
                traced: Path = typer.Option(None, "--trace", help="Trace the replay with `ioloom run` into this "
                                            "directory, and compare it with the original."),
                gaps: bool = typer.Option(False, "--gaps", help="Wait the recorded time between calls (computation "
                                          "and communication of the original) instead of none."),
                mpiio: bool = typer.Option(False, "--mpiio", help=MPIIO_HELP)) -> None:
    """Replay a trace's POSIX and stdio calls (with --mpiio its MPI-IO calls as MPI-IO) in a new directory: same
    files relative to it, sizes, offsets and order per process."""
    from ioloom.replay.run import ReplayError, run
    from ioloom.replay.script import write

    _empty_or_exit(directory)
    _summary(directory, _built(write, trace, directory, _level(mpiio)))
    try:
        done = run(directory, traced, gaps)
    except ReplayError as e:
        typer.echo(f"ioloom: {e}", err=True)
        raise typer.Exit(2) from None
    typer.echo(done.stderr.rstrip())
    if done.returncode != 0:
        typer.echo(f"ioloom: the replay exited {done.returncode}", err=True)
        raise typer.Exit(1)
    if traced is not None:
        _compare(trace, traced, _level(mpiio))


def _compare(original: Path, replay: Path, level: str) -> None:
    from ioloom.replay.compare import MATCHES, differences, footprint, library_differences, not_reproduced
    from ioloom.stats_cli import load_or_exit

    a, b = footprint(load_or_exit(original), level), footprint(load_or_exit(replay), level)
    lines = differences(a, b)
    what = "MPI-IO and other " if level == "mpiio" else ""
    typer.echo(f"compared: {len(a.bytes)} files, {sum(a.calls.values()):,} {what}calls in the original; " +
               (MATCHES if not lines else f"{len(lines)} differences"))
    for line in lines:
        typer.echo(f"  {line}")
    if a.library is not None and b.library is not None:
        library = library_differences(a, b)
        typer.echo(f"  the MPI library's POSIX requests inside the MPI-IO calls (reported, not compared): "
                   f"{sum(a.library.calls.values()):,} in the original, {sum(b.library.calls.values()):,} in the "
                   f"replay" + (f"; {len(library)} differences" if library else "; the same"))
        for line in library:
            typer.echo(f"    {line}")
    if missing := not_reproduced(a):
        typer.echo(f"  {missing}")
    if lines:
        raise typer.Exit(1)


@app.command("compare")
def compare_command(original: Path = typer.Argument(..., help="The original trace."),
                    replay: Path = typer.Argument(..., help="The replay's trace."),
                    mpiio: bool = typer.Option(False, "--mpiio", help="Compare as for a replay made with --mpiio: "
                                               "the MPI-IO calls (and the POSIX and stdio calls outside them) are "
                                               "held to the original's, the POSIX requests inside MPI-IO calls only "
                                               "reported.")) -> None:
    """Check a replay's trace against the original's: bytes per file, calls per operation, each process's calls in
    order (file, offset, bytes)."""
    _compare(original, replay, _level(mpiio))
