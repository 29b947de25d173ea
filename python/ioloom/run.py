"""`ioloom run [-o DIR] [--layers posix,stdio,mpiio,async] -- CMD`: trace any command without rebuilding it.

Preloads libioloom-trace.so (and libioloom-trace-mpi-<impl>.so for the MPI the command uses), points the
tracer at DIR, runs CMD, exits with CMD's exit code, and prints where the trace went with a short summary."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer

from ioloom import mpi, paths
from ioloom.coord.log import LogError

if TYPE_CHECKING:
    import numpy as np

LAYERS = ("posix", "stdio", "mpiio", "async")  # the traced layers one may choose (process: always)
# Launchers and daemons of both MPIs: they carry LD_PRELOAD to the ranks but their own I/O is not the program's.
LAUNCHERS = ("mpirun", "mpiexec", "orterun", "orted", "prterun", "prted", "mpiexec.openmpi", "mpirun.openmpi",
             "mpiexec.hydra", "mpiexec.mpich", "mpirun.mpich", "hydra_pmi_proxy", "hydra_nameserver")


def fail(message: str) -> NoReturn:
    typer.echo(f"ioloom run: {message}", err=True)
    raise typer.Exit(2)


def parse_layers(text: str) -> list[str]:
    layers = [item.strip() for item in text.split(",") if item.strip()]
    unknown = [item for item in layers if item not in LAYERS]
    if unknown or not layers:
        fail(f"unknown layer(s) {', '.join(unknown) or '(none given)'}: choose from {', '.join(LAYERS)}, "
             f"e.g. --layers posix,mpiio")
    return layers


def output_dir(requested: Path | None) -> Path:
    """The trace directory: a new one under the trace root unless given; never one that already holds a trace."""
    out = requested or paths.trace_root() / time.strftime("%Y%m%d-%H%M%S")
    out = out.resolve()
    if out.exists() and not out.is_dir():
        fail(f"{out} is a file; give a directory for the trace with -o")
    if out.is_dir() and any(out.glob("*.ioloom")):
        fail(f"{out} already holds a trace; give another directory with -o (or remove the old trace first)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        fail(f"cannot create the trace directory {out}: {err.strerror}; give a directory you can write with -o")
    return out


def libraries(argv: list[str], layers: list[str]) -> list[Path]:
    """The libraries to preload: the MPI wrappers for the command's MPI (when mpiio is traced), then the tracer."""
    try:
        libs = [paths.native_lib("ioloom-trace")]
    except paths.NativeMissing as err:
        fail(str(err))
    detected = mpi.examine(argv)
    impl = detected.impl
    if impl and "mpiio" in layers and detected.disagreement():
        typer.echo(f"ioloom run: warning: {detected.disagreement()}", err=True)
    if impl and "mpiio" in layers:
        try:
            libs.insert(0, paths.native_lib(f"ioloom-trace-mpi-{impl.name}"))
        except paths.NativeMissing:
            typer.echo(f"ioloom run: libioloom-trace-mpi-{impl.name}.so is not built: MPI-IO calls will not be traced "
                       f"(run `make build`)", err=True)
    return libs + launcher_libraries(detected.launcher, argv)


def launcher_libraries(launcher: mpi.MpiImpl | None, argv: list[str]) -> list[Path]:
    """What the launch itself needs preloaded into the ranks (mpi.MpiImpl.idle_yield: MPICH's ranks, and Open
    MPI's on more ranks than cores, sleep when they wait), for a command argv that starts with `launcher`
    (mpi.examine's)."""
    try:
        return launcher.idle_yield(mpi.launched_ranks(argv)) if launcher else []
    except paths.NativeMissing as err:
        fail(str(err))


def traced_environment(libs: list[Path], out: Path, layers: list[str]) -> dict[str, str]:
    env = dict(os.environ)
    existing = env.get("LD_PRELOAD", "")
    env["LD_PRELOAD"] = " ".join([str(lib) for lib in libs] + ([existing] if existing else []))
    env["IOLOOM_TRACE_DIR"] = str(out)
    env["IOLOOM_LAYERS"] = ",".join(layers)
    env.setdefault("IOLOOM_SKIP_PROGRAMS", ",".join(LAUNCHERS))
    return env


FOLD_MAX_QUANTUM = 10 ** 9  # native/trace/fold.h IOLOOM_FOLD_MAX_QUANTUM


def fold_settings(fold: bool, quantum: int | None) -> dict[str, str]:
    """The tracer's settings for --fold and --fold-quantum-ns."""
    if quantum is not None and not fold:
        fail("--fold-quantum-ns needs --fold (the times of an unfolded trace are always exact)")
    return {"IOLOOM_FOLD": "1", "IOLOOM_FOLD_QUANTUM_NS": str(quantum or 1)} if fold else {}


def logfs_mounts(mounts: list[Path]) -> tuple[Path, dict[str, str]]:
    """Re-weave as well as trace: the logfs library, to preload after the tracer (so the trace shows the program's
    logical I/O on each container and logfs's physical log and index I/O beneath it), and its mount settings."""
    from ioloom.logfs import preload

    missing = [str(m) for m in mounts if not m.is_dir()]
    if missing:
        fail(f"--logfs needs existing directories: {', '.join(missing)} is not one (create it, or name another)")
    try:
        return preload.library(), {"IOLOOM_LOGFS_ROOTS": preload.roots_value({m.resolve(): [] for m in mounts}),
                                   **preload.own_log_collectives()}
    except paths.NativeMissing as err:
        fail(str(err))


def coord_library() -> Path:
    """The coordination client for unmodified programs, preloaded first (before the tracer, which so records
    the writes without the waits)."""
    try:
        return paths.native_lib("ioloom-coord-preload")
    except paths.NativeMissing as err:
        fail(str(err))


def coord_settings(address: str, cmd: list[str], out: Path) -> dict[str, str]:
    """The preloaded client's settings: the coordinator, one name for all the command's processes (so they share
    a phase), where their counters go. IOLOOM_COORD_NAME, _CORES, _BYTES and _IDLE set by the user stand."""
    settings = {"IOLOOM_COORD": address, "IOLOOM_COORD_LOG": str(out / "coord.jsonl")}
    if "IOLOOM_COORD_NAME" not in os.environ:
        settings["IOLOOM_COORD_NAME"] = f"{Path(cmd[0]).name.replace(' ', '_')}-{os.getpid()}"
    return settings


def coord_summary(out: Path) -> list[str]:
    """One line: what coordination did to the command's processes (from their counters)."""
    from ioloom.coord import log
    rows = log.read(out / "coord.jsonl")
    if not rows:
        return ["  coord: no process wrote to a regular file"]
    total = {k: sum(r[k] for r in rows) for k in ("phases", "waits", "waited_seconds", "timeouts", "lost")}
    predicted = sum(a["bytes_from"] == "predictor" for r in rows for a in r["announced"])
    return [f"  coord: {len(rows)} processes, {total['phases']} phases, told to wait {total['waits']} times "
            f"({total['waited_seconds']:.3f} s waiting), {total['timeouts']} waits past their bound, "
            f"{total['lost']} without the coordinator (wrote anyway)"
            + (f"; {predicted} phases announced with the predictor's bytes" if predicted else "")]


def forwarded_variables(env: dict[str, str]) -> list[str]:
    """What ranks on other hosts need: the preload list and every IOLOOM_* setting, the user's and ours."""
    return sorted(name for name in env if name == "LD_PRELOAD" or name.startswith("IOLOOM_"))


def launch_command(argv: list[str], env: dict[str, str]) -> list[str]:
    """An MPI launcher may start ranks on other hosts without the caller's environment (Open MPI passes only the
    variables named with -x; MPICH's Hydra passes all unless told -genvnone): name ours to it explicitly."""
    launcher = mpi.launcher_impl(argv[0])
    if launcher is None:
        return argv
    if launcher.name == "openmpi":
        forwarded = [arg for name in forwarded_variables(env) for arg in ("-x", name)]
    else:
        forwarded = [arg for name in forwarded_variables(env) for arg in ("-genv", name, env[name])]
    return [argv[0], *forwarded, *argv[1:]]


def trace(cmd: list[str], out: Path, layers: list[str], libs: list[Path], settings: dict[str, str],
          timeout: float | None = None) -> int:
    """Run cmd with libs preloaded, its processes tracing `layers` into out, with `settings` added to the
    environment: `ioloom run` before its summary. The command's exit status; with a timeout (seconds), a command
    still running then has its process group killed and TimeoutError is raised."""
    env = {**traced_environment(libs, out, layers), **settings}
    return run_traced(launch_command(cmd, env), env, timeout)


def run_traced(argv: list[str], env: dict[str, str], timeout: float | None = None) -> int:
    if not shutil.which(argv[0]) and not Path(argv[0]).is_file():
        fail(f"command not found: {argv[0]} (to run a shell pipeline, use: ioloom run -- sh -c '...')")
    expired = False
    try:
        # Without a timeout Ctrl-C reaches the command (same process group) and ioloom waits for it to finish
        # writing its trace; with one, the command has a process group of its own, to kill on expiry.
        with subprocess.Popen(argv, env=env, start_new_session=timeout is not None) as proc:
            while True:
                try:
                    code = proc.wait(timeout)
                    break
                except KeyboardInterrupt:
                    continue
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    expired, code = True, proc.wait()
                    break
    except OSError as err:
        fail(f"cannot run {argv[0]}: {err.strerror}")
    if expired:
        raise TimeoutError(f"{' '.join(argv)}: still running after {timeout:g} s; its process group was killed (its "
                           "trace is incomplete)")
    return 128 - code if code < 0 else code


def stream_totals(stream) -> tuple[np.ndarray, np.ndarray]:
    """(events per layer, [bytes read, bytes written] per layer) of one stream, vectorised: bytes moved by the
    calls that move data (ret_bytes, or the bytes asked when the call completes later, as non-blocking MPI-IO)."""
    import numpy as np

    from ioloom.analysis import ops

    events = np.zeros(len(ops.LAYERS), np.int64)
    per_layer = np.zeros((len(ops.LAYERS), 2), np.int64)
    for table in stream.ranges(["layer", "op", "ret_bytes", "req_bytes", "aux"]):
        layer = ops.layer_codes(table.column("layer"))
        kind = ops.kind_codes(table.column("op"), table.column("aux").to_numpy())
        ret, req = table.column("ret_bytes").to_numpy(), table.column("req_bytes").to_numpy()
        moved = np.where(ret >= 0, ret, np.maximum(req, 0))
        for column, which in enumerate((ops.READ, ops.WRITE)):
            mine = kind == which
            per_layer[:, column] += np.bincount(layer[mine], moved[mine], minlength=len(ops.LAYERS)).astype(np.int64)
        events += np.bincount(layer, minlength=len(ops.LAYERS))
    return events, per_layer


def summary(out: Path) -> list[str]:
    """Where the trace went and three lines: events per layer, bytes per layer, dropped events and problems.
    Read range by range, so it costs little memory whatever the size of the trace."""
    import numpy as np

    from ioloom.analysis.ops import LAYERS as ALL_LAYERS
    from ioloom.trace import open_trace

    trace = open_trace(out)
    counts, moved = np.zeros(len(ALL_LAYERS), np.int64), np.zeros((len(ALL_LAYERS), 2), np.int64)
    for stream in trace.streams:
        stream_counts, stream_moved = stream_totals(stream)
        counts += stream_counts
        moved += stream_moved
    order = np.argsort(-counts, kind="stable")
    per_layer = ", ".join(f"{ALL_LAYERS[i]} {counts[i]:,}" for i in order if counts[i])
    moved_text = [f"{name} read {read:,} B, written {written:,} B"
                  for name, (read, written) in zip(ALL_LAYERS, moved) if read or written]
    problems = f"; {len(trace.problems)} problem(s): " + " | ".join(trace.problems[:3]) if trace.problems else ""
    return [f"ioloom: trace of {len(trace.streams)} process(es) in {out}",
            f"  events: {counts.sum():,}" + (f" ({per_layer})" if per_layer else ""),
            "  bytes: " + ("; ".join(moved_text) or "none moved"),
            f"  dropped: {trace.meta['dropped_events']:,} events{problems}"] + fold_summary(trace)


def fold_summary(trace) -> list[str]:
    """A line on folding (--fold): events written folded, at which time resolution, and those written plain and
    why (the stream's INFO, written by native/trace/writer.c); none when nothing was folded."""
    folded = sum(int(s.info.get("folded_events", 0)) for s in trace.streams)
    plain: Counter[str] = Counter()
    for stream in trace.streams:
        for key, value in stream.info.items():
            if key.startswith("fold_fallback:"):
                plain[key.partition(":")[2]] += int(value)
    if not folded and not plain:
        return []
    quanta = sorted({int(s.info["fold_quantum_ns"]) for s in trace.streams if "fold_quantum_ns" in s.info})
    resolution = ", ".join(f"{q:,} ns" for q in quanta) or "-"
    why = ", ".join(f"{count:,} {reason.replace('_', ' ')}" for reason, count in sorted(plain.items()))
    return [f"  folded: {folded:,} events, times at {resolution}" + (f"; written plain: {why}" if why else "")]


def command(
    cmd: list[str] = typer.Argument(..., metavar="-- CMD [ARGS]...", help="The command to trace (after --)."),
    output: Path = typer.Option(None, "-o", "--output", help="Trace directory (default: ./ioloom-traces/<time>)."),
    layers: str = typer.Option(",".join(LAYERS), "--layers", help="Layers to trace, comma-separated."),
    logfs: list[Path] = typer.Option([], "--logfs", metavar="DIR", help="Also run over logfs: files the command "
                                     "creates under DIR become containers of per-writer logs (repeatable)."),
    coord: str = typer.Option(None, "--coord", metavar="ADDR", help="Coordinate the command's writes with other "
                              "applications through the coordinator at ADDR (`ioloom coord serve`; docs/coord.md)."),
    fold: bool = typer.Option(False, "--fold", help="Write each buffer of events folded by the predictor's grammar "
                              "(FOLDED chunks, docs/trace-format.md): read back as the same events."),
    fold_quantum_ns: int = typer.Option(None, "--fold-quantum-ns", min=1, max=FOLD_MAX_QUANTUM, metavar="Q",
                                        help="With --fold: times rounded down to multiples of Q ns (default 1: "
                                             "exact)."),
) -> None:
    """Run CMD with the tracer preloaded; every process it starts writes a stream into the trace directory."""
    chosen = parse_layers(layers)
    logfs_lib, logfs_settings = logfs_mounts(logfs) if logfs else (None, {})
    out = output_dir(output)
    libs = libraries(cmd, chosen) + ([logfs_lib] if logfs_lib else [])
    settings = {**logfs_settings, **fold_settings(fold, fold_quantum_ns)}
    if coord:
        libs.insert(0, coord_library())
        settings.update(coord_settings(coord, cmd, out))
    code = trace(cmd, out, chosen, libs, settings)
    try:
        for line in summary(out) + (coord_summary(out) if coord else []):
            typer.echo(line, err=True)
    except FileNotFoundError:
        typer.echo(f"ioloom: no trace was written to {out} (did the command start any traced process?)", err=True)
    except LogError as e:  # the command ran; its coordination log cannot be summed up
        typer.echo(f"ioloom: {e}", err=True)
    raise typer.Exit(code)
