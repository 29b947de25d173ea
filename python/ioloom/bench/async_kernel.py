"""`ioloom bench async`: the CM1-like kernel of libioloom-async (native/async/cm1.c) in each mode, as Dorier's
Ch. 3 measures Damaris: the write time the simulation saw, the iteration-time jitter, the run time and how idle
the dedicated cores were, with Eq. 3.2's prediction beside the measured outcome.

Storage is modelled by the writers' bandwidth limit (the configuration's writer.bandwidth), so that a local disk's
page cache does not make every write free: --node-bandwidth is shared by a node's writers (each of the N
processes in the synchronous and helper-thread modes, the k dedicated cores otherwise). Each client computes for
--compute seconds per iteration, N/(N-k) times that with k dedicated cores (the same work on fewer cores, Eq.
3.2's C_ded). Modes run once per round in a rotating order; figures are medians over rounds with min and max,
and ratios to the synchronous run of the same round. The run time is the clients' iterations plus finalize (the
writes drained), not MPI's and the library's start-up."""
from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path

import typer

from ioloom import units
from ioloom.bench import app
from ioloom.bench.stats import rounds_allowed, spread

MODE_ORDER = ("synchronous", "helper-thread", "dedicated-cores")


class KernelRunFailed(RuntimeError):
    """A run of the kernel exited with an error: its figures would measure nothing."""


def per_run(run: dict, counters_path: Path, mode: str) -> dict:
    """One run's figures: visible write time per iteration (median and total), jitter, run time, idle."""
    from ioloom import async_io
    out = async_io.open(counters_path)
    servers = [r for r in out.ranks if r["role"] == 1]
    idle = (statistics.mean(1 - r["writer_busy_seconds"] / r["writer_wall_seconds"] for r in servers)
            if servers else None)
    return {**timing_figures(run), "idle_fraction": idle, "blocked": out.counters()["blocked"], "mode": mode}


def timing_figures(run: dict) -> dict:
    """A run's timings (rank 0's, or the slowest rank's): the write seen per iteration (median, total and standard
    deviation: the storage's variability as the synchronous mode sees it), the iteration-time jitter, the run."""
    visible, period = run["visible"], run["iteration_seconds"]
    return {"visible_median": statistics.median(visible), "visible_total": sum(visible),
            "visible_std": statistics.pstdev(visible), "jitter_std": statistics.pstdev(period),
            "jitter_max_over_median": max(period) / statistics.median(period),
            "run_seconds": run["run_seconds"] + run["finalize_seconds"]}


def one_round(impl, ranks: int, compute: float, dims, nvars: int, iterations: int, bandwidth: int, work: Path,
              order, fsync: bool = False, sleep: bool = False, variability: float = 0.0) -> dict:
    from ioloom.async_io.kernel import Setup, run_kernel
    from ioloom.bench import async_adios2
    results = {}
    for mode in order:
        if mode in async_adios2.ASYNC_WRITE:
            timed = async_adios2.run_ranks(ranks, work / mode, mode, dims, nvars, iterations, compute, sleep)
            results[mode] = async_adios2.per_run(timed, mode)
            continue
        writers = 1 if mode == "dedicated-cores" else ranks
        setup = Setup(work / mode, mode=mode, dims=dims, buffer=256 << 20, bandwidth=bandwidth // writers,
                      events=(), variables=tuple(f"var{i}" for i in range(nvars)), fsync=fsync,
                      variability=variability)
        c = compute * ranks / (ranks - 1) if mode == "dedicated-cores" else compute
        run = run_kernel(impl, ranks, setup.write(work / f"{mode}.yaml"), setup, iterations, c, timeout=600,
                         sleep=sleep)
        if run.returncode != 0:
            raise KernelRunFailed(f"{mode} run failed (exit {run.returncode}): {run.stderr.strip()[-300:]}")
        results[mode] = per_run(run.result, setup.directory, mode)
    return results


def summarise(rounds: list[dict], compute: float, ranks: int) -> dict:
    from ioloom.async_io.cli import advice
    summary = {}
    for mode in rounds[0]:
        rs = [r[mode] for r in rounds]
        summary[mode] = {k: spread([r[k] for r in rs]) for k in
                         ("visible_median", "visible_std", "jitter_std", "jitter_max_over_median",
                                                           "run_seconds")}
        if mode != "synchronous":
            summary[mode]["visible_ratio"] = spread([r[mode]["visible_median"] / max(r["synchronous"]
                                                     ["visible_median"], 1e-9) for r in rounds])
            summary[mode]["jitter_reduction"] = spread([r["synchronous"]["jitter_std"] / max(r[mode]["jitter_std"],
                                                        1e-9) for r in rounds])
            summary[mode]["run_ratio"] = spread([r[mode]["run_seconds"] / r["synchronous"]["run_seconds"]
                                                 for r in rounds])
        if mode == "dedicated-cores":
            summary[mode]["idle_fraction"] = spread([r[mode]["idle_fraction"] for r in rounds])
    w_std = summary["synchronous"]["visible_median"]["median"]
    summary["eq_3_2"] = advice(compute, w_std, ranks, None)
    summary["eq_3_2"]["measured_dedicated_faster"] = summary["dedicated-cores"]["run_ratio"]["median"] < 1
    return summary


def _cell(figure: dict | None, fmt: str) -> str:
    """median [min-max] of a spread, or - when the mode has no such figure."""
    if figure is None:
        return "-"
    return f"{fmt.format(figure['median'])} [{fmt.format(figure['min'])}-{fmt.format(figure['max'])}]"


def render(report: dict) -> None:
    from rich.console import Console
    from rich.table import Table
    s = report["summary"]
    varies = f", storage variability {report['variability']:g}" if report["variability"] else ""
    table = Table(title=f"ioloom bench async: {report['mpi']}, {report['ranks']} ranks on one node, "
                  f"{report['iterations']} iterations, compute {report['compute']:g} s, {report['variables']} "
                  f"variables, {report['block_bytes']} bytes per rank and iteration, node bandwidth "
                  f"{report['node_bandwidth'] or 'unlimited'} B/s{', fsync' if report['fsync'] else ''}"
                  f"{varies}, "
                  f"{'sleeping' if report['sleep'] else 'busy'} compute, {report['rounds']} rounds; load before/after "
                  f"{report['load'][0]} / {report['load'][1]}")
    for column in ("mode", "write seen (s/iteration)", "write std (s)", "ratio to sync", "jitter std (s)",
                   "jitter lower by", "jitter max/median", "run (s)", "run ratio", "dedicated idle"):
        table.add_column(column)
    for mode in report["modes"]:
        m = s[mode]
        table.add_row(mode, _cell(m["visible_median"], "{:.5f}"), _cell(m["visible_std"], "{:.4f}"),
                      _cell(m.get("visible_ratio"), "{:.3f}"),
                      _cell(m["jitter_std"], "{:.4f}"), _cell(m.get("jitter_reduction"), "{:.1f}x"),
                      _cell(m["jitter_max_over_median"], "{:.2f}"),
                      _cell(m["run_seconds"], "{:.2f}"), _cell(m.get("run_ratio"), "{:.3f}"),
                      _cell(m.get("idle_fraction"), "{:.1%}"))
    Console(width=240).print(table)
    e = s["eq_3_2"]
    print(f"Eq. 3.2 with W_std = {e['write']:.4f} s (synchronous, measured), C_std = {e['compute']:g} s, N = "
          f"{report['ranks']}: a dedicated core {'pays' if e['eq_3_2']['worthwhile'] else 'does not pay'} "
          f"(predicted {e['eq_3_2']['standard']:.3f} s -> {e['eq_3_2']['dedicated']:.3f} s per iteration); "
          f"measured: dedicated {'faster' if e['measured_dedicated_faster'] else 'slower'} than synchronous "
          f"(run ratio {s['dedicated-cores']['run_ratio']['median']:.3f}); advice: {e['mode']}")


def block_bytes(dims, nvars: int) -> int:
    """Bytes each rank outputs per iteration."""
    n = 8 * nvars
    for d in dims:
        n *= d
    return n


def crossing(points: list[dict]) -> float | None:
    """The W_std/C_std at which the dedicated core's run-time ratio to synchronous crosses 1 (interpolated
    between the two measured points around it), None when it does not cross within the sweep."""
    pts = sorted(points, key=lambda p: p["measured_ratio"])
    for a, b in zip(pts, pts[1:]):
        fa, fb = a["run_ratio"]["median"] - 1, b["run_ratio"]["median"] - 1
        if fa >= 0 > fb:
            return a["measured_ratio"] + fa / (fa - fb) * (b["measured_ratio"] - a["measured_ratio"])
    return None


def break_even(impl, ranks: int, compute: float, dims, nvars: int, iterations: int, rounds: int,
               multiples: list[float], work: Path, sleep: bool = False) -> dict:
    """Sweeps the write-to-compute ratio W/C (through the node bandwidth) around Eq. 3.2's break-even 1/(N-1),
    running synchronous and dedicated-cores in alternating order each round, and finds the measured crossing."""
    from ioloom import models
    predicted = models.dedicated_core(compute, compute, ranks).break_even_ratio
    points = []
    for multiple in multiples:
        bandwidth = int(ranks * block_bytes(dims, nvars) / (multiple * predicted * compute))
        rs = [one_round(impl, ranks, compute, dims, nvars, iterations, bandwidth, work,
                        ("synchronous", "dedicated-cores")[::1 if r % 2 == 0 else -1], sleep=sleep)
              for r in range(rounds)]
        w_std = statistics.median(r["synchronous"]["visible_median"] for r in rs)
        points.append({"target_ratio": multiple * predicted, "node_bandwidth": bandwidth, "write_std": w_std,
                       "measured_ratio": w_std / compute,
                       "run_ratio": spread([r["dedicated-cores"]["run_seconds"] / r["synchronous"]["run_seconds"]
                                            for r in rs])})
    measured = crossing(points)
    return {"predicted": predicted, "measured": measured, "points": points,
            "difference": None if measured is None else abs(measured - predicted) / predicted}


def render_break_even(report: dict) -> None:
    b = report["break_even"]
    print(f"break-even sweep ({report['ranks']} ranks, compute {report['compute']:g} s, {report['rounds']} rounds "
          f"per point): W_std/C_std -> run time dedicated/synchronous, median [min-max]")
    for p in b["points"]:
        print(f"  W/C {p['measured_ratio']:.3f} (target {p['target_ratio']:.3f}): "
              f"{_cell(p['run_ratio'], '{:.3f}')}")
    verdict = ("no crossing within the sweep" if b["measured"] is None else
               f"measured {b['measured']:.3f}, {b['difference']:.0%} from Eq. 3.2's 1/(N-1) = {b['predicted']:.3f}")
    print(f"break-even W/C: {verdict}")


@app.command("async")
def bench_async(ranks: int = typer.Option(2, min=2, help="Ranks on the node (N of Eq. 3.2)."),
                compute: float = typer.Option(0.1, min=0.0, help="Compute seconds per iteration and rank."),
                dims: str = typer.Option("32,32,32", help="Dimensions of each 3-D float64 variable per rank."),
                variables: int = typer.Option(3, min=1, max=16, help="Variables written per iteration."),
                iterations: int = typer.Option(10, min=2, help="Iterations per run."),
                node_bandwidth: float = typer.Option(16.0, min=0.0, help="Storage bandwidth of the node, MiB/s "
                                                     "(0: no limit, the file system as it is)."),
                fsync: bool = typer.Option(False, "--fsync", help="Writers make each iteration durable (fdatasync):"
                                           " the disk's own speed and variability."),
                variability: float = typer.Option(0.0, "--storage-variability", min=0.0, max=4.0,
                                                  help="The modelled storage's speed varies: each iteration's "
                                                  "writes take a log-normal factor (this sigma, mean 1) longer or "
                                                  "shorter (writer.variability)."),
                sleep: bool = typer.Option(False, "--sleep", help="Compute by sleeping instead of a stencil sweep: "
                                           "more ranks than cores without CPU contention (a logical N)."),
                directory: Path | None = typer.Option(None, "--dir", help="Where the runs write (default: a "
                                                      "temporary directory)."),
                rounds: int = typer.Option(10, min=1, help="Interleaved rounds."),
                quick: bool = typer.Option(False, help="Allow fewer rounds than published figures take."),
                mpi_name: str = typer.Option("openmpi", "--mpi", help="MPI to use."),
                sweep: bool = typer.Option(False, "--break-even", help="Also sweep W/C around Eq. 3.2's break-even "
                                           "and report where dedicated cores start to pay."),
                multiples: str = typer.Option("0.25,0.5,0.75,1,1.25,1.5,2,3", help="The sweep's W/C values, as "
                                              "multiples of the break-even 1/(N-1)."),
                compare: str = typer.Option("", "--compare", help="Also run the kernel's computation and data "
                                            "through another library: 'adios2' (BP5, synchronous and AsyncWrite; "
                                            "needs --node-bandwidth 0 and the adios2 package)."),
                as_json: bool = typer.Option(False, "--json", help="Print the result as JSON.")) -> None:
    """Each mode of libioloom-async on the CM1-like kernel: write time seen, jitter, run time, idle fraction."""
    import os

    from ioloom import mpi
    from ioloom.bench import async_adios2
    problem = rounds_allowed(rounds, quick, "--rounds") or (
        "--break-even sweeps W/C through the node bandwidth: give --node-bandwidth > 0" if sweep and
        not node_bandwidth else None) or async_adios2.compare_problem(compare, node_bandwidth, variability,
                                                                      fsync, async_adios2.installed())
    if problem:
        typer.echo(f"ioloom bench async: {problem}", err=True)
        raise typer.Exit(2)
    shape = tuple(units.numbers(dims, "--dims"))
    sweep_multiples = tuple(units.numbers(multiples, "--multiples", float))
    impl = mpi.by_name(mpi_name)
    bandwidth = int(node_bandwidth * (1 << 20))
    load = [os.getloadavg()[0]]
    modes = MODE_ORDER + (tuple(async_adios2.ASYNC_WRITE) if compare else ())
    all_rounds = []
    with tempfile.TemporaryDirectory(prefix="ioloom-bench-async-", dir=directory) as tmp:
        for r in range(rounds):
            order = modes[r % len(modes):] + modes[:r % len(modes)]
            all_rounds.append(one_round(impl, ranks, compute, shape, variables, iterations, bandwidth, Path(tmp),
                                        order, fsync, sleep, variability))
        swept = (break_even(impl, ranks, compute, shape, variables, iterations, rounds,
                            list(sweep_multiples), Path(tmp), sleep) if sweep else None)
    load.append(os.getloadavg()[0])
    report = {"mpi": impl.name, "ranks": ranks, "compute": compute, "iterations": iterations, "rounds": rounds,
              "variables": variables, "block_bytes": block_bytes(shape, variables), "node_bandwidth": bandwidth,
              "fsync": fsync, "sleep": sleep, "variability": variability, "modes": modes,
              "load": [f"{x:.2f}" for x in load], "summary": summarise(all_rounds, compute, ranks),
              "per_round": all_rounds, "break_even": swept}
    if as_json:
        print(json.dumps(report, indent=2))
        return
    render(report)
    if swept:
        render_break_even(report)
