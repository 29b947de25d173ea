"""`ioloom bench async --compare adios2`: the option's refusals (always), and the kernel's data written through
ADIOS2's BP5 with AsyncWrite and read back (when the benchmark-only extra `ioloom[bench-adios2]` is installed)."""
from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from ioloom.async_io.kernel import expected_value
from ioloom.bench import async_adios2

needs_adios2 = pytest.mark.skipif(importlib.util.find_spec("adios2") is None,
                                  reason="adios2 is not installed (pip install 'ioloom[bench-adios2]')")


@pytest.mark.parametrize("compare,bandwidth,variability,fsync,installed,words", [
    ("hdf5", 0, 0, False, True, "the one comparison is 'adios2'"),
    ("adios2", 16, 0, False, True, "give --node-bandwidth 0"),
    ("adios2", 0, 0.5, False, True, "no --storage-variability"),
    ("adios2", 0, 0, True, True, "leave out --fsync"),
    ("adios2", 0, 0, False, False, "pip install 'ioloom[bench-adios2]'"),
])
def test_compare_refusals(compare, bandwidth, variability, fsync, installed, words):
    assert words in async_adios2.compare_problem(compare, bandwidth, variability, fsync, installed)


def test_compare_accepted_or_not_asked():
    assert async_adios2.compare_problem("", 16, 1, True, False) is None
    assert async_adios2.compare_problem("adios2", 0, 0, False, True) is None


def test_refusal_is_one_line_before_any_run(ioloom_cli):
    done = ioloom_cli("bench", "async", "--quick", "--rounds", "1", "--compare", "adios2", check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == ("ioloom bench async: --compare adios2 writes at the file system's speed, which "
                                   "ioloom's storage model cannot slow or vary: give --node-bandwidth 0 and no "
                                   "--storage-variability")


def test_fill_is_the_kernels():
    block = np.empty((2, 3, 4))
    async_adios2.fill(block, 5, 1, 2)
    assert block.reshape(-1).tolist() == [expected_value(5, 1, 2, k) for k in range(24)]


@needs_adios2
@pytest.mark.parametrize("mode", sorted(async_adios2.ASYNC_WRITE))
def test_ranks_write_the_kernels_data_through_bp5(tmp_path, mode):
    import adios2
    run = async_adios2.run_ranks(2, tmp_path, mode, (4, 8, 8), 2, 3, 0.01, False, timeout=120)
    assert len(run["visible"]) == 3 and all(p >= 0.01 for p in run["iteration_seconds"])
    for rank in range(2):
        with adios2.FileReader(str(tmp_path / f"cm1.{rank}.bp")) as f:
            assert f.num_steps() == 3
            got = f.read("var1", step_selection=[2, 1]).reshape(-1)
        assert got.tolist() == [expected_value(2, rank, 1, k) for k in range(4 * 8 * 8)]
    figures = async_adios2.per_run(run, mode)
    assert figures["run_seconds"] >= 3 * 0.01 and figures["idle_fraction"] is None  # three computes at least


@needs_adios2
@pytest.mark.mpi
def test_bench_async_prints_adios2_beside_the_modes(ioloom_cli):
    out = json.loads(ioloom_cli("bench", "async", "--rounds", "1", "--quick", "--iterations", "2", "--compute", "0.02",
                                "--dims", "8,8,8", "--node-bandwidth", "0", "--compare", "adios2", "--json").stdout)
    assert list(out["modes"]) == ["synchronous", "helper-thread", "dedicated-cores", "adios2-sync", "adios2-async"]
    assert out["summary"]["adios2-async"]["visible_ratio"]["median"] > 0
