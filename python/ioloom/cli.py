"""The `ioloom` command. Each subcommand is defined in its own module and registered here.

Every error reaches the user as one line on stderr that says what is wrong and what to do, with a non-zero exit
status: bad options are refused by click with the option's name (status 2); errors the user can act on (a missing,
unreadable or damaged input, a full disk: OSError and ioloom's own exception types) print their message (status
2); anything else is a bug in ioloom and says so (status 70). `ioloom --debug ...` (or IOLOOM_DEBUG=1) shows the
traceback instead."""
from __future__ import annotations

import os
import sys

import typer

from ioloom import __version__, doctor, run, export, report_cli, stats_cli
from ioloom.errors import explain
from ioloom.advise import app as advise_app
from ioloom.bench import app as bench_app
from ioloom.logfs.cli import app as container_app

app = typer.Typer(name="ioloom", no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="See, understand and fix the I/O of parallel (MPI and POSIX) programs.")


def _print_version(value: bool) -> None:
    if value:
        print(f"ioloom {__version__}")
        raise typer.Exit()


def _debug(value: bool) -> None:
    if value:
        os.environ["IOLOOM_DEBUG"] = "1"


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                       help="Print the version and exit."),
          debug: bool = typer.Option(False, "--debug", callback=_debug, is_eager=True,
                                     help="Show the traceback of an error instead of its one-line message.")) -> None:
    pass


app.command("doctor")(doctor.command)
app.command("run", context_settings={"allow_interspersed_args": False})(run.command)
app.command("stats")(stats_cli.command)
app.command("report")(report_cli.command)
app.command("export")(export.command)
app.add_typer(bench_app, name="bench")
app.add_typer(advise_app, name="advise")
app.add_typer(container_app, name="container")


def main(argv: list[str] | None = None) -> None:
    """Run the command line (argv: the arguments after `ioloom`, default sys.argv)."""
    try:
        app(args=argv, prog_name="ioloom")
    except Exception as err:  # noqa: BLE001 (each error is told in one line; --debug shows the traceback)
        if os.environ.get("IOLOOM_DEBUG") == "1":
            raise
        message, status = explain(err)
        print(f"ioloom: {message}".replace("\n", " "), file=sys.stderr)
        sys.exit(status)
