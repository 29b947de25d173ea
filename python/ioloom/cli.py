"""The `ioloom` command. Each subcommand is defined in its own module, named in SUBCOMMANDS and imported only when
it is used (run, or its help shown), so that `ioloom X` loads X's dependencies only: `ioloom container flatten`
starts without numpy, pandas, pyarrow or plotly, and without the modules of the other subcommands.

Every error reaches the user as one line on stderr that says what is wrong and what to do, with a non-zero exit
status: bad options are refused by click with the option's name (status 2); errors the user can act on (a missing,
unreadable or damaged input, a full disk: OSError and ioloom's own exception types) print their message (status
2); anything else is a bug in ioloom and says so (status 70). `ioloom --debug ...` (or IOLOOM_DEBUG=1) shows the
traceback instead."""
from __future__ import annotations

import functools
import os
import sys
from importlib import import_module

import click
import typer
from typer.core import TyperGroup

from ioloom import __version__
from ioloom.errors import explain

# name: "module:attribute", a function (one command) or a typer.Typer (a group of them), in the order of --help.
SUBCOMMANDS = {
    "doctor": "ioloom.doctor:command",
    "run": "ioloom.run:command",
    "stats": "ioloom.stats_cli:command",
    "report": "ioloom.report_cli:command",
    "export": "ioloom.export:command",
    "bench": "ioloom.bench:app",
    "advise": "ioloom.advise:app",
    "container": "ioloom.logfs.cli:app",
    "sim": "ioloom.sim.cli:app",
    "predict": "ioloom.predict.cli:command",
    "replay": "ioloom.replay.cli:app",
    "async": "ioloom.async_io.cli:app",
    "probe": "ioloom.probe.cli:app",
    "coord": "ioloom.coord.cli:app",
}
# `ioloom run [OPTIONS] -- CMD --its-options`: everything after CMD is CMD's.
CONTEXT_SETTINGS = {"run": {"allow_interspersed_args": False}}


@functools.cache
def load(name: str) -> click.Command:
    """The click command of subcommand `name`, its module imported now."""
    module, attribute = SUBCOMMANDS[name].split(":")
    target = getattr(import_module(module), attribute)
    command: click.Command
    if isinstance(target, typer.Typer):
        command = typer.main.get_group(target)
    else:
        single = typer.Typer(add_completion=False)
        single.command(name, context_settings=CONTEXT_SETTINGS.get(name))(target)
        command = typer.main.get_command(single)
    command.name = name
    return command


class LazySubcommands(TyperGroup):
    """The root group: its subcommands are SUBCOMMANDS, each loaded when click asks for it."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*super().list_commands(ctx), *SUBCOMMANDS]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return load(cmd_name) if cmd_name in SUBCOMMANDS else super().get_command(ctx, cmd_name)


app = typer.Typer(name="ioloom", cls=LazySubcommands, no_args_is_help=True, add_completion=False,
                  pretty_exceptions_enable=False,
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
