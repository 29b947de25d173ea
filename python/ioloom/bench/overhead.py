"""`ioloom bench overhead`: what tracing adds per call, and how fast traces are read back.

Runs the probe (native/trace/overhead_probe.c: N small pwrite, pread, write, read, fwrite, fread, open+close, stat
and lseek calls on a file in the page cache, and MPI_File_write_at, MPI_File_write_at_all, MPI_File_read_at,
MPI_File_write, MPI_File_write_all and MPI_File_read in the per-MPI builds) untraced, traced and with each other
tool compared, for a number of rounds, in one command. In a round the probes run at once, on one CPU, and take turns
block by block (run_in_turns), each block timed with the thread's CPU clock; a round's figure per call is the median
of its blocks' differences to the untraced blocks they took turns with, and the added cost is the median of the
rounds' figures, shown with their minimum and maximum, beside the goal (at most GOAL_NS added). Then decodes the
traces it just wrote and reports the reader's speed (events per second) and the size on disk per event.

CPU times still move with whatever else the machine runs; `--instructions` adds a repeatable figure: the
instructions tracing (and each other tool) adds per call on the program's own thread, counted by callgrind
(valgrind)."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from ioloom import mpi, paths
from ioloom.bench import app, stats
from ioloom.run import traced_environment

GOAL_NS = 100
POSIX_CALLS = ("pwrite", "pread", "write", "read", "fwrite", "fread", "open+close", "stat", "lseek")
MPI_CALLS = ("MPI_File_write_at", "MPI_File_write_at_all", "MPI_File_read_at", "MPI_File_write", "MPI_File_write_all",
             "MPI_File_read")
# glibc's malloc in the callgrind runs: a per-thread cache large enough to hold every block freed. Open MPI's OMPIO
# mallocs and frees about a dozen blocks per data call, and with the default cache (7 blocks per size) glibc serves
# them through paths whose length depends on the heap's layout, which differs from run to run: without it the counts
# moved by hundreds per call (docs/bench.md). Every callgrind_per_call run takes it.
COUNTED_MALLOC = "glibc.malloc.tcache_count=65535"
# Calls per timed block: at least as many events as the tracer's default buffer holds between two flushes
# (native/trace/writer.c, allocate_writer), so that every block encodes and writes its share of the events and a
# median block includes it.
BLOCK_CALLS = 5000


@dataclass(frozen=True)
class Probe:
    """One build of the probe: its label, the binary, the libraries tracing preloads, the calls it times and how
    it is launched (the MPI builds through their mpiexec, on one rank)."""
    label: str
    binary: Path
    libs: list[Path]
    calls: tuple[str, ...]
    impl: mpi.MpiImpl | None = None

    def argv(self) -> list[str]:
        return self.impl.launch(1, [str(self.binary)]) if self.impl else [str(self.binary)]

    def launch_env(self, env: dict[str, str]) -> dict[str, str]:
        """env (a whole environment, its LD_PRELOAD the variant's) as the probe's launch takes it: one rank."""
        return self.impl.launch_env(1, env) if self.impl else env


def probes() -> list[Probe]:
    """The plain probe and each MPI's probe that is built."""
    found = [Probe("posix+stdio", paths.native_bin("ioloom-overhead-probe"), [paths.native_lib("ioloom-trace")],
                   POSIX_CALLS)]
    for impl in mpi.implementations():
        try:
            binary = paths.native_bin(f"ioloom-overhead-probe-{impl.name}")
            wrappers = paths.native_lib(f"ioloom-trace-mpi-{impl.name}")
        except paths.NativeMissing:
            continue
        found.append(Probe(impl.name, binary, [wrappers, paths.native_lib("ioloom-trace")], MPI_CALLS, impl))
    return found


def run_probe(argv: list[str], target: Path, calls: int, env: dict[str, str] | None,
              kinds: tuple[str, ...] = (), cpu: int | None = None, cwd: Path | None = None) -> dict[str, float]:
    """ns per call of each kind the probe timed (all kinds, or those given); on CPU `cpu` alone when given (the
    launcher, the probe and anything they start); in `cwd` when given (a relative `target` is taken from there)."""
    pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    out = subprocess.run([*argv, str(target), str(calls), *([",".join(kinds)] if kinds else [])], capture_output=True,
                         text=True, env=env, timeout=1800, preexec_fn=pin, cwd=cwd)
    if out.returncode != 0:
        raise RuntimeError(f"{argv[-1]} failed (exit {out.returncode}): {out.stderr.strip()}")
    return {name: float(value) for name, value in (line.split() for line in out.stdout.splitlines() if line.strip())}


@dataclass(frozen=True)
class Tool:
    """Another preloaded tool to time beside ioloom: its name and its libraries per build of the probe (key None:
    every build without its own), since a tool built against one MPI cannot be loaded into the other's program; a
    build's libraries are preloaded in their order (another ioloom build for an MPI: its MPI wrappers, then its
    tracer)."""
    name: str
    libraries: dict[str | None, tuple[Path, ...]]

    def library(self, probe: Probe) -> tuple[Path, ...]:
        """The libraries to preload into this build's probe; none when the tool has none for it."""
        return self.libraries.get(probe.label, self.libraries.get(None, ()))

    def env(self, probe: Probe, work: Path) -> dict[str, str]:
        """The probe's environment with the tool preloaded. Darshan's settings unless the caller gave them: logs,
        and the logs it maps while running, to a directory of this run (not /tmp, where a process that execs,
        such as valgrind's launcher, leaves them), and a program without MPI traced only when asked
        (DARSHAN_ENABLE_NONMPI); an MPI program never in that mode (Darshan would start twice, at load and at
        MPI_Init)."""
        logs = work / f"{self.name}-logs"
        logs.mkdir(exist_ok=True)
        env = probe.launch_env({"DARSHAN_LOGPATH": str(logs), "DARSHAN_MMAP_LOGPATH": str(logs), **_base_env(),
                                "LD_PRELOAD": " ".join(str(lib) for lib in self.library(probe))})
        if probe.impl:
            env.pop("DARSHAN_ENABLE_NONMPI", None)
        else:
            env.setdefault("DARSHAN_ENABLE_NONMPI", "1")
        return env


def _variants(probe: Probe, trace: Path, work: Path, others: list[Tool], traced_env: dict[str, str] | None = None
              ) -> dict[str, dict[str, str]]:
    """The probe's environments: untraced, traced and with each other tool that has a library for this build."""
    return {"untraced": probe.launch_env({**_base_env(), "LD_PRELOAD": ""}),
            "traced": probe.launch_env({**traced_environment(probe.libs, trace, ["posix", "stdio", "mpiio"]),
                                        **(traced_env or {})}),
            **{tool.name: tool.env(probe, work) for tool in others if tool.library(probe)}}


def blocks_of(calls: int) -> int:
    """Timed blocks per kind: blocks of BLOCK_CALLS calls (one block when fewer calls are asked for)."""
    return max(1, calls // BLOCK_CALLS)


def run_in_turns(commands: list[tuple[list[str], dict[str, str]]], work: Path, blocks: int,
                 cpu: int | None = None) -> list[dict[str, list[float]]]:
    """Runs the probe commands (argv without --turn, environment) at once, taking turns block by block (the first
    holds the token first and writes the probe's file), on CPU `cpu` alone when given; each one's ns per call of
    each timed block, by kind. A probe that fails ends the others at once (they would wait for their turn)."""
    fifos = [work / f"turn-{i}" for i in range(len(commands))]
    for fifo in fifos:
        fifo.unlink(missing_ok=True)
        os.mkfifo(fifo)
    pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    running: list[tuple[subprocess.Popen, Path]] = []
    try:
        for i, (argv, env) in enumerate(commands):
            turn = ["--turn", str(fifos[i]), str(fifos[(i + 1) % len(fifos)]), str(blocks),
                    *(["lead"] if i == 0 else [])]
            out = work / f"turn-{i}.out"
            with out.open("w") as stdout, out.with_suffix(".err").open("w") as stderr:
                running.append((subprocess.Popen([*argv, *turn], env=env, stdout=stdout, stderr=stderr,
                                                 preexec_fn=pin), out))
        _wait_all([process for process, _ in running])
    finally:
        for process, _ in running:
            if process.poll() is None:
                process.kill()
                process.wait()
    failed = [f"{shlex.join(argv)} failed (exit {process.returncode}): {out.with_suffix('.err').read_text().strip()}"
              for (process, out), (argv, _) in zip(running, commands, strict=True) if process.returncode]
    if failed:
        raise RuntimeError("; ".join(failed))
    return [{line.split()[0]: [float(ns) for ns in line.split()[1:]]
             for line in out.read_text().splitlines() if line.strip()} for _, out in running]


def _wait_all(processes: list[subprocess.Popen], timeout: float = 1800) -> None:
    """Until every process has ended, or one has failed (the caller ends the others), or `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        codes = [process.poll() for process in processes]
        if all(code == 0 for code in codes) or any(code for code in codes):
            return
        time.sleep(0.02)


def _round(probe: Probe, calls: int, work: Path, trace: Path, others: list[Tool], index: int,
           blocks: dict[str, list[dict[str, list[float]]]], cpu: int | None) -> None:
    """One round: the probe untraced, traced and with each other tool preloaded instead, all at once and taking
    turns block by block, the ring starting from a different variant each round; each variant's blocks (ns per
    call by kind) appended to blocks[variant]."""
    variants = list(_variants(probe, trace, work, others, {"IOLOOM_BACKGROUND_ENCODE": "0"}).items())
    variants = variants[index % len(variants):] + variants[:index % len(variants)]
    argv = [*probe.argv(), str(work / f"{probe.label}.dat"), str(calls), ",".join(probe.calls)]
    ran = run_in_turns([(argv, env) for _, env in variants], work, blocks_of(calls), cpu)
    for (variant, _), timed in zip(variants, ran, strict=True):
        blocks.setdefault(variant, []).append(timed)


def _by_round(plain: list[dict[str, list[float]]], tool: list[dict[str, list[float]]], call: str) -> dict:
    """Per round: the tool's median block, what it added (the median of its blocks' differences to the untraced
    blocks they took turns with) and its ratio (the median of the blocks' ratios); each as a spread over rounds."""
    pairs = [list(zip(u[call], t[call], strict=True)) for u, t in zip(plain, tool, strict=True)]
    return {"ns": stats.spread([statistics.median(t[call]) for t in tool]),
            "added_ns": stats.spread([statistics.median(b - a for a, b in blocks) for blocks in pairs]),
            "ratio": stats.spread([statistics.median(b / a for a, b in blocks) for blocks in pairs])}


def measure(calls: int, rounds: int, work: Path, builds: list[Probe], others: list[Tool] | None = None,
            cpu: int | None = None) -> tuple[list[dict], list[Path]]:
    """Per call kind: untraced and traced ns of thread CPU time per call, what tracing added and the ratio, each
    round's figure the median over its blocks (the differences of blocks that took turns), given as median, min
    and max over the rounds; the same for each other preloaded tool given, in the same rounds. Every run on CPU
    `cpu` when given."""
    rows, traces = [], []
    for probe in builds:
        blocks: dict[str, list[dict[str, list[float]]]] = {}
        for round_ in range(rounds):
            traces.append(work / f"{probe.label}-{round_}")
            _round(probe, calls, work, traces[-1], others or [], round_, blocks, cpu)
        plain = blocks["untraced"]
        for name in probe.calls:
            traced = _by_round(plain, blocks["traced"], name)
            row = {"call": name, "build": probe.label,
                   "untraced_ns": stats.spread([statistics.median(u[name]) for u in plain]),
                   "traced_ns": traced["ns"], "added_ns": traced["added_ns"], "ratio": traced["ratio"],
                   "meets_goal": traced["added_ns"]["median"] <= GOAL_NS, "others": {}}
            for tool in others or []:
                if tool.name in blocks:
                    theirs = _by_round(plain, blocks[tool.name], name)
                    less = row["added_ns"]["median"] < theirs["added_ns"]["median"]
                    row["others"][tool.name] = {"added_ns": theirs["added_ns"], "ratio": theirs["ratio"],
                                                "less_than_theirs": less}
            rows.append(row)
    return rows, traces


def _thread_instructions(argv: list[str], env: dict[str, str], work: Path, cwd: Path | None = None
                         ) -> tuple[int, int]:
    """(instructions run by the main thread, of which inside the writer's flush_half: encoding and writing
    chunks) for one callgrind run (in `cwd` when given)."""
    for old in work.glob("callgrind.out*"):
        old.unlink()
    out = work / "callgrind.out"
    subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes", f"--callgrind-out-file={out}", *argv],
                   env=env, capture_output=True, check=True, timeout=1800, cwd=cwd)
    main = work / "callgrind.out-01"
    summary = re.search(r"^summary: (\d+)", main.read_text(), re.M)
    if summary is None:
        raise RuntimeError(f"{main}: callgrind wrote no summary line")
    total = int(summary.group(1))
    listing = subprocess.run(["callgrind_annotate", "--inclusive=yes", str(main)], capture_output=True, text=True,
                             check=True).stdout
    encoding = re.search(r"^\s*([\d,]+) .*writer\.c:flush_half \[", listing, re.M)
    return total, int(encoding.group(1).replace(",", "")) if encoding else 0


def valgrind_missing(option: str) -> str | None:
    """Why `option`'s instruction counts cannot be taken here (valgrind is not installed), or None."""
    return None if shutil.which("valgrind") else f"{option} needs valgrind (apt-get install valgrind)"


def callgrind_per_call(before: list[str], after: list[str], env: dict[str, str], work: Path, calls: int,
                       cwd: Path | None = None, prepare: Callable[[], None] | None = None) -> tuple[float, float]:
    """(instructions per call on the program's main thread, of which in the writer's flush_half) by callgrind: the
    difference of a run of `calls` calls and one of 3 x `calls` (the command `before`, the count, `after`; prepare()
    called before each run), which cancels start-up and exit; glibc's malloc with COUNTED_MALLOC."""
    env = _counted_malloc(env)
    counts = []
    for n in (calls, 3 * calls):
        if prepare:
            prepare()
        counts.append(_thread_instructions([*before, str(n), *after], env, work, cwd))
    (small, small_encoding), (large, large_encoding) = counts
    return (large - small) / (2 * calls), (large_encoding - small_encoding) / (2 * calls)


def instructions_per_call(work: Path, builds: list[Probe], calls: int = 100_000,
                          others: list[Tool] | None = None) -> list[dict]:
    """Instructions per call of each kind on the program's thread, untraced, traced and with each other tool.
    Each kind runs alone, and the difference of runs of `calls` and 3 x `calls` calls cancels start-up and exit
    (MPI_Init, a tool's final log included). The MPI probes run as singletons (no launcher: valgrind must run the
    probe itself). The traced runs encode on the program's thread (IOLOOM_BACKGROUND_ENCODE=0): valgrind runs one
    thread at a time, so how much the encoder thread would take depends on its scheduling; encoding inline, the
    count is the same run after run, and the encoding (writer.c:flush_half) is counted apart."""
    missing = valgrind_missing("--instructions")
    if missing:
        raise RuntimeError(missing)
    rows = []
    for probe in builds:
        variants = _variants(probe, work / f"cg-{probe.label}", work, others or [], {"IOLOOM_BACKGROUND_ENCODE": "0"})
        for kind in probe.calls:
            counted = {label: callgrind_per_call([str(probe.binary), str(work / "cg.dat")], [kind], env, work, calls)
                       for label, env in variants.items()}
            untraced = counted.pop("untraced")[0]
            traced, encoding = counted.pop("traced")
            rows.append({"call": kind, "build": probe.label, "untraced": round(untraced, 1),
                         "traced": round(traced, 1), "added": round(traced - untraced, 1),
                         "added_without_encoding": round(traced - untraced - encoding, 1),
                         "others": {name: {"added": round(total - untraced, 1)}
                                    for name, (total, _) in counted.items()}})
    return rows


def _counted_malloc(env: dict[str, str]) -> dict[str, str]:
    """env with COUNTED_MALLOC added to the glibc tunables it may already set."""
    return {**env, "GLIBC_TUNABLES": ":".join(filter(None, (env.get("GLIBC_TUNABLES"), COUNTED_MALLOC)))}


def _base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}


READER_STEPS = ("open", "first_read", "read", "merged")


def reader_speed(traces: list[Path]) -> dict:
    """Decode every event column of the traces written above (one per round and build), per stream (what an
    analysis mapping over streams pays), twice: the first read (memory fresh from the OS: page faults included),
    then again (memory reused, as when an analysis reads stream after stream); then merged into one time-ordered
    table; opening is the chunk index and checksums. Each step's events/s is taken per trace and given as median,
    min and max over the traces (stats.spread): a best-of figure moves with one lucky read."""
    from ioloom.trace import open_trace

    rates: dict[str, list[float]] = {step: [] for step in READER_STEPS}
    events = size = 0
    for trace_dir in traces:
        seconds = dict.fromkeys(READER_STEPS, 0.0)
        start = time.perf_counter()
        trace = open_trace(trace_dir)
        seconds["open"] = time.perf_counter() - start
        rows = 0
        for stream in trace.streams:
            for step in ("first_read", "read"):
                start = time.perf_counter()
                got = stream.read().num_rows
                seconds[step] += time.perf_counter() - start
            rows += got
        start = time.perf_counter()
        trace.events()
        seconds["merged"] = time.perf_counter() - start
        for step, spent in seconds.items():
            rates[step].append(rows / spent)
        events += rows
        size += sum(p.stat().st_size for p in trace_dir.glob("*.ioloom"))
    return {"events": events, "traces": len(traces),
            **{f"{step}_events_per_s": stats.spread(rates[step]) for step in READER_STEPS},
            "bytes_per_event": round(size / events, 2) if events else None}


def _reader_line(reader: dict) -> str:
    def rate(step: str) -> str:
        figure = reader[f"{step}_events_per_s"]
        return f"{figure['median'] / 1e6:.1f} [{figure['min'] / 1e6:.1f}, {figure['max'] / 1e6:.1f}]"
    return (f"reader, {reader['events']:,} events in {reader['traces']} traces, all columns, per stream, M events/s "
            f"(median \\[min, max] over the traces): {rate('read')} (memory reused), {rate('first_read')} (first "
            f"read); merged and time-ordered: {rate('merged')}; opening (index and checksums): {rate('open')}; "
            f"{reader['bytes_per_event']} bytes/event on disk")


def _ranged(figures: dict[str, float]) -> str:
    return f"{figures['median']:.1f} [{figures['min']:.1f}, {figures['max']:.1f}]"


def _print_calls(console: Console, rows: list[dict], calls: int, rounds: int, others: list[str]) -> None:
    blocks = blocks_of(calls)
    table = Table(title=f"what tracing adds per call: thread CPU time, {rounds} rounds of {calls:,} calls of each "
                        f"kind in {blocks} blocks, untraced, traced and each tool compared taking turns block by "
                        "block; each round's figure its median block (difference), median [min, max] over rounds")
    columns = ["call", "build", "untraced ns", "traced ns", "added ns", "traced/untraced", f"added <= {GOAL_NS} ns"]
    for other in others:
        columns += [f"{other} added ns", f"{other}/untraced", f"less than {other}"]
    for column in columns:
        table.add_column(column, justify="left" if column in ("call", "build") else "right")
    for r in rows:
        theirs = [cell for other in others for cell in _their_cells(r["others"].get(other))]
        table.add_row(r["call"], r["build"], _ranged(r["untraced_ns"]), _ranged(r["traced_ns"]),
                      _ranged(r["added_ns"]), f"{r['ratio']['median']:.2f}", "yes" if r["meets_goal"] else "NO",
                      *theirs)
    console.print(table)


def _their_cells(theirs: dict | None) -> tuple[str, str, str]:
    if theirs is None:  # the tool has no library for this build
        return "-", "-", "-"
    return (_ranged(theirs["added_ns"]), f"{theirs['ratio']['median']:.2f}",
            "yes" if theirs["less_than_theirs"] else "NO")


def _print_instructions(console: Console, counted: list[dict], others: list[str]) -> None:
    table = Table(title="instructions per call on the program's thread (callgrind)")
    columns = ["call", "build", "untraced", "traced", "added", "added without encoding"]
    for other in others:
        columns += [f"{other} added", f"less than {other}"]
    for column in columns:
        table.add_column(column, justify="left" if column in ("call", "build") else "right")
    for r in counted:
        theirs = [cell for other in others for cell in
                  ((f"{r['others'][other]['added']:.1f}", "yes" if r["added"] < r["others"][other]["added"] else "NO")
                   if other in r["others"] else ("-", "-"))]
        table.add_row(r["call"], r["build"], f"{r['untraced']:.1f}", f"{r['traced']:.1f}", f"{r['added']:.1f}",
                      f"{r['added_without_encoding']:.1f}", *theirs)
    console.print(table)
    console.print("(the traced runs encode on the program's thread, as by default, so that the count does not "
                  "depend on how valgrind schedules threads; the last column leaves that encoding out, as "
                  "IOLOOM_BACKGROUND_ENCODE=1 does where a core is free; every counted run has glibc's "
                  f"{COUNTED_MALLOC}: with the default, Open MPI's per-call mallocs cost a number of instructions "
                  "that depends on the heap's layout, which differs from run to run)")


def _refuse(message: str) -> None:
    typer.echo(f"ioloom bench overhead: {message}", err=True)  # one line, whatever the terminal's width
    raise typer.Exit(2)


def cpu_not_allowed(cpu: int) -> str | None:
    """Why --cpu `cpu` cannot run the probes (this process may not use it), or None."""
    allowed = sorted(os.sched_getaffinity(0))
    if cpu in allowed:
        return None
    return f"--cpu {cpu}: this process may run on CPUs {', '.join(map(str, allowed))} only; give one of them"


def _pinned_cpu(cpu: int | None) -> int:
    """The CPU the timed runs share: `cpu`, which this process must be allowed to use, or the last one it may."""
    if cpu is None:
        return sorted(os.sched_getaffinity(0))[-1]
    refused = cpu_not_allowed(cpu)
    if refused:
        _refuse(f"{refused} or leave --cpu out")
    return cpu


def _other_tools(compare: list[str], builds: list[str]) -> list[Tool]:
    """NAME=LIBRARY or NAME@BUILD=LIBRARY items, LIBRARY one path or several joined by ':', one tool per name; one
    line and exit 2 for a malformed item, an unknown build or a missing library."""
    libraries: dict[str, dict[str | None, tuple[Path, ...]]] = {}
    for item in compare:
        key, _, library = item.partition("=")
        name, at, build = key.partition("@")
        paths = tuple(Path(part) for part in library.split(":"))
        if not name or not library or not all(path.is_file() for path in paths) or name in ("untraced", "traced"):
            _refuse(f"--compare {item}: give NAME=LIBRARY (or NAME@BUILD=LIBRARY) with an existing shared library, "
                    "or several joined by ':', e.g. darshan=/opt/darshan/lib/libdarshan.so")
        if at and build not in builds:
            _refuse(f"--compare {item}: no probe build named {build}: the builds here are {', '.join(builds)}")
        libraries.setdefault(name, {})[build if at else None] = paths
    return [Tool(name, by_build) for name, by_build in libraries.items()]


@app.command("overhead")
def command(
    calls: int = typer.Option(200_000, "--calls", min=1000, help="Calls of each kind per run."),
    rounds: int = typer.Option(stats.PUBLISHED_ROUNDS, "--rounds", "--repeats", min=1,
                               help="Rounds of an untraced and a traced run; medians, minima and maxima over them."),
    quick: bool = typer.Option(False, "--quick", help=f"Allow fewer than {stats.PUBLISHED_ROUNDS} rounds."),
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
    instructions: bool = typer.Option(False, "--instructions",
                                      help="Also count instructions added per call with callgrind (needs valgrind)."),
    instruction_calls: int = typer.Option(100_000, "--instruction-calls", min=1000,
                                          help="Calls of each kind in the shorter callgrind run (the longer: 3x)."),
    build: list[str] = typer.Option([], "--build",
                                    help="Only this build of the probe: posix+stdio, or an MPI's name (repeatable)."),
    pin: bool = typer.Option(True, "--pin/--no-pin",
                             help="Run every timed probe on one CPU (--cpu), the default: the probes of a round take "
                                  "turns, so they never compete for it, and none spends a round on a slower CPU than "
                                  "the others; --no-pin leaves them to the scheduler."),
    cpu: int | None = typer.Option(None, "--cpu", min=0,
                                   help="The CPU of --pin, which it implies (default: the last one this process may "
                                        "use)."),
    compare: list[str] = typer.Option([], "--compare", metavar="NAME[@BUILD]=LIBRARY[:LIBRARY...]",
                                      help="Also time the probe with another preloaded tool (e.g. "
                                           "darshan=/opt/darshan/lib/libdarshan.so) in the same rounds, and count "
                                           "its instructions with --instructions; NAME@BUILD=LIBRARY gives its "
                                           "library for one build (a tool built for one MPI); several libraries "
                                           "joined by ':' are preloaded in that order (another ioloom build for an "
                                           "MPI: its MPI wrappers, then its tracer); its settings come from the "
                                           "environment (repeatable)."),
) -> None:
    """Added CPU ns per traced call (pwrite, pread, write, read, fwrite, fread, open+close, stat, lseek,
    MPI_File_write_at, MPI_File_write_at_all, MPI_File_read_at, MPI_File_write, MPI_File_write_all, MPI_File_read)
    against the goal, and the reader's events/s."""
    too_few = stats.rounds_allowed(rounds, quick, "--rounds")
    if too_few:
        _refuse(too_few)
    labels = [probe.label for probe in probes()]
    others = _other_tools(compare, labels)
    builds = [probe for probe in probes() if not build or probe.label in build]
    if not builds:
        _refuse(f"no probe build named {', '.join(build)}: the builds here are {', '.join(labels)}")
    pinned = _pinned_cpu(cpu) if pin or cpu is not None else None
    load_before = stats.load_average()
    with tempfile.TemporaryDirectory(prefix="ioloom-overhead-") as tmp:
        try:
            rows, traces = measure(calls, rounds, Path(tmp), builds, others, pinned)
            reader = reader_speed(traces)
            counted = instructions_per_call(Path(tmp), builds, instruction_calls, others) if instructions else None
        except (RuntimeError, subprocess.CalledProcessError) as err:
            typer.echo(f"ioloom bench overhead: {' '.join(str(err).split())}", err=True)
            raise typer.Exit(1) from None
    result: dict[str, Any] = {"calls": calls, "rounds": rounds, "blocks": blocks_of(calls),
                              "block_calls": calls // blocks_of(calls), "cpu": pinned, "goal_added_ns": GOAL_NS,
                              "load": {"before": load_before, "after": stats.load_average()}, "calls_overhead": rows,
                              "reader": reader}
    if counted:
        result["instructions_per_call"] = counted
    if as_json:
        print(json.dumps(result, indent=2))
        return
    console = Console()
    _print_calls(console, rows, calls, rounds, [tool.name for tool in others])
    console.print(f"load average (1, 5, 15 min): {result['load']['before']} before, {result['load']['after']} after; "
                  + (f"every run on CPU {pinned}" if pinned is not None else "runs not pinned"))
    console.print(_reader_line(reader))
    if counted:
        _print_instructions(console, counted, [tool.name for tool in others])
