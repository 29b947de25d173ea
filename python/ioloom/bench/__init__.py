"""`ioloom bench`: benchmarks that print figures. Each subcommand lives in its own module of this package."""
import typer

app = typer.Typer(help="Benchmarks that print figures (ours against a baseline, measured in one run).",
                  no_args_is_help=True)

# Subcommand modules register themselves on `app` when imported.
from ioloom.bench import io  # noqa: E402,F401  (registers `ioloom bench io`)
from ioloom.bench import sweep  # noqa: E402,F401  (registers `ioloom bench sweep`)
from ioloom.bench import overhead  # noqa: E402,F401  (registers `ioloom bench overhead`)
from ioloom.bench import logfs  # noqa: E402,F401  (registers `ioloom bench logfs`)
from ioloom.bench import riot  # noqa: E402,F401  (registers `ioloom bench riot`)
from ioloom.bench import analyse  # noqa: E402,F401  (registers `ioloom bench analyse`)
from ioloom.bench import fuzz  # noqa: E402,F401  (registers `ioloom bench fuzz`)
from ioloom.bench import async_kernel  # noqa: E402,F401  (registers `ioloom bench async`)
from ioloom.bench import predict  # noqa: E402,F401  (registers `ioloom bench predict`)
