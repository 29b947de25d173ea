"""`ioloom container ls|stat|cat|flatten|check|recover|rm`: look at and repair logfs containers."""
from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import typer

from ioloom.errors import NO_SPACE
from ioloom.progress import QUIET_OPTION

app = typer.Typer(help="Inspect, flatten, check and repair logfs containers (a logical file stored as logs + index).",
                  no_args_is_help=True)


def _fail(message: str) -> None:
    print(f"ioloom container: {message}", file=sys.stderr)
    raise typer.Exit(2)


def _problem(err: OSError | ValueError) -> str:
    """What went wrong (a FormatError, which says it all, or an OSError), in one line that says what to do."""
    if not isinstance(err, OSError):
        return str(err)
    where = f"{err.filename}: " if err.filename else ""
    if err.errno in NO_SPACE:
        return (f"{where}{err.strerror}; free space (or raise the quota or file-size limit) or write to another "
                "file system, then run the command again. What it was replacing is intact (each file is renamed "
                "into place only when complete)")
    return f"{where}{err.strerror or err}"


def _command(name: str, **settings):
    """app.command(name), with the errors a user can act on (a damaged container, a full disk, a missing or
    unreadable file) told in one line and exit status 2 instead of a traceback."""
    def register(fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            from ioloom.logfs.format import FormatError
            try:
                return fn(*args, **kwargs)
            except (FormatError, OSError) as err:
                _fail(_problem(err))
        return app.command(name, **settings)(run)
    return register


def _tools():
    from ioloom.logfs import tools  # numpy only when a subcommand runs: keeps `ioloom --help` fast
    return tools


def _one(path: str) -> Path:
    from ioloom.logfs.format import is_container, strip_prefix
    if not is_container(path) and not _tools().is_packed(path):
        _fail(f"{path} is not a logfs container (a directory with ioloom-logfs.meta); "
              "`ioloom container ls DIR` lists the containers under DIR")
    return strip_prefix(path)


def _bar(what: str, path: str, quiet: bool):
    """The progress bar of a tool working through a container's bytes (ioloom.progress: a terminal only)."""
    from ioloom import progress
    return lambda total: progress.bar(total, f"{what} {path}", "bytes", quiet)


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


@_command("ls")
def ls(paths: list[str] = typer.Argument(..., help="Containers, or directories to search for containers."),
       as_json: bool = typer.Option(False, "--json", help="One JSON object per container.")) -> None:
    """List containers with their logical size, writers and files (a damaged one is named and skipped)."""
    from ioloom.logfs.format import PACK_NAME, FormatError
    tools = _tools()
    found = [c for p in paths for c in tools.find_containers(p)]
    if not found:
        _fail(f"no containers under {', '.join(paths)}")
    damaged = 0
    for c in found:
        try:
            s = tools.summary(c)
            packed = tools.packed_files(c) if c.name == PACK_NAME else {}
        except (FormatError, OSError) as err:
            print(f"ioloom container: skipped {c}: {_problem(err)}", file=sys.stderr)
            damaged += 1
            continue
        if as_json:
            print(json.dumps({**s, "packed": packed} if packed else s))
            continue
        print(f"{s['size']:>14}  {s['writers']:>5} writers  {s['files']:>5} files  {s['index_bytes']:>9} B index  {c}"
              + (f"  (a pack of {len(packed)} files)" if c.name == PACK_NAME else ""))
        for name, size in packed.items():
            print(f"{size:>14}  packed  {c.parent / name}")
    if damaged:
        raise typer.Exit(1)


@_command("stat")
def stat(path: str, as_json: bool = typer.Option(False, "--json")) -> None:
    """Everything about one container: format, backends, index size, patterns, logical size."""
    s = _tools().summary(_one(path))
    if as_json:
        print(json.dumps(s, indent=1))
        return
    for key, value in s.items():
        shown = _human(value) + f" ({value})" if key in ("size", "index_bytes", "log_bytes") else value
        print(f"{key:>16}: {shown}")


@_command("cat")
def cat(path: str, quiet: bool = QUIET_OPTION) -> None:
    """Write the logical file to standard output (progress on the terminal only when the output goes elsewhere)."""
    _tools().cat(_one(path), sys.stdout.buffer, _bar("cat", path, quiet or sys.stdout.isatty()))


@_command("flatten")
def flatten(path: str, target: Path = typer.Argument(..., help="The plain file to write."),
            quiet: bool = QUIET_OPTION) -> None:
    """Write the logical file as one plain file (kernel copies of each extent)."""
    size = _tools().flatten(_one(path), target, _bar("flatten", path, quiet))
    print(f"{target}: {size} bytes")


@_command("check")
def check(path: str, quiet: bool = QUIET_OPTION) -> None:
    """Verify the index against the logs (checksums, offsets, unindexed records). Exit 1 on a problem."""
    report = _tools().check(_one(path), _bar("checking", path, quiet))
    for problem in report.problems:
        print(f"problem: {problem}")
    print(f"{path}: {report.records_checked} records checked, "
          f"{'OK' if report.ok else f'{len(report.problems)} problem(s)'}")
    if not report.ok:
        raise typer.Exit(1)


@_command("recover")
def recover(path: str, quiet: bool = QUIET_OPTION) -> None:
    """Rebuild the index from the record journals after a crash (records whose data in the log is intact)."""
    stats = _tools().recover(_one(path), _bar("recovering", path, quiet))
    print(f"{path}: {stats['records']} records from {stats['logs']} logs re-indexed into {stats['entries']} entries"
          + (f" ({stats['rebuilt']} records of lost record journals rebuilt from the index and the logs)"
             if stats["rebuilt"] else ""))


def _fanout(text: str) -> str:
    """--fanout as IOLOOM_LOGFS_FANOUT takes it (docs/logfs-format.md), or refused with the option's name."""
    if text not in ("rank", "node") and not (text.isdigit() and int(text) >= 1):
        raise typer.BadParameter(f"{text!r}: give rank, node, or a number of ranks >= 1 per log")
    return text


@_command("run", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def run(ctx: typer.Context,
        mounts: list[Path] = typer.Option(..., "--mount", "-m", help="A directory whose new files become containers "
                                          "(repeatable)."),
        backends: list[Path] = typer.Option([], "--backend", "-b", help="An extra backend directory for the logs "
                                            "of every mount (repeatable)."),
        fanout: str = typer.Option("rank", callback=_fanout, help="Writers per log: rank, node, or a number of ranks."),
        pack: bool = typer.Option(False, help="Pack a directory's new files into one container (1-N)."),
        spread: int = typer.Option(32, min=0, max=4096, help="Shared directories per extra backend that new "
                                   "containers' logs are spread over (0: a directory per container)."),
        two_phase: bool = typer.Option(False, "--two-phase", help="Keep MPI-IO's collective buffering (by default "
                                       "each rank writes its own data to its own log, as PLFS's driver did).")) -> None:
    """Run a command (e.g. an mpiexec line) over logfs: `ioloom container run -m /scratch/lfs -- mpiexec -n 4 ./app`."""
    import os
    import subprocess

    from ioloom.logfs import preload
    from ioloom.paths import NativeMissing
    if not ctx.args:
        _fail("give the command to run after --, e.g. ioloom container run -m DIR -- mpiexec -n 4 ./app")
    for directory in (*mounts, *backends):
        if not directory.is_dir():
            _fail(f"{directory} is not a directory: create it first (mounts and backends must exist)")
    try:
        # preloads already in the environment (another tool's) stay, in front: they see the logical I/O
        env = preload.env({m.resolve(): [b.resolve() for b in backends] for m in mounts},
                          preload_first=os.environ.get("LD_PRELOAD"), two_phase=two_phase, fanout=fanout,
                          spread=str(spread))
    except NativeMissing as err:
        _fail(str(err))
    if pack:
        env["IOLOOM_LOGFS_PACK"] = ":".join(str(m.resolve()) for m in mounts)
    raise typer.Exit(subprocess.run(ctx.args, env={**os.environ, **env}).returncode)


@_command("rm")
def rm(paths: list[str]) -> None:
    """Delete containers (from every backend)."""
    for path in paths:
        _tools().remove(_one(path))
