"""Runs a replay written by script.write (docs/replay.md, "Running"): creates the files that existed before the
traced run (their sizes), the directories, and the progress counters, then launches `ioloom-replay` (one process
per script) or, for an MPI trace, `ioloom-replay-<mpi>` under mpiexec (one rank per script), optionally traced
by `ioloom run`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ioloom import mpi, paths
from ioloom.replay.script import SCRIPTS, VERSION


class ReplayError(RuntimeError):
    """The replay cannot run as asked; the message says what to do."""


def manifest_of(directory: Path) -> dict:
    path = directory / SCRIPTS / "manifest.json"
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        raise ReplayError(f"{directory}: no replay here (no readable {path}); write one with "
                          "`ioloom replay write`") from None
    if manifest.get("version") != VERSION:
        raise ReplayError(f"{path}: replay version {manifest.get('version')}, this ioloom reads {VERSION}; "
                          "write the replay again")
    return manifest


def prepare(directory: Path, manifest: dict) -> Path:
    """The files and directories the replay starts from; the progress file. Refuses to overwrite a file."""
    for relative in manifest["files"]:
        if (directory / relative).exists():
            raise ReplayError(f"{directory / relative} exists (an earlier replay?): a replay starts from the files "
                              "as the traced run found them; write it to a new directory")
    for relative in manifest["files"]:
        (directory / relative).parent.mkdir(parents=True, exist_ok=True)
    for relative, size in manifest["initial_sizes"].items():
        with open(directory / relative, "wb") as f:
            f.truncate(size)
    progress = directory / SCRIPTS / "progress"
    progress.write_bytes(bytes(8 * len(manifest["processes"])))
    return progress


def command(directory: Path, manifest: dict, progress: Path, gaps: bool) -> tuple[list[str], dict[str, str]]:
    """The replayer's command line and the environment it needs on top of ours."""
    scripts = [str(directory / SCRIPTS / p["script"]) for p in manifest["processes"]]
    flags = [*(["--gaps"] if gaps else []), "--sync", str(progress)]
    if manifest["mpi"] is None:
        return [str(paths.native_bin("ioloom-replay")), *flags, *scripts], {}
    impl = mpi.by_name(manifest["mpi"])
    binary = paths.native_bin(f"ioloom-replay-{impl.name}")
    return impl.launch(len(scripts), [str(binary), *flags, *scripts]), impl.launch_env(len(scripts))


def run(directory: Path, trace: Path | None = None, gaps: bool = False) -> subprocess.CompletedProcess:
    """Runs the replay in `directory` (traced into `trace` when given); the finished process, output captured."""
    directory = directory.resolve()  # the replay runs there: paths given relative to here must still hold
    manifest = manifest_of(directory)
    progress = prepare(directory, manifest)
    argv, env = command(directory, manifest, progress, gaps)
    if trace is not None:
        argv = [sys.executable, "-m", "ioloom", "run", "-o", str(trace.resolve()), "--", *argv]
    return subprocess.run(argv, cwd=directory, env={**os.environ, **env}, capture_output=True, text=True)
