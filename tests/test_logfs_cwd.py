"""Relative paths through the layer (issue 15, the cost outside the mounts): the layer keeps each thread's copy of the
working directory instead of asking getcwd per call, so every change of it must reach every thread's copy: chdir
and fchdir into and out of a mount, another thread's chdir, a fork, a rename of a directory above it. The same
script runs in a tree without the layer (the oracle: what a program sees) and with it; the layer's run must see the
same, and put every file under the mount in a container and every other one in a plain file."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import build_program
from ioloom.logfs import preload
from ioloom.logfs.format import Container, is_container

# Run in ROOT (holding mnt/ and out/); prints what it saw, as JSON. Every file is written and read back by a
# relative path; `where` records which directory each name was meant to land in.
SCRIPT = r"""
import errno, json, os, sys, threading
root = sys.argv[1]
seen, where = [], {}

def put(name, into):
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, name.encode() + b" in " + into.encode())
    os.close(fd)
    where[os.path.normpath(os.path.join(into, name))] = into
    with open(name, "rb") as f:
        seen.append([name, os.stat(name).st_size, f.read().decode()])

def attempt(what, call):
    try:
        call()
        seen.append([what, "ok"])
    except OSError as e:
        seen.append([what, errno.errorcode[e.errno]])

os.chdir(root)
put("mnt/a", ".")
put("out/b", ".")
os.chdir("mnt")                                         # into the mount
put("c", "mnt")
put("../out/d", "mnt")
attempt("chdir into a file", lambda: os.chdir("c"))     # a container is a regular file: ENOTDIR
os.chdir("..")                                          # out of it
put("e", ".")
mnt_fd, out_fd = os.open("mnt", os.O_RDONLY), os.open("out", os.O_RDONLY)
os.fchdir(mnt_fd)
put("f", "mnt")
os.fchdir(out_fd)
put("g", "out")
file_fd = os.open(os.path.join(root, "mnt", "c"), os.O_RDONLY)
attempt("fchdir to a file", lambda: os.fchdir(file_fd))
os.close(file_fd)

# Another thread's chdir moves every thread (the working directory is the process's): each thread must see it.
def thread_body(fd, name, into, gate_in, gate_out):
    gate_in.wait()
    put(name, into)
    os.fchdir(fd)
    gate_out.wait()
gates = [threading.Barrier(2) for _ in range(2)]
t = threading.Thread(target=thread_body, args=(mnt_fd, "h", "out", *gates))
t.start()
put("i", "out")                     # this thread's copy now holds out/
gates[0].wait()
gates[1].wait()                     # the other thread moved us into mnt/
t.join()
put("j", "mnt")
t = threading.Thread(target=lambda: put("k", "mnt"))    # a new thread, taking its first copy
t.start(); t.join()

# A fork: the child inherits the directory, changes its own; the parent's stays.
pid = os.fork()
if pid == 0:
    put("l", "mnt")
    os.fchdir(out_fd)
    put("m", "out")
    os.chdir("../mnt")
    put("n", "mnt")
    print(json.dumps([seen, where]))
    sys.stdout.flush()
    os._exit(0)
os.waitpid(pid, 0)
put("o", "mnt")

# A directory outside the mount renamed into it while this process works in it.
os.chdir(root)
os.mkdir("w")
os.chdir("w")
put("p", "w")
os.rename(os.path.join(root, "w"), os.path.join(root, "mnt", "w"))
where["mnt/w/p"] = where.pop("w/p")
put("q", "mnt/w")
os.chdir(root)
print(json.dumps([seen, where]))
"""


def run(root: Path, env: dict[str, str]) -> list:
    (root / "mnt").mkdir(parents=True)
    (root / "out").mkdir()
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(root)], env={**os.environ, **env}, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_relative_paths_follow_every_change_of_the_working_directory(tmp_path):
    plain = run(tmp_path / "plain", {})
    root = tmp_path / "layer"
    layer = run(root, preload.env({root / "mnt": []}))
    assert layer == plain
    (child_seen, child_where), (seen, where) = layer
    assert ["chdir into a file", "ENOTDIR"] in seen and ["fchdir to a file", "ENOTDIR"] in seen
    names = {**child_where, **where}
    assert len(names) == 17
    for name in names:
        path = root / name
        if name.startswith("mnt/") and name != "mnt/w/p":   # p was written before its directory moved in
            assert is_container(path), name
            assert Container.open(path).read() == (tmp_path / "plain" / name).read_bytes(), name
        else:
            assert path.is_file() and not is_container(path), name
            assert path.read_bytes() == (tmp_path / "plain" / name).read_bytes(), name


def walk_tree(root: Path, env: dict[str, str]) -> None:
    """mnt/ holding f1 and `before` (containers under the layer), out/ holding sub/f1 and f2 with other bytes."""
    (root / "out" / "sub").mkdir(parents=True)
    (root / "mnt").mkdir()
    (root / "out" / "sub" / "f1").write_bytes(b"plain f1")
    (root / "out" / "f2").write_bytes(b"plain f2")
    subprocess.run([sys.executable, "-c", "import sys; [open(n, 'wb').write(n.encode()) for n in sys.argv[1:]]",
                    "f1", "before"], cwd=root / "mnt", env={**os.environ, **env}, check=True, timeout=60)


@pytest.mark.parametrize("how", ["nftw", "fts"])
def test_walks_that_change_directory_inside_glibc(tmp_path, how):
    """nftw(FTW_CHDIR) and fts move between directories with glibc's internal chdir, which the layer does not see:
    its wrappers forget the working directory at each entry, so a file opened by its name relative to the walk's
    directory (out/sub/f1) is that file, not the container of the same name in the mount the walk started from."""
    exe = build_program("logfs_walk.c")
    outs = []
    for root, env in ((tmp_path / "plain", {}), (tmp_path / "layer", preload.env({tmp_path / "layer" / "mnt": []}))):
        walk_tree(root, env)
        out = subprocess.run([exe, root / "out", how], cwd=root / "mnt", env={**os.environ, **env},
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        outs.append(sorted(out.stdout.splitlines()))
    assert outs[1] == outs[0] == ["after after", "before before", "f1 plain f1", "f2 plain f2"]
    layer = tmp_path / "layer"
    assert is_container(layer / "mnt" / "after") and is_container(layer / "mnt" / "f1")
    assert not list((layer / "out").rglob("after"))
