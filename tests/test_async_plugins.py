"""Plugins of libioloom-async: a function of a shared library named in the configuration runs on the writer side
(in each mode) when a client signals its event, with the blocks that client wrote in that iteration; a plugin that
cannot be loaded is a configuration error on every rank."""
from __future__ import annotations

import re

import pytest

from ioloom import async_io, paths
from ioloom.async_io.kernel import MODES, Setup, expected_value, run_kernel


def plugin(mpi):
    return mpi.compile("async_plugin.c", "-shared", "-fPIC", f"-I{paths.REPO_ROOT / 'native' / 'async'}")


def with_plugin(setup: Setup, library, function: str = "show_blocks") -> str:
    return setup.yaml() + f"plugins:\n  - {{event: checkpoint, library: {library}, function: {function}}}\n"


@pytest.mark.parametrize("mode", MODES)
def test_plugin_sees_each_iterations_blocks(mpi, tmp_path, mode):
    setup = Setup(tmp_path / "out", mode=mode, variables=("u", "v"), dims=(4, 4, 4), buffer=1 << 20)
    config = tmp_path / "c.yaml"
    config.write_text(with_plugin(setup, plugin(mpi)))
    run = run_kernel(mpi.impl, 3, config, setup, 5, 0.0, event="checkpoint")
    assert run.returncode == 0, run.stderr
    clients = 2 if mode == "dedicated-cores" else 3
    calls = re.findall(r"plugin checkpoint iteration (\d+) block (\d+):(.*)", run.stderr)
    assert sorted((int(it), int(b)) for it, b, _ in calls) == [(it, b) for it in range(5) for b in range(clients)]
    for it, b, seen in calls:
        blocks = dict(item.split("=") for item in seen.split())
        assert set(blocks) == {"u", "v"}
        for v, name in enumerate(("u", "v")):
            first, nbytes, dtype, ndims = blocks[name].split("/")
            assert float(first) == pytest.approx(expected_value(int(it), int(b), v, 0))
            assert (int(nbytes), dtype, int(ndims)) == (8 * 64, "float64", 3)
    assert async_io.open(tmp_path / "out").counters()["written_blocks"] == 5 * clients * 2


def test_plugin_keeps_an_iteration_in_a_small_ring(mpi, tmp_path):
    """Plugins keep an iteration's blocks until its end, so the ring must hold an iteration: with room for just
    that, 30 iterations of a writer limited to 4 MiB/s still finish (no deadlock) and every block is written."""
    setup = Setup(tmp_path / "out", mode="dedicated-cores", variables=("u", "v"), dims=(8, 8, 8),
                  buffer=2 * (3 * (4096 + 64)) + 64, bandwidth=4 << 20)
    config = tmp_path / "c.yaml"
    config.write_text(with_plugin(setup, plugin(mpi)))
    run = run_kernel(mpi.impl, 3, config, setup, 30, 0.0, event="checkpoint")
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("plugin checkpoint") == 60
    assert async_io.open(tmp_path / "out").counters()["blocked"] > 0


def errors(mpi, tmp_path, text: str) -> list[str]:
    config = tmp_path / "c.yaml"
    config.write_text(text)
    lib = paths.build_dir() / "lib"
    exe = mpi.compile("async_errors.c", f"-I{paths.REPO_ROOT / 'native' / 'async'}", f"-L{lib}",
                      f"-lioloom-async-{mpi.name}", f"-Wl,-rpath,{lib}")
    out = mpi.run(3, [exe, config], timeout=60)
    return [line for line in out.stdout.splitlines() if line.startswith("rank")]


@pytest.mark.parametrize("change,message", [
    (lambda lib: (lib, "nope"), "has no function nope"),
    (lambda lib: ("/nonexistent/x.so", "show_blocks"), "plugin: cannot load /nonexistent/x.so"),
])
def test_plugin_that_cannot_load_is_refused_on_every_rank(mpi, tmp_path, change, message):
    setup = Setup(tmp_path / "out", mode="dedicated-cores", variables=("u",), dims=(4, 4, 4), buffer=1 << 20)
    lines = errors(mpi, tmp_path, with_plugin(setup, *change(plugin(mpi))))
    assert len(lines) == 3 and all("initialize rc 1: rank 2: " in line and message in line for line in lines), lines


def test_plugin_of_an_undeclared_event_and_a_ring_too_small(mpi, tmp_path):
    setup = Setup(tmp_path / "out", mode="dedicated-cores", variables=("u",), dims=(4, 4, 4), buffer=1 << 20,
                  events=())
    lines = errors(mpi, tmp_path, with_plugin(setup, plugin(mpi)))
    assert all("plugin: event 'checkpoint' is not declared under events" in line for line in lines), lines
    setup = Setup(tmp_path / "out", mode="dedicated-cores", variables=("u", "v"), dims=(8, 8, 8),
                  buffer=2 * (4096 + 64) * 2)
    lines = errors(mpi, tmp_path, with_plugin(setup, plugin(mpi)))
    assert all("an iteration's blocks, which plugins keep until its end" in line for line in lines), lines


NODE_LINE = re.compile(r"node plugin checkpoint iteration (\d+) block -1:(.*)")


def node_calls(stderr: str) -> dict[int, dict[str, float]]:
    """Per iteration, the blocks a node-scope plugin saw: {"u@0": first element, ...}."""
    return {int(it): dict((k, float(v)) for k, v in (item.split("=") for item in seen.split()))
            for it, seen in NODE_LINE.findall(stderr)}


@pytest.mark.parametrize("mode,ranks,extra", [("dedicated-cores", 3, {}),
                                              ("dedicated-nodes", 4, {"ranks_per_node": 1})])
def test_node_scope_plugin_runs_once_all_clients_signalled(mpi, tmp_path, mode, ranks, extra):
    """scope: node runs once per iteration on the (one) server, with every client's blocks; a client that
    finishes early (client 1 after 3 iterations) is not waited for."""
    setup = Setup(tmp_path / "out", mode=mode, variables=("u", "v"), dims=(4, 4, 4), buffer=1 << 20, **extra)
    config = tmp_path / "c.yaml"
    config.write_text(setup.yaml() + f"plugins:\n  - {{event: checkpoint, library: {plugin(mpi)}, "
                      "function: show_node, scope: node}\n")
    run = run_kernel(mpi.impl, ranks, config, setup, 6, 0.0, event="checkpoint", early=(1, 3), timeout=60)
    assert run.returncode == 0, run.stderr
    calls = node_calls(run.stderr)
    assert sorted(calls) == list(range(6)) and len(NODE_LINE.findall(run.stderr)) == 6
    for it, seen in calls.items():
        clients = [b for b in range(ranks - 1) if it < 3 or b != 1]
        assert sorted(seen) == sorted(f"{v}@{b}" for v in ("u", "v") for b in clients), (it, seen)
        for v, name in enumerate(("u", "v")):
            for b in clients:
                assert seen[f"{name}@{b}"] == pytest.approx(expected_value(it, b, v, 0))
    assert async_io.open(tmp_path / "out").counters()["written_blocks"] == (6 * (ranks - 2) + 3) * 2


def test_node_scope_needs_a_dedicated_mode(mpi, tmp_path):
    setup = Setup(tmp_path / "out", mode="helper-thread", variables=("u",), dims=(4, 4, 4), buffer=1 << 20)
    text = setup.yaml() + f"plugins:\n  - {{event: checkpoint, library: {plugin(mpi)}, function: show_node, " \
                          "scope: node}\n"
    lines = errors(mpi, tmp_path, text)
    assert len(lines) == 3 and all("plugin: scope node runs on a server once all its clients signalled" in line
                                   for line in lines), lines
