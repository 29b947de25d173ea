"""`ioloom bench coord`: Δ-graphs of two applications sharing storage (Dorier Ch. 6), uncoordinated and under
each policy of `ioloom coord`. A starts its phase at 0 and B at dt, B's offsets sweeping [-T_B, T_A]. The
applications are (`--program`) two ioloom-coord-writer processes, or two unmodified `ioloom-bench` runs under
`ioloom run --coord` (the preloaded client). The storage is (`--storage`) an emulated one, one reservation clock
of fixed bandwidth (native/coord/storage.h: proportional sharing by weight, whatever this machine's disk does),
or this machine's disk, written through (fdatasync after each write; ioloom-bench only). Per run: each one's
interference factor I = T / T_alone (T_alone: the median over the rounds of its runs alone, interleaved with
the others) and the machine time wasted f = N_A T_A + N_B T_B, as a ratio to the uncoordinated run at the same
dt in the same round. Pairs: `small` (a big application of --big-weight cores beside a small one of 1) and
`equal` (two big ones). Rounds interleave everything; figures are medians with their min and max
(docs/bench.md)."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import typer

from ioloom import outputs, paths
from ioloom.bench import app
from ioloom.bench.stats import rounds_allowed, spread
from ioloom.coord import COORDINATED, MIN_GAIN, log, offsets

START_MARGIN = 0.25  # seconds from spawning the writers to A's start: both are sleeping by then
# seconds from spawning two `ioloom run`s to A's first write (--margin): both have started by then (their first
# write comes about 1 s after the spawn on a quiet machine, later under load)
BENCH_MARGIN = 3.0
# seconds without a write that end a phase under `ioloom run`: Open MPI's singleton daemon writes two small files
# 0.25 s before its application's planned start, a phase of the application's name that must be over before the
# other application starts (or the other's first write would join its place in the order)
BENCH_IDLE = 0.1


def writer_argv(work: Path, name: str, size: int, weight: int, options: dict, start_at: float,
                address: str | None) -> list[str]:
    argv = [str(paths.native_bin("ioloom-coord-writer")), "--name", name, "--bytes", str(size), "--chunk",
            str(options["chunk"]), "--weight", str(weight), "--cores", str(weight), "--storage",
            str(work / "storage"), "--bandwidth", str(options["bandwidth"]), "--start-at", f"{start_at:.6f}"]
    return argv + (["--coord", address] if address else [])


def run_apps(work: Path, apps: list[tuple[str, int, int, float]], options: dict, address: str | None) -> list:
    """Run the applications (name, bytes, weight, offset) at once, uncoordinated (address None) or not: each
    one's {"t": its phase's seconds, "start": when its phase started (CLOCK_MONOTONIC)}."""
    return (run_benches if options["program"] == "bench" else run_writers)(work, apps, options, address)


def run_writers(work: Path, apps: list[tuple[str, int, int, float]], options: dict, address: str | None) -> list:
    """Run ioloom-coord-writers on a fresh emulated storage, A's phase START_MARGIN from now."""
    (work / "storage").unlink(missing_ok=True)
    t0 = time.monotonic() + START_MARGIN
    procs = [subprocess.Popen(writer_argv(work, name, size, weight, options, t0 + offset, address),
                              stdout=subprocess.PIPE, text=True) for name, size, weight, offset in apps]
    results = []
    for p in procs:
        out, _ = p.communicate(timeout=600)
        if p.returncode != 0:
            raise RuntimeError(f"ioloom-coord-writer failed (status {p.returncode})")
        results.append(json.loads(out))
    for r, (name, *_) in zip(results, apps):
        refuse_unruled(f"writer {name}", r["lost"], r["timeouts"])
    # a writer's time counts from its planned start, so a late wake-up is not hidden
    return [{"t": r["end"] - (t0 + offset), "start": t0 + offset} for r, (_, _, _, offset) in zip(results, apps)]


def coord_run(work: Path, name: str, address: str | None, program: list[str], cores: int, start_at: float,
              idle: float) -> tuple[list[str], dict]:
    """`ioloom run --coord` of `program` (argv, environment) as the application NAME of `cores` cores, traced to
    work/run-NAME, its first write held until `start_at` (CLOCK_MONOTONIC seconds), a phase ending after `idle`
    seconds without a write; uncoordinated (address None), the address is one where no coordinator listens (the
    client then writes on, counted lost), so both runs go through the same preload."""
    argv = [sys.executable, "-m", "ioloom", "run", "--coord", address or str(work / "nobody.sock"), "-o",
            str(work / f"run-{name}"), "--", *program]
    env = {**os.environ, "IOLOOM_COORD_NAME": name, "IOLOOM_COORD_CORES": str(cores),
           "IOLOOM_COORD_START_AT": f"{start_at:.6f}", "IOLOOM_COORD_IDLE": str(idle)}
    return argv, env


def emulated_storage(work: Path, bandwidth: float) -> dict[str, str]:
    """The settings that give each coordinated write its time on the emulated storage work/storage."""
    return {"IOLOOM_COORD_STORAGE": str(work / "storage"), "IOLOOM_COORD_BANDWIDTH": str(bandwidth)}


def bench_command(work: Path, name: str, size: int, weight: int, options: dict, start_at: float,
                  address: str | None) -> tuple[list[str], dict]:
    """coord_run of an unmodified ioloom-bench writing `size` bytes in writes of chunk x weight (a file of its own,
    one rank)."""
    program = [str(paths.native_bin("ioloom-bench-openmpi")), "-a", "posix", "-F", "-w", "-s", "1", "-b", str(size),
               "-t", str(options["chunk"] * weight), "-o", str(work / f"{name}.dat")]
    argv, env = coord_run(work, name, address, program, weight, start_at, BENCH_IDLE)
    env["IOLOOM_COORD_BYTES"] = str(size)
    if options["storage"] == "local":
        env["IOLOOM_COORD_WRITE_THROUGH"] = "1"
    else:
        env.update(emulated_storage(work, options["bandwidth"]))
    return argv, env


def data_row(trace: Path, coordinated: bool) -> dict:
    """The preloaded client's counters (coord.jsonl) of the process that wrote the data. A run whose client wrote
    without its coordinator (when coordinated) or passed its wait bound is refused: it is not a policy's."""
    rows = log.read(trace / "coord.jsonl")
    if not rows:
        raise RuntimeError(f"{trace.name}: no process of the run wrote to a regular file (no coord.jsonl line): "
                           "the program did not write its data")
    data = max(rows, key=lambda r: r["bytes"])
    refuse_unruled(f"{trace.name}: the program", coordinated and data["lost"], data["timeouts"])
    return data


class RunRefused(RuntimeError):
    """A run that is not a policy's (refuse_unruled): its program wrote without its coordinator or past its wait
    bound."""


def refuse_unruled(who: str, lost: int, timeouts: int) -> None:
    """A run in which `who` wrote without its coordinator (lost) or past its wait bound is not a policy's:
    RunRefused saying so in one line."""
    why = (["lost its coordinator (and wrote on)"] if lost else []) + \
        ([f"passed the wait bound {timeouts} times (and wrote on)"] if timeouts else [])
    if why:
        raise RunRefused(f"{who} {' and '.join(why)}: the run is not a policy's, refused (a machine too loaded? "
                           "run again)")


def bench_phase(trace: Path, coordinated: bool, planned: float) -> dict:
    """The phase of the process that wrote the data (data_row), counted from its planned start as the writers'
    are."""
    data = data_row(trace, coordinated)
    return {"t": data["last_end"] - planned, "start": data["first_start"]}


def run_together(work: Path, commands: dict[str, tuple[list[str], dict]], what: str) -> None:
    """Start the `ioloom run`s (name: (argv, environment)) at once, each traced to a fresh work/run-NAME, on a fresh
    emulated storage, and wait for them all; one that fails raises, with its status and the end of its errors."""
    (work / "storage").unlink(missing_ok=True)
    procs = {}
    for name, (argv, env) in commands.items():
        shutil.rmtree(work / f"run-{name}", ignore_errors=True)
        procs[name] = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for p in procs.values():
        _, err = p.communicate(timeout=600)
        if p.returncode != 0:
            raise RuntimeError(f"ioloom run of {what} failed (status {p.returncode}): {err.strip()[-300:]}")


def run_benches(work: Path, apps: list[tuple[str, int, int, float]], options: dict, address: str | None) -> list:
    """Run ioloom-bench under `ioloom run --coord`, A's first write options["margin"] from now; the offset actually
    reached is measured (each phase's first write), not assumed."""
    t0 = time.monotonic() + options.get("margin", BENCH_MARGIN)
    run_together(work, {name: bench_command(work, name, size, weight, options, t0 + offset, address)
                        for name, size, weight, offset in apps}, "ioloom-bench")
    return [bench_phase(work / f"run-{name}", address is not None, t0 + offset) for name, _, _, offset in apps]


class Coordinators:
    """One coordinator per policy, in a thread of this process, for the whole campaign."""

    def __init__(self, work: Path, metric: str, min_gain: float, bandwidth: float,
                 policies: tuple[str, ...] = COORDINATED) -> None:
        from ioloom.coord import service
        from ioloom.coord.policy import Policy
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.addresses = {}
        for policy in policies:
            ready = threading.Event()
            address = str(work / f"{policy}.sock")
            coro = service.serve(address, Policy(policy, metric, min_gain), 60.0, bandwidth, ready.set)
            asyncio.run_coroutine_threadsafe(coro, self.loop)
            if not ready.wait(30):
                raise RuntimeError(f"the {policy} coordinator did not start")
            self.addresses[policy] = address

    def close(self) -> None:
        """Stop every coordinator (each ends its clients' connections) and wait for it, then the loop."""
        asyncio.run_coroutine_threadsafe(stop_all(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


async def stop_all() -> None:
    """Cancel every other task of the running loop and wait until each has ended."""
    tasks = asyncio.all_tasks() - {asyncio.current_task()}
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def pairs(options: dict, which: str) -> dict:
    """name: ((bytes, weight) of A, (bytes, weight) of B)."""
    big = (options["big_bytes"], options["big_weight"])
    chosen = {"small": (big, (options["small_bytes"], 1)), "equal": (big, big)}
    return chosen if which == "both" else {which: chosen[which]}


def one_round(work: Path, options: dict, chosen: dict, coords: Coordinators, points: int, flip: bool) -> dict:
    """One interleaved round: each pair's applications alone, then each offset under each policy (orders
    alternate by round): {(pair, dt, policy): {"t_a", "t_b"}, (pair, "alone"): {"t_a", "t_b"}}."""
    samples: dict = {}
    for pair, (a, b) in chosen.items():
        samples[(pair, "alone")] = {"t_a": run_apps(work, [("A", *a, 0.0)], options, None)[0]["t"],
                                    "t_b": run_apps(work, [("B", *b, 0.0)], options, None)[0]["t"]}
        dts = offsets(a[0] / options["bandwidth"], b[0] / options["bandwidth"], points, digits=6)
        policies = ["none", *coords.addresses]
        for dt in (reversed(dts) if flip else dts):
            for policy in (reversed(policies) if flip else policies):
                ra, rb = run_apps(work, [("A", *a, max(0.0, -dt)), ("B", *b, max(0.0, dt))], options,
                                  coords.addresses.get(policy))
                samples[(pair, dt, policy)] = {"t_a": ra["t"], "t_b": rb["t"], "f": a[1] * ra["t"] + b[1] * rb["t"],
                                               "dt": rb["start"] - ra["start"]}
    return samples


def alone_times(rounds: list[dict]) -> dict:
    """{pair: (median T_A alone, median T_B alone)} over the rounds: a single run alone on a loaded machine is
    too noisy a baseline for one round's ratio."""
    pairs_seen = {key[0] for key in rounds[0] if key[1] == "alone"}
    return {p: (statistics.median(r[(p, "alone")]["t_a"] for r in rounds),
                statistics.median(r[(p, "alone")]["t_b"] for r in rounds)) for p in pairs_seen}


def summarise(rounds: list[dict]) -> list[dict]:
    rows, alone = [], alone_times(rounds)
    for key in (k for k in rounds[0] if k[1] != "alone"):
        pair, dt, policy = key
        ratio = [r[key]["f"] / r[(pair, dt, "none")]["f"] for r in rounds]
        rows.append({"pair": pair, "dt": dt, "policy": policy, "t_alone": alone[pair],
                     "dt_reached": spread([r[key]["dt"] for r in rounds]),
                     "i_a": spread([r[key]["t_a"] / alone[pair][0] for r in rounds]),
                     "i_b": spread([r[key]["t_b"] / alone[pair][1] for r in rounds]), "f_ratio": spread(ratio)})
    return sorted(rows, key=lambda r: (r["pair"], r["dt"], ["none", *COORDINATED].index(r["policy"])))


def goals(rows: list[dict]) -> dict:
    """The issue's goals on the small pair: where uncoordinated B's I >= 3, its I <= 1.5 and A's <= 1.1 under
    the best policy run at that dt; f never above uncoordinated under dynamic (median ratio <= 1.00 as the table
    prints it; None when dynamic was not run)."""
    by = {(r["pair"], r["dt"], r["policy"]): r for r in rows}
    hurt = [dt for (pair, dt, policy), r in by.items() if pair == "small" and policy == "none"
            and r["i_b"]["median"] >= 3]
    run = [p for p in COORDINATED if any(r["policy"] == p for r in rows)]
    rescued = {dt: min((by[("small", dt, p)] for p in run), key=lambda r: r["i_b"]["median"]) for dt in hurt}
    dynamic = [r for r in rows if r["policy"] == "dynamic"]
    return {"small_hurt_offsets": hurt,
            "small_rescued": all(r["i_b"]["median"] <= 1.5 and r["i_a"]["median"] <= 1.1 for r in rescued.values()),
            "rescued_by": {str(dt): r["policy"] for dt, r in rescued.items()},
            "dynamic_never_worse": all(round(r["f_ratio"]["median"], 2) <= 1.0 for r in dynamic) if dynamic else None}


def print_report(report: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    def cell(s):
        return f"{s['median']:.2f} [{s['min']:.2f}, {s['max']:.2f}]"
    console = Console()
    for pair in sorted({r["pair"] for r in report["rows"]}):
        table = Table(title=f"{pair} pair: I = T / T_alone and f / f(uncoordinated), median [min, max] of "
                            f"{report['rounds']} rounds (load {report['load']})")
        for column in ("dt (s)", "dt reached", "policy", "I_A", "I_B", "f / f_none"):
            table.add_column(column)
        for r in (r for r in report["rows"] if r["pair"] == pair):
            table.add_row(f"{r['dt']:+.3f}", cell(r["dt_reached"]), r["policy"], cell(r["i_a"]), cell(r["i_b"]),
                          cell(r["f_ratio"]))
        console.print(table)
    console.print(f"goals: {report['goals']}")


def plot_html(report: dict, path: Path) -> None:
    """The Δ-graphs: I_A and I_B against dt, one line per policy, one panel per pair (plotly, self-contained)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots
    chosen = sorted({r["pair"] for r in report["rows"]})
    where = f"{report['options']['program']} on {report['options']['storage']} storage"
    fig = make_subplots(rows=1, cols=len(chosen), subplot_titles=[f"{p} pair, {where}" for p in chosen])
    for col, pair in enumerate(chosen, start=1):
        for policy in ["none", *COORDINATED]:
            rows = [r for r in report["rows"] if r["pair"] == pair and r["policy"] == policy]
            if not rows:
                continue
            for who, dash in (("i_a", "solid"), ("i_b", "dot")):
                fig.add_trace(go.Scatter(x=[r["dt_reached"]["median"] for r in rows],
                                         y=[r[who]["median"] for r in rows],
                                         name=f"{policy} {who.upper()}", line={"dash": dash}), row=1, col=col)
        fig.update_xaxes(title_text="dt (s): B starts after A (median reached)", row=1, col=col)
    fig.update_yaxes(title_text="interference factor I = T / T_alone")
    outputs.save_figure(fig, path)


def setup_refused(program: str, storage: str, big: tuple[int, int], small: tuple[int, int], chunk: int) -> str:
    """Why the applications and storage asked for cannot run ('' if they can)."""
    if program not in ("writer", "bench"):
        return f"--program {program!r}: use writer or bench"
    if storage not in ("emulated", "local"):
        return f"--storage {storage!r}: use emulated or local"
    if storage == "local" and program == "writer":
        return "--storage local needs --program bench (ioloom-coord-writer writes on the emulated storage only)"
    bad = [size for size, weight in (big, small) if size % (chunk * weight)]
    if program == "bench" and bad:
        return (f"--program bench writes in transfers of --chunk x weight bytes, which must divide the bytes "
                f"written ({bad[0]}): choose sizes that are multiples of them")
    return ""


@app.command("coord")
def command(pair: str = typer.Option("both", help="small (big beside small), equal, or both."),
            points: int = typer.Option(9, min=2, help="Offsets dt in [-T_B, T_A]."),
            rounds: int = typer.Option(10, "--rounds", min=1, help="Interleaved rounds."),
            quick: bool = typer.Option(False, help="Allow fewer than 10 rounds (a quick look, not a figure)."),
            program: str = typer.Option("writer", help="writer (ioloom-coord-writer) or bench (an unmodified "
                                                       "ioloom-bench under `ioloom run --coord`)."),
            storage: str = typer.Option("emulated", help="emulated (fixed bandwidth) or local (this machine's "
                                                         "disk, written through; --program bench)."),
            bandwidth: float = typer.Option(5e8, min=1e6, help="Emulated storage bandwidth (bytes/s); with "
                                                               "--storage local, the coordinator's estimate."),
            big_bytes: int = typer.Option(800_000_000, min=1, help="Bytes the big application writes."),
            big_weight: int = typer.Option(8, min=1, help="Cores (bandwidth weight) of the big application."),
            small_bytes: int = typer.Option(50_000_000, min=1, help="Bytes the small application writes."),
            chunk: int = typer.Option(2_000_000, min=1, help="Bytes per write; a step is weight writes."),
            metric: str = typer.Option("core-seconds", help="What dynamic minimises: core-seconds or factors."),
            min_gain: float = typer.Option(MIN_GAIN, "--min-gain", min=0.0, max=0.99,
                                           help="dynamic's least gain to serialise (coord serve --min-gain)."),
            policies: str = typer.Option(",".join(COORDINATED), help="The coordinated policies to run beside the "
                                                                   "uncoordinated one (comma-separated)."),
            margin: float = typer.Option(BENCH_MARGIN, min=0.5, help="--program bench: seconds from starting the "
                                                                     "two programs to A's first write."),
            output: Path = typer.Option(None, "-o", "--output", help="Also write coord.json and coord.html here."),
            as_json: bool = typer.Option(False, "--json", help="Print the report as JSON.")) -> None:
    """Δ-graphs of two writers on an emulated storage, uncoordinated and under each coordination policy."""
    if pair not in ("small", "equal", "both"):
        raise typer.BadParameter(f"--pair {pair!r}: use small, equal or both")
    if metric not in ("core-seconds", "factors"):
        raise typer.BadParameter(f"--metric {metric!r}: use core-seconds or factors")
    chosen_policies = tuple(p.strip() for p in policies.split(",") if p.strip())
    if not chosen_policies or not set(chosen_policies) <= set(COORDINATED):
        raise typer.BadParameter(f"--policies {policies!r}: name one or more of {','.join(COORDINATED)}")
    if why := rounds_allowed(rounds, quick, "--rounds"):
        raise typer.BadParameter(why)
    if why := setup_refused(program, storage, (big_bytes, big_weight), (small_bytes, 1), chunk):
        raise typer.BadParameter(why)
    if output:
        output.mkdir(parents=True, exist_ok=True)  # a bad -o is refused before the runs, not after them
    options = {"program": program, "storage": storage, "bandwidth": bandwidth, "big_bytes": big_bytes,
               "big_weight": big_weight, "small_bytes": small_bytes, "chunk": chunk, "margin": margin}
    chosen = pairs(options, pair)
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="ioloom-bench-coord-") as tmp:
        coords = Coordinators(Path(tmp), metric, min_gain, bandwidth, chosen_policies)
        try:
            samples = [one_round(Path(tmp), options, chosen, coords, points, flip=r % 2 == 1) for r in range(rounds)]
        finally:
            coords.close()
    load.append(os.getloadavg()[0])
    rows = summarise(samples)
    report = {"options": options, "metric": metric, "min_gain": min_gain, "rounds": rounds,
              "load": f"{load[0]:.1f}->{load[1]:.1f}", "rows": rows, "goals": goals(rows)}
    if output:
        outputs.save_json(report, output / "coord.json")
        plot_html(report, output / "coord.html")
    if as_json:
        print(json.dumps(report, indent=1))
    else:
        print_report(report)
