"""`ioloom advise`: the documents' models as commands. Every subcommand prints a readable answer, or JSON with
--json. Formulas and sources: docs/models.md. The models (and numpy) are imported when a subcommand runs, so
that the rest of `ioloom` starts fast."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from ioloom import units

app = typer.Typer(help="Models of contention, interference, dedicated cores and energy, with advice.",
                  no_args_is_help=True)
JSON = typer.Option(False, "--json", help="Print the result as JSON.")
TRACE = typer.Option(None, "--trace", help="A trace directory (ioloom run -o DIR) to measure the inputs from.")
def _plain(value):
    if dataclasses.is_dataclass(value):
        return {k: _plain(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def _emit(as_json: bool, result: dict, render) -> None:
    if as_json:
        print(json.dumps(_plain(result), indent=2))
    else:
        render(Console(), result)


def _refuse(error: ValueError) -> None:
    typer.echo(f"ioloom advise: {error}", err=True)
    raise typer.Exit(2)


def _table(title: str, columns: list[str], rows) -> Table:
    table = Table(title=title)
    for c in columns:
        table.add_column(c, justify="right", overflow="fold")
    for row in rows:
        table.add_row(*[f"{v:.3f}" if isinstance(v, float) else str(v) for v in row])
    return table


@app.command("ost-load")
def ost_load(targets: int = typer.Option(..., min=1, help="Storage targets (OSTs) in the file system, D_total."),
             stripes: list[int] = typer.Option(..., min=1, help="Stripe count of each job (repeat per job, or give one "
                                                          "with --jobs)."),
             jobs: int | None = typer.Option(None, min=1, help="Number of jobs that all request the one --stripes."),
             as_json: bool = JSON) -> None:
    """Targets in use, requested and their mean load as jobs start (Wright Eqs. 6.1-6.4), how many targets
    exactly k jobs share, and the expected load of the busiest target."""
    from ioloom import models
    try:
        if jobs is not None:
            if len(stripes) != 1:
                raise ValueError("--jobs repeats a single --stripes value; give one --stripes, or one per job")
            requests = [stripes[0]] * models._check.count("jobs", jobs)
        else:
            requests = stripes
        result = {"targets": targets, "requests": requests, "rows": models.ost_load(requests, targets),
                  "shared_by_k": models.sharing_distribution(requests, targets),
                  "expected_max_load": models.expected_max_load(requests, targets)}
    except ValueError as e:
        _refuse(e)

    def render(con, r):
        con.print(_table(f"Eqs. 6.1-6.4, {targets} targets", ["jobs", "D_inuse", "D_req", "D_load"],
                         [(x.jobs, x.d_inuse, x.d_req, x.d_load) for x in r["rows"]]))
        con.print(_table(f"targets shared by exactly k of {len(requests)} jobs", ["k", "targets"],
                         enumerate(r["shared_by_k"].tolist())))
        con.print(f"expected jobs on the most loaded target: {r['expected_max_load']:.3f}")
    _emit(as_json, result, render)


@app.command("plfs")
def plfs(targets: int = typer.Option(..., min=1, help="Storage targets, D_total."),
         ranks: list[int] = typer.Option(..., min=1, help="Rank counts to evaluate (repeatable)."),
         files_per_rank: int = typer.Option(1, min=1, help="Data files each rank creates."),
         stripes_per_file: int = typer.Option(2, min=1, help="Stripes per file (Lustre default in Wright: 2)."),
         load: float = typer.Option(3.0, min=0.0, help="Load whose crossing (the tipping point) to find."),
         as_json: bool = JSON) -> None:
    """Mean target load of PLFS's per-rank files (Wright Eqs. 6.5-6.6) and the rank count past a given load."""
    from ioloom import models
    try:
        rows = [models.plfs_load(n, targets, files_per_rank, stripes_per_file) for n in ranks]
        tip = models.plfs_tipping_point(load, targets, files_per_rank, stripes_per_file)
    except ValueError as e:
        _refuse(e)
    result = {"targets": targets, "rows": [dict(ranks=n, **dataclasses.asdict(r)) for n, r in zip(ranks, rows)],
              "load": load, "tipping_point_ranks": tip}

    def render(con, r):
        con.print(_table(f"Eqs. 6.5-6.6, {targets} targets", ["ranks", "D_inuse", "D_req", "D_load"],
                         [(x["ranks"], x["d_inuse"], x["d_req"], x["d_load"]) for x in r["rows"]]))
        con.print(f"the load passes {load:g} at {tip} ranks")
    _emit(as_json, result, render)


@app.command("striping")
def striping(targets: int = typer.Option(..., min=1, help="Storage targets, D_total."),
             writers: int | None = typer.Option(None, min=1, help="Writing processes."),
             bytes_per_writer: str | None = typer.Option(None, help="Bytes each writer writes, e.g. 256MiB."),
             request_size: str | None = typer.Option(None, help="Size of each write request, e.g. 1MiB."),
             layout: str = typer.Option("shared", help="shared (one file) or per-process (a file per writer)."),
             strided: bool = typer.Option(False, help="Writers interleave blocks in the shared file."),
             jobs: int = typer.Option(1, min=1, help="Jobs like this one writing at the same time."),
             nodes: int | None = typer.Option(None, min=1, help="Compute nodes (for cb_nodes); default: writers."),
             max_load: float = typer.Option(1.25, min=0.0, help="Highest acceptable mean target load (Eq. 6.4)."),
             probe: Path | None = typer.Option(None, "--probe", help="A probe store (ioloom probe run): place "
                                               "chunks on its targets, slow ones left out, correlated ones "
                                               "spread apart."),
             simulate: bool = typer.Option(False, "--simulate", help="Also rank stripe counts and sizes and the "
                                           "log layer by simulating the job (ioloom sim; with --trace, replaying "
                                           "it)."),
             sim_platform: Path | None = typer.Option(None, "--platform", help="With --simulate: the platform "
                                                      "file (docs/sim.md); --targets sets its targets."),
             trace: Path | None = TRACE, as_json: bool = JSON) -> None:
    """Stripe count and size, ROMIO hints, whether a log layer helps, and Wan's chunk plan, each with why."""
    from ioloom import models
    try:
        if sim_platform is not None and not simulate:
            raise ValueError("--platform is the simulated machine of --simulate: give both, or neither")
        if trace is not None:
            pattern = _trace_pattern(trace)
        else:
            if writers is None or bytes_per_writer is None or request_size is None:
                raise ValueError("give --writers, --bytes-per-writer and --request-size, or --trace")
            if layout not in ("shared", "per-process"):
                raise ValueError(f"--layout must be shared or per-process, got {layout!r}")
            pattern = models.striping.Pattern(writers, units.size(bytes_per_writer, "--bytes-per-writer"),
                                             units.size(request_size, "--request-size"), layout == "shared",
                                             not strided)
        placement = _probe_placement(probe) if probe is not None else None
        advice = models.striping.advise(pattern, targets, jobs, nodes, max_load,
                                        placement.value if placement else None)
    except ValueError as e:
        _refuse(e)
    result = {"pattern": pattern, **dataclasses.asdict(advice)}
    if placement:
        result["placement"] = dataclasses.asdict(placement)
    if simulate:
        result["simulated"] = _simulated(pattern, advice, targets, nodes, trace, sim_platform)

    def render(con, r):
        items = [("stripe count", advice.stripe_count), ("stripe size", advice.stripe_size),
                 *advice.hints.items(), ("log layer helps", advice.log_layer), ("chunking", advice.chunks),
                 *([("targets", placement)] if placement else [])]
        table = Table(title=f"advice for {pattern.writers} writers x {pattern.bytes_per_writer} B "
                            f"in {pattern.request_size} B requests")
        for c in ("what", "value", "why"):
            table.add_column(c)
        for name, a in items:
            table.add_row(name, json.dumps(a.value) if isinstance(a.value, dict) else str(a.value), a.reason)
        con.print(table)
        if advice.plan:
            con.print(_table("chunk plan (first writers)", ["writer", "chunk", "offset", "bytes", "target"],
                             [tuple(p.values()) for p in advice.plan]))
        if simulate:
            con.print(_table("simulated, fastest first (ioloom sim, fsync included)",
                             ["stripe count", "stripe size", "log layer", "seconds", "MB/s"],
                             [(c["stripe_count"], c["stripe_size"], c["logfs"], f"{c['seconds']:.4g}",
                               f"{c['bandwidth'] / 1e6:,.0f}") for c in r["simulated"]]))
    _emit(as_json, result, render)


def _simulated(pattern, advice, targets: int, nodes: int | None, trace: Path | None,
               sim_platform: Path | None) -> list[dict]:
    """The simulator's ranking of candidate layouts for the pattern (or the trace, replayed)."""
    from ioloom import paths
    from ioloom.sim import engine, platform, ranking, workload

    per_node = -(-pattern.writers // nodes) if nodes else 16
    args = ranking.pattern_args(pattern.writers, pattern.bytes_per_writer, pattern.request_size,
                                pattern.shared_file, pattern.contiguous)
    try:
        found = ranking.rank(targets, (advice.stripe_count.value, advice.stripe_size.value), trace, args,
                             pattern.writers, per_node, sim_platform)
    except (platform.PlatformError, workload.WorkloadError, engine.SimError, paths.NativeMissing) as e:
        _refuse(ValueError(f"--simulate: {e}"))
    return [dataclasses.asdict(c) for c in found]


def _probe_placement(store: Path):
    """The targets of a probe store to place chunks on, by preference, and why (docs/probe.md)."""
    from ioloom.models.striping import Advice
    from ioloom.probe import analysis
    from ioloom.probe import store as probe_store

    s = analysis.summarise(probe_store.load(store))
    order = analysis.preferred_targets(s)
    why = [f"best median first ({len(order)} of {len(s.per_target)} targets measured in {store})"]
    if s.slow:
        why.append(f"left out as slow (median below half the best): {', '.join(s.slow)}")
    if s.clusters:
        why.append("members of a group that moves together (r >= 0.4) spread apart: "
                   + "; ".join(", ".join(g) for g in s.clusters))
    return Advice(order, "; ".join(why))


@app.command("interference")
def interference(job_counts: str | None = typer.Option(None, help="Distribution of running applications, "
                                                                     "n:P(X=n) pairs, e.g. '1:0.2,2:0.5,3:0.3'."),
                 swf: Path | None = typer.Option(None, help="Or: a Standard Workload Format job log to take "
                                                                "P(X = n) from (time-weighted)."),
                 mu: float | None = typer.Option(None, min=0.0, max=1.0, help="E(mu), mean fraction of time in I/O."),
                 t_a: float | None = typer.Option(None, min=0.0, help="I/O phase of A alone (s)."),
                 t_b: float | None = typer.Option(None, min=0.0, help="I/O phase of B alone (s)."),
                 n_a: int = typer.Option(1, min=1, help="Cores of A (bandwidth share and machine time)."),
                 n_b: int = typer.Option(1, min=1, help="Cores of B."),
                 dt: float | None = typer.Option(None, help="B starts dt seconds after A (else: a Δ-graph)."),
                 points: int = typer.Option(11, min=2, help="Points of the Δ-graph."),
                 metric: str = typer.Option("core-seconds", help="CALCioM's f: core-seconds (sum N_X T_X, Eq. 6.4) "
                                                                 "or factors (sum of interference factors)."),
                 as_json: bool = JSON) -> None:
    """P(two or more applications in I/O) (Dorier Eq. 6.2), the Δ-graph of two applications under
    proportional sharing, and CALCioM's choice by machine time wasted (Eq. 6.4) or the sum of I_X."""
    from ioloom import models
    result: dict = {}
    try:
        if job_counts is not None or swf is not None or mu is not None:
            if (job_counts is None) == (swf is None) or mu is None:
                raise ValueError("give --mu with one of --job-counts or --swf")
            if swf is not None:
                dist = models.concurrency_from_swf(swf)
            else:
                assert job_counts is not None  # exactly one of the two, checked above
                dist = _pairs("--job-counts", job_counts)
            result["job_counts"] = dist
            result["p_two_or_more_in_io"] = models.p_concurrent_io(dist, mu)
        if t_a is not None or t_b is not None:
            if t_a is None or t_b is None:
                raise ValueError("--t-a and --t-b go together")
            dts = [dt] if dt is not None else [g.dt for g in models.delta_graph(t_a, t_b, n_a, n_b, points)]
            result["runs"] = [models.proportional_sharing(t_a, t_b, d, n_a, n_b) for d in dts]
            result["choices"] = [models.calciom_choice(n_a, t_a, n_b, t_b, d, metric) for d in dts]
        if not result:
            raise ValueError("give --job-counts with --mu, and/or --t-a with --t-b")
    except ValueError as e:
        _refuse(e)

    def render(con, r):
        if "p_two_or_more_in_io" in r:
            con.print(f"P(two or more applications in I/O) = {r['p_two_or_more_in_io']:.3f}")
        if "runs" in r:
            con.print(_table(f"Δ-graph (proportional sharing) and CALCioM's choice (f: {metric})",
                             ["dt", "T_A", "T_B", "I_A", "I_B", "interfere", "serialise", "interrupt", "choice"],
                             [(g.dt, g.t_a, g.t_b, g.i_a, g.i_b, c.interfere, c.serialise, c.interrupt, c.best)
                              for g, c in zip(r["runs"], r["choices"])]))
    _emit(as_json, result, render)


@app.command("dedicated-core")
def dedicated_core(compute: float | None = typer.Option(None, min=0.0, help="Compute time C_std (s, per iteration "
                                                                      "or whole run)."),
                   write: float | None = typer.Option(None, min=0.0, help="Write time W_std over the same span (s)."),
                   cores_per_node: int = typer.Option(..., min=2, help="Cores per node, N."),
                   write_dedicated: float | None = typer.Option(None, min=0.0, help="Write time of the dedicated core "
                                                                              "W_ded (default: W_std)."),
                   trace: Path | None = TRACE, as_json: bool = JSON) -> None:
    """Whether one dedicated I/O core per node pays off (Damaris, Dorier Eq. 3.2) and the expected gain."""
    from ioloom import models
    try:
        measured = None
        if trace is not None:
            measured = _trace_split(trace)
            compute, write = measured.compute, measured.write
        if compute is None or write is None:
            raise ValueError("give --compute and --write, or --trace")
        verdict = models.dedicated_core(compute, write, cores_per_node, write_dedicated)
    except ValueError as e:
        _refuse(e)
    result = {"compute": compute, "write": write, "measured_from_trace": measured, **dataclasses.asdict(verdict)}

    def render(con, r):
        con.print(f"standard: W + C = {r['standard']:.3f} s; dedicated core: max(C N/(N-1), W_ded) = "
                  f"{r['dedicated']:.3f} s; gain {r['gain']:.3f} s (speedup {r['speedup']:.3f})")
        con.print(("[green]dedicate a core[/green]: " if r["worthwhile"] else "[yellow]keep all cores computing"
                   "[/yellow]: ") + r["reason"])
    _emit(as_json, result, render)


@app.command("energy")
def energy(t_base: float = typer.Option(..., min=0.0, help="Time of one iteration on one core of one node (s)."),
           iterations: int = typer.Option(..., min=1, help="Iterations, n_iter."),
           cores_per_node: int = typer.Option(..., min=1, help="Cores per node."),
           nodes: int = typer.Option(..., min=1, help="Nodes in the allocation."),
           p_max: float = typer.Option(..., min=0.0, help="Power of a computing node (W)."),
           p_idle: float = typer.Option(..., min=0.0, help="Power of an idle node (W)."),
           io_time: float = typer.Option(0.0, min=0.0, help="Total time in I/O phases under time partitioning (s)."),
           dedicated_cores: int = typer.Option(1, min=1, help="Dedicated cores per node."),
           dedicated_nodes: int = typer.Option(1, min=1, help="Dedicated nodes."),
           s_core: float = typer.Option(1.0, min=0.0, max=1.0,
                                        help="Scaling efficiency across cores, s_core in (0, 1]."),
           s_node: float = typer.Option(1.0, min=0.0, max=1.0,
                                        help="Scaling efficiency across nodes, s_node in (0, 1]."),
           as_json: bool = JSON) -> None:
    """Run time, power and energy (Dorier Eqs. 5.1-5.4) for time partitioning, dedicated cores, dedicated nodes."""
    from ioloom import models
    common: dict[str, Any] = dict(t_base=t_base, iterations=iterations, cores_per_node=cores_per_node, nodes=nodes,
                                  p_max=p_max, p_idle=p_idle, io_time=io_time, s_core=s_core, s_node=s_node)
    try:
        rows = [models.energy("time-partitioning", **common),
                models.energy("dedicated-cores", dedicated=dedicated_cores, **common),
                models.energy("dedicated-nodes", dedicated=dedicated_nodes, **common)]
    except ValueError as e:
        _refuse(e)
    result = {"approaches": rows, "least_energy": min(rows, key=lambda r: r.energy).approach}

    def render(con, r):
        con.print(_table("Eqs. 5.1-5.4", ["approach", "T_sim (s)", "P_sim per node (W)", "nodes", "energy (J)"],
                         [(x.approach, x.t_sim, x.p_sim, x.nodes, x.energy) for x in r["approaches"]]))
        con.print(f"least energy: {r['least_energy']}")
    _emit(as_json, result, render)


def _pairs(name: str, text: str) -> dict[int, float]:
    try:
        return {int(n): float(p) for n, p in (item.split(":") for item in text.split(",") if item.strip())}
    except ValueError:
        raise ValueError(f"{name} must be n:probability pairs separated by commas, e.g. '1:0.2,2:0.8', "
                         f"got {text!r}") from None


def _trace_events(path: Path):
    from ioloom.stats_cli import load_or_exit
    return load_or_exit(path).ops_named()


def _trace_pattern(path: Path):
    from ioloom.models import from_trace
    return from_trace.pattern(_trace_events(path))


def _trace_split(path: Path):
    from ioloom.models import from_trace
    return from_trace.compute_write_split(_trace_events(path))
