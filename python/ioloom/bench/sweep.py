"""`ioloom bench sweep CONFIG`: run ioloom-bench over a grid and draw bandwidth against the varied parameter.

The grid is Boito et al.'s kind of study at our scale: NSEG (the same bytes per rank in more, smaller
segments), TMP (a wait between operations), CLIENTS (more ranks, the same bytes each) and SMP (more ranks per
emulated node: the -C shift and, with -c, the collective-buffering aggregators). CONFIG is TOML (or the same keys
in YAML, in a file named .yaml or .yml):

    ranks = 4                      # ranks for the NSEG and TMP tests
    mpi = "openmpi"                # optional: openmpi or mpich (default: the first found)
    args = ["-a", "posix", "-w", "-r", "-e", "-C"]   # given to every run
    restart_read = true            # optional: write and read in two launches (Boito restarts the clients)
    drop_caches = false            # optional: and drop the page cache between them (root, whole machine)
    [[test]]
    name = "SFSA-strided-NSEG"
    vary = "segments"              # segments | wait | ranks | ranks_per_node
    values = [1, 4, 16]
    bytes_per_rank = "16m"         # segments: block = bytes_per_rank / segments
    transfer = "1m"                # at most the block
    args = ["--pattern", "strided"]

Outputs in the output directory: sweep.json (every point), sweep.html (plotly, self-contained), sweep.png.
Each point is the median effective bandwidth over its repetitions, with bars from the smallest to the largest.
A read that may have been served from the page cache (its bytes fit in free memory and the cache was not
dropped before it) is marked so in sweep.json ("page_cache"), in the panel titles and in the printed lines.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import typer
from rich.console import Console

from ioloom import docfile, outputs, paths, units
from ioloom.bench import app
from ioloom.bench import io as bench_io

VARY = {"segments": "segment count", "wait": "wait between operations (ms)", "ranks": "clients (ranks)",
        "ranks_per_node": "ranks per (emulated) node"}


class ConfigError(ValueError):
    """The sweep configuration cannot be run; the message names the key and what to write."""


@dataclass
class Test:
    name: str
    vary: str
    values: list[float]
    args: list[str] = field(default_factory=list)
    bytes_per_rank: int | None = None
    transfer: int | None = None


@dataclass
class Sweep:
    ranks: int
    tests: list[Test]
    args: list[str] = field(default_factory=list)
    mpi: str | None = None
    restart_read: bool = False
    drop_caches: bool = False


def _string_list(value, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
        raise ConfigError(f"{key}: expected a list of arguments such as [\"-a\", \"mpiio\", \"-c\"]")
    return [str(v) for v in value]


def _test(raw: dict, index: int) -> Test:
    where = f"test {index + 1} ({raw.get('name', 'unnamed')})"
    unknown = set(raw) - {"name", "vary", "values", "args", "bytes_per_rank", "transfer"}
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; known: name, vary, values, args, "
                          "bytes_per_rank, transfer")
    if raw.get("vary") not in VARY:
        raise ConfigError(f"{where}: vary = {raw.get('vary')!r}: expected one of {', '.join(VARY)}")
    values = raw.get("values")
    if not isinstance(values, list) or not values or not all(isinstance(v, (int, float)) and v >= 0 for v in values):
        raise ConfigError(f"{where}: values: expected a non-empty list of numbers >= 0, e.g. [1, 4, 16]")
    test = Test(str(raw.get("name", f"test{index + 1}")), raw["vary"], list(values),
                _string_list(raw.get("args", []), f"{where}: args"))
    if test.vary == "segments":
        if "bytes_per_rank" not in raw:
            raise ConfigError(f"{where}: vary = \"segments\" needs bytes_per_rank (the bytes each rank moves "
                              "in all its segments, e.g. \"16m\")")
        test.bytes_per_rank = units.size(raw["bytes_per_rank"], f"{where}: bytes_per_rank")
        for s in values:
            if int(s) != s or s < 1 or test.bytes_per_rank % int(s):
                raise ConfigError(f"{where}: values: segment count {s} does not divide bytes_per_rank "
                                  f"({test.bytes_per_rank}); choose counts that divide it")
    if test.vary in ("ranks", "ranks_per_node") and not all(int(v) == v and v >= 1 for v in values):
        raise ConfigError(f"{where}: values: {test.vary.replace('_', ' ')} must be whole numbers >= 1")
    if "transfer" in raw:
        test.transfer = units.size(raw["transfer"], f"{where}: transfer")
    return test


def load(path: str | Path) -> Sweep:
    """Reads and checks a sweep configuration; raises ConfigError saying what to change."""
    raw = docfile.read(path, "sweep grid", ConfigError)
    tests = raw.get("test")
    if not isinstance(tests, list) or not tests:
        raise ConfigError(f"{path}: no [[test]] tables; add at least one (see `ioloom bench sweep --help`)")
    ranks = raw.get("ranks", 4)
    if not isinstance(ranks, int) or ranks < 1:
        raise ConfigError(f"{path}: ranks = {ranks!r}: expected a whole number >= 1")
    flags = {key: raw.get(key, False) for key in ("restart_read", "drop_caches")}
    for key, value in flags.items():
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: {key} = {value!r}: expected true or false")
    return Sweep(ranks, [_test(t, i) for i, t in enumerate(tests)], _string_list(raw.get("args", []), "args"),
                 raw.get("mpi"), **flags)


def point_args(test: Test, x: float, ranks: int) -> tuple[int, list[str]]:
    """Ranks and ioloom-bench arguments of one point of a test."""
    args = list(test.args)
    if test.vary == "segments":
        assert test.bytes_per_rank is not None  # the config is refused without it (_test)
        block = test.bytes_per_rank // int(x)
        transfer = min(test.transfer or block, block)
        args += ["-s", str(int(x)), "-b", str(block), "-t", str(transfer)]
    elif test.transfer:
        args += ["-t", str(test.transfer)]
    if test.vary == "wait":
        args += ["--wait", f"{x:g}"]
    if test.vary == "ranks_per_node":
        args += ["--ranks-per-node", str(int(x))]
    return (int(x) if test.vary == "ranks" else ranks), args


def run(sweep: Sweep, workdir: Path, mpi_name: str | None = None, console: Console | None = None) -> list[dict]:
    """Runs every point; one row per point and op with the bandwidth summary over repetitions."""
    rows = []
    for test in sweep.tests:
        for x in test.values:
            ranks, args = point_args(test, x, sweep.ranks)
            argv = [*sweep.args, *args, "-o", str(workdir / "sweep.dat")]
            if console:
                console.print(f"{test.name}: {test.vary} = {x:g} ({ranks} ranks)")
            result = bench_io.measure(mpi_name or sweep.mpi, ranks, argv, sweep.restart_read, sweep.drop_caches)
            cached = bench_io.cache_note(result) is not None
            for s in result["summary"]:
                rows.append({"test": test.name, "vary": test.vary, "x": x, "ranks": ranks, "op": s["op"],
                             "mpi": result["mpi"], "args": argv, "restarted": "restarted" in result,
                             "page_cache": cached and s["op"] == "read",
                             **{f"{kind}_{stat}": s[f"{kind}_bw"][stat] for kind in bench_io.BANDWIDTHS
                                for stat in ("min", "median", "mean", "max")}})
    return rows


def _panels(rows: list[dict]) -> list[tuple[str, str]]:
    """(op, varied parameter) of every panel: one row of panels per op, one column per varied parameter."""
    ops = list(dict.fromkeys(r["op"] for r in rows))
    varies = [v for v in VARY if any(r["vary"] == v for r in rows)]
    return [(op, vary) for op in ops for vary in varies]


def _series(rows: list[dict], op: str, vary: str):
    """(test, xs, median, min, max) of each test in one panel; effective bandwidth in MiB/s."""
    for test in dict.fromkeys(r["test"] for r in rows if (r["op"], r["vary"]) == (op, vary)):
        points = sorted((r for r in rows if (r["test"], r["op"]) == (test, op)), key=lambda r: r["x"])
        yield (test, [p["x"] for p in points],
               *([p[f"effective_{s}"] / bench_io.MIB for p in points] for s in ("median", "min", "max")))


def _title(rows: list[dict], op: str, vary: str) -> str:
    """A panel's title; it says when its points may have been read from the page cache rather than the device."""
    cached = any(r["page_cache"] for r in rows if (r["op"], r["vary"]) == (op, vary))
    return f"{op}: {VARY[vary]}" + (" (from the page cache)" if cached else "")


def _shape(rows: list[dict]) -> tuple[int, int]:
    panels = _panels(rows)
    ncols = len({vary for _, vary in panels})
    return len(panels) // ncols, ncols


def plot_html(rows: list[dict], path: Path) -> None:
    """Effective bandwidth (median, bars from min to max over repetitions) against each varied parameter."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots
    nrows, ncols = _shape(rows)
    panels = _panels(rows)
    fig = make_subplots(rows=nrows, cols=ncols, subplot_titles=[_title(rows, op, vary) for op, vary in panels])
    colours: dict[str, str] = {}  # test name -> its colour in every panel
    for i, (op, vary) in enumerate(panels):
        row, col = divmod(i, ncols)
        for test, xs, mean, low, high in _series(rows, op, vary):
            colour = colours.setdefault(test, f"hsl({len(colours) * 67 % 360}, 65%, 45%)")
            fig.add_trace(go.Scatter(x=xs, y=mean, name=test, legendgroup=test, showlegend=row == 0,
                                     mode="lines+markers", line={"color": colour},
                                     error_y={"type": "data", "symmetric": False,
                                              "array": [h - m for h, m in zip(high, mean)],
                                              "arrayminus": [m - lo for m, lo in zip(mean, low)]}),
                          row=row + 1, col=col + 1)
        fig.update_xaxes(title_text=VARY[vary], type="log" if vary == "segments" else "linear", row=row + 1,
                         col=col + 1)
        fig.update_yaxes(title_text="effective MiB/s", rangemode="tozero", row=row + 1, col=col + 1)
    fig.update_layout(title="ioloom bench sweep: effective bandwidth (median; bars: min-max over repetitions)",
                      height=380 * nrows + 120, width=max(700, 480 * ncols))
    outputs.save_figure(fig, path)


def plot_png(rows: list[dict], path: Path) -> None:
    """The same panels as plot_html, as a PNG (matplotlib, Agg)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    nrows, ncols = _shape(rows)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.5 * ncols, 3.8 * nrows), squeeze=False)
    for i, (op, vary) in enumerate(_panels(rows)):
        ax = axes[i // ncols][i % ncols]
        for test, xs, mean, low, high in _series(rows, op, vary):
            ax.errorbar(xs, mean, yerr=[[m - lo for m, lo in zip(mean, low)], [h - m for h, m in zip(high, mean)]],
                        marker="o", capsize=3, label=test)
        if vary == "segments":
            ax.set_xscale("log", base=2)
        ax.set_ylim(bottom=0)
        ax.set_title(_title(rows, op, vary), fontsize=10)
        ax.set_xlabel(VARY[vary])
        ax.set_ylabel("effective MiB/s")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


@app.command("sweep")
def sweep_command(config: Path = typer.Argument(..., help="TOML grid, or YAML when named .yaml/.yml (docs/bench.md)."),
                  output: Path = typer.Option(Path("ioloom-sweep"), "-o", "--output", help="Output directory."),
                  mpi_name: str = typer.Option(None, "--mpi", help="openmpi or mpich (overrides the config)."),
                  workdir: Path = typer.Option(None, "--dir",
                                               help="Where the benchmark's files go (default: a temporary "
                                                    "directory under the output directory).")) -> None:
    """Run ioloom-bench over a grid (Boito's NSEG, TMP, CLIENTS, SMP tests) and draw bandwidth against segment
    count, wait time, clients and ranks per node, as sweep.html and sweep.png, with every point in sweep.json."""
    console = Console(stderr=True)
    try:
        sweep = load(config)
        output.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=workdir or output) as scratch:
            rows = run(sweep, Path(scratch), mpi_name, console)
    except (ConfigError, units.UnitError, bench_io.BenchFailed, LookupError, PermissionError,
            paths.NativeMissing) as err:
        typer.echo(f"ioloom bench sweep: {err}", err=True)
        raise typer.Exit(2) from None
    outputs.save_json(rows, output / "sweep.json")
    plot_html(rows, output / "sweep.html")
    plot_png(rows, output / "sweep.png")
    for row in rows:
        print(f"{row['test']:<24} {row['vary']}={row['x']:<8g} {row['op']:<6} "
              f"effective {row['effective_median'] / bench_io.MIB:10.2f} MiB/s  "
              f"raw {row['raw_median'] / bench_io.MIB:10.2f}" + ("  (page cache)" if row["page_cache"] else ""))
    if any(row["page_cache"] for row in rows):
        print("(page cache): the read's bytes fit in free memory and the cache was not dropped before it, so it "
              "may measure memory rather than the device; restart_read = true and drop_caches = true (root) read "
              "from the device")
    print(f"wrote {output / 'sweep.html'}, {output / 'sweep.png'}, {output / 'sweep.json'}")
