"""What a probe target is and how one measurement on it is made.

A target is named on the command line as
- a directory (`/scratch/a`, `ost:3@/lustre/dir` for Lustre OST 3 through `lfs setstripe -i 3 -c 1`): real
  writers, each a process writing its own file there, timed with the system-wide monotonic clock;
- `sim:N`, target N of a simulated file system (`--sim PLATFORM.toml`), measured by `ioloom sim` in batches
  (campaign.measure_simulated).

One measurement: `writers` processes start together (a barrier), each writes `volume` bytes in requests of
`request` bytes to a new file, fsyncs it when asked, and stops its clock; the file is removed afterwards.
"""
from __future__ import annotations

import multiprocessing
import os
import queue
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

PROBE_FILE = ".ioloom-probe"   # prefix of the files a measurement writes (and always removes)


class TargetError(ValueError):
    """A target that cannot be measured; the message names it and what to do."""


@dataclass(frozen=True)
class Target:
    name: str       # as given
    kind: str       # dir | ost | sim
    path: Path | None = None
    index: int = -1  # OST index, or the simulated target's number


def parse(spec: str) -> Target:
    """A target from its command-line name (module docstring)."""
    if spec.startswith("sim:"):
        number = spec[4:]
        if not number.isdigit():
            raise TargetError(f"target {spec!r}: a simulated target is sim:N with N a target number, e.g. sim:3")
        return Target(spec, "sim", index=int(number))
    if spec.startswith("ost:"):
        index, _, where = spec[4:].partition("@")
        if not index.isdigit() or not where:
            raise TargetError(f"target {spec!r}: a Lustre target is ost:INDEX@DIRECTORY, e.g. ost:3@/lustre/me")
        return _directory(Target(spec, "ost", Path(where), int(index)))
    return _directory(Target(spec, "dir", Path(spec)))


def _directory(t: Target) -> Target:
    assert t.path is not None
    if not t.path.is_dir():
        raise TargetError(f"target {t.name!r}: {t.path} is not a directory; create it or name another")
    if not os.access(t.path, os.W_OK | os.X_OK):
        raise TargetError(f"target {t.name!r}: {t.path} is not writable; choose a directory you may write")
    if t.kind == "ost" and shutil.which("lfs") is None:
        raise TargetError(f"target {t.name!r}: `lfs` (Lustre's client tools) is not installed here; "
                          "name the directory itself to probe it without choosing the OST")
    return t


def _create(t: Target, path: Path) -> int:
    if t.kind == "ost":
        subprocess.run(["lfs", "setstripe", "-c", "1", "-i", str(t.index), str(path)], check=True,
                       capture_output=True)
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)


def _write(t: Target, path: Path, volume: int, request: int, fsync: bool, start, done) -> None:
    """One writer (a child process): waits for the others, writes, reports (start, end) or the error."""
    payload = memoryview(os.urandom(request))   # incompressible, and not zeros a file system could skip
    try:
        fd = _create(t, path)
        start.wait()
        began = time.monotonic()
        left = volume
        while left:
            left -= os.write(fd, payload[:min(request, left)])
        if fsync:
            os.fsync(fd)
        os.close(fd)
        done.put((began, time.monotonic(), None))
    except (OSError, subprocess.CalledProcessError, threading.BrokenBarrierError) as e:
        done.put((0.0, 0.0, f"{type(e).__name__}: {e}"))
        start.abort()


def _collect(children: list, done) -> list[tuple[float, float, str | None]]:
    """Each writer's (start, end, error); a writer that died without a word (killed) is an error, not a hang."""
    results: list[tuple[float, float, str | None]] = []
    while len(results) < len(children):
        try:
            results.append(done.get(timeout=1.0))
        except queue.Empty:
            dead = [c for c in children if c.exitcode not in (None, 0)]
            if dead:
                for c in children:
                    c.kill()
                results.append((0.0, 0.0, f"a writer died with status {dead[0].exitcode}"))
                break
    for c in children:
        c.join()
    return results


def measure(t: Target, request: int, writers: int, volume: int, fsync: bool) -> dict:
    """One measurement of a directory target: the row's measured columns (docs/probe.md)."""
    assert t.path is not None and request > 0 and volume >= request and writers > 0
    context = multiprocessing.get_context("fork")
    start, done = context.Barrier(writers), context.Queue()
    paths = [t.path / f"{PROBE_FILE}-{os.getpid()}-{w}" for w in range(writers)]
    children = [context.Process(target=_write, args=(t, p, volume, request, fsync, start, done)) for p in paths]
    try:
        for c in children:
            c.start()
        results = _collect(children, done)
    finally:
        for p in paths:
            p.unlink(missing_ok=True)
    errors = [e for _, _, e in results if e]
    if errors:
        raise TargetError(f"target {t.name!r}: a writer failed ({errors[0]}); the results of earlier rounds are "
                          "kept")
    begin, end = min(r[0] for r in results), max(r[1] for r in results)
    seconds = max(end - begin, 1e-9)
    return {"bytes": volume * writers, "seconds": seconds, "throughput": volume * writers / seconds,
            "slowest_writer_seconds": max(r[1] - r[0] for r in results)}
