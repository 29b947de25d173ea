"""A defined CPU load for a benchmark: N competitor processes that spin on the CPU from before a benchmark's first
run to after its last (`ioloom bench logfs --load N`), at the benchmark's own niceness, so that a figure taken
"under load" says which load and can be taken again (other programs' work on a shared machine is neither).

Each competitor is a Python loop that asks the kernel to kill it when the benchmark's process ends
(PR_SET_PDEATHSIG), so none is left running however the benchmark ends (an error, a signal, a timeout); on a
normal end they are killed and reaped before the figures are printed. What they took is measured, not assumed:
their CPU seconds over the seconds they ran (`share`, in cores) say how much of the machine the benchmark
competed with."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

# The competitor: killed with the benchmark (prctl 1 is PR_SET_PDEATHSIG, 9 SIGKILL); a benchmark that ended before
# the request took effect is seen as a new parent, and the loop does not start.
SPIN = r"""
import ctypes, os, sys
ctypes.CDLL(None).prctl(1, 9)
if os.getppid() != int(sys.argv[1]):
    sys.exit(0)
while True:
    pass
"""
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    """User and system CPU time of a running process (/proc/PID/stat, fields 14 and 15 after the command name)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


@contextmanager
def competing(count: int) -> Iterator[dict]:
    """`count` CPU-bound processes running for the block, at this process's niceness. Yields the record the figures
    carry: {"processes", "nice", "pids"} at once, {"seconds", "cpu_seconds", "share"} added when the block ends (the
    competitors' CPU seconds over their seconds, in cores). count 0 starts nothing and records no time."""
    record: dict = {"processes": count, "nice": os.getpriority(os.PRIO_PROCESS, 0), "pids": []}
    spinners: list[subprocess.Popen] = []
    start = time.monotonic()
    try:
        for _ in range(count):
            spinners.append(subprocess.Popen([sys.executable, "-I", "-S", "-c", SPIN, str(os.getpid())],
                                             stdin=subprocess.DEVNULL))
            record["pids"].append(spinners[-1].pid)
        yield record
    finally:
        try:
            used = sum(_cpu_seconds(p.pid) for p in spinners if p.poll() is None)
        finally:
            for spinner in spinners:
                spinner.kill()
                spinner.wait()
    if count:
        seconds = time.monotonic() - start
        record.update(seconds=round(seconds, 1), cpu_seconds=round(used, 1), share=round(used / seconds, 2))


def describe(record: dict) -> str:
    """One line saying the load a figure was taken under."""
    if not record["processes"]:
        return "no competitor load (--load 0)"
    return (f"under load: {record['processes']} CPU-bound competitor processes at nice {record['nice']} ran from "
            f"before the first run to after the last, taking {record['share']:.2f} cores ({record['cpu_seconds']:.0f} "
            f"CPU s over {record['seconds']:.0f} s) of the {len(os.sched_getaffinity(0))} this process may use")
