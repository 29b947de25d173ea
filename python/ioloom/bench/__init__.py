"""`ioloom bench`: benchmarks that print figures. Each subcommand lives in its own module of this package."""
import typer

app = typer.Typer(help="Benchmarks that print figures (ours against a baseline, measured in one run).",
                  no_args_is_help=True)

# Subcommand modules register themselves on `app` when imported (so after it; no name of theirs is used here):
# `ioloom bench analyse|async|coord|coord-predict|drishti|fuzz|io|logfs|overhead|predict|replay|riot|sim|sweep`.
from ioloom.bench import (  # noqa: E402,F401
    analyse,
    async_kernel,
    coord,
    coord_predict,
    drishti,
    fuzz,
    io,
    logfs,
    overhead,
    predict,
    replay,
    riot,
    sim,
    sweep,
)
