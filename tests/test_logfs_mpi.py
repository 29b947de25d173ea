"""MPI-IO through containers with no patched MPI: an unmodified N-1 strided program (collective through a file view,
then independent writes) writes through logfs on 4 ranks and reads back on 3; the result equals the same
program's direct write byte for byte. Open MPI runs it under OMPIO and ROMIO, MPICH under ROMIO."""
from __future__ import annotations

from ioloom.logfs import preload
from ioloom.logfs.format import Container
from ioloom.logfs.tools import check, summary

BLOCK, COUNT = 3000, 24


def io_components(name: str) -> list[list[str]]:
    return [["--mca", "io", "ompio"], ["--mca", "io", "romio321"]] if name == "openmpi" else [[]]


def test_n1_strided_through_container(mpi, tmp_path):
    program = mpi.compile("logfs_mpi_strided.c")
    direct = tmp_path / "direct"
    mpi.run(4, [program, "write", direct, BLOCK, COUNT])
    expected = direct.read_bytes()
    assert len(expected) == 4 * BLOCK * COUNT
    for component in io_components(mpi.name):
        mount = tmp_path / f"mnt{len(component)}{component[-1] if component else ''}"
        mount.mkdir()
        env = preload.env({mount: []})
        path = mount / "shared"
        out = mpi.run(4, [*component, program, "write", path, BLOCK, COUNT], env=env)
        assert "OK written" in out.stdout
        back = mpi.run(3, [*component, program, "read", path], env=env)   # another rank count reads it
        assert f"OK {len(expected)}" in back.stdout, back.stdout
        assert Container.open(path).read() == expected, component
        report = check(path)
        assert report.ok, report.problems
        facts = summary(path)
        assert facts["groups"] == 4 and facts["size"] == len(expected)
        # The independent strided writes of each rank stay one pattern entry, however many there are.
        assert facts["pattern_entries"] >= 4 and facts["index_entries"] <= 4 * 4, facts


def test_parallel_hdf5_through_container(tmp_path):
    """Parallel HDF5 (MPICH's: Debian builds it against MPICH only) writes and reads back a shared file through
    logfs, every byte verified by ioloom-bench."""
    from ioloom.bench.io import run_bench
    mount = tmp_path / "mnt"
    mount.mkdir()
    result = run_bench("mpich", 4, ["-a", "hdf5", "-b", "256k", "-t", "64k", "-s", "8", "-w", "-r", "--verify", "-k",
                                    "-o", mount / "shared.h5"], env=preload.env({mount: []}))
    assert result["verify"]["enabled"] and result["verify"]["errors"] == 0
    report = check(mount / "shared.h5")
    assert report.ok, report.problems
    assert Container.open(mount / "shared.h5").read(0, 8) == b"\x89HDF\r\n\x1a\n"   # the HDF5 signature
