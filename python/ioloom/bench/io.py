"""`ioloom bench io`: run ioloom-bench (native/bench) under an MPI and show its figures.

Other parts call `run_bench(impl, nranks, args, env=...)`, which returns the program's JSON document as a dict
(schema: docs/bench.md); `run_restarted()` runs the write and the read in two launches; `bench_command()` gives
the argv to wrap (e.g. under `ioloom run` or a preload); `summary()` and `time_per_call()` read a result.
"""
from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ioloom import mpi, paths
from ioloom.bench import app

MIB = 1024.0 * 1024.0
JSON_MARK = '{"ioloom_bench"'
BANDWIDTHS = ("effective", "raw", "access")  # each phase's bandwidths (docs/bench.md, "Timing and figures")


class BenchFailed(RuntimeError):
    """ioloom-bench exited non-zero. `result` holds its JSON when it printed one (e.g. a --verify failure)."""

    def __init__(self, message: str, returncode: int, stderr: str, result: dict | None):
        super().__init__(message)
        self.returncode, self.stderr, self.result = returncode, stderr, result


def needs_hdf5(args: Sequence[str]) -> bool:
    """Whether ioloom-bench arguments ask for HDF5 (-a hdf5, --kernel flash), which only the MPICH build has."""
    args = [str(a).lower() for a in args]
    pairs = list(zip(args, args[1:]))
    return any(a in ("-a", "--api") and v == "hdf5" or a == "--kernel" and v == "flash" for a, v in pairs) \
        or any(a in ("-ahdf5", "--api=hdf5", "--kernel=flash") for a in args)


def _impl(impl: str | mpi.MpiImpl | None, args: Sequence[str] = ()) -> mpi.MpiImpl:
    """The MPI to run under: the one named, else MPICH when HDF5 is asked for, else the first found."""
    if isinstance(impl, mpi.MpiImpl):
        return impl
    if impl is None:
        found = mpi.implementations()
        if not found:
            raise mpi.MpiNotFound("no MPI implementation found: run `make build` (it installs Open MPI and MPICH)")
        return next((i for i in found if i.name == "mpich"), found[0]) if needs_hdf5(args) else found[0]
    return mpi.by_name(impl)


def bench_command(impl: str | mpi.MpiImpl | None, nranks: int, args: list[str]) -> list[str]:
    """The launch command of ioloom-bench-<impl> on nranks ranks with `args` plus --json."""
    impl = _impl(impl, args)
    program = paths.native_bin(f"ioloom-bench-{impl.name}")
    return impl.launch(nranks, [str(program), *map(str, args), "--json"])


def parse_output(stdout: str) -> dict | None:
    """The JSON document rank 0 printed (MPI may print other lines around it), or None."""
    for line in stdout.splitlines():
        if line.startswith(JSON_MARK):
            return json.loads(line)
    return None


def run_bench(impl: str | mpi.MpiImpl | None, nranks: int, args: list[str], env: dict[str, str] | None = None,
              cwd: str | Path | None = None, timeout: float = 600) -> dict:
    """Runs ioloom-bench and returns its JSON document as a dict. `env` is added to this process's environment
    (e.g. {"LD_PRELOAD": ...}). Raises BenchFailed with the program's message when it exits non-zero."""
    impl = _impl(impl, args)
    out = subprocess.run(bench_command(impl, nranks, args), capture_output=True, text=True, timeout=timeout,
                         cwd=cwd, env={**os.environ, **impl.launch_env(nranks, env)})
    result = parse_output(out.stdout)
    if out.returncode != 0 or result is None:
        message = "\n".join(line for line in out.stderr.splitlines() if "ioloom-bench" in line) or out.stderr
        raise BenchFailed(f"ioloom-bench-{impl.name} exited {out.returncode}: {message.strip()}",
                          out.returncode, out.stderr, result)
    return result


PHASE_FLAGS = {"-w", "--write", "-r", "--read", "-k", "--keep", "--verify"}


def drop_page_cache() -> None:
    """Writes dirty data back and drops the page cache, so the next read comes from the device. Needs root
    and acts on the whole machine, so it is only ever done when asked for."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError as err:
        raise PermissionError(f"dropping the page cache needs root (writing /proc/sys/vm/drop_caches: "
                              f"{err.strerror}); run without --drop-caches") from err


class EvictionFailed(RuntimeError):
    """The page cache of a run's files could not be emptied or checked: a read would not be shown the device's."""


def _files_under(roots: Sequence[Path]) -> list[Path]:
    """The regular files among `roots` and below those that are directories (symbolic links not followed); a root
    that is missing, or a directory that cannot be listed, is EvictionFailed (its files would go unchecked)."""
    def unlisted(err: OSError) -> None:
        raise EvictionFailed(f"cannot list {err.filename} to evict its files from the page cache: {err.strerror}")
    files = []
    for root in roots:
        if root.is_dir() and not root.is_symlink():
            files += [Path(top, name) for top, _, names in os.walk(root, onerror=unlisted) for name in names]
        elif root.exists():
            files.append(root)
        else:
            raise EvictionFailed(f"{root} is missing: nothing to evict from the page cache")
    return [f for f in files if f.is_file() and not f.is_symlink()]


def cached_bytes(files: Sequence[Path]) -> int:
    """Bytes of `files` in the page cache (util-linux fincore, which asks mincore(2) of a mapping of each);
    EvictionFailed when fincore is missing or fails."""
    if not files:
        return 0
    try:
        out = subprocess.run(["fincore", "--bytes", "--noheadings", "--raw", "--output", "RES", *map(str, files)],
                             capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as err:
        detail = err.stderr.strip() if isinstance(err, subprocess.CalledProcessError) else err.strerror
        raise EvictionFailed(f"fincore (util-linux) could not say what stayed in the page cache: {detail}") from err
    return sum(int(line) for line in out.stdout.split())


def sync_file(path: Path, advice: int | None = None) -> None:
    """fsync(2) the regular file `path` (opened read-only, not through a symbolic link, and without waiting: a FIFO
    would block the open for a writer), then, if given, `advice` for all of it (posix_fadvise); OSError as the calls
    raise it, and EINVAL ("not a regular file") for anything else found there."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        os.fsync(fd)
        if advice is not None:
            os.posix_fadvise(fd, 0, 0, advice)
    finally:
        os.close(fd)


def evict_page_cache(roots: Sequence[Path]) -> dict:
    """Drops the cached pages of every regular file under `roots`, without root and without touching other files:
    each file synced (posix_fadvise drops clean pages only), then posix_fadvise(POSIX_FADV_DONTNEED); then checks
    with cached_bytes() that none stayed (EvictionFailed otherwise). Directory and inode caches are kept. Returns
    {"files", "bytes", "cached_before", "cached_after"} (bytes of file data; cached_after is 0)."""
    files = _files_under(roots)
    before = cached_bytes(files)
    for path in files:
        try:
            sync_file(path, os.POSIX_FADV_DONTNEED)
        except OSError as err:
            raise EvictionFailed(f"cannot sync {path} and evict it from the page cache: {err.strerror}") from err
    after = cached_bytes(files)
    if after:
        raise EvictionFailed(f"{after} bytes of {len(files)} files under {', '.join(map(str, roots))} stayed in the "
                             "page cache after posix_fadvise(DONTNEED) (a process maps or writes them?)")
    return {"files": len(files), "bytes": sum(f.stat().st_size for f in files), "cached_before": before,
            "cached_after": after}


def run_restarted(impl: str | mpi.MpiImpl | None, nranks: int, args: list[str], drop_caches: bool = False,
                  env: dict[str, str] | None = None, timeout: float = 600, evict: Sequence[Path] = ()) -> dict:
    """The write phase and the read phase in two launches, as Boito et al. restart their clients between
    the two, and with drop_caches the page cache dropped in between (root), with `evict` the cached pages of every
    file under those paths (evict_page_cache; the record under "restarted"): the read then finds neither the
    writers' processes nor (with either) their data in memory. -w, -r, -k and --verify in `args` are placed on
    the right launch (write each flag on its own). Returns one result with the phases of both launches."""
    base = [a for a in args if a not in PHASE_FLAGS]
    written = run_bench(impl, nranks, [*base, "-w", "-k"], env=env, timeout=timeout)
    if drop_caches:
        drop_page_cache()
    evicted = evict_page_cache(evict) if evict else None
    extra = [flag for flag in ("--verify", "-k") if flag in args]
    read = run_bench(impl, nranks, [*base, "-r", *extra], env=env, timeout=timeout)
    return {**written, "phases": written["phases"] + read["phases"], "summary": written["summary"] + read["summary"],
            "verify": read["verify"], "notes": list(dict.fromkeys(written["notes"] + read["notes"])),
            "restarted": {"drop_caches": drop_caches, "evicted": evicted}}


def measure(impl: str | mpi.MpiImpl | None, nranks: int, args: list[str], restart: bool = False,
            drop_caches: bool = False) -> dict:
    """One measurement: run_bench, or run_restarted when the read must not find the writers' state."""
    if restart or drop_caches:
        return run_restarted(impl, nranks, args, drop_caches)
    return run_bench(impl, nranks, args)


def summary(result: dict, op: str) -> dict:
    """The summary entry of one op ("write", "read", "MPI_File_write", "checkpoint", ...)."""
    for entry in result["summary"]:
        if entry["op"] == op:
            return entry
    raise KeyError(f"no {op!r} phase in this result (have: {[e['op'] for e in result['summary']]})")


def time_per_call(phase: dict) -> float:
    """Mean time of one data call in a phase, seconds: each rank's time in data calls over its calls."""
    ranks = [r for r in phase["ranks"] if r["calls"] > 0]
    return sum(r["data"] / r["calls"] for r in ranks) / len(ranks) if ranks else 0.0


def _mib(value: float) -> str:
    return f"{value / MIB:,.2f}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.3f}"


def _triple(stats: dict, fmt, middle: str = "mean") -> str:
    return " / ".join(fmt(stats[k]) for k in ("min", middle, "max"))


def _phases_table(result: dict) -> Table:
    table = Table(title="phases (times: slowest rank, ms)")
    times_shown = ("open", "data", "sync", "close", "total", "wait", "prep")
    for column in ("op", "rep", "effective MiB/s", "raw MiB/s", "access MiB/s", *times_shown, "µs/call"):
        table.add_column(column, justify="left" if column == "op" else "right")
    for p in result["phases"]:
        times = [_ms(p["time"][k]["max"]) for k in times_shown]
        table.add_row(p["op"], str(p["rep"]), *(_mib(p[f"{kind}_bw"]) for kind in BANDWIDTHS), *times,
                      f"{time_per_call(p) * 1e6:,.1f}")
    return table


def _summary_table(result: dict) -> Table:
    table = Table(title="over repetitions: bandwidth MiB/s min / median / max; time ms min / mean / max over "
                        "repetitions and ranks")
    for column in ("op", "reps", *BANDWIDTHS, "open", "data", "close"):
        table.add_column(column, justify="left" if column == "op" else "right")
    for s in result["summary"]:
        table.add_row(s["op"], str(s["reps"]), *(_triple(s[f"{kind}_bw"], _mib, "median") for kind in BANDWIDTHS),
                      *(_triple(s["time"][k], _ms) for k in ("open", "data", "close")))
    return table


def _ranks_table(result: dict) -> Table:
    table = Table(title="per rank (ms; MiB/s inside data calls)")
    for column in ("op", "rep", "rank", "open", "data", "sync", "close", "total", "raw MiB/s", "errors"):
        table.add_column(column, justify="left" if column == "op" else "right")
    for p in result["phases"]:
        for r in p["ranks"]:
            raw = r["bytes"] / r["data"] if r["data"] > 0 else 0.0
            table.add_row(p["op"], str(p["rep"]), str(r["rank"]),
                          *(_ms(r[k]) for k in ("open", "data", "sync", "close", "total")), _mib(raw),
                          str(r["errors"]))
    return table


def available_memory() -> int:
    """MemAvailable from /proc/meminfo, bytes (0 when unknown)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def cache_note(result: dict) -> str | None:
    """A warning when the read phase may have been served from the page cache rather than the device."""
    reads = [p for p in result["phases"] if p["op"] == "read"]
    restarted = result.get("restarted", {})
    if not reads or restarted.get("drop_caches") or restarted.get("evicted"):
        return None
    largest, memory = max(p["bytes"] for p in reads), available_memory()
    if largest >= memory:
        return None
    return (f"the reads ({largest / MIB:,.0f} MiB) fit in free memory ({memory / MIB:,.0f} MiB) and were "
            "not preceded by dropping the page cache: they may measure memory, not the device "
            "(--restart-read --drop-caches measures the device)")


def print_result(result: dict, per_rank: bool = False, console: Console | None = None) -> None:
    """The readable form of a result: parameters, phases, summary, hints in effect, verify."""
    console = console or Console(width=None if sys.stdout.isatty() else 150)
    p = result["params"]
    what = f"kernel {p['kernel']}" if p["kernel"] != "none" else \
        f"{p['api']}{' collective' if p['collective'] else ''}, pattern {p['pattern']}, block {p['block_size']}, " \
        f"transfer {p['transfer_size']}, segments {p['segment_count']}"
    console.print(f"[bold]ioloom-bench[/] ({result['mpi']}, {result['nranks']} ranks, "
                  f"{result['ranks_per_node']} per node): {what}")
    if "restarted" in result:
        console.print("write and read ran in two launches" +
                      (", the page cache dropped in between" if result["restarted"]["drop_caches"] else ""))
    console.print(_phases_table(result))
    console.print(_summary_table(result))
    if per_rank:
        console.print(_ranks_table(result))
    if "simulator" in result:  # `ioloom sim run`: no MPI hints, no page cache
        return
    hints = result["hints"]
    console.print("hints in effect after open: " + (", ".join(f"{k}={v}" for k, v in hints.items()) or "none reported"))
    for note in [*result.get("notes", []), cache_note(result)]:
        if note:
            console.print(f"[yellow]note:[/] {escape(note)}")
    if result["verify"]["enabled"]:
        errors = result["verify"]["errors"]
        console.print(f"verify: {'[green]every byte matches[/]' if errors == 0 else f'[red]{errors} bytes differ[/]'}")


@app.command("io", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def io_command(ctx: typer.Context,
               mpi_name: str = typer.Option(None, "--mpi", help="openmpi or mpich (default: the first found; "
                                            "mpich when HDF5 is asked for)."),
               nranks: int = typer.Option(4, "-n", "--ranks", min=1, help="MPI ranks."),
               json_out: bool = typer.Option(False, "--json", help="Print the program's JSON document."),
               per_rank: bool = typer.Option(False, "--per-rank", help="Also show every rank's figures."),
               restart: bool = typer.Option(False, "--restart-read",
                                            help="Write and read in two launches (the read finds no writer "
                                                 "process state), as Boito et al. restart their clients."),
               drop_caches: bool = typer.Option(False, "--drop-caches",
                                                help="With --restart-read: drop the page cache between the "
                                                     "launches (root; acts on the whole machine).")) -> None:
    """Run ioloom-bench (IOR-like access patterns; FLASH-IO, BT-IO and RIOT kernels) and show its figures.

    Benchmark options follow ours, IOR's letters where they mean the same, e.g.
    `ioloom bench io --mpi mpich -n 4 -a mpiio -c -b 4m -t 1m -s 8 -e -o /tmp/x/testfile`;
    `ioloom bench io -- --help` lists them all (docs/bench.md explains the figures).
    """
    args = list(ctx.args)
    if "--help" in args or "-h" in args:
        program = paths.native_bin(f"ioloom-bench-{_impl(mpi_name).name}")
        subprocess.run([str(program), "--help"], env={**os.environ, **_impl(mpi_name).launch_env(1)})
        return
    try:
        result = measure(mpi_name, nranks, args, restart, drop_caches)
    except PermissionError as err:
        typer.echo(str(err), err=True)
        raise typer.Exit(2) from None
    except (BenchFailed, LookupError, paths.NativeMissing) as err:
        if isinstance(err, BenchFailed) and err.result is not None:
            (print(json.dumps(err.result)) if json_out else print_result(err.result, per_rank))
        typer.echo(str(err), err=True)
        raise typer.Exit(getattr(err, "returncode", 1) or 1) from None
    if json_out:
        print(json.dumps(result))
    else:
        print_result(result, per_rank)
