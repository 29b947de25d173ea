"""1-N: many small files per process packed into one log per writer group (IOLOOM_LOGFS_PACK), each record and
index entry carrying its file's id; listed, read, removed and moved by unmodified tools."""
from __future__ import annotations

import os
import subprocess
import sys

from ioloom.logfs import preload
from ioloom.logfs.format import PACK_NAME, Container
from ioloom.logfs.tools import check, packed_containers, packed_files, recover

MAKER = r"""
import os, sys
rank = int(os.environ["PMI_RANK"])
for i in range(int(sys.argv[2])):
    with open(os.path.join(sys.argv[1], f"r{rank}-{i}.txt"), "w") as f:
        f.write(f"rank {rank} file {i}\n" * (i + 1))
"""

TOOLS = r"""
set -e
cd "$MNT"
ls | wc -l
ls -l r0-3.txt | awk '{print $5}'
cat r1-2.txt | head -1
rm r2-0.txt
cp r3-4.txt copy.txt
mv copy.txt moved.txt
truncate -s 5 r0-1.txt
stat -c %s r0-1.txt moved.txt
ls r2-0.txt 2>/dev/null || echo gone
"""


def test_many_small_files_in_few_physical_files(tmp_path, ioloom_cli):
    mount = tmp_path / "mnt"
    mount.mkdir()
    env = {**os.environ, **preload.env({mount: []}, fanout="node"), "IOLOOM_LOGFS_PACK": str(mount)}
    procs = [subprocess.Popen([sys.executable, "-c", MAKER, str(mount), "50"], env={**env, "PMI_RANK": str(r)})
             for r in range(4)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    pack = mount / PACK_NAME
    physical = sorted(p.name for p in pack.iterdir())
    assert len(physical) <= 5 and physical[0] == "index.h" + os.uname().nodename  # 200 files in 5 physical ones
    files = packed_files(pack)
    assert len(files) == 200
    assert Container.open(mount / "r3-9.txt").read() == b"rank 3 file 9\n" * 10

    out = subprocess.run(["bash", "-c", TOOLS], env={**env, "MNT": str(mount)}, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split()
    assert lines[0] == "200"                                           # ls lists packed files, not the pack
    assert int(lines[1]) == len(b"rank 0 file 3\n" * 4)
    assert " ".join(lines[2:6]) == "rank 1 file 2"
    assert lines[6:] == ["5", str(len(b"rank 3 file 4\n" * 5)), "gone"]
    files = packed_files(pack)
    assert "r2-0.txt" not in files and files["moved.txt"] == files["r3-4.txt"] and files["r0-1.txt"] == 5

    assert check(pack).ok
    before = {name: c.read() for name, c in packed_containers(pack).items()}
    recover(pack)                                                      # records carry their file ids
    assert {name: c.read() for name, c in packed_containers(pack).items()} == before
    assert "packed" in ioloom_cli("container", "ls", mount).stdout
