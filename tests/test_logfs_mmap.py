"""mmap of containers through the preloaded layer, with the same calls on a plain file as the oracle: read-only
and private mappings are served (numpy's mmap_mode, git), shared writable ones are refused and counted."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ioloom.logfs import preload
from ioloom.logfs.format import Container, is_container

# Runs in DIR (a mount of the layer, or a plain directory) and prints what each mapping showed, as JSON.
MAPPINGS = r"""
import errno, json, mmap, os, sys
import numpy as np
d = sys.argv[1]
facts = {}
data = bytes(range(256)) * 4099                       # not a whole number of pages
with open(f"{d}/blob", "wb") as f:
    f.write(data)
fd = os.open(f"{d}/blob", os.O_RDONLY)
with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as m:      # MAP_SHARED, PROT_READ: the whole file
    facts["whole"] = m[:] == data
with mmap.mmap(fd, 3 * 4096, access=mmap.ACCESS_READ, offset=8192) as m:
    facts["window"] = m[:] == data[8192:8192 + 3 * 4096]
with mmap.mmap(fd, 0, access=mmap.ACCESS_COPY) as m:      # MAP_PRIVATE, writable: changes stay private
    m[:5] = b"XXXXX"
    facts["private_sees_own"] = m[:5] == b"XXXXX"
os.close(fd)
facts["private_left_file"] = open(f"{d}/blob", "rb").read() == data
try:
    mmap.mmap(os.open(f"{d}/blob", os.O_RDONLY), 4096, access=mmap.ACCESS_READ, offset=100)
except OSError as e:
    facts["unaligned"] = errno.errorcode[e.errno]
try:
    mmap.mmap(os.open(f"{d}/blob", os.O_WRONLY), 4096, access=mmap.ACCESS_READ)
except OSError as e:
    facts["write_only"] = errno.errorcode[e.errno]
a = np.arange(300_000, dtype=np.float64).reshape(1000, 300)
np.save(f"{d}/a.npy", a)
facts["npy_r"] = bool((np.load(f"{d}/a.npy", mmap_mode="r") == a).all())
c = np.load(f"{d}/a.npy", mmap_mode="c")
c[0, 0] = -1.0
facts["npy_c"] = [float(c[0, 0]), float(np.load(f"{d}/a.npy")[0, 0])]
try:
    with mmap.mmap(os.open(f"{d}/blob", os.O_RDWR), 4096) as m:     # MAP_SHARED, writable
        m[:1] = b"Z"
    facts["shared_write"] = "served"
except OSError as e:
    facts["shared_write"] = errno.errorcode[e.errno]
print(json.dumps(facts))
"""

# Dates fixed, so that the same commands give the same object ids in any directory.
GIT = r"""
set -e
cd "$1"
export GIT_AUTHOR_DATE='2001-02-03T04:05:06Z' GIT_COMMITTER_DATE='2001-02-03T04:05:06Z' GIT_CONFIG_GLOBAL=/dev/null
git init -q -b main repo && cd repo
git config user.email ci@example.org && git config user.name ci
/bin/echo one > f && git add f && git commit -qm one
/bin/echo two >> f && git commit -qam two
git checkout -qb side && seq 1 500 > g && git add g && git commit -qm side
git checkout -q main && /bin/echo three >> f && git commit -qam three && git merge -q --no-edit side
git gc -q && git fsck --no-progress --full
git log --format='%H %T %s' --graph
git cat-file -p HEAD:g | tail -1
git diff --stat HEAD~2 HEAD
git status --porcelain --untracked-files=all
git count-objects -v | grep -E '^(count|in-pack|packs)'
"""


# `exclusive|shared DIR`: a database in WAL mode in DIR, every connection opened with `PRAGMA locking_mode=EXCLUSIVE`
# first or not; prints what it saw as JSON: SQLite's error and its extended code where it failed.
SQLITE_WAL = r"""
import json, os, sqlite3, sys
exclusive, d = sys.argv[1] == "exclusive", sys.argv[2]
def connect():
    c = sqlite3.connect(f"{d}/db.sqlite", isolation_level=None)
    if exclusive:
        c.execute("PRAGMA locking_mode=EXCLUSIVE")
    return c
facts = {}
try:
    c = connect()
    facts["journal"] = c.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    c.execute("CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT)")
    c.executemany("INSERT INTO t(v) VALUES (?)", [("x" * (i % 50) + str(i),) for i in range(2000)])
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for i in range(50):                       # transactions left in the WAL until the connection closes
        c.execute("UPDATE t SET v = v || '!' WHERE k % 7 = ?", (i % 7,))
    facts["rows"] = c.execute("SELECT count(*), sum(length(v)) FROM t").fetchone()
    facts["wal_pages"] = os.stat(f"{d}/db.sqlite-wal").st_size > 0
    c.close()
    c = connect()
    facts["reopened"] = c.execute("SELECT count(*), sum(length(v)), max(v) FROM t").fetchone()
    facts["integrity"] = c.execute("PRAGMA integrity_check").fetchone()[0]
    c.close()
except sqlite3.Error as e:
    facts["error"] = [str(e), e.sqlite_errorcode]
facts["files"] = sorted(os.listdir(d))
print(json.dumps(facts))
"""
SQLITE_IOERR_SHMMAP = 10 | 21 << 8


def test_sqlite_wal_with_exclusive_locking_matches_a_plain_file(tmp_path):
    """SQLite in WAL mode with `PRAGMA locking_mode=EXCLUSIVE` set before `journal_mode=WAL` keeps its WAL index in
    heap memory and maps nothing: through the layer the database (a container, and its -wal) gives the same answers
    and the same bytes as a plain file."""
    (tmp_path / "mnt").mkdir()
    (tmp_path / "plain").mkdir()
    served = run([sys.executable, "-c", SQLITE_WAL, "exclusive"], tmp_path / "mnt", layer=True)
    plain = run([sys.executable, "-c", SQLITE_WAL, "exclusive"], tmp_path / "plain", layer=False)
    assert json.loads(served.stdout) == json.loads(plain.stdout)
    assert json.loads(served.stdout)["integrity"] == "ok" and json.loads(served.stdout)["wal_pages"]
    assert is_container(tmp_path / "mnt" / "db.sqlite")
    assert Container.open(tmp_path / "mnt" / "db.sqlite").read() == (tmp_path / "plain" / "db.sqlite").read_bytes()
    assert "could not be served" not in served.stderr


def test_sqlite_wal_by_default_fails_with_the_refused_mapping_counted(tmp_path):
    """SQLite's default WAL mode maps its -shm file (the WAL index, shared between the database's connections) shared
    and writable, which the layer refuses (ENODEV): SQLite fails with SQLITE_IOERR_SHMMAP ("disk I/O error") where a
    plain file works, and the layer counts the refusals at exit. docs/logfs-format.md ("mmap") says why the -shm is
    not kept a plain file, and names the workarounds (EXCLUSIVE locking, above; the rollback journal)."""
    (tmp_path / "mnt").mkdir()
    (tmp_path / "plain").mkdir()
    served = run([sys.executable, "-c", SQLITE_WAL, "shared"], tmp_path / "mnt", layer=True)
    plain = json.loads(run([sys.executable, "-c", SQLITE_WAL, "shared"], tmp_path / "plain", layer=False).stdout)
    assert plain["integrity"] == "ok" and "error" not in plain
    assert json.loads(served.stdout)["error"] == ["disk I/O error", SQLITE_IOERR_SHMMAP]
    assert re.search(r"ioloom-logfs: \d+ mmap call\(s\) on containers could not be served", served.stderr)


def run(script: list[str], where: Path, layer: bool) -> subprocess.CompletedProcess:
    env = {**os.environ, **(preload.env({where: []}) if layer else {})}
    out = subprocess.run([*script, str(where)], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out


def test_mappings_match_a_plain_file(tmp_path):
    (tmp_path / "mnt").mkdir()
    (tmp_path / "plain").mkdir()
    served = run([sys.executable, "-c", MAPPINGS], tmp_path / "mnt", layer=True)
    plain = json.loads(run([sys.executable, "-c", MAPPINGS], tmp_path / "plain", layer=False).stdout)
    facts = json.loads(served.stdout)
    assert is_container(tmp_path / "mnt" / "blob") and is_container(tmp_path / "mnt" / "a.npy")
    assert plain["shared_write"] == "served" and facts.pop("shared_write") == "ENODEV"
    plain.pop("shared_write")
    assert facts == plain
    assert all(facts[k] for k in ("whole", "window", "private_sees_own", "private_left_file", "npy_r"))
    assert facts["npy_c"] == [-1.0, 0.0]
    assert "1 mmap call(s) on containers could not be served" in served.stderr


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_works_in_a_mount(tmp_path):
    """Commits, a branch, a merge, gc (packs, which git reads through mmap) and fsck, with fixed dates: the same
    output, object ids included, as in a plain directory. Issue 15, before mappings were served: `unable to mmap
    .git/config`."""
    (tmp_path / "mnt").mkdir()
    (tmp_path / "plain").mkdir()
    out = run(["bash", "-c", GIT, "git"], tmp_path / "mnt", layer=True)
    plain = run(["bash", "-c", GIT, "git"], tmp_path / "plain", layer=False)
    assert out.stdout == plain.stdout and "Merge branch 'side'" in out.stdout
    assert is_container(tmp_path / "mnt" / "repo" / ".git" / "config")
    assert "could not be served" not in out.stderr
