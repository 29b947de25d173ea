"""The dedicated-nodes mode of libioloom-async: the ranks of the last nodes are servers, each client sends its
blocks to one of them with MPI, and the output holds every block. On one machine nodes are emulated with
ranks_per_node (consecutive groups of ranks)."""
from __future__ import annotations

import re

import pytest

from ioloom import async_io
from ioloom.async_io.kernel import Setup, run_kernel
from test_async import check_output
from test_async_errors import initialize
from test_async_plugins import plugin, with_plugin

DIMS = (8, 6, 4)


def run(mpi, tmp_path, nranks: int, iterations: int = 6, **options):
    kernel = {k: options.pop(k) for k in ("zero_copy", "early") if k in options}
    setup = Setup(tmp_path / "out", mode="dedicated-nodes", dims=DIMS, **options)
    result = run_kernel(mpi.impl, nranks, setup.write(tmp_path / "c.yaml"), setup, iterations, 0.0,
                        event="checkpoint", timeout=60, **kernel)
    assert result.returncode == 0, result.stderr
    return setup, result


def test_last_node_serves_the_others(mpi, tmp_path):
    """4 ranks as 2 nodes of 2: ranks 0-1 compute, ranks 2-3 (the last node) write, client c to server c mod 2."""
    setup, result = run(mpi, tmp_path, 4, ranks_per_node=2)
    assert result.result["clients"] == 2
    out = check_output(tmp_path / "out", setup, 2, 6)
    assert out.mode == "dedicated-nodes" and out.meta["nodes"] == 2 and out.meta["dedicated_nodes"] == 1
    assert out.meta["writers"] == [2, 3]
    assert {(block, writer) for (_, _, block), (writer, _, _) in out._blocks.items()} == {(0, 2), (1, 3)}
    assert sorted(out.events) == sorted(("checkpoint", it, b) for it in range(6) for b in range(2))
    roles = [r["role"] for r in out.ranks]
    assert roles == [0, 0, 1, 1]
    assert out.counters()["written_blocks"] == 6 * 2 * len(setup.variables)


def test_one_server_for_three_nodes_of_clients(mpi, tmp_path):
    setup, _ = run(mpi, tmp_path, 4, ranks_per_node=1)
    out = check_output(tmp_path / "out", setup, 3, 6)
    assert out.meta["nodes"] == 4 and out.meta["writers"] == [3]


def test_only_the_clients_commit_their_buffers_at_start_up(mpi, tmp_path):
    """64 MiB of buffer per client: each client writes every page of its outbox at initialize (so that its first
    hand-over takes no page faults); the server serving 3 clients leaves its channels' pages to the blocks it
    receives (tiny ones here), and did commit 3 x 64 MiB at start-up before."""
    _, result = run(mpi, tmp_path, 4, iterations=2, ranks_per_node=1, buffer=64 << 20)
    assert result.result["max_rss_kib"] > 64 << 10  # the clients' largest
    assert result.result["server_max_rss_kib"] < 64 << 10, result.stdout


@pytest.mark.parametrize("policy", ["block", "spill"])
def test_small_buffers_and_a_slow_writer_lose_nothing(mpi, tmp_path, policy):
    """Outbox and server channel hold two blocks each, the writer 4 MiB/s: clients wait or spill, and every block
    arrives (zero copy too)."""
    block = 8 * 8 * 6 * 4
    setup, _ = run(mpi, tmp_path, 3, iterations=20, ranks_per_node=1, buffer=2 * (block + 64) + 64,
                   bandwidth=4 << 20, policy=policy, zero_copy=True)
    counters = check_output(tmp_path / "out", setup, 2, 20).counters()
    assert counters["blocked"] + counters["spilled_blocks"] > 0


def test_early_finisher_does_not_hang_finalize(mpi, tmp_path):
    setup, _ = run(mpi, tmp_path, 4, iterations=8, ranks_per_node=2, early=(1, 3))
    out = async_io.open(tmp_path / "out")
    assert out.blocks_at("u", 2) == [0, 1] and out.blocks_at("u", 5) == [0]


def test_every_node_dedicated_is_refused_on_every_rank(mpi, tmp_path):
    """Without ranks_per_node, the ranks here share one node: dedicating it leaves none to compute."""
    text = Setup(tmp_path / "out", mode="dedicated-nodes", variables=("u",), dims=(4, 4, 4)).yaml()
    lines = [line for line in initialize(mpi, tmp_path, text) if "initialize" in line]
    assert len(lines) == 3 and all("dedicated_nodes: 1 of the job's 1 node(s) leaves none to compute" in line
                                   for line in lines), lines


def test_plugin_runs_on_the_dedicated_node(mpi, tmp_path):
    setup = Setup(tmp_path / "out", mode="dedicated-nodes", ranks_per_node=2, variables=("u", "v"), dims=DIMS,
                  buffer=1 << 20)
    config = tmp_path / "c.yaml"
    config.write_text(with_plugin(setup, plugin(mpi)))
    result = run_kernel(mpi.impl, 4, config, setup, 5, 0.0, event="checkpoint", timeout=60)
    assert result.returncode == 0, result.stderr
    calls = re.findall(r"plugin checkpoint iteration (\d+) block (\d+): u=[\d.]+/\d+/float64/3 v=", result.stderr)
    assert sorted((int(it), int(b)) for it, b in calls) == [(it, b) for it in range(5) for b in range(2)]
