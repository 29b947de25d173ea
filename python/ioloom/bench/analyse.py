"""`ioloom bench analyse --events N`: how fast and in how much memory the full report of an N-event trace is
made, against a baseline that loads the whole trace into one pandas frame (what a simple analysis does).

The trace is real: `ioloom run` traces `ioloom-bench` writing N/2 tiny transfers with independent MPI-IO
calls, each an MPI-IO event with the POSIX call under it, interleaved across ranks on one shared file. Time is
wall-clock of `ioloom report` in a fresh process; memory is the peak of the summed resident memory of that
process and all its workers, sampled every 20 ms.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import typer

from ioloom import mpi, progress
from ioloom.bench import app
from ioloom.bench.io import bench_command

TRANSFER = 8          # bytes per data call: the file stays small while the trace grows
SEGMENTS = 100        # interleaved segments: an N-1 strided file
BASELINE_LIMIT = 20_000_000  # events above which the baseline would need more memory than this machine shares
BASELINE = """
import sys, ioloom
frame = ioloom.open_trace(sys.argv[1]).ops_named()
frame["time"] = frame["t_end"] - frame["t_start"]
print(frame.groupby(["layer", "op", "file_id", "rank"]).agg(ops=("time", "size"), bytes=("ret_bytes", "sum"),
                                                            time=("time", "sum")).shape)
"""


def _tree_rss(root: int) -> int:
    """Summed resident bytes of process `root` and its descendants."""
    parents, rss = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/statm") as f:
                rss[int(entry)] = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    def under(pid: int) -> bool:
        while pid > 1:
            if pid == root:
                return True
            pid = parents.get(pid, 0)
        return False
    return sum(size for pid, size in rss.items() if under(pid))


def measure(argv: list[str], bar: progress.Bar = progress.silent) -> tuple[float, int, subprocess.CompletedProcess]:
    """(seconds, peak bytes of the process tree, the finished process) for a command; `bar` shows it running."""
    peak, done = [0], threading.Event()
    with bar(None):
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], _tree_rss(proc.pid))
                done.wait(0.02)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        out, err = proc.communicate()
        seconds = time.perf_counter() - start
        done.set()
        sampler.join()
    return seconds, peak[0], subprocess.CompletedProcess(argv, proc.returncode, out, err)


def generate(events: int, ranks: int, impl: mpi.MpiImpl, workdir: Path, bar: progress.Bar = progress.silent) -> Path:
    """A real trace of about `events` events: ioloom-bench under `ioloom run`. `bar` draws the bytes of the
    benchmark's file written so far (8 per two events), read from its size every 0.2 s."""
    per_rank = max(SEGMENTS, events // (2 * ranks))
    block = max(1, per_rank // SEGMENTS) * TRANSFER
    trace, data = workdir / "trace", workdir / "bench.dat"
    args = ["-a", "mpiio", "-w", "-b", str(block), "-t", str(TRANSFER), "-s", str(SEGMENTS), "-o", str(data)]
    command = [sys.executable, "-m", "ioloom", "run", "-o", str(trace), "--",
               *bench_command(impl, ranks, args)]
    with bar(ranks * SEGMENTS * block) as advance, tempfile.TemporaryFile("w+") as output:
        proc = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, **impl.base_env()})
        _follow_size(proc, data, advance)
        output.seek(0)
        if proc.returncode != 0:
            raise RuntimeError(f"generating the trace failed:\n{output.read()}")
    data.unlink(missing_ok=True)
    return trace


def _follow_size(proc: subprocess.Popen, path: Path, advance: progress.Advance) -> None:
    """Tells `advance` how much `path` grew, every 0.2 s until `proc` ends."""
    seen = 0
    while proc.poll() is None:
        try:
            size = path.stat().st_size
        except FileNotFoundError:  # not created yet
            size = seen
        advance(max(0, size - seen))
        seen = max(seen, size)
        time.sleep(0.2)


def _bar(description: str, unit: str, quiet: bool) -> progress.Bar:
    """A step's progress bar on the terminal (bytes, or with no total the time it has run), redrawn once a
    second: drawing shares the CPUs with the step being timed."""
    return lambda total: progress.bar(total, description, unit, quiet, refresh=1)


def _line(name: str, seconds: float, peak: int, events: int) -> str:
    return (f"{name:<28} {seconds:8.1f} s  {events / seconds / 1e6:6.2f} M events/s  "
            f"peak {peak / 2**30:5.2f} GiB")


@app.command("analyse")
def analyse_command(events: int = typer.Option(10_000_000, "--events", min=1, help="Events in the generated trace."),
                    ranks: int = typer.Option(2, "--ranks", min=1, help="MPI ranks writing the trace."),
                    impl: str = typer.Option(None, "--mpi", help="openmpi or mpich (default: MPICH when present)."),
                    trace: Path = typer.Option(None, "--trace", help="Time this existing trace instead."),
                    keep: bool = typer.Option(False, "--keep", help="Keep the generated trace."),
                    workdir: Path = typer.Option(None, "--dir", help="Where to write (default: a temporary "
                                                 "directory under /tmp; needs ~10 bytes per event)."),
                    quiet: bool = progress.QUIET_OPTION) -> None:
    """Time the full report of a large real trace (goal: 10^8 events in < 30 s and < 1 GiB on 2 cores)."""
    import ioloom

    try:
        chosen = mpi.chosen(impl)
    except mpi.MpiNotFound as why:
        typer.echo(f"ioloom: {why}", err=True)
        raise typer.Exit(2) from None
    if trace is None and chosen is None:
        typer.echo("ioloom: no MPI found to generate a trace; run `make build` or pass --trace", err=True)
        raise typer.Exit(2)
    root = Path(tempfile.mkdtemp(prefix="ioloom-bench-analyse-", dir=workdir))
    try:
        if trace is None:
            t0 = time.perf_counter()
            trace = generate(events, ranks, chosen, root, _bar("generating the trace", "bytes", quiet))
            typer.echo(f"generated {trace} with {chosen.name} in {time.perf_counter() - t0:.0f} s")
        meta = ioloom.open_trace(trace).meta
        size = sum(p.stat().st_size for p in Path(trace).iterdir())
        typer.echo(f"trace: {meta['events']:,} events, {meta['streams']} streams, {size / 2**20:,.0f} MiB on disk, "
                   f"{meta['dropped_events']:,} dropped; {os.cpu_count()} CPUs")
        seconds, peak, done = measure([sys.executable, "-m", "ioloom", "report", str(trace), "-o",
                                       str(root / "report.html")], _bar("timing ioloom report", "", quiet))
        if done.returncode != 0:
            raise RuntimeError(done.stderr)
        typer.echo(_line("ioloom report (full)", seconds, peak, meta["events"]))
        if meta["events"] <= BASELINE_LIMIT:
            seconds, peak, done = measure([sys.executable, "-c", BASELINE, str(trace)],
                                          _bar("timing the baseline", "", quiet))
            typer.echo(_line("baseline: one pandas frame", seconds, peak, meta["events"]) if done.returncode == 0
                       else f"baseline failed: {done.stderr.strip().splitlines()[-1]}")
        else:
            typer.echo(f"baseline: skipped above {BASELINE_LIMIT:,} events (one frame of 17 columns would need "
                       f"about {meta['events'] * 150 / 2**30:.0f} GiB)")
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            typer.echo(f"kept: {root}")
