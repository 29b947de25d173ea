"""MPI-IO through containers with no patched MPI: an unmodified N-1 strided program (collective through a file view,
then independent writes) writes through logfs on 4 ranks and reads back on 3; the result equals the same
program's direct write byte for byte. Open MPI runs it under OMPIO and ROMIO, MPICH under ROMIO."""
from __future__ import annotations

import pytest

from ioloom.analysis.partition import mpi_runtime_name
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


@pytest.mark.parametrize("component", ["ompio", "romio"])
def test_collective_writes_go_to_each_ranks_own_log(mpi, tmp_path, component):
    """Collective MPI-IO over logfs writes each rank's blocks to that rank's own log, as PLFS's MPI-IO driver did
    (today's main, under Open MPI's OMPIO: the two-phase exchange had rank 0 aggregate every rank's blocks into its
    log; ROMIO writes these non-interleaved calls independently either way); the bytes equal the same collective
    writes to a plain file."""
    from ioloom.bench.io import run_bench
    from ioloom.logfs.format import load_journals, read_meta
    if component == "ompio" and mpi.name != "openmpi":
        pytest.skip("OMPIO is Open MPI's")
    select = {"OMPI_MCA_io": "romio321" if component == "romio" else "ompio"} if mpi.name == "openmpi" else {}
    mount, block, ranks = tmp_path / "mnt", 65536, 4
    mount.mkdir()
    args = ["-a", "mpiio", "-c", "-w", "-k", "--pattern", "strided", "-b", str(block), "-t", str(block), "-s", "8"]
    run_bench(mpi.name, ranks, [*args, "-o", tmp_path / "plain"], env=select)
    run_bench(mpi.name, ranks, [*args, "-o", mount / "shared"], env={**preload.env({mount: []}), **select})
    assert Container.open(mount / "shared").read() == (tmp_path / "plain").read_bytes()
    journals = load_journals(read_meta(mount / "shared"))
    assert sorted(j.group for j in journals) == [f"r{r}" for r in range(ranks)]
    for j in journals:
        rank = int(j.group[1:])
        for e in j.entries:
            starts = [int(e["offset"]) + i * int(e["stride"]) for i in range(int(e["count"]))]
            assert all(s // block % ranks == rank and s % block + int(e["length"]) <= block for s in starts), \
                (j.group, e)


@pytest.mark.parametrize("component", ["ompio", "romio"])
def test_noncontiguous_views_log_each_byte_once(mpi, tmp_path, component):
    """BT-IO's 3-D subarray views (each rank's cells scattered in the file), written through logfs collectively and
    independently: every rank logs its own bytes and only those, once each. Under ROMIO with its default data sieving
    on writes (today's main), each write read the span between its first and last byte and wrote it all back under a
    record lock, so the logs held the holes' old bytes again (1.8x the file at 4 ranks) and every lock was a sync
    point. The file equals the same program's direct write."""
    from ioloom.bench.io import run_bench
    if component == "ompio" and mpi.name != "openmpi":
        pytest.skip("OMPIO is Open MPI's")
    select = {"OMPI_MCA_io": "romio321" if component == "romio" else "ompio"} if mpi.name == "openmpi" else {}
    args = ["-a", "mpiio", "-w", "-k", "--kernel", "btio", "--cells", "32", "--steps", "2"]
    for collective in ([], ["-c"]):
        mount, plain = tmp_path / f"mnt{len(collective)}", tmp_path / f"plain{len(collective)}"
        mount.mkdir()
        plain.mkdir()
        run_bench(mpi.name, 4, [*args, *collective, "-o", plain / "bt"], env=select)
        run_bench(mpi.name, 4, [*args, *collective, "-o", mount / "bt"], env={**preload.env({mount: []}), **select})
        (expected,) = list(plain.iterdir())
        container = Container.open(mount / expected.name)
        assert container.read() == expected.read_bytes(), collective
        entries, _, _ = container.all_entries()
        logged = int((entries["length"].astype(int) * entries["count"].astype(int)).sum())
        assert logged == expected.stat().st_size, (collective, logged)


LOCKTEST = r"""
import fcntl, os, sys, struct
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)     # as OMPIO probes locks at every MPI_File_open
fcntl.fcntl(fd, fcntl.F_SETLK, struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 1, 0))
os.write(fd, b"probe")
os.close(fd)
"""


@pytest.mark.parametrize("name", ["f.locktest.0", "f-2983034881-41234.lock"])
def test_ompio_lock_files_stay_plain_files(tmp_path, name):
    """OMPIO's NAME.locktest.RANK probe and its lockedfile component's NAME-JOBID-PID.lock (the shared file pointer
    when ranks span nodes) under a mount are plain files, as in a plain directory (the oracle): today's main made
    the probe a container created and removed at every MPI_File_open (most of a 4 MiB read's time), and still makes
    the pointer's file one (its fcntl locks then sync points)."""
    import os
    import subprocess
    import sys
    mount, plain = tmp_path / "mnt", tmp_path / "plain"
    mount.mkdir()
    plain.mkdir()
    subprocess.run([sys.executable, "-c", LOCKTEST, plain / name], check=True)
    subprocess.run([sys.executable, "-c", LOCKTEST, mount / name], check=True,
                   env={**os.environ, **preload.env({mount: []})})
    assert (mount / name).is_file() and not (mount / name).is_dir()
    assert (mount / name).read_bytes() == (plain / name).read_bytes()


def test_a_container_named_like_a_lock_file_stays_a_container(tmp_path):
    """A container made under a runtime file's name before the layer knew the name (here through the logfs:
    prefix, which is always the layer's) is still read and removed through the mount as the file it holds (it
    was EISDIR: the name alone sent the path past the layer)."""
    import os
    import subprocess
    mount = tmp_path / "mnt"
    mount.mkdir()
    path = mount / "old-1234-56.lock"
    env = {**os.environ, **preload.env({mount: []})}
    subprocess.run(["dd", "if=/dev/zero", f"of=logfs:{path}", "bs=100", "count=3", "status=none"], check=True,
                   env=env)
    assert path.is_dir()  # the container, seen without the layer
    out = subprocess.run(["wc", "-c", str(path)], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and out.stdout.split()[0] == "300", out.stderr
    subprocess.run(["rm", str(path)], check=True, env=env)
    assert not path.exists()


# mpiio_matrix.c's variants but the shared pointer's independent ones (shared, ishared): they read back blocks other
# ranks wrote with no sync between, which MPI's consistency rules leave undefined (logfs: close-to-open,
# logfs-format.md).
UNSYNCED = "shared,ishared"


@pytest.mark.parametrize("sharedfp", ["lockedfile", "default"])
def test_shared_file_pointers_through_lockedfile(mpi, tmp_path, sharedfp):
    """Open MPI's ordered accesses, blocking and split, and every other variant of tests/programs/mpiio_matrix.c
    (non-blocking and split ones included) under OMPIO with its lockedfile component (the shared file pointer it
    picks when the ranks span nodes) and its default, and under MPICH's ROMIO, through logfs: each rank reads back
    its block (the program checks), the mount holds the files the plain run made, each equal to the plain run's,
    and no runtime file (the pointer's NAME-JOBID-PID.lock, a NAME.locktest.RANK probe) is left behind in either.
    Today's main made the pointer's NAME-JOBID-PID.lock a container, and a rank crashed (SIGSEGV); and the split
    write_ordered_end failed (MPI_ERR_OTHER): OMPIO writes a split access with POSIX aio, whose glibc thread wrote
    the container's descriptor past the layer (EBADF). Under ROMIO with logfs's hints (collective buffering off, so
    the collective write no longer synchronises the ranks) the ordered variants raced with the program's
    seek_shared, which resets the pointer on rank 0 before its barrier (a plain file with the same hints did the
    same): the program now rewinds after a barrier."""
    if mpi.name != "openmpi" and sharedfp != "default":
        pytest.skip("sharedfp/lockedfile is OMPIO's")
    program = mpi.compile("mpiio_matrix.c")
    select = {"OMPI_MCA_io": "ompio", **({"OMPI_MCA_sharedfp": sharedfp} if sharedfp != "default" else {})} \
        if mpi.name == "openmpi" else {}
    plain, mount = tmp_path / "plain", tmp_path / "mnt"
    plain.mkdir()
    mount.mkdir()
    mpi.run(3, [program, plain, UNSYNCED], env=select)
    mpi.run(3, [program, mount, UNSYNCED], env={**preload.env({mount: []}), **select})
    names = sorted(p.name for p in plain.iterdir())
    assert sorted(p.name for p in mount.iterdir()) == names and "split_ordered.dat" in names
    assert not [name for name in names if mpi_runtime_name(name)], names
    for name in names:
        assert Container.open(mount / name).read() == (plain / name).read_bytes(), name
