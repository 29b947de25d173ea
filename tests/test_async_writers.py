"""libioloom-async's writer formats, chosen in the configuration (writer.format): a logfs container per writer,
which `ioloom container check|cat` read, an HDF5 file per writer (MPICH build), which h5dump reads, and one HDF5
file the servers write together (hdf5-shared, MPICH build), which h5py reads; the Python reader gives every block
back as the kernel computed it."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from ioloom import async_io
from ioloom.async_io.kernel import Setup, expected_value, run_kernel
from ioloom.async_io.reader import INDEX_RECORD
from test_async import check_output
from test_async_errors import initialize

DIMS = (8, 6, 4)


def kernel_block(iteration: int, block: int, variable: int) -> np.ndarray:
    """The block the kernel writes (cm1.c's fill), computed here independently of the library and reader."""
    element = np.arange(int(np.prod(DIMS)))
    return expected_value(iteration, block, variable, element).reshape(DIMS)


def run(mpi, tmp_path, mode: str, writer_format: str, iterations: int = 5):
    setup = Setup(tmp_path / "out", mode=mode, dims=DIMS, writer_format=writer_format)
    result = run_kernel(mpi.impl, 3, setup.write(tmp_path / "c.yaml"), setup, iterations, 0.0, event="checkpoint")
    assert result.returncode == 0, result.stderr
    clients = 2 if mode == "dedicated-cores" else 3
    return setup, check_output(tmp_path / "out", setup, clients, iterations), clients


@pytest.mark.parametrize("mode", ["synchronous", "helper-thread", "dedicated-cores"])
def test_logfs_containers_read_back_with_the_container_tools(mpi, tmp_path, ioloom_cli, mode):
    setup, out, clients = run(mpi, tmp_path, mode, "logfs")
    assert out.writer_format == "logfs"
    info = json.loads(ioloom_cli("async", "info", str(tmp_path / "out"), "--json").stdout)
    assert info["writer_format"] == "logfs" and info["counters"]["written_blocks"] == 5 * clients * 3
    assert "writer(s) (logfs)" in ioloom_cli("async", "info", str(tmp_path / "out")).stdout
    writers = out.meta["writers"]
    assert len(writers) == (1 if mode == "dedicated-cores" else 3)
    for writer in writers:
        container = tmp_path / "out" / f"cm1.{writer}.data"
        assert (container / "ioloom-logfs.meta").is_file()  # a container, not a plain file
        assert ioloom_cli("container", "check", str(container)).returncode == 0
    # The bytes `container cat` gives, at the offsets the index records, are the kernel's blocks.
    records = {}
    for writer in writers:
        raw = (tmp_path / "out" / f"cm1.{writer}.index").read_bytes()
        data = subprocess.run([sys.executable, "-m", "ioloom", "container", "cat",
                               str(tmp_path / "out" / f"cm1.{writer}.data")], capture_output=True, check=True).stdout
        for variable, block, iteration, offset, nbytes in np.frombuffer(raw, INDEX_RECORD).tolist():
            if variable >= 0:
                records[(variable, iteration, block)] = np.frombuffer(data[offset:offset + nbytes], "<f8")
    assert len(records) == 5 * clients * len(setup.variables)
    for (variable, iteration, block), values in records.items():
        assert np.array_equal(values.reshape(DIMS), kernel_block(iteration, block, variable))


def h5dump_block(path, dataset: str, tmp_path) -> np.ndarray:
    """A dataset's values as h5dump writes them (binary, little-endian), and its shape from h5dump's header."""
    binary = tmp_path / "block.bin"
    subprocess.run(["h5dump", "-d", dataset, "-b", "LE", "-o", str(binary), str(path)], capture_output=True,
                   check=True)
    header = subprocess.run(["h5dump", "-H", "-d", dataset, str(path)], capture_output=True, text=True,
                            check=True).stdout
    assert "H5T_IEEE_F64LE" in header and "( 8, 6, 4 )" in header, header
    return np.fromfile(binary, "<f8").reshape(DIMS)


@pytest.mark.skipif(not shutil.which("h5dump"), reason="h5dump (hdf5-tools) is not installed")
@pytest.mark.parametrize("mode", ["synchronous", "dedicated-cores"])
def test_hdf5_files_read_back_with_h5dump(mpi, tmp_path, mode):
    if mpi.name != "mpich":
        pytest.skip("the hdf5 format is in the MPICH build (test_hdf5_refused_under_open_mpi)")
    setup, out, clients = run(mpi, tmp_path, mode, "hdf5", iterations=3)
    assert out.writer_format == "hdf5" and json.loads(out.path.read_text())["writer_format"] == "hdf5"
    seen = 0
    for writer in out.meta["writers"]:
        path = tmp_path / "out" / f"cm1.{writer}.h5"
        blocks = sorted({b for (_, _, b), where in out._blocks.items() if where[0] == writer})
        for v, name in enumerate(setup.variables):
            for it in range(3):
                for b in blocks:
                    assert np.array_equal(h5dump_block(path, f"/{name}/{it}/{b}", tmp_path), kernel_block(it, b, v))
                    seen += 1
    assert seen == 3 * clients * len(setup.variables)


def h5py_blocks(path, iterations: int, variables, clients: int, absent=frozenset()) -> int:
    """Checks the shared file with h5py, independently of the library's index: a group per iteration, a dataset per
    variable holding every client's block in block order; returns the blocks compared (absent: (iteration, block)
    no client gave, left out)."""
    h5py = pytest.importorskip("h5py")
    compared = 0
    with h5py.File(path, "r") as f:
        assert sorted(f, key=int) == [str(it) for it in range(iterations)]
        for it in range(iterations):
            assert sorted(f[str(it)]) == sorted(variables)
            for v, name in enumerate(variables):
                dataset = f[str(it)][name]
                assert dataset.shape == (clients, *DIMS) and dataset.dtype == np.dtype("<f8")
                for b in range(clients):
                    if (it, b) not in absent:
                        assert np.array_equal(dataset[b], kernel_block(it, b, v)), (it, name, b)
                        compared += 1
    return compared


SHARED_JOBS = {  # 2 servers each time; the first server of the 5-rank job serves two clients, the second one
    "dedicated-cores": (6, {"ranks_per_node": 3, "fsync": True}, 4, [2, 5]),
    "dedicated-nodes": (5, {"ranks_per_node": 1, "dedicated_nodes": 2}, 3, [3, 4]),
}


@pytest.mark.parametrize("mode", SHARED_JOBS)
def test_hdf5_shared_is_one_file_the_servers_write_together(mpi, tmp_path, mode):
    if mpi.name != "mpich":
        pytest.skip("the hdf5 formats are in the MPICH build (test_hdf5_refused_under_open_mpi)")
    nranks, options, clients, writers = SHARED_JOBS[mode]
    setup = Setup(tmp_path / "out", mode=mode, dims=DIMS, variables=("u", "v"), buffer=1 << 20,
                  writer_format="hdf5-shared", **options)
    result = run_kernel(mpi.impl, nranks, setup.write(tmp_path / "c.yaml"), setup, 4, 0.0, event="checkpoint",
                        timeout=60)
    assert result.returncode == 0, result.stderr
    out = check_output(tmp_path / "out", setup, clients, 4)
    assert out.writer_format == "hdf5-shared" and out.meta["writers"] == writers
    assert sorted(p.name for p in (tmp_path / "out").glob("*.h5")) == ["cm1.h5"]
    assert h5py_blocks(tmp_path / "out" / "cm1.h5", 4, setup.variables, clients) == 4 * 2 * clients
    assert out.counters()["written_blocks"] == 4 * 2 * clients and out.counters()["lost_blocks"] == 0


def test_hdf5_shared_early_finisher_and_tight_rings(mpi, tmp_path):
    """Client 1 stops after 2 of 6 iterations; each ring holds one iteration (the least initialize takes), the
    writers are slow and clients
    write in place (zero copy): the servers still write together to the end, and hold no iteration forever."""
    if mpi.name != "mpich":
        pytest.skip("the hdf5 formats are in the MPICH build")
    block = int(np.prod(DIMS)) * 8
    setup = Setup(tmp_path / "out", mode="dedicated-nodes", ranks_per_node=1, dedicated_nodes=2, dims=DIMS,
                  variables=("u", "v"), buffer=3 * (block + 64) + 64, bandwidth=2 << 20,
                  writer_format="hdf5-shared")
    result = run_kernel(mpi.impl, 5, setup.write(tmp_path / "c.yaml"), setup, 6, 0.0, event="checkpoint",
                        timeout=60, early=(1, 2), zero_copy=True)
    assert result.returncode == 0, result.stderr
    out = async_io.open(tmp_path / "out")
    assert [out.blocks_at("u", it) for it in range(6)] == [[0, 1, 2]] * 2 + [[0, 2]] * 4
    absent = {(it, 1) for it in range(2, 6)}
    assert h5py_blocks(tmp_path / "out" / "cm1.h5", 6, setup.variables, 3, absent) == 2 * (3 * 6 - 4)


@pytest.mark.parametrize("server,calls", [(5, "1"), (2, "3+")])
def test_hdf5_shared_creation_failing_on_one_server_ends_on_all(mpi, tmp_path, monkeypatch, server, calls):
    """One server's H5Dcreate2 fails (a test-only preload, tests/programs/hdf5_create_fault.c): before, the servers'
    HDF5 metadata differed and the run hung at close (H5Fclose's collective calls did not match). A failure that
    passes (server 5's first creation): that server tries again, the metadata stay the same, and every block is
    written. One that stays (server 2's, from the second iteration's first on): the job ends at once, with one line
    saying why, instead of hanging."""
    if mpi.name != "mpich":
        pytest.skip("the hdf5 formats are in the MPICH build")
    monkeypatch.chdir(tmp_path)  # h5pcc leaves its object file in the working directory
    fault = mpi.compile("hdf5_create_fault.c", "-shared", "-fPIC", "-ldl", compiler="h5pcc")
    for name, value in {"LD_PRELOAD": str(fault), "HDF5_FAULT_RANK": str(server), "HDF5_FAULT_CALL": calls}.items():
        monkeypatch.setenv(name, value)
    nranks, options, clients, writers = SHARED_JOBS["dedicated-cores"]
    setup = Setup(tmp_path / "out", mode="dedicated-cores", dims=DIMS, variables=("u", "v"), buffer=1 << 20,
                  writer_format="hdf5-shared", **options)
    result = run_kernel(mpi.impl, nranks, setup.write(tmp_path / "c.yaml"), setup, 4, 0.0, timeout=60)
    dataset = "/0/u" if calls == "1" else "/1/u"
    retried = f"ioloom-async: writer {server}: HDF5 could not create {dataset} in the shared output; trying once more"
    assert result.stderr.count(retried) == 1, result.stderr
    if calls == "1":
        assert result.returncode == 0, result.stderr
        check_output(tmp_path / "out", setup, clients, 4)
        assert h5py_blocks(tmp_path / "out" / "cm1.h5", 4, setup.variables, clients) == 4 * 2 * clients
        return
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if "metadata now differ" in line]
    assert lines == [f"ioloom-async: writer {server}: HDF5 could not create {dataset} in the shared output, which the "
                     "other servers did; their HDF5 metadata now differ and the file cannot be closed: aborting the "
                     "job (the file is incomplete; writer.format hdf5 writes a file per writer)"], result.stderr


@pytest.mark.parametrize("writer_format", ["hdf5", "hdf5-shared"])
def test_hdf5_refused_under_open_mpi(mpi, tmp_path, writer_format):
    setup = Setup(tmp_path / "out", mode="dedicated-cores", variables=("u",), dims=(4, 4, 4), buffer=1 << 20,
                  writer_format=writer_format)
    lines = initialize(mpi, tmp_path, setup.yaml())
    if mpi.name == "mpich":
        assert sum(" initialize rc 0" in line for line in lines) == 3, lines
        return
    refusal = f"initialize rc 1: rank 2: writer: format {writer_format} needs libioloom-async-mpich"
    assert len(lines) == 3 and all(refusal in line for line in lines), lines


@pytest.mark.parametrize("writer_format", ["logfs", "hdf5"])
def test_formats_on_dedicated_nodes(mpi, tmp_path, writer_format):
    """The servers of the dedicated-nodes mode write either format (2 emulated nodes of 2 ranks: 2 writers)."""
    if writer_format == "hdf5" and mpi.name != "mpich":
        pytest.skip("the hdf5 format is in the MPICH build")
    setup = Setup(tmp_path / "out", mode="dedicated-nodes", ranks_per_node=2, dims=DIMS, writer_format=writer_format)
    result = run_kernel(mpi.impl, 4, setup.write(tmp_path / "c.yaml"), setup, 4, 0.0, timeout=60)
    assert result.returncode == 0, result.stderr
    out = check_output(tmp_path / "out", setup, 2, 4)
    assert out.writer_format == writer_format and out.meta["writers"] == [2, 3]
    suffix = "h5" if writer_format == "hdf5" else "data"
    assert all((tmp_path / "out" / f"cm1.{w}.{suffix}").exists() for w in (2, 3))
