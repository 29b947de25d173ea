"""`ioloom sim`: run a what-if simulation of a striped parallel file system, or check the simulator against the
documents. Heavy modules are imported inside the commands, so `ioloom sim --help` stays quick."""
from __future__ import annotations

import json
from pathlib import Path

import typer

from ioloom import outputs, units
from ioloom.coord import MIN_GAIN

app = typer.Typer(help="Simulate a striped parallel file system on SimGrid (docs/sim.md).", no_args_is_help=True)


def _fail(message: str) -> None:
    typer.echo(f"ioloom sim: {message}", err=True)
    raise typer.Exit(2)


@app.command("run", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def run_command(ctx: typer.Context,
                platform_file: Path = typer.Option(None, "--platform", "-p", help="Platform file (TOML, or YAML: "
                                                   ".yaml, .yml); default: the documented defaults."),
                ranks: int = typer.Option(4, "-n", "--ranks", min=1, help="Ranks of the job."),
                ranks_per_node: int = typer.Option(None, "--ranks-per-node", min=1,
                                                   help="Ranks per node [platform's clients.ranks_per_node]."),
                logfs: bool = typer.Option(False, "--logfs", help="Re-weave the job as logfs does (per-writer logs "
                                           "and an index)."),
                stripe_count: int = typer.Option(None, "--stripe-count",
                                                 help="Targets per file [layout.stripe_count]."),
                stripe_size: str = typer.Option(None, "--stripe-size", help="Bytes per stripe, e.g. 1m "
                                                "[layout.stripe_size]."),
                trace: Path = typer.Option(None, "--trace", help="Replay this ioloom trace (a directory of "
                                           "`ioloom run`) instead of a bench pattern."),
                jobs: Path = typer.Option(None, "--jobs", help="Run the jobs of this job-mix file (TOML or YAML, "
                                          "docs/sim.md) instead of one bench pattern."),
                html_out: Path = typer.Option(None, "--html", help="Also write the figures (latency, throughput "
                                              "per rank and target over time, target correlation) to this page."),
                json_out: bool = typer.Option(False, "--json", help="Print the JSON document ioloom bench io prints "
                                              "(with --trace: the replay's)."),
                wall_budget: float = typer.Option(600.0, "--wall-budget", min=1.0,
                                                  help="Wall-clock seconds before the simulation is stopped."),
                phases: bool = typer.Option(False, "--phases", help="With --trace: also each rank's I/O phases, "
                                            "traced and simulated, with the end the predictor foresaw at each "
                                            "phase's first operation on the simulated clock.")) -> None:
    """Simulate one job running the access pattern of `ioloom bench io`'s options (after --), e.g.
    `ioloom sim run -n 1024 --stripe-count 4 -- -b 4m -t 1m -s 4 -w`, or replaying a trace (--trace DIR)."""
    from ioloom import paths
    from ioloom.bench.io import print_result
    from ioloom.sim import engine, platform, results, workload

    if phases and trace is None:
        _fail("--phases needs --trace: the phases are a replayed trace's")
    try:
        p = platform.load(platform_file)
        size = workload.parse_size(stripe_size) if stripe_size else None
        if stripe_count is not None and not (stripe_count == -1 or 1 <= stripe_count <= p["targets.count"]):
            raise workload.WorkloadError(f"--stripe-count {stripe_count}: use 1..{p['targets.count']} or -1 (all)")
        w, names = _workload(p, ctx.args, trace, jobs, logfs, ranks, ranks_per_node, stripe_count, size)
        outcome = engine.run(p, workload.logfs(w, p) if logfs else w, wall_budget)
    except (platform.PlatformError, workload.WorkloadError, engine.SimError) as e:
        _fail(str(e))
    except paths.NativeMissing as e:
        _fail(f"{e} (the simulator needs SimGrid: Debian's libsimgrid-dev)")
    if html_out is not None:
        _write_page(outcome, names, html_out)
    if trace is not None:
        _print_replay(outcome, json_out, phases)
        return
    docs = [results.job_document(outcome, j) for j in range(len(names))]
    if json_out:
        print(json.dumps(docs[0] if jobs is None else {"jobs": [{"name": n, **d} for n, d in zip(names, docs)]}))
        return
    for name, doc in zip(names, docs):
        if jobs is not None:
            print(f"{name} (starts at {doc['simulator']['start']:g} s)")
        print_result(doc, False)
    s = docs[0]["simulator"]
    print(f"simulated {s['simulated_time']:.6g} s in {s['wall_seconds']:.3g} s: {s['operations']:,} operations, "
          f"{s['transfers']:,} transfers")


def _workload(p, bench_args: list[str], trace: Path | None, jobs: Path | None, logfs: bool, ranks: int,
              ranks_per_node: int | None, stripe_count: int | None, stripe_size: int | None):
    """The workload `run` simulates, and its jobs' names: a job mix, a replayed trace or one bench pattern."""
    from ioloom.sim import workload

    if trace is not None and jobs is not None:
        raise workload.WorkloadError("give --trace or --jobs, not both")
    if (trace is not None or jobs is not None) and bench_args:
        raise workload.WorkloadError("--trace and --jobs take the calls from their file: give no bench options "
                                     "after --")
    if jobs is not None:
        if logfs:
            raise workload.WorkloadError("with --jobs, re-weave a job by `logfs = true` in its [[job]] table")
        return workload.job_mix(p, jobs)
    if trace is not None:
        return workload.from_trace(p, trace, ranks_per_node, stripe_count=stripe_count, stripe_size=stripe_size), \
            ["trace"]
    w = workload.bench_job(p, workload.parse_bench_args(bench_args), ranks, ranks_per_node or
                           p["clients.ranks_per_node"], stripe_count=stripe_count, stripe_size=stripe_size)
    return w, ["job 0"]


def _write_page(outcome, names: list[str], path: Path) -> None:
    from ioloom.sim import page

    title = ", ".join(f"{n}: {r} ranks" for n, (_, r, _, _) in zip(names, outcome.workload.jobs))
    try:
        outputs.save(page.render(outcome, names, title), path)
    except OSError as e:
        _fail(f"cannot write {path}: {e.strerror}")
    typer.echo(f"figures: {path}", err=True)


def _print_replay(outcome, json_out: bool, phases: bool) -> None:
    from ioloom.sim import results
    from ioloom.sim.phases import print_replay_phases, replay_phases

    doc = results.replay_document(outcome)
    if phases:
        doc["phases"] = replay_phases(outcome.workload, outcome.times)
    if json_out:
        print(json.dumps(doc))
        return
    print(f"replayed {doc['operations']:,} calls of {doc['ranks']} rank(s) on {doc['files']} file(s): traced "
          f"{doc['traced_time']:.6g} s, simulated {doc['simulated_time']:.6g} s")
    for name, c in doc["calls"].items():
        print(f"  {name:8} {c['calls']:>9,} calls {c['bytes']:>15,} B  traced {c['traced_s']:.6g} s  simulated "
              f"{c['simulated_s']:.6g} s")
    if phases:
        print_replay_phases(doc["phases"])


def _scratch(directory: Path | None):
    """A temporary directory under `directory` (default: the system's temporary directory) for bench io's files."""
    import tempfile

    try:
        return tempfile.TemporaryDirectory(prefix="ioloom-sim-cal-", dir=directory)
    except OSError as e:
        _fail(f"cannot make a scratch directory in {directory}: {e.strerror}: give a writable --dir")


def _load() -> str:
    from ioloom.bench.stats import load_average

    return f"load average {load_average()}"


@app.command("calibrate")
def calibrate_command(output: Path = typer.Option(Path("machine.toml"), "-o", "--output",
                                                  help="Platform file to write."),
                      directory: Path = typer.Option(None, "--dir", help="Where bench io writes (a disk-backed "
                                                     "directory) [the temporary directory]."),
                      size: str = typer.Option("256m", "--size", help="Bytes of the measuring write."),
                      repeats: int = typer.Option(3, "--repeats", min=1, help="Runs per figure (their median)."),
                      mpi_name: str = typer.Option(None, "--mpi", help="openmpi or mpich [the first found].")) -> None:
    """Measure this machine's disk with `ioloom bench io` (fsync'd writes) and its copy into the page cache under
    the machine's load, and write them as a platform file: one node, one target, the page cache as the write-back
    cache (docs/sim.md, "Calibration")."""
    from ioloom import paths
    from ioloom.bench.io import BenchFailed
    from ioloom.sim import calibrate, workload

    output.parent.mkdir(parents=True, exist_ok=True)  # a bad -o is refused before measuring, not after
    try:
        workload.parse_size(size)
        with _scratch(directory) as scratch:
            disk = calibrate.measure(Path(scratch), size, mpi_name, repeats)
        doc = calibrate.platform_doc(disk)
    except (workload.WorkloadError, ValueError, BenchFailed, LookupError, paths.NativeMissing, OSError) as e:
        _fail(f"calibration failed: {e}")
    header = (f"ioloom sim calibrate: this machine's disk measured by ioloom bench io (median of {repeats} runs, "
              f"{_load()}).\nread_bandwidth is not measured (it needs the page cache dropped): it repeats the "
              "write bandwidth.")
    try:
        outputs.save(calibrate.to_toml(doc, header), output)
    except OSError as e:
        _fail(f"cannot write {output}: {e.strerror}")
    c = disk.client
    print(f"copy into the page cache {c.copy_bandwidth / 1e6:,.0f} MB/s per core, the first {c.copy_burst / 2**20:.3g} "
          f"MiB after a wait ahead of a load of {c.cpu_load:.3g}, {c.copy_efficiency:.3g} of it per core with "
          f"{doc['clients']['cores']} copies at once, {c.oversubscribed_efficiency:.3g} with twice as many; device "
          f"{disk.write_bandwidth / 1e6:,.0f} "
          f"MB/s, fsync commit {disk.commit * 1e3:.3g} ms, create {disk.create * 1e6:.3g} us, close "
          f"{disk.close * 1e6:.3g} us; dirty limit {doc['cache']['dirty_limit'] / 2**20:,.0f} MiB, flush threshold "
          f"{doc['cache']['flush_threshold'] / 2**20:,.0f} MiB ({_load()})")
    print(f"platform written: {output}")


def _calibration_check(platform_file: Path | None, rounds: int, quick: bool, directory: Path | None,
                       mpi_name: str | None, size: str) -> None:
    import subprocess

    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from ioloom import paths
    from ioloom.bench.io import BenchFailed
    from ioloom.bench.stats import rounds_allowed, spread
    from ioloom.sim import calibrate, engine, platform, workload

    too_few = rounds_allowed(rounds, quick, "--rounds")
    if too_few:
        _fail(too_few)
    before = _load()
    try:
        workload.parse_size(size)
        p = platform.load(platform_file) if platform_file else None
        with _scratch(directory) as scratch:
            figures = calibrate.check(Path(scratch), rounds, p, mpi_name, size, progress=lambda r: typer.echo(
                f"round {r + 1} of {rounds} ({_load()})", err=True))
    except (platform.PlatformError, engine.SimError, ValueError, BenchFailed, LookupError, paths.NativeMissing,
            OSError, subprocess.SubprocessError, workload.WorkloadError) as e:
        _fail(f"calibration check failed: {e}")
    table = Table("run", "measured", "predicted", "predicted / measured", "rounds within 20%",
                  title=escape(f"ioloom bench io -- {calibrate.CHECK_ARGS}: median [min, max] over {rounds} rounds, "
                               + (f"platform {platform_file}" if platform_file else
                                  f"each round calibrated first (--size {size})")))

    def cell(values, scale=1e6, fmt=",.0f") -> str:
        s = spread([v / scale for v in values])
        return f"{s['median']:{fmt}} [{s['min']:{fmt}}, {s['max']:{fmt}}]"
    def row(label: str, measured: list[float], predicted: list[float], scale: float, fmt: str, within: str) -> None:
        ratios = [a / b for a, b in zip(predicted, measured)]
        table.add_row(label, cell(measured, scale, fmt), cell(predicted, scale, fmt), cell(ratios, 1, ".3g"), within)
    for n, f in figures.items():
        within = f"{calibrate.within(f)} of {rounds}"
        if n == calibrate.DEMO:
            row("demo, 4 ranks: traced s", f["measured"], f["predicted"], 1, ".3g", within)
            continue
        row(f"{n} rank(s): MB/s", f["measured"], f["predicted"], 1e6, ",.0f", within)
        for t in calibrate.PHASE_TIMES:  # where the time went: the slowest rank's copies and write-back
            row(f"  {t} s (slowest rank)", f[f"measured {t}"], f[f"predicted {t}"], 1, ".3g", "")
    Console(width=160).print(table)
    print(f"{before} before, {_load()} after")


@app.command("validate")
def validate_command(ctx: typer.Context,
                     check: list[str] = typer.Option(None, "--check", help="Run only these checks (repeatable): "
                                                     "table-6.3, table-6.2, delta-graph, ior-tuning, "
                                                     "small-beside-big, four-ior-jobs, wan-chunks, "
                                                     "tipping-point."),
                     calibration: bool = typer.Option(False, "--calibration", help="Instead: measure ioloom bench io "
                                                      "on 1, 2 and 4 ranks on this machine's disk and the demo "
                                                      "program's time, and predict them, round by round "
                                                      "(docs/sim.md, \"Calibration\")."),
                     platform_file: Path = typer.Option(None, "--platform", "-p", help="With --calibration: predict "
                                                        "on this platform file [each round calibrates first]."),
                     rounds: int = typer.Option(10, "--rounds", min=1, help="With --calibration: interleaved rounds."),
                     quick: bool = typer.Option(False, "--quick", help="With --calibration: allow fewer than 10 "
                                                "rounds (a quick look)."),
                     directory: Path = typer.Option(None, "--dir", help="With --calibration: where bench io writes."),
                     size: str = typer.Option("256m", "--size", help="With --calibration and no --platform: bytes of "
                                              "each round's measuring write (sim calibrate --size)."),
                     mpi_name: str = typer.Option(None, "--mpi", help="With --calibration: openmpi or mpich.")) -> None:
    """Compare the simulator with the documents' tables and equations; exits 1 if a row disagrees."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from ioloom.sim import validate

    if calibration:
        _calibration_check(platform_file, rounds, quick, directory, mpi_name, size)
        return
    _refuse_calibration_options(ctx)

    unknown = sorted(set(check or []) - set(validate.CHECKS))
    if unknown:
        _fail(f"unknown check {', '.join(unknown)}: use {', '.join(validate.CHECKS)}")
    rows = validate.run(check or None)
    table = Table("check", "document", "simulated", "tolerance", "", "note")
    for r in rows:
        table.add_row(escape(r.check), f"{r.document:.4g}", f"{r.simulated:.4g}", r.tolerance,
                      "ok" if r.ok else "[red]DIFFERS[/]", escape(r.note))
    Console(width=160).print(table)
    bad = sum(not r.ok for r in rows)
    print(f"{len(rows) - bad} of {len(rows)} rows agree")
    if bad:
        raise typer.Exit(1)


CALIBRATION_OPTIONS = ("platform_file", "rounds", "quick", "directory", "size", "mpi_name")


def _refuse_calibration_options(ctx: typer.Context) -> None:
    """Options of --calibration given without it would be ignored silently: refused, named as typed."""
    import click

    given = [p.opts[0] for p in ctx.command.params if p.name in CALIBRATION_OPTIONS
             and ctx.get_parameter_source(p.name) is not click.core.ParameterSource.DEFAULT]
    if given:
        _fail(f"{', '.join(given)}: for --calibration only; add --calibration, or leave "
              f"{'it' if len(given) == 1 else 'them'} out")


@app.command("sweep", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def sweep_command(ctx: typer.Context,
                  platform_file: Path = typer.Option(None, "--platform", "-p", help="Platform file (TOML or YAML)."),
                  ranks: str = typer.Option("16,64", "--ranks", help="Rank counts, e.g. 64,256,1024."),
                  counts: str = typer.Option("1,4,16", "--stripe-count", help="Stripe counts (-1: all targets)."),
                  sizes: str = typer.Option("1m,4m", "--stripe-size", help="Stripe sizes, e.g. 1m,4m,64m."),
                  ranks_per_node: int = typer.Option(16, "--ranks-per-node", min=1, help="Ranks per node."),
                  scheduler: str = typer.Option(None, "--scheduler", help="A Dask scheduler's address (tcp://host:"
                                                "port); default: a LocalCluster on this machine."),
                  workers: int = typer.Option(2, "--workers", min=1, help="LocalCluster worker processes."),
                  serial: bool = typer.Option(False, "--serial", help="Run every point in this process instead."),
                  json_out: bool = typer.Option(False, "--json", help="Print the rows as JSON.")) -> None:
    """Sweep ranks x stripe count x stripe size for the bench pattern after --, each point one simulation run on
    Dask (the rows are the same whichever executor runs them)."""
    from ioloom.sim import engine, platform, sweep, workload

    try:
        p = platform.load(platform_file)
        args = " ".join(ctx.args)
        workload.parse_bench_args(args)
        todo = sweep.points(units.numbers(ranks, "--ranks"), units.numbers(counts, "--stripe-count", also=(-1,)),
                            units.sizes(sizes, "--stripe-size"))
        too_wide = [c for c in {pt.stripe_count for pt in todo} if c > p["targets.count"]]
        if too_wide:
            raise workload.WorkloadError(f"--stripe-count {too_wide[0]} exceeds the platform's {p['targets.count']} "
                                         "targets")
        rows = sweep.run(p.values, args, ranks_per_node, todo, scheduler, workers, serial)
    except (platform.PlatformError, workload.WorkloadError, units.UnitError, engine.SimError, ConnectionError) as e:
        _fail(str(e))
    if json_out:
        print(json.dumps(rows))
        return
    from rich.console import Console
    from rich.table import Table

    columns = list(rows[0])
    table = Table(*columns, title=f"ioloom sim sweep: {args}")
    for r in rows:
        table.add_row(*(f"{r[c] / 2**20:,.1f}" if c.endswith("_bw") else f"{r[c]:.6g}" if isinstance(r[c], float)
                        else str(r[c]) for c in columns))
    Console(width=160).print(table)
    print("bandwidths in MiB/s")


@app.command("coord")
def coord_command(ranks_a: int = typer.Option(64, min=1, help="Ranks of job A (its cores N_A)."),
                  ranks_b: int = typer.Option(64, min=1, help="Ranks of job B."),
                  bench_a: str = typer.Option("-F -b 16m -t 1m -w", help="ioloom bench io options of A's phase."),
                  bench_b: str = typer.Option("-F -b 4m -t 1m -w", help="ioloom bench io options of B's phase."),
                  points: int = typer.Option(9, min=2, help="Offsets dt in [-T_B, T_A]."),
                  metric: str = typer.Option("core-seconds", help="What dynamic minimises: core-seconds or factors."),
                  min_gain: float = typer.Option(MIN_GAIN, "--min-gain", min=0.0, max=0.99,
                                                 help="dynamic's least gain to serialise (coord serve --min-gain)."),
                  targets: int = typer.Option(4, min=1, help="Targets of the default platform."),
                  platform: str = typer.Option(None, "-p", "--platform", help="Platform file (docs/sim.md)."),
                  ranks_per_node: int = typer.Option(16, min=1, help="Ranks per node."),
                  output: Path = typer.Option(None, "-o", "--output", help="Also write coord.json, coord.html here."),
                  as_json: bool = typer.Option(False, "--json", help="Print the rows as JSON."),
                  trace_a: Path = typer.Option(None, "--trace-a", help="Job A replays this trace (a directory of "
                                               "`ioloom run`), its phases announced as the predictor foresees them "
                                               "beside oracle announcements; needs --trace-b (then --ranks-a/-b and "
                                               "--bench-a/-b are not used)."),
                  trace_b: Path = typer.Option(None, "--trace-b", help="Job B replays this trace.")) -> None:
    """Two simulated jobs' Δ-graph, uncoordinated and under each ioloom coord policy."""
    from ioloom.sim import coord

    if (trace_a is None) != (trace_b is None):
        _fail("give both --trace-a and --trace-b (a trace per job), or neither")
    coord.main(ranks_a, ranks_b, bench_a, bench_b, points, metric, min_gain, targets, platform, ranks_per_node,
               output, as_json, (trace_a, trace_b) if trace_a and trace_b else None)
