"""`ioloom async`: look into an output of libioloom-async (info), check a configuration for a number of clients
(check), choose a mode from measured compute and write times with Dorier's Eq. 3.2 (advise), and run the CM1-like
kernel many times with random timings under a watchdog (stress). The library itself and its configuration:
docs/async.md."""
from __future__ import annotations

import json
import random
import subprocess
import tempfile
from pathlib import Path

import typer

app = typer.Typer(help="Asynchronous output (libioloom-async): inspect an output, advise a mode, stress test.",
                  no_args_is_help=True)
JSON = typer.Option(False, "--json", help="Print the result as JSON.")


@app.command("info")
def info(path: Path = typer.Argument(..., help="An output's index (<directory>/<name>.json) or its directory."),
         as_json: bool = JSON) -> None:
    """The variables, iterations, blocks, events and summed counters of an output."""
    from ioloom import async_io
    out = async_io.open(path)
    result = {"index": str(out.path), "mode": out.mode, "policy": out.meta["policy"], "blocks": out.meta["blocks"],
              "writers": out.meta["writers"], "writer_format": out.writer_format, "iterations": len(out.iterations()),
              "variables": {n: {"type": str(v.dtype), "dimensions": list(v.shape),
                                "global": None if v.global_shape is None else list(v.global_shape)}
                            for n, v in out.variables.items()},
              "events": len(out.events), "counters": out.counters()}
    if as_json:
        print(json.dumps(result, indent=2))
        return
    print(f"{out.path}: mode {out.mode}, policy {result['policy']}, {result['blocks']} blocks per variable and "
          f"iteration, {len(out.meta['writers'])} writer(s) ({out.writer_format}), {result['iterations']} iterations, "
          f"{result['events']} events")
    for name, v in result["variables"].items():
        print(f"  {name}: {v['type']} {v['dimensions']}" + (f" in global {v['global']}" if v["global"] else ""))
    c = result["counters"]
    print(f"  written {c['written_blocks']:.0f} blocks ({c['written_bytes']:.0f} bytes), lost {c['lost_blocks']:.0f}, "
          f"blocked {c['blocked']:.0f} times ({c['blocked_seconds']:.3f} s), spilled {c['spilled_blocks']:.0f}, "
          f"skipped {c['skipped_iterations']:.0f} iterations")


@app.command("check")
def check(config: Path = typer.Argument(..., help="A configuration (YAML, or Damaris-style XML with .xml)."),
          clients: int = typer.Option(..., min=1, help="The run's clients (ranks that compute): blocks per variable."),
          mpi_name: str = typer.Option(None, "--mpi", help="The library of this MPI; default: MPICH when installed "
                                       "(its build has the hdf5 formats), else the other.")
          ) -> None:
    """Checks a configuration for a run of N clients without running it: the layouts, and in a global domain every
    block inside the extents and none overlapping, as initialize will. Exit status 2 with the mistake."""
    from ioloom import mpi
    from ioloom.async_io.client import check as check_config
    impl = mpi.chosen(mpi_name)
    if impl is None:
        raise mpi.MpiNotFound("no MPI implementation found to check against: run `make build` (it installs Open MPI "
                              "and MPICH)")
    check_config(config, clients, impl.name)
    print(f"{config}: fine for {clients} clients")


def advice(compute: float, write: float, cores_per_node: int, write_dedicated: float | None) -> dict:
    """The mode to use: a dedicated core when Eq. 3.2 says it pays (ioloom.models.dedicated_core, the one
    implementation of it); otherwise a helper thread when the writes can overlap the next compute phase (W <= C:
    the thread hides them without giving up a core, if writing mostly waits on storage rather than the CPU);
    otherwise synchronous (the writer could not keep up and the buffer would fill every iteration)."""
    from ioloom import models
    verdict = models.dedicated_core(compute, write, cores_per_node, write_dedicated)
    w_ded = write if write_dedicated is None else write_dedicated
    if verdict.worthwhile:
        mode, why = "dedicated-cores", verdict.reason
    elif w_ded <= compute:
        mode, why = "helper-thread", (f"{verdict.reason}; a helper thread hides the {write:g} s write behind the "
                                      f"{compute:g} s compute phase without giving up a core")
    else:
        mode, why = "synchronous", (f"{verdict.reason}; the writes ({w_ded:g} s) outlast a compute phase "
                                    f"({compute:g} s), so a helper thread would fill its buffer every iteration")
    return {"compute": compute, "write": write, "cores_per_node": cores_per_node, "mode": mode, "reason": why,
            "eq_3_2": {"standard": verdict.standard, "dedicated": verdict.dedicated, "gain": verdict.gain,
                       "break_even_ratio": verdict.break_even_ratio, "worthwhile": verdict.worthwhile}}


def energy(compute: float, write: float, cores_per_node: int, p_max: float, p_idle: float) -> dict:
    """Joules per node and iteration with and without one dedicated core (Dorier Eqs. 5.1-5.4 through
    ioloom.models.energy: time partitioning takes C + W at P_max, a dedicated core C N/(N-1) at P_max)."""
    from ioloom import models
    common: dict = {"t_base": compute * cores_per_node, "iterations": 1, "cores_per_node": cores_per_node,
                    "nodes": 1, "p_max": p_max, "p_idle": p_idle}
    return {"synchronous": models.energy("time-partitioning", io_time=write, **common).energy,
            "dedicated-cores": models.energy("dedicated-cores", dedicated=1, **common).energy}


@app.command("advise")
def advise(compute: float | None = typer.Option(None, min=0.0, help="Compute time per iteration C_std (s)."),
           write: float | None = typer.Option(None, min=0.0, help="Write time per iteration W_std (s)."),
           cores_per_node: int = typer.Option(..., min=2, help="Cores per node, N."),
           write_dedicated: float | None = typer.Option(None, min=0.0, help="Write time of the dedicated core "
                                                           "W_ded (default: W_std)."),
           trace: Path | None = typer.Option(None, "--trace", help="A trace directory (ioloom run -o DIR) to "
                                                "measure C and W from."),
           p_max: float | None = typer.Option(None, min=0.0, help="Power of a busy node (W): adds the energy "
                                              "per iteration (Eqs. 5.1-5.4)."),
           p_idle: float = typer.Option(0.0, min=0.0, help="Power of an idle node (W), with --p-max."),
           as_json: bool = JSON) -> None:
    """Which mode to configure (synchronous, helper-thread, dedicated-cores), from Dorier's Eq. 3.2."""
    from ioloom.advise import _trace_split
    if trace is not None:
        measured = _trace_split(trace)
        compute, write = measured.compute, measured.write
    if compute is None or write is None:
        raise typer.BadParameter("give --compute and --write, or --trace")
    try:
        result = advice(compute, write, cores_per_node, write_dedicated)
        result["energy"] = None if p_max is None else energy(compute, write, cores_per_node, p_max, p_idle)
    except ValueError as err:
        typer.echo(f"ioloom async advise: {err}", err=True)
        raise typer.Exit(2) from None
    if as_json:
        print(json.dumps(result, indent=2))
        return
    e = result["eq_3_2"]
    print(f"Eq. 3.2: W + C = {e['standard']:.4g} s per iteration now; with a dedicated core max(C N/(N-1), W_ded) "
          f"= {e['dedicated']:.4g} s (break-even W/C = {e['break_even_ratio']:.1%})")
    print(f"mode: {result['mode']}: {result['reason']}")
    if result["energy"]:
        print("energy per node and iteration: " + ", ".join(f"{mode} {joules:.4g} J"
                                                            for mode, joules in result["energy"].items()))


def random_case(rng: random.Random, impl_names: list[str]) -> dict:
    """One randomised run: mode, policy, buffer, ranks, iterations, compute times, an early finisher."""
    from ioloom.async_io.kernel import MODES, POLICIES
    dims = (rng.choice((2, 4, 8, 16)), rng.choice((4, 8)), rng.choice((4, 8)))
    ranks = rng.randint(2, 4)
    blocks_fit = rng.choice((1, 2, 3, 8, 64))
    iterations = rng.randint(1, 25)
    case: dict = {"mpi": rng.choice(impl_names), "mode": rng.choice(MODES + ("dedicated-nodes",)),
                  "policy": rng.choice(POLICIES),
                  "dims": dims, "ranks": ranks, "iterations": iterations,
                  "compute": rng.choice((0.0, 0.0005, 0.002)),
                  "jitter": rng.choice((0.0, 0.5, 1.0)), "zero_copy": rng.random() < 0.3, "blocks_fit": blocks_fit,
                  "bandwidth": rng.choice((0, 0, 8 << 20)), "seed": rng.randrange(1 << 30)}
    # Dedicated nodes: nodes of 1 to ranks - 1 ranks emulated on this machine, the last one dedicated.
    case["ranks_per_node"] = rng.randint(1, ranks - 1) if case["mode"] == "dedicated-nodes" else 0
    servers = ranks - (ranks - 1) // case["ranks_per_node"] * case["ranks_per_node"] if case["ranks_per_node"] else 1
    sharing = ranks - 1 if case["mode"] == "dedicated-cores" else 1  # clients sharing the buffer
    case["buffer"] = sharing * blocks_fit * (8 * dims[0] * dims[1] * dims[2] + 64) + 64
    case["early"] = (rng.randrange(ranks - servers), rng.randint(0, iterations)) if rng.random() < 0.5 else None
    # The servers' shared HDF5 file (MPICH build; rings that hold an iteration) in half the runs that can have
    # it, drawn from the case's own seed so that a seed's earlier cases stay as they were.
    shared = case["mpi"] == "mpich" and case["mode"] in ("dedicated-cores", "dedicated-nodes") and blocks_fit >= 3
    case["writer_format"] = "hdf5-shared" if shared and random.Random(case["seed"]).random() < 0.5 else "files"
    return case


def run_case(case: dict, work: Path, timeout: float) -> str | None:
    """None when the run finished and its output holds every block not skipped; else what went wrong."""
    from ioloom import async_io, mpi
    from ioloom.async_io.kernel import Setup, run_kernel
    setup = Setup(work / "out", mode=case["mode"], policy=case["policy"], dims=case["dims"], buffer=case["buffer"],
                  bandwidth=case["bandwidth"], variables=("u", "v"), ranks_per_node=case.get("ranks_per_node", 0),
                  writer_format=case.get("writer_format", "files"))
    try:
        run = run_kernel(mpi.by_name(case["mpi"]), case["ranks"], setup.write(work / "c.yaml"), setup,
                         case["iterations"], case["compute"], timeout=timeout, jitter=case["jitter"],
                         seed=case["seed"], early=case["early"], zero_copy=case["zero_copy"], sleep=True)
    except subprocess.TimeoutExpired:
        return f"hang: killed after {timeout:g} s"
    if run.returncode != 0:
        return f"exit {run.returncode}: {run.stderr.strip()[-300:]}"
    counters = async_io.open(setup.directory).counters()
    if counters["written_blocks"] + counters["skipped_blocks"] != counters["blocks"] or counters["lost_blocks"]:
        return f"blocks: {counters['blocks']:.0f} given, {counters['written_blocks']:.0f} written, " \
               f"{counters['skipped_blocks']:.0f} skipped, {counters['lost_blocks']:.0f} lost"
    return None


def stress_runs(runs: int, seed: int, timeout: float, impl_names: list[str]) -> dict:
    rng = random.Random(seed)
    failures, hangs = [], 0
    for i in range(runs):
        case = random_case(rng, impl_names)
        with tempfile.TemporaryDirectory(prefix="ioloom-async-stress-") as tmp:
            problem = run_case(case, Path(tmp), timeout)
        if problem:
            hangs += problem.startswith("hang")
            failures.append({"run": i, "problem": problem, "case": case})
    return {"runs": runs, "seed": seed, "hangs": hangs, "failures": failures}


@app.command("stress")
def stress(runs: int = typer.Option(100, min=1, help="Randomised runs."),
           seed: int = typer.Option(1, help="Seed of the random cases (a failure is reproduced by its seed)."),
           timeout: float = typer.Option(60.0, min=1.0, help="Watchdog: a run still alive after this is a hang."),
           mpi_name: list[str] = typer.Option(None, "--mpi", help="MPI to use (repeatable); default: every one."),
           as_json: bool = JSON) -> None:
    """Runs the CM1-like kernel with random modes, policies, buffer sizes, compute times and a rank that finishes
    early, each under a watchdog; checks every output. Exit status 1 when any run hung or failed."""
    from ioloom import mpi
    names = mpi_name or [i.name for i in mpi.implementations()]
    result = stress_runs(runs, seed, timeout, names)
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{runs} runs (seed {seed}, {', '.join(names)}): {result['hangs']} hangs, "
              f"{len(result['failures'])} failures")
        for f in result["failures"]:
            print(f"  run {f['run']}: {f['problem']}  case {json.dumps(f['case'])}")
    if result["failures"]:
        raise typer.Exit(1)
