"""The analysis map on a real Dask cluster (LocalCluster on loopback) gives what local processes give."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from distributed import LocalCluster

from ioloom.analysis import analyse
from ioloom.analysis.synthetic import Builder


def _job() -> Builder:
    """4 ranks, independent sieved writes on a shared file, then collective writes on another."""
    b = Builder()
    shared, out = b.file("/scratch/shared"), b.file("/scratch/out")
    for rank in range(4):
        t = 1000 * rank
        for i in range(50):
            b.sieved_write(rank, t, shared, (i * 4 + rank) * 4096, 4096, 512 << 10)
            t += 30_000
        for i in range(5):
            b.plain_write(rank, t, t + 9000, out, (i * 4 + rank) << 20, 1 << 20, "MPI_File_write_at_all", i)
            t += 10_000
    return b


def _without_executor(result: dict) -> str:
    result["summary"].pop("executor")
    return json.dumps(result, sort_keys=True)


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as c:
        yield c


def test_dask_cluster_gives_the_local_result(cluster):
    trace = _job().trace()
    local = analyse(trace, workers=2).to_json()
    remote = analyse(trace, scheduler=cluster.scheduler_address).to_json()
    assert remote["summary"]["executor"] == f"dask cluster at {cluster.scheduler_address}"
    assert _without_executor(remote) == _without_executor(local)
    assert {f["code"] for f in remote["findings"]} >= {"data-sieving"}


@pytest.fixture(scope="module")
def disk_trace(tmp_path_factory):
    """dd writing 4 MiB, traced by `ioloom run`: (trace directory, data file)."""
    root = tmp_path_factory.mktemp("dask")
    data = root / "data.bin"
    subprocess.run([sys.executable, "-m", "ioloom", "run", "-o", str(root / "trace"), "--", "sh", "-c",
                    f"dd if=/dev/zero of={data} bs=1M count=4 status=none"], check=True, capture_output=True,
                   timeout=120)
    return root / "trace", data


def test_dask_cluster_reads_an_on_disk_trace(cluster, disk_trace):
    trace, data = disk_trace
    out = subprocess.run([sys.executable, "-m", "ioloom", "stats", str(trace), "--json", "--scheduler",
                          cluster.scheduler_address], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["summary"]["executor"].startswith("dask cluster")
    files = [f for f in result["files"] if f["path"] == str(data) and f["kind"] == "write"]
    assert files and files[0]["bytes"] == 4 << 20


def test_unreachable_scheduler_is_a_clear_error(disk_trace):
    out = subprocess.run([sys.executable, "-m", "ioloom", "stats", str(disk_trace[0]), "--scheduler",
                          "tcp://127.0.0.1:9"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "cannot reach the Dask scheduler" in out.stderr and "Traceback" not in out.stderr
