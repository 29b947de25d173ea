"""`ioloom bench async --compare adios2`: the CM1-like kernel's computation and data written through ADIOS2's BP5
engine, beside libioloom-async's modes in the same interleaved rounds.

ADIOS2 (the `adios2` package, the benchmark-only extra `ioloom[bench-adios2]`, never a run-time dependency) is
installed from PyPI as a serial build (no MPI), so each rank is a process of its own writing its own BP5 output
(`<dir>/cm1.<rank>.bp`, ADIOS2's file per process; aggregation needs its MPI build). Each rank computes for the
same time per iteration as native/async/cm1.c (a smoothing sweep until the time is up, or a sleep), fills each
variable with the same values (cm1.c's fill, ioloom.async_io.kernel.expected_value) and writes it as one step:
begin_step, put per variable, end_step. Two rows: `adios2-sync` (BP5's AsyncWrite=sync, ADIOS2's own baseline)
and `adios2-async` (AsyncWrite=guided, its asynchronous write of each step's buffer by a thread while the
simulation computes). The write time seen is that of fill + begin_step..end_step, as cm1.c times fill + the
library's calls; the run time adds close (the writes drained), as cm1.c's adds finalize.

ADIOS2 writes at the file system's speed: libioloom-async's storage model (bandwidth, variability) and fsync have
no ADIOS2 counterpart, so the comparison runs with --node-bandwidth 0, without --storage-variability and without
--fsync (refused otherwise)."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

# Row name -> BP5's AsyncWrite parameter (ADIOS2 2.10+: sync, naive, guided, throttled, auto).
ASYNC_WRITE = {"adios2-sync": "sync", "adios2-async": "guided"}
COMPARISONS = ("adios2",)
EXTRA_HINT = "pip install 'ioloom[bench-adios2]' (or: pip install adios2)"


def installed() -> bool:
    return importlib.util.find_spec("adios2") is not None


def compare_problem(compare: str, node_bandwidth: float, variability: float, fsync: bool,
                    have_adios2: bool) -> str | None:
    """Why `--compare` cannot run as asked (None when it can, or when no comparison is asked)."""
    if not compare:
        return None
    if compare not in COMPARISONS:
        return f"--compare {compare!r}: the one comparison is 'adios2'"
    if node_bandwidth or variability:
        return ("--compare adios2 writes at the file system's speed, which ioloom's storage model cannot slow or "
                "vary: give --node-bandwidth 0 and no --storage-variability")
    if fsync:
        return "--compare adios2: ADIOS2's BP5 does not make each step durable; leave out --fsync"
    if not have_adios2:
        return f"--compare adios2 needs the adios2 Python package, which is not installed: {EXTRA_HINT}"
    return None


def fill(block, iteration: int, client: int, variable: int) -> None:
    """cm1.c's fill, in place: i*1e6 + b*1e3 + v + (k % 7)*1e-3 at element k."""
    import numpy as np
    flat = block.reshape(-1)
    flat[:] = np.arange(flat.size) % 7
    flat *= 1e-3
    flat += iteration * 1e6 + client * 1e3 + variable


def compute(seconds: float, sleeping: bool, field) -> None:
    """cm1.c's compute: a 3-point smoothing over (at most) 4,096 values until `seconds` have passed, or a sleep."""
    if sleeping:
        time.sleep(seconds)
        return
    f = field.reshape(-1)[:4096]
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        f[1:-1] = 0.25 * f[:-2] + 0.5 * f[1:-1] + 0.25 * f[2:]


def rank_main(rank: int, directory: Path, async_write: str, dims: tuple[int, ...], nvars: int, iterations: int,
              seconds: float, sleeping: bool) -> dict:
    """One rank's run: per iteration the output time and the iteration time; the iterations' time and close's."""
    import adios2
    import numpy as np
    io = adios2.Adios().declare_io(f"cm1.{rank}")
    io.set_engine("BP5")
    io.set_parameters({"AsyncWrite": async_write})
    blocks = [np.zeros(dims) for _ in range(nvars)]
    field = np.zeros(dims)
    variables = [io.define_variable(f"var{v}", blocks[v], [], [], list(dims)) for v in range(nvars)]
    engine = io.open(str(directory / f"cm1.{rank}.bp"), adios2.bindings.Mode.Write)
    start = time.perf_counter()  # as cm1.c: from the first iteration (initialize and open left out)
    visible, period = [], []
    for i in range(iterations):
        t0 = time.perf_counter()
        compute(seconds, sleeping, field)
        t1 = time.perf_counter()
        engine.begin_step()
        for v, block in enumerate(blocks):
            fill(block, i, rank, v)
            engine.put(variables[v], block)
        engine.end_step()
        visible.append(time.perf_counter() - t1)
        period.append(time.perf_counter() - t0)
    run = time.perf_counter() - start
    engine.close()
    return {"visible": visible, "iteration_seconds": period, "run_seconds": run,
            "finalize_seconds": time.perf_counter() - start - run}


def run_ranks(ranks: int, directory: Path, mode: str, dims, nvars: int, iterations: int, seconds: float,
              sleeping: bool, timeout: float = 600) -> dict:
    """Runs the ranks as concurrent processes; as cm1.c reports, the slowest rank's times per iteration."""
    directory.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "ioloom.bench.async_adios2", str(directory), ASYNC_WRITE[mode],
            ",".join(map(str, dims)), str(nvars), str(iterations), f"{seconds:.6f}", "1" if sleeping else "0"]
    procs = [subprocess.Popen(argv + [str(r)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(ranks)]
    results = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"{mode} rank failed (exit {proc.returncode}): {stderr.strip()[-300:]}")
        results.append(json.loads(stdout))
    slowest = {k: [max(r[k][i] for r in results) for i in range(iterations)] for k in ("visible",
                                                                                       "iteration_seconds")}
    return {**slowest, "run_seconds": max(r["run_seconds"] for r in results),
            "finalize_seconds": max(r["finalize_seconds"] for r in results)}


def per_run(run: dict, mode: str) -> dict:
    """The figures bench async prints per mode (ADIOS2 has no dedicated core and no back-pressure counter)."""
    from ioloom.bench.async_kernel import timing_figures
    return {**timing_figures(run), "idle_fraction": None, "blocked": 0, "mode": mode}


def main(argv: list[str]) -> int:
    directory, async_write, dims, nvars, iterations, seconds, sleeping, rank = argv
    result = rank_main(int(rank), Path(directory), async_write, tuple(int(d) for d in dims.split(",")),
                       int(nvars), int(iterations), float(seconds), sleeping == "1")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
