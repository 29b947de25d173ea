"""The `ioloom` command. Each subcommand is defined in its own module and registered here."""
import typer

from ioloom import __version__, doctor, run, export, report_cli, stats_cli
from ioloom.advise import app as advise_app
from ioloom.bench import app as bench_app
from ioloom.logfs.cli import app as container_app

app = typer.Typer(name="ioloom", no_args_is_help=True, add_completion=False, pretty_exceptions_show_locals=False,
                  help="See, understand and fix the I/O of parallel (MPI and POSIX) programs.")


def _print_version(value: bool) -> None:
    if value:
        print(f"ioloom {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    pass


app.command("doctor")(doctor.command)
app.command("run", context_settings={"allow_interspersed_args": False})(run.command)
app.command("stats")(stats_cli.command)
app.command("report")(report_cli.command)
app.command("export")(export.command)
app.add_typer(bench_app, name="bench")
app.add_typer(advise_app, name="advise")
app.add_typer(container_app, name="container")


def main() -> None:
    app()
