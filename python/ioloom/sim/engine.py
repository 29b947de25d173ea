"""Runs the C++ engine (native/sim, `ioloom-sim`) on a platform and a workload and reads what it measured.

The engine's input is a text file of parameters, layouts, jobs and load profiles plus a binary file of
operations; its output is each operation's start and end and each RPC's transfer (docs/sim.md, "Engine input and
output"). A run that exceeds its wall-clock budget is stopped and reported, never left hanging.
"""
from __future__ import annotations

import os
import select
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ioloom import paths
from ioloom.sim.platform import Platform
from ioloom.sim.workload import Workload

PIECE = np.dtype([("target", "<i4"), ("kind", "<i4"), ("start", "<f8"), ("end", "<f8"), ("bytes", "<f8")])
assert PIECE.itemsize == 32  # native/sim/sim.hpp: struct Piece


class SimError(RuntimeError):
    """The engine could not run or finish the simulation; the message says why and what to do."""


@dataclass
class Outcome:
    workload: Workload
    platform: Platform
    times: np.ndarray      # (operations, 2): start and end in simulated seconds
    pieces: np.ndarray     # PIECE records
    simulated_time: float  # when the last rank ended and the write-back caches drained
    wall_seconds: float    # the engine's own: its run, without the driver
    cpu_seconds: float
    peak_rss: int          # bytes, the engine process's peak resident size


def background_profiles(platform: Platform) -> tuple[dict[int, list[tuple[float, float]]], float]:
    """Each target's capacity over time: a draw from the modes every period, reproducible from the seed; with
    background.shared, a target takes its server's draw for a period with that chance."""
    modes = platform["background.modes"]
    if not modes:
        return {}, -1.0
    rng = np.random.default_rng(platform["run.seed"] + 31337)
    left = np.array([m[0] for m in modes], dtype=float)
    weights = np.array([m[1] for m in modes], dtype=float)
    period, horizon = platform["background.period"], platform["background.horizon"]
    steps = max(1, int(horizon / period))
    targets, servers = platform["targets.count"], platform["servers.count"]
    draws = rng.choice(left.size, size=(targets, steps), p=weights / weights.sum())
    if platform["background.shared"] > 0:
        per_server = -(-targets // servers)  # native/sim/platform.cpp: a server's targets are numbered contiguously
        server_draws = rng.choice(left.size, size=(servers, steps), p=weights / weights.sum())
        takes_server = rng.random((targets, steps)) < platform["background.shared"]
        draws = np.where(takes_server, server_draws[np.arange(targets) // per_server], draws)
    times = np.arange(steps) * period
    return {t: list(zip(times.tolist(), left[draws[t]].tolist())) for t in range(draws.shape[0])}, steps * period


def _input_text(platform: Platform, w: Workload, work: Path) -> str:
    lines = ["ioloom-sim-input 1"]
    lines += [f"param {k} {v!r}" for k, v in platform.engine_params().items()]
    lines += [f"file {f} {size} " + " ".join(map(str, targets)) for f, (size, targets) in sorted(w.layouts.items())]
    lines += [f"job {start!r} {n} {rpn} {node}" for start, n, rpn, node in w.jobs]
    profiles, period = background_profiles(platform)
    if profiles:
        lines.append(f"profile_period {period!r}")
        lines += [f"profile {t} " + " ".join(f"{a!r} {b!r}" for a, b in p) for t, p in profiles.items()]
    lines += [f"ops {work / 'ops.bin'}", f"times {work / 'times.bin'}", f"pieces {work / 'pieces.bin'}"]
    return "\n".join(lines) + "\n"


def _check_fits(platform: Platform, w: Workload) -> None:
    nodes = platform["clients.nodes"]
    for i, (_, n, rpn, first) in enumerate(w.jobs):
        need = first + -(-n // rpn)
        if need > nodes:
            raise SimError(f"job {i} needs {need} nodes ({n} ranks, {rpn} per node, from node {first}) but the "
                           f"platform has {nodes}: raise clients.nodes or ranks per node")


def _coordinated(argv: list[str], work: Path, coordinator: Callable[[str], str], wall_budget: float,
                 phases: np.ndarray | None) -> subprocess.CompletedProcess:
    """Run the engine with a pipe each way to `coordinator`, which answers each request line it sends (docs/sim.md,
    "Coordinated phases") until it exits; `phases`: each operation's phase (int32, -1 none) instead of barriers."""
    requests_r, requests_w = os.pipe()
    replies_r, replies_w = os.pipe()
    fds = [requests_w, replies_r]
    with open(work / "input.txt", "a") as f:
        f.write(f"param coord_requests {requests_w}\nparam coord_replies {replies_r}\n")
        if phases is not None:
            phases.astype("<i4").tofile(work / "phases.bin")
            fds.append(os.open(work / "phases.bin", os.O_RDONLY))
            f.write(f"param coord_phases {fds[-1]}\n")
    deadline = time.monotonic() + wall_budget
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, pass_fds=fds)
    for fd in fds:
        os.close(fd)
    with os.fdopen(requests_r) as requests, os.fdopen(replies_w, "w") as replies:
        while select.select([requests], [], [], max(0.0, deadline - time.monotonic()))[0]:
            line = requests.readline()
            if not line:
                break
            replies.write(coordinator(line) + "\n")
            replies.flush()
    try:
        out, err = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def run(platform: Platform, w: Workload, wall_budget: float = 600.0,
        coordinator: Callable[[str], str] | None = None, phases: np.ndarray | None = None) -> Outcome:
    """Simulates workload `w` on `platform`; with `coordinator`, each job's write phases are coordinated by it
    (ioloom.sim.coord): the writes between two of a job's barriers, or with `phases` (per operation, int32; -1:
    none) the writes of a job numbered alike."""
    assert phases is None or (coordinator is not None and len(phases) == len(w.ops))  # phases are coordination's
    engine = paths.native_bin("ioloom-sim")
    _check_fits(platform, w)
    with tempfile.TemporaryDirectory(prefix="ioloom-sim-") as tmp:
        work = Path(tmp)
        w.ops.tofile(work / "ops.bin")
        (work / "input.txt").write_text(_input_text(platform, w, work))
        argv = [str(engine), str(work / "input.txt"), "--log=root.thres:critical"]
        try:
            out = (_coordinated(argv, work, coordinator, wall_budget, phases) if coordinator else
                   subprocess.run(argv, capture_output=True, text=True, timeout=wall_budget))
        except subprocess.TimeoutExpired:
            raise SimError(f"the simulation did not finish within {wall_budget:g} s of wall-clock time: simulate "
                           "fewer ranks or operations, or raise the budget (--wall-budget)") from None
        if out.returncode not in (0, 3):
            raise SimError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else
                           f"ioloom-sim exited {out.returncode}")
        summary = out.stdout.split()
        fields = dict(zip(summary[2::2], summary[3::2]))
        if out.returncode == 3:
            raise SimError(f"the simulated time budget ran out at {float(fields['simulated_time']):g} s with "
                           "operations still under way: raise run.time_budget in the platform file")
        times = np.fromfile(work / "times.bin", dtype="<f8").reshape(-1, 2)
        pieces = np.fromfile(work / "pieces.bin", dtype=PIECE)
    return Outcome(w, platform, times, pieces, float(fields["simulated_time"]), float(fields["wall_seconds"]),
                   float(fields["cpu_seconds"]), int(fields["peak_rss_kib"]) * 1024)
