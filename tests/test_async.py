"""libioloom-async under real MPI (Open MPI and MPICH): every mode writes what the CM1-like kernel computed, the
Python reader gives it back exactly, back-pressure policies are counted, and 10,000 iterations run in bounded
memory."""
from __future__ import annotations

import numpy as np
import pytest

from ioloom import async_io
from ioloom.async_io.kernel import MODES, Setup, expected_value, run_kernel


def check_output(directory, setup: Setup, clients: int, iterations: int, skipped: set | None = None):
    """Every block the kernel wrote reads back with the values it computed; returns the output."""
    out = async_io.open(directory)
    assert out.iterations() == list(range(iterations))
    for v, name in enumerate(setup.variables):
        for it in range(iterations):
            blocks = out.blocks_at(name, it)
            expect = [b for b in range(clients) if (it, b) not in (skipped or set())]
            assert blocks == expect, (name, it)
            for b in blocks:
                data = out.read(name, it, b)
                assert data.shape == setup.dims and data.dtype == np.float64
                flat = data.reshape(-1)
                assert flat[0] == expected_value(it, b, v, 0) and flat[-1] == expected_value(it, b, v, flat.size - 1)
    return out


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_writes_every_block(mpi, tmp_path, mode):
    setup = Setup(tmp_path / "out", mode=mode, dims=(16, 8, 4))
    run = run_kernel(mpi.impl, 3, setup.write(tmp_path / "c.yaml"), setup, 6, 0.002, event="checkpoint")
    assert run.returncode == 0, run.stderr
    clients = 2 if mode == "dedicated-cores" else 3
    assert run.result["clients"] == clients
    out = check_output(tmp_path / "out", setup, clients, 6)
    assert out.mode == mode
    assert sorted(out.events) == sorted(("checkpoint", it, b) for it in range(6) for b in range(clients))
    counters = out.counters()
    assert counters["written_blocks"] == counters["blocks"] == 6 * clients * 3
    assert counters["lost_blocks"] == counters["skipped_blocks"] == counters["spilled_blocks"] == 0
    writers = [r for r in out.ranks if r["written_blocks"] > 0]
    assert len(writers) == (1 if mode == "dedicated-cores" else 3)


@pytest.mark.parametrize("mode", ["synchronous", "dedicated-cores"])
def test_fsync_each_iteration(mpi, tmp_path, mode):
    setup = Setup(tmp_path / "out", mode=mode, dims=(8, 8, 4), fsync=True)
    run = run_kernel(mpi.impl, 3, setup.write(tmp_path / "c.yaml"), setup, 4, 0.0)
    assert run.returncode == 0, run.stderr
    syncs = check_output(tmp_path / "out", setup, 2 if mode == "dedicated-cores" else 3, 4).counters()["syncs"]
    # Each process syncs its own file once per iteration; a dedicated core at least once per iteration, at most
    # once per client and iteration (it skips a sync with nothing new written).
    assert syncs == 3 * 4 if mode == "synchronous" else 4 <= syncs <= 8


def test_arrow_table_of_a_variable(mpi, tmp_path):
    setup = Setup(tmp_path / "out", mode="helper-thread", dims=(4, 4, 2), variables=("u", "v"))
    assert run_kernel(mpi.impl, 2, setup.write(tmp_path / "c.yaml"), setup, 3, 0.0).returncode == 0
    out = async_io.open(tmp_path / "out")
    table = out.table("v")
    assert table.num_rows == 3 * 2 and table.schema.metadata[b"shape"] == b"[4, 4, 2]"
    for row in table.to_pylist():
        assert np.array_equal(np.array(row["values"]).reshape(4, 4, 2), out.read("v", row["iteration"], row["block"]))


@pytest.mark.parametrize("mode", ["synchronous", "dedicated-cores"])
def test_zstd_compressed_output_reads_back(mpi, tmp_path, mode):
    setup = Setup(tmp_path / "out", mode=mode, dims=(16, 16, 8), compression="zstd")
    run = run_kernel(mpi.impl, 3, setup.write(tmp_path / "c.yaml"), setup, 4, 0.0)
    assert run.returncode == 0, run.stderr
    out = check_output(tmp_path / "out", setup, 2 if mode == "dedicated-cores" else 3, 4)
    counters = out.counters()
    assert out.compression == "zstd" and counters["written_bytes"] < counters["bytes"] / 4  # the fill repeats


def test_zero_copy_dedicated(mpi, tmp_path):
    setup = Setup(tmp_path / "out", mode="dedicated-cores", dims=(8, 8, 8), buffer=1 << 20)
    run = run_kernel(mpi.impl, 3, setup.write(tmp_path / "c.yaml"), setup, 20, 0.0, zero_copy=True)
    assert run.returncode == 0, run.stderr
    check_output(tmp_path / "out", setup, 2, 20)


def test_two_dedicated_cores_share_a_node(mpi, tmp_path):
    setup = Setup(tmp_path / "out", mode="dedicated-cores", dedicated_cores=2, dims=(8, 8, 4))
    run = run_kernel(mpi.impl, 4, setup.write(tmp_path / "c.yaml"), setup, 4, 0.0)
    if run.returncode and "cores" in run.stderr:
        pytest.skip("two dedicated cores need three cores here")
    assert run.returncode == 0, run.stderr
    out = check_output(tmp_path / "out", setup, 2, 4)
    assert len(out.meta["writers"]) == 2


# A ring that holds two blocks per client and a writer limited to 2 MiB/s: a kernel with no compute fills it.
SLOW = {"dims": (16, 16, 16), "buffer": 2 * 2 * (32768 + 64) + 64, "bandwidth": 2 << 20}


@pytest.mark.parametrize("mode", ["helper-thread", "dedicated-cores"])
@pytest.mark.parametrize("policy", ["block", "spill"])
def test_full_buffer_blocks_or_spills_without_loss(mpi, tmp_path, mode, policy):
    setup = Setup(tmp_path / "out", mode=mode, policy=policy, variables=("u", "v"), **SLOW)
    setup.buffer = setup.buffer // 2 if mode == "helper-thread" else setup.buffer
    run = run_kernel(mpi.impl, 3, setup.write(tmp_path / "c.yaml"), setup, 8, 0.0)
    assert run.returncode == 0, run.stderr
    clients = 2 if mode == "dedicated-cores" else 3
    counters = check_output(tmp_path / "out", setup, clients, 8).counters()
    if policy == "block":
        assert counters["blocked"] > 0 and counters["blocked_seconds"] > 0 and counters["spilled_blocks"] == 0
    else:
        assert counters["spilled_blocks"] > 0 and counters["spill_high_water"] >= setup.block_bytes


def test_full_buffer_skips_iterations_and_counts_them(mpi, tmp_path):
    setup = Setup(tmp_path / "out", mode="dedicated-cores", policy="skip", variables=("u", "v"), **SLOW)
    run = run_kernel(mpi.impl, 3, setup.write(tmp_path / "c.yaml"), setup, 12, 0.0)
    assert run.returncode == 0, run.stderr
    out = async_io.open(tmp_path / "out")
    counters = out.counters()
    assert counters["skipped_iterations"] > 0
    written = sum(len(out.blocks_at(v, it)) for v in setup.variables for it in out.iterations())
    assert written + counters["skipped_blocks"] == 12 * 2 * 2
    for it in out.iterations("u"):  # what was kept is intact
        for b in out.blocks_at("u", it):
            assert out.read("u", it, b).reshape(-1)[5] == expected_value(it, b, 0, 5)


@pytest.mark.parametrize("mode", ["helper-thread", "dedicated-cores"])
def test_ten_thousand_iterations_in_bounded_memory(mpi, tmp_path, mode):
    """The ring (8 blocks per client) wraps over a thousand times; the clients' maximum resident set after 10,000
    iterations is that after 1,000, within 2 MiB."""
    rss = {}
    for iterations in (1000, 10000):
        setup = Setup(tmp_path / f"out{iterations}", mode=mode, variables=("u", "v"),
                      dims=(8, 8, 4), buffer=8 * 2 * (2048 + 64) * 2, events=())
        run = run_kernel(mpi.impl, 2, setup.write(tmp_path / f"c{iterations}.yaml"), setup, iterations, 0.0,
                         timeout=300)
        assert run.returncode == 0, run.stderr
        out = async_io.open(setup.directory)
        clients = 1 if mode == "dedicated-cores" else 2
        assert out.counters()["written_blocks"] == iterations * 2 * clients
        assert out.iterations() == list(range(iterations))
        rss[iterations] = run.result["max_rss_kib"]
    assert rss[10000] - rss[1000] < 2048, rss


def test_storage_variability_makes_write_times_vary(mpi, tmp_path):
    """writer.variability: each iteration's writes take a log-normal factor (sigma 0.5) of their time at the
    bandwidth; the synchronous writes the simulation sees then vary (coefficient of variation ~0.5 expected)."""
    import statistics
    setup = Setup(tmp_path / "out", mode="synchronous", dims=(16, 16, 8), bandwidth=4 << 20, variability=0.5,
                  events=())
    run = run_kernel(mpi.impl, 2, setup.write(tmp_path / "c.yaml"), setup, 16, 0.0)
    assert run.returncode == 0, run.stderr
    seen = run.result["visible"]
    assert statistics.pstdev(seen) / statistics.mean(seen) > 0.15 and max(seen) / min(seen) > 1.5, seen
    check_output(tmp_path / "out", setup, 2, 16)
