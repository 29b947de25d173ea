"""`ioloom container ls|stat|cat|flatten|check|recover|rm`: look at and repair logfs containers."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

app = typer.Typer(help="Inspect, flatten, check and repair logfs containers (a logical file stored as logs + index).",
                  no_args_is_help=True)


def _fail(message: str) -> None:
    print(f"ioloom container: {message}", file=sys.stderr)
    raise typer.Exit(2)


def _tools():
    from ioloom.logfs import tools  # numpy only when a subcommand runs: keeps `ioloom --help` fast
    return tools


def _one(path: str) -> Path:
    from ioloom.logfs.format import is_container, strip_prefix
    if not is_container(path) and not _tools().is_packed(path):
        _fail(f"{path} is not a logfs container (a directory with ioloom-logfs.meta); "
              "`ioloom container ls DIR` lists the containers under DIR")
    return strip_prefix(path)


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


@app.command("ls")
def ls(paths: list[str] = typer.Argument(..., help="Containers, or directories to search for containers."),
       as_json: bool = typer.Option(False, "--json", help="One JSON object per container.")) -> None:
    """List containers with their logical size, writers and files."""
    from ioloom.logfs.format import PACK_NAME
    tools = _tools()
    found = [c for p in paths for c in tools.find_containers(p)]
    if not found:
        _fail(f"no containers under {', '.join(paths)}")
    for c in found:
        s = tools.summary(c)
        packed = tools.packed_files(c) if c.name == PACK_NAME else {}
        if as_json:
            print(json.dumps({**s, "packed": packed} if packed else s))
            continue
        print(f"{s['size']:>14}  {s['writers']:>5} writers  {s['files']:>5} files  {s['index_bytes']:>9} B index  {c}"
              + (f"  (a pack of {len(packed)} files)" if c.name == PACK_NAME else ""))
        for name, size in packed.items():
            print(f"{size:>14}  packed  {c.parent / name}")


@app.command("stat")
def stat(path: str, as_json: bool = typer.Option(False, "--json")) -> None:
    """Everything about one container: format, backends, index size, patterns, logical size."""
    s = _tools().summary(_one(path))
    if as_json:
        print(json.dumps(s, indent=1))
        return
    for key, value in s.items():
        shown = _human(value) + f" ({value})" if key in ("size", "index_bytes", "log_bytes") else value
        print(f"{key:>16}: {shown}")


@app.command("cat")
def cat(path: str) -> None:
    """Write the logical file to standard output."""
    _tools().cat(_one(path), sys.stdout.buffer)


@app.command("flatten")
def flatten(path: str, target: Path = typer.Argument(..., help="The plain file to write.")) -> None:
    """Write the logical file as one plain file (kernel copies of each extent)."""
    size = _tools().flatten(_one(path), target)
    print(f"{target}: {size} bytes")


@app.command("check")
def check(path: str) -> None:
    """Verify the index against the logs (checksums, offsets, unindexed records). Exit 1 on a problem."""
    report = _tools().check(_one(path))
    for problem in report.problems:
        print(f"problem: {problem}")
    print(f"{path}: {report.records_checked} records checked, "
          f"{'OK' if report.ok else f'{len(report.problems)} problem(s)'}")
    if not report.ok:
        raise typer.Exit(1)


@app.command("recover")
def recover(path: str) -> None:
    """Rebuild the index from the record journals after a crash (records whose data in the log is intact)."""
    stats = _tools().recover(_one(path))
    print(f"{path}: {stats['records']} records from {stats['logs']} logs re-indexed into {stats['entries']} entries")


@app.command("run", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def run(ctx: typer.Context,
        mounts: list[Path] = typer.Option(..., "--mount", "-m", help="A directory whose new files become containers "
                                          "(repeatable)."),
        backends: list[Path] = typer.Option([], "--backend", "-b", help="An extra backend directory for the logs "
                                            "of every mount (repeatable)."),
        fanout: str = typer.Option("rank", help="Writers per log: rank, node, or a number of ranks."),
        pack: bool = typer.Option(False, help="Pack a directory's new files into one container (1-N).")) -> None:
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
        env = preload.env({m.resolve(): [b.resolve() for b in backends] for m in mounts}, fanout=fanout)
    except NativeMissing as err:
        _fail(str(err))
    if pack:
        env["IOLOOM_LOGFS_PACK"] = ":".join(str(m.resolve()) for m in mounts)
    raise typer.Exit(subprocess.run(ctx.args, env={**os.environ, **env}).returncode)


@app.command("rm")
def rm(paths: list[str]) -> None:
    """Delete containers (from every backend)."""
    for path in paths:
        _tools().remove(_one(path))
