"""The tracer's x86-64 stack walk by DWARF rules (native/trace/unwind_rules.c, cfi.c; docs/predict.md, "Stack
symbols") on a program built without frame pointers: every walked stack is backtrace()'s, return address for return
address (IOLOOM_STACKS_CHECK=1 compares each call's), over many call sites, recursion, VLA and alloca frames under a
writer that clobbers rbp, a realigned stack (which the walk leaves to backtrace()), a libc callback, a signal handler
on the thread's stack and on an alternate one, and four threads; the calls are walked, not asked of backtrace(), but
for each new stack and the realigned frame's; and the program's output and file are those of an untraced run."""
from __future__ import annotations

import platform
import subprocess
from bisect import bisect_right
from pathlib import Path

import pytest

from ioloom.predict.side import read_side, side_path

ROUNDS, THREADS = 5, 4

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="the walk by DWARF rules is x86-64's")


def _functions(exe: Path):
    """The program's function at an offset (its functions from nm, by start address)."""
    rows = [line.split() for line in subprocess.run(["nm", "--defined-only", str(exe)], capture_output=True,
                                                     text=True, check=True).stdout.splitlines()]
    starts = sorted((int(row[0], 16), row[2]) for row in rows if len(row) == 3 and row[1] in "tT")
    addresses = [start for start, _ in starts]
    return lambda offset: starts[bisect_right(addresses, offset - 1) - 1][1]  # a return address follows its call


@pytest.fixture(scope="module")
def walked(tmp_path_factory):
    from test_trace_native import compile_program, traced_env

    exe = compile_program("unwind_sites.c", "-fomit-frame-pointer")
    tmp = tmp_path_factory.mktemp("unwind")
    plain = subprocess.run([exe, tmp / "plain.dat", str(ROUNDS)], capture_output=True, text=True, check=True)
    env = traced_env(tmp / "trace", IOLOOM_STACKS="8", IOLOOM_STACKS_CHECK="1")
    traced = subprocess.run([exe, tmp / "traced.dat", str(ROUNDS)], capture_output=True, text=True, check=True,
                            env=env)
    streams = sorted((tmp / "trace").glob("*.ioloom"))
    assert len(streams) == 1
    return exe, tmp, plain, traced, read_side(side_path(streams[0]))


def test_the_program_runs_as_untraced(walked):
    _, tmp, plain, traced, _ = walked
    assert traced.stdout == plain.stdout and traced.stderr == plain.stderr == ""
    assert (tmp / "traced.dat").read_bytes() == (tmp / "plain.dat").read_bytes()


def test_every_walked_stack_is_backtraces_and_most_calls_are_walked(walked):
    _, _, _, _, side = walked
    calls, symbols = len(side.calls), len(side.symbols)
    # every walk that gave frames gave backtrace()'s, a stack's first call included
    assert side.problems == [] and side.count("stacks_mismatched") == 0
    # backtrace() answers a stack's first call and the realigned frame's calls (one per round and thread): every
    # other call is walked. A few more when threads meet a new stack at once; a walk that gives up where it should
    # not (a wrong rbp, a rule made RULE_SLOW) sends dozens more
    realigned = THREADS * ROUNDS
    assert realigned <= side.count("stacks_backtraced") <= symbols + realigned + 2 * THREADS
    assert side.count("stacks_walked") + side.count("stacks_backtraced") == calls
    assert side.count("stacks_walked") > 0.9 * calls
    assert side.count("unwind_rules_slow") >= 1 and side.count("unwind_rules_past_cap") == 0


def test_the_stacks_have_every_shape(walked):
    exe, _, _, _, side = walked
    function = _functions(exe)

    def names(symbol) -> list[str]:
        return [function(f.offset) if f.module == str(exe.resolve()) else Path(f.module).name.split(".so")[0]
                for f in symbol.frames]

    stacks = [names(s) for s in side.symbols.values() if s.op == "pwrite"]
    assert ["put", "on_signal", "libc"] in stacks  # the handler: the kernel's frame returns into libc
    assert any(s[:2] == ["put", "compare"] and s[2] == "libc" for s in stacks)  # qsort's callback
    assert any(s[:5] == ["put", "put_clobbering_rbp", "vla", "with_alloca", "round_of"] for s in stacks)
    assert any(s[:4] == ["put", "put_clobbering_rbp", "vla", "round_of"] for s in stacks)
    assert any(s == ["put"] + ["recurse"] * 7 for s in stacks)  # depth 6: seven calls, cut at 8 frames
    assert any(s[:3] == ["put", "realigned", "round_of"] for s in stacks)
    sites = {s[1] for s in stacks if s[1].startswith("site_")}
    assert len(sites) == 24 and {s[2] for s in stacks if s[1].startswith("site_")} == {"caller_a", "caller_b"}
