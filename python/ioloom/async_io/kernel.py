"""Configurations for libioloom-async and runs of its CM1-like kernel (native/async/cm1.c), shared by
`ioloom bench async`, `ioloom async stress` and the tests."""
from __future__ import annotations

import json
import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ioloom import mpi, paths

MODES = ("synchronous", "helper-thread", "dedicated-cores")
POLICIES = ("block", "spill", "skip")


@dataclass
class Setup:
    """One configuration: the output's variables all share one float64 layout of `dims`."""
    directory: Path
    mode: str = "synchronous"
    variables: tuple[str, ...] = ("u", "v", "theta")
    dims: tuple[int, ...] = (32, 32, 16)
    buffer: int = 64 << 20
    queue: int = 256
    policy: str = "block"
    dedicated_cores: int = 1
    dedicated_nodes: int = 1
    ranks_per_node: int = 0
    bandwidth: int = 0
    variability: float = 0.0
    fsync: bool = False
    compression: str = "none"
    writer_format: str = "files"
    events: tuple[str, ...] = ("checkpoint",)
    name: str = "cm1"

    def yaml(self) -> str:
        dims = ", ".join(map(str, self.dims))
        lines = [f"name: {self.name}", f"mode: {self.mode}", f"dedicated_cores: {self.dedicated_cores}",
                 f"dedicated_nodes: {self.dedicated_nodes}"]
        lines += [f"ranks_per_node: {self.ranks_per_node}"] if self.ranks_per_node else []
        lines += [f"buffer: {self.buffer}", f"queue: {self.queue}", f"policy: {self.policy}", "writer:",
                  f"  directory: {self.directory}"]
        lines += [f"  bandwidth: {self.bandwidth}"] if self.bandwidth else []
        lines += [f"  variability: {self.variability}"] if self.variability else []
        lines += ["  fsync: true"] if self.fsync else []
        lines += [f"  compression: {self.compression}"] if self.compression != "none" else []
        lines += [f"  format: {self.writer_format}"] if self.writer_format != "files" else []
        lines += ["layouts:", f"  grid: {{type: float64, dimensions: [{dims}]}}", "variables:"]
        lines += [f"  {v}: {{layout: grid}}" for v in self.variables]
        lines += [f"events: [{', '.join(self.events)}]"] if self.events else []
        return "\n".join(lines) + "\n"

    def write(self, path: Path) -> Path:
        path.write_text(self.yaml())
        return path

    @property
    def block_bytes(self) -> int:
        n = 8
        for d in self.dims:
            n *= d
        return n


@dataclass
class Run:
    """What one kernel run printed (rank 0's JSON line), its exit status and the time it took."""
    returncode: int
    stdout: str
    stderr: str
    result: dict = field(default_factory=dict)


def kernel_command(impl: mpi.MpiImpl, nranks: int, config: Path, setup: Setup, iterations: int, compute: float,
                   *, jitter: float = 0.0, seed: int = 0, early: tuple[int, int] | None = None,
                   zero_copy: bool = False, sleep: bool = False, event: str | None = None) -> list[str]:
    argv = [str(paths.native_bin(f"ioloom-async-cm1-{impl.name}")), str(config), "--variables",
            ",".join(setup.variables), "--iterations", str(iterations), "--compute", f"{compute:.6f}",
            "--jitter", str(jitter), "--seed", str(seed)]
    argv += ["--early", f"{early[0]}:{early[1]}"] if early else []
    argv += ["--zero-copy"] if zero_copy else []
    argv += ["--sleep"] if sleep else []
    argv += ["--signal", event] if event else []
    return impl.launch(nranks, argv)


def run_kernel(impl: mpi.MpiImpl, nranks: int, config: Path, setup: Setup, iterations: int, compute: float,
               timeout: float = 120, **options) -> Run:
    """Runs the kernel in its own session; past `timeout` (a hang) the launcher and every rank are killed and
    subprocess.TimeoutExpired is raised."""
    proc = subprocess.Popen(kernel_command(impl, nranks, config, setup, iterations, compute, **options),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, **impl.launch_env(nranks)})
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    result: dict = {}
    for line in stdout.splitlines():  # rank 0's report, then its timing of the whole run
        result.update(json.loads(line) if line.startswith("{") else {})
    return Run(proc.returncode, stdout, stderr, result)


def expected_value(iteration: int, block: int, variable: int, element: int) -> float:
    """What the kernel writes at an element of a block (cm1.c's fill)."""
    return iteration * 1e6 + block * 1e3 + variable + (element % 7) * 1e-3


def global_value(iteration: int, shape: tuple[int, ...]):
    """The values of a variable in a global domain in the tests and the docs' example: iteration * 1e6 plus each
    element's index in the whole global array (C order), so that a block out of place shows."""
    import numpy as np
    return iteration * 1e6 + np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
