"""`ioloom bench sim`: how fast the simulator (docs/sim.md) runs at scale: events per second, wall-clock and CPU
time, peak memory of the engine process, against the issue's goal (4,096 ranks x 480 targets x 100 writes each
in under 30 s and 4 GiB on 2 cores).

Configurations, each run once per round, the order alternating between rounds (docs/bench.md's rules):
- `scale`: the goal's job through the write-back cache: a file per rank (stripe count 1) on 480 targets, 16
  ranks per node, writes of 1 MiB, 4 MiB RPCs (8 in flight: 32 MiB windows) under a 64 MiB dirty limit;
- `cached` and `write-through`: a smaller job (`--base-ranks` x `--base-writes`, the default platform) through
  the cache and write-through; their CPU-time ratio, round by round, is what the cache's streams buy.
An event is an operation replayed plus a flow (an RPC window) the solver shared.
"""
from __future__ import annotations

import json
import os
import time

import typer
from rich.console import Console
from rich.table import Table

from ioloom.bench import app
from ioloom.bench.stats import load_average, per_round, rounds_allowed, spread

GOAL_SECONDS, GOAL_BYTES = 30.0, 4 << 30
CONFIGS = ("scale", "cached", "write-through")


def _job(config: str, ranks: int, writes: int):
    """(platform, workload) of a configuration: a file per rank, `writes` writes of 1 MiB each, then fsync."""
    from ioloom.sim import platform, workload

    doc: dict = {"clients": {"nodes": -(-ranks // 16)}, "targets": {"count": 480}}
    if config == "scale":
        doc.update(rpc={"size": 4 << 20}, cache={"dirty_limit": 64 << 20})
    elif config == "write-through":
        doc.update(cache={"dirty_limit": 0})
    p = platform.from_dict(doc)
    args = workload.parse_bench_args(f"-F -b {writes}m -t 1m -e -w")
    return p, workload.bench_job(p, args, ranks, 16)


def run_config(config: str, ranks: int, writes: int, wall_budget: float) -> dict:
    """One simulation: {"events", "simulated", "wall", "cpu", "rss", "driver_wall"}."""
    from ioloom.sim import engine

    began = time.perf_counter()
    p, w = _job(config, ranks, writes)
    o = engine.run(p, w, wall_budget)
    return {"events": int(w.ops.size + o.pieces.size), "simulated": o.simulated_time, "wall": o.wall_seconds,
            "cpu": o.cpu_seconds, "rss": o.peak_rss, "driver_wall": time.perf_counter() - began}


def _table(sizes: dict, figures: dict) -> Table:
    table = Table("config", "ranks x writes", "events", "simulated s", "engine wall s", "CPU s", "events/s (wall)",
                  "peak RSS MiB", "with driver s", title="median [min, max] over rounds")

    def cell(s: dict, fmt: str) -> str:
        return f"{s['median']:{fmt}} [{s['min']:{fmt}}, {s['max']:{fmt}}]"

    for config, runs in figures.items():
        ranks, writes = sizes[config]
        table.add_row(config, f"{ranks:,} x {writes}", f"{runs['events']['median']:,.0f}",
                      f"{runs['simulated']['median']:.4g}", cell(runs["wall"], ".3g"), cell(runs["cpu"], ".3g"),
                      cell(runs["events_per_s"], ",.0f"), f"{runs['rss']['max'] / 2**20:,.0f}",
                      cell(runs["driver_wall"], ".3g"))
    return table


@app.command("sim")
def sim_command(ranks: int = typer.Option(4096, "--ranks", min=1, help="Ranks of the scale job."),
                writes: int = typer.Option(100, "--writes", min=1, help="Writes of 1 MiB per rank (scale job)."),
                base_ranks: int = typer.Option(1024, "--base-ranks", min=1, help="Ranks of the cached/write-through "
                                               "comparison."),
                base_writes: int = typer.Option(20, "--base-writes", min=1, help="Writes per rank there."),
                rounds: int = typer.Option(10, "--rounds", min=1, help="Interleaved rounds."),
                quick: bool = typer.Option(False, "--quick", help="Allow fewer than 10 rounds (a quick look)."),
                wall_budget: float = typer.Option(600.0, "--wall-budget", min=1.0,
                                                  help="Wall-clock seconds before one simulation is stopped."),
                json_out: bool = typer.Option(False, "--json", help="Print the figures as JSON.")) -> None:
    """Time the simulator on the issue's scale job and on a cached against write-through pair."""
    from ioloom import paths
    from ioloom.sim import engine

    why = rounds_allowed(rounds, quick, "--rounds")
    if why:
        typer.echo(f"ioloom bench sim: {why}", err=True)
        raise typer.Exit(2)
    sizes = {"scale": (ranks, writes), "cached": (base_ranks, base_writes), "write-through": (base_ranks, base_writes)}
    runs: dict[str, list[dict]] = {c: [] for c in CONFIGS}
    before = load_average()
    try:
        for r in range(rounds):
            for config in CONFIGS if r % 2 == 0 else CONFIGS[::-1]:
                runs[config].append(run_config(config, *sizes[config], wall_budget))
    except engine.SimError as e:
        typer.echo(f"ioloom bench sim: {e}", err=True)
        raise typer.Exit(1) from None
    except paths.NativeMissing as e:
        typer.echo(f"ioloom bench sim: {e} (the simulator needs SimGrid: Debian's libsimgrid-dev)", err=True)
        raise typer.Exit(1) from None
    figures = {c: {k: spread([x[k] for x in rs]) for k in ("events", "simulated", "wall", "cpu", "rss",
                                                             "driver_wall")} for c, rs in runs.items()}
    for c, rs in runs.items():
        figures[c]["events_per_s"] = spread([x["events"] / x["wall"] for x in rs])
    speedup = spread(per_round([x["cpu"] for x in runs["write-through"]], [x["cpu"] for x in runs["cached"]]))
    scale = figures["scale"]
    goal = {"wall_s": scale["wall"]["median"], "peak_rss": scale["rss"]["max"],
            "met": scale["wall"]["median"] < GOAL_SECONDS and scale["rss"]["max"] < GOAL_BYTES}
    after = load_average()
    if json_out:
        print(json.dumps({"sizes": sizes, "figures": figures, "write_through_over_cached_cpu": speedup, "goal": goal,
                          "load": {"before": before, "after": after}, "cpus": os.cpu_count()}))
        return
    console = Console(width=170)
    console.print(_table(sizes, figures))
    console.print(f"the same job ({base_ranks:,} x {base_writes}) simulated write-through takes "
                  f"{speedup['median']:.3g}x [{speedup['min']:.3g}, {speedup['max']:.3g}] the CPU time it takes "
                  "through the cache's streams")
    console.print(f"goal ({ranks:,} ranks x 480 targets x {writes} writes < {GOAL_SECONDS:g} s, < 4 GiB): "
                  f"engine wall {goal['wall_s']:.3g} s (CPU {scale['cpu']['median']:.3g} s), peak "
                  f"{goal['peak_rss'] / 2**20:,.0f} MiB: {'met' if goal['met'] else 'NOT met'}")
    console.print(f"load average (1, 5, 15 min): {before} before, {after} after, on {os.cpu_count()} CPUs "
                  "(wall-clock figures on a shared machine: read the CPU time beside them)")
