"""The container format across C and Python: shared vectors, the checksum, overlap and truncate order among
writers, pattern entries (10^6 strided writes keep a tiny index), fan-out of writers to logs, several backends,
opening 1,024 writers' indexes, and the names of an MPI runtime's files that stay plain files."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import build_program
from ioloom import paths
from ioloom.analysis.partition import mpi_runtime_name
from ioloom.logfs import preload
from ioloom.logfs.format import Container, is_container, load_journals, read_meta, sum64
from ioloom.logfs.tools import check, journal_records, recover

VECTORS = Path(__file__).parent / "vectors" / "logfs"


def tool(*args, env=None) -> str:
    out = subprocess.run([str(paths.native_bin("ioloom-logfs-tool")), *map(str, args)], capture_output=True,
                         text=True, timeout=300, env={**os.environ, **(env or {})})
    assert out.returncode == 0, out.stderr
    return out.stdout


RUNTIME_NAMES = json.loads((VECTORS / "runtime-names.json").read_text())
CREATE = """
import os, sys
for name in sys.argv[2:]:
    os.close(os.open(os.path.join(sys.argv[1], name), os.O_CREAT | os.O_WRONLY))
"""


def test_runtime_names_are_the_same_in_c_and_python():
    """tests/vectors/logfs/runtime-names.json: the layer's matcher (native/logfs/lf_runtime.c) and the trace
    analysis's (partition.mpi_runtime_name) give each name the verdict the file gives it. The Python one took a
    name ending in a newline after `.lock` for the runtime's, and not one with a newline before its first dash."""
    expected = ["runtime" if v["runtime"] else "data" for v in RUNTIME_NAMES]
    assert tool("runtime-name", *(v["name"] for v in RUNTIME_NAMES)).splitlines() == expected
    assert ["runtime" if mpi_runtime_name(v["name"]) else "data" for v in RUNTIME_NAMES] == expected


def test_the_layer_keeps_runtime_names_plain_files(tmp_path):
    """Each name of the vectors that is one component, created under a mount through the layer: a plain file if
    it names a runtime's file, else a container."""
    names = [v for v in RUNTIME_NAMES if v["name"] and "/" not in v["name"]]
    subprocess.run([sys.executable, "-c", CREATE, tmp_path, *(v["name"] for v in names)],
                   env={**os.environ, **preload.env({tmp_path: []})}, check=True, timeout=60)
    made = {v["name"]: ("plain" if (tmp_path / v["name"]).is_file() else "container"
                        if is_container(tmp_path / v["name"]) else "?") for v in names}
    assert made == {v["name"]: "plain" if v["runtime"] else "container" for v in names}


def test_checksum_vectors(tmp_path):
    for case in json.loads((VECTORS / "sums.json").read_text()):
        assert f"{sum64(bytes.fromhex(case['data'])):016x}" == case["sum64"]
    fresh = np.random.default_rng(3).integers(0, 256, 100_003, dtype=np.uint8).tobytes()
    (tmp_path / "f").write_bytes(fresh)
    assert tool("sum", tmp_path / "f").strip() == f"{sum64(fresh):016x}"


@pytest.mark.parametrize("name", ["overlap", "overlap-v2"])
def test_committed_vector_reads_the_same_in_python_and_c(tmp_path, name):
    """The current format's vector and version 2's (a record per write), which every reader still reads."""
    expected = (VECTORS / f"{name}.plain").read_bytes()
    assert Container.open(VECTORS / f"{name}.lf").read() == expected
    assert check(VECTORS / f"{name}.lf").ok
    copy = tmp_path / f"{name}.lf"            # read-only use of the vector; the layer may add files
    shutil.copytree(VECTORS / f"{name}.lf", copy)
    out = subprocess.run(["cat", f"logfs:{copy}"], capture_output=True, env={**os.environ, **preload.env()})
    assert out.stdout == expected
    stats = recover(copy)                     # rebuilt from its record journals, in its own version
    assert stats["records"] == 12 and Container.open(copy).read() == expected and check(copy).ok


APPEND = """
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
for i in range(20):
    os.pwrite(fd, bytes([65 + i]) * 512, 9000 + 1024 * i)   # a strided run
os.close(fd)
"""


def test_a_version_2_container_stays_version_2_when_written(tmp_path):
    """Writes into a version-2 container add version-2 records (one per write), so every reader still reads it
    whole; the plain file given the same writes is the oracle."""
    copy, plain = tmp_path / "old.lf", tmp_path / "plain"
    shutil.copytree(VECTORS / "overlap-v2.lf", copy)
    shutil.copyfile(VECTORS / "overlap-v2.plain", plain)
    subprocess.run([sys.executable, "-c", APPEND, plain], check=True)
    subprocess.run([sys.executable, "-c", APPEND, f"logfs:{copy}"], check=True,
                   env={**os.environ, **preload.env(), "PMI_RANK": "0"})
    assert read_meta(copy).version == 2 and Container.open(copy).read() == plain.read_bytes()
    assert (copy / "records.r0").stat().st_size == (VECTORS / "overlap-v2.lf" / "records.r0").stat().st_size + 20 * 64
    report = check(copy)
    assert report.ok and report.records_checked >= 20, report.problems


def test_fresh_c_writes_read_in_python(tmp_path):
    tool("vectors", tmp_path / "c", tmp_path / "plain", env={"IOLOOM_LOGFS_CHUNK": "4096"})
    c = Container.open(tmp_path / "c")
    assert c.read() == (tmp_path / "plain").read_bytes()
    assert len(c.journals) == 3 and check(tmp_path / "c").ok
    runs = list(journal_records(tmp_path / "c" / "records.r0"))   # writer 0's strided 8-byte writes: one record
    assert [(int(r["count"]), int(r["stride"]), int(r["length"])) for r in runs][-1] == (4, 100, 8)


def journals_bytes(container: Path, group: str) -> int:
    """What a writer group's journals (index and records) take beside its data."""
    return sum((container / f"{kind}.{group}").stat().st_size for kind in ("index", "records"))


def test_million_strided_writes_keep_tiny_journals(tmp_path):
    """Version 2 wrote a 64-byte record per write: 61 MiB per rank for these 8 MB of data."""
    tool("synth", tmp_path / "c", 2, 1_000_000, 8)   # two ranks interleaved: each one's writes are strided
    for group in ("r0", "r1"):
        assert journals_bytes(tmp_path / "c", group) <= 4096
    for journal in load_journals(read_meta(tmp_path / "c")):
        assert journal.entries["count"].sum() == 1_000_000 and len(journal.entries) == 1
        assert journal.entries["stride"][0] == 16 and journal.entries["pstride"][0] == 8  # the log: data alone
    opened = json.loads(tool("open-time", tmp_path / "c"))
    assert opened["size"] == 16_000_000 and opened["last_byte_ok"]


def test_million_strided_writes_through_the_layer_keep_tiny_journals(tmp_path):
    """Issue 15's journal goal through the preloaded layer: 2 ranks at once (two processes, as MPI ranks), each
    making 10^6 pwrite calls of 8 bytes strided over one file (tests/programs/logfs_strided_pwrite.c), keep their
    index and record journals together <= 4 KiB per rank, and the file holds the bytes of a plain file written the
    same way (the oracle)."""
    exe = build_program("logfs_strided_pwrite.c")
    ranks, count, size = 2, 1_000_000, 8
    for path, env in ((tmp_path / "plain", {}), (f"logfs:{tmp_path / 'c'}", preload.env())):
        procs = [subprocess.Popen([exe, str(path), str(r), str(ranks), str(count), str(size)],
                                  env={**os.environ, **env, "PMI_RANK": str(r)}) for r in range(ranks)]
        assert [p.wait(timeout=120) for p in procs] == [0] * ranks
    assert Container.open(tmp_path / "c").read() == (tmp_path / "plain").read_bytes()
    assert (tmp_path / "plain").stat().st_size == ranks * count * size
    for r in range(ranks):
        assert journals_bytes(tmp_path / "c", f"r{r}") <= 4096


FAST_WRITER = r"""
import os, sys
rank, n, block, count = map(int, sys.argv[2:6])
tile = bytes(x * 13 % 251 for x in range(251)) * (block // 251 + 2)   # byte x of the file is x * 13 mod 251
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
for i in range(count):
    off = (i * n + rank) * block
    os.pwrite(fd, tile[off % 251:off % 251 + block], off)
os.close(fd)
"""


@pytest.mark.parametrize("block", [4096, 47008, 65536, 1 << 20])
@pytest.mark.parametrize("ranks", [1, 2], ids=["sequential", "strided"])
def test_journals_cost_at_most_1_percent_of_the_data(tmp_path, block, ranks):
    """Writes of 4 KiB and up, one writer's sequential stream and two writers' strided ones (IOR's aligned and
    hard shapes): index and record journals together <= 1% of the data (version 2: 1.6% at 4 KiB from the
    records alone). The same writes to a plain file are the oracle for the bytes."""
    count = max(4, (4 << 20) // block)
    for path, env in ((tmp_path / "plain", {}), (f"logfs:{tmp_path / 'c'}", preload.env())):
        # the writers run at once, creating the container together (as N ranks do)
        procs = [subprocess.Popen([sys.executable, "-c", FAST_WRITER, str(path), str(r), str(ranks), str(block),
                                   str(count)], env={**os.environ, **env, "PMI_RANK": str(r)}) for r in range(ranks)]
        assert [p.wait(timeout=120) for p in procs] == [0] * ranks
    assert Container.open(tmp_path / "c").read() == (tmp_path / "plain").read_bytes()
    for r in range(ranks):
        assert journals_bytes(tmp_path / "c", f"r{r}") <= block * count / 100


WRITER = r"""
import os, sys
rank, n, block, count, transfer = map(int, sys.argv[2:7])
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
for i in range(count):
    off = (i * n + rank) * block
    data = bytes((off + k) * 13 % 251 for k in range(block))
    for k in range(0, block, transfer):
        os.pwrite(fd, data[k:k + transfer], off + k)
os.close(fd)
"""


def concurrent_writers(path, n, block, count, transfer=None, **settings):
    args = [str(n), str(block), str(count), str(transfer or block)]
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(r), *args],
                              env={**os.environ, **preload.env(**settings), "PMI_RANK": str(r)}) for r in range(n)]
    assert all(p.wait(timeout=120) == 0 for p in procs)


def expected_bytes(size):
    return bytes(x * 13 % 251 for x in range(size))


@pytest.mark.parametrize("fanout, logs", [("rank", 8), ("4", 2), ("node", 1)])
def test_fanout_controls_the_number_of_logs(tmp_path, fanout, logs):
    path = tmp_path / "c"
    concurrent_writers(f"logfs:{path}", 8, 1000, 40, fanout=fanout, chunk="4096")
    assert len(list(path.glob("log.*"))) == logs
    assert Container.open(path).read() == expected_bytes(8 * 1000 * 40)
    report = check(path)
    assert report.ok, report.problems


def test_blocks_written_in_pieces_stay_one_pattern(tmp_path):
    """IOR's -t < -b: each 4 KiB block written as 4 writes of 1 KiB, strided between 2 writers. The pieces of a
    block join into one record and the blocks into one pattern per writer; recover rebuilds the same entries."""
    path = tmp_path / "c"
    concurrent_writers(f"logfs:{path}", 2, 4096, 100, transfer=1024)
    journals = load_journals(read_meta(path))
    assert [(len(j.entries), int(j.entries["count"][0]), int(j.entries["length"][0])) for j in journals] == \
        [(1, 100, 4096)] * 2
    assert Container.open(path).read() == expected_bytes(2 * 4096 * 100)
    report = check(path)
    assert report.ok and report.records_checked == 2 * 100 * 4, report.problems
    before = [j.entries.tobytes() for j in journals]
    recover(path)
    assert [j.entries.tobytes() for j in load_journals(read_meta(path))] == before


def test_several_backends_one_namespace(tmp_path, ioloom_cli):
    mount, extras = tmp_path / "mnt", [tmp_path / "b1", tmp_path / "b2"]
    for d in (mount, *extras):
        d.mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(mount / "shared"), str(r), "8", "512", "20", "512"],
                              env={**os.environ, **preload.env({mount: extras}), "PMI_RANK": str(r)})
             for r in range(8)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    c = Container.open(mount / "shared")
    assert len(c.meta.backends) == 3
    used = {j.log_path.parent for j in c.journals}
    assert len(used) >= 2                                              # the logs are spread
    assert c.read() == expected_bytes(8 * 512 * 20)
    ioloom_cli("container", "rm", mount / "shared")
    assert not [p for b in extras for p in b.rglob("*") if not p.is_dir()] and not (mount / "shared").exists()


def test_opening_1024_writers_indexes_takes_under_a_second(tmp_path):
    tool("synth", tmp_path / "c", 1024, 4, 4096)
    opened = json.loads(tool("open-time", tmp_path / "c"))
    assert opened["size"] == 1024 * 4 * 4096 and opened["last_byte_ok"]
    assert opened["seconds"] < 1.0, opened


READER = r"""
import os, subprocess, sys
path = sys.argv[1]
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"first;")
os.fsync(fd)
before = os.pread(fd, 100, 0)
subprocess.run([sys.executable, "-c",
                "import os, sys; fd = os.open(sys.argv[1], os.O_WRONLY); os.pwrite(fd, b'second', 6); os.close(fd)",
                path], check=True)
print(before.decode(), os.pread(fd, 100, 0).decode())   # no reopen: a read past the known end reloads
"""


def test_a_read_past_the_end_sees_what_others_published(tmp_path):
    out = subprocess.run([sys.executable, "-c", READER, f"logfs:{tmp_path / 'c'}"], capture_output=True, text=True,
                         env={**os.environ, **preload.env()}, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["first;", "first;second"]


THREADS = r"""
import os, sys, threading
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
def work(t):
    other = os.dup(fd) if t % 2 else fd                      # half through a dup: the same open description
    for i in range(300):
        off = (i * 8 + t) * 1000
        os.pwrite(other, bytes([(off // 1000) % 251 + 1]) * 1000, off)
threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
for t in threads: t.start()
for t in threads: t.join()
data = os.pread(fd, 8 * 300 * 1000 + 10, 0)
print(len(data), all(data[b * 1000:(b + 1) * 1000] == bytes([b % 251 + 1]) * 1000 for b in range(8 * 300)))
"""


def test_threads_writing_one_container(tmp_path):
    out = subprocess.run([sys.executable, "-c", THREADS, f"logfs:{tmp_path / 'c'}"], capture_output=True, text=True,
                         env={**os.environ, **preload.env()}, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(8 * 300 * 1000), "True"]
    assert Container.open(tmp_path / "c").read() == b"".join(bytes([b % 251 + 1]) * 1000 for b in range(2400))


NN_WRITER = r"""
import os, sys
where, files = sys.argv[1], int(sys.argv[2])
for i in range(files):                        # N-N: a file per rank (here one process plays the ranks)
    fd = os.open(f"{where}/rank{i}.dat", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, bytes([i % 251]) * (1000 + i))
    os.close(fd)
"""


def test_nn_files_spread_over_shared_directories_on_extra_backends(tmp_path):
    """N-N with two extra backends and a fan-out of 8: each extra backend holds the files' logs in at most 8 shared
    directories, none of its own per file (today's main: a directory per file on every extra backend); every file
    reads as the same writes made to a plain directory (the oracle), and removing the files leaves the shared
    directories empty."""
    mount, plain, extras = tmp_path / "mnt", tmp_path / "plain", [tmp_path / "b1", tmp_path / "b2"]
    for d in (mount, plain, *extras):
        d.mkdir()
    subprocess.run([sys.executable, "-c", NN_WRITER, plain, "100"], check=True)
    subprocess.run([sys.executable, "-c", NN_WRITER, mount, "100"], check=True,
                   env={**os.environ, **preload.env({mount: extras}, spread="8")})
    for name in os.listdir(plain):
        assert Container.open(mount / name).read() == (plain / name).read_bytes()
    for extra in extras:
        dirs = [p for p in extra.rglob("*") if p.is_dir()]
        assert len(dirs) <= 1 + 8, dirs                                   # lf-spread and its 8 directories
        assert len({p.parent for p in extra.rglob("*.log.*")}) > 1        # the logs are spread over them
    assert sum(len(list(extra.rglob("*.log.*"))) for extra in extras) > 0
    subprocess.run(["rm", *(str(mount / n) for n in os.listdir(plain))], check=True,
                   env={**os.environ, **preload.env({mount: extras})})
    assert not os.listdir(mount) and not [p for extra in extras for p in extra.rglob("*") if p.is_file()]
