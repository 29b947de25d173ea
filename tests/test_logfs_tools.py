"""Unmodified tools on containers under a mount (cp, cat, dd, md5sum, tar, grep, ls -l, stat, rm, mv, truncate,
Python open, shell redirection across exec, fork) and the `ioloom container` tools on what they made."""
from __future__ import annotations

import hashlib
import os
import resource
import subprocess
import sys

import pytest

from ioloom.logfs import preload
from ioloom.logfs.format import RECORD, Container, is_container
from ioloom.logfs.tools import check, journal_records, recover

SCRIPT = r"""
set -e
cd "$WORK"
cp src.txt mnt/cp
cat src.txt > mnt/redirect
dd if=mnt/cp of=mnt/dd bs=4096 status=none
echo "md5 $(md5sum < mnt/dd | cut -d' ' -f1)"
echo "grep $(grep -c 7 mnt/cp)"
echo "wc $(wc -c < mnt/redirect)"
mkdir -p mnt/sub
tar cf mnt/sub/src.tar src.txt
tar xf mnt/sub/src.tar -O > extracted.txt
echo "ls $(ls -l mnt/cp | awk '{print substr($1,1,1), $5}')"
echo "lsF $(ls -F mnt | tr '\n' ' ')"
echo "stat $(stat -c '%s %F' mnt/dd)"
chmod 600 mnt/dd
echo "mode $(stat -c %a mnt/dd)"
cp mnt/dd mnt/gone && rm mnt/gone
mv mnt/redirect mnt/moved
truncate -s 1000 mnt/moved
echo "truncated $(stat -c %s mnt/moved)"
truncate -s 5000 mnt/moved
echo "grown $(stat -c %s mnt/moved)"
/bin/echo "appended" >> mnt/moved  # a builtin would write through bash's own stdout FILE
python3 - <<'PY'
import mmap, os
with open("mnt/py", "w") as f:
    f.write("line\n" * 1000)
with open("mnt/py", "a") as f:
    f.write("tail\n")
print("py", len(open("mnt/py").read()), os.path.getsize("mnt/py"))
fd = os.open("mnt/fork", os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"parent-")
pid = os.fork()
if pid == 0:
    os.pwrite(fd, b"child", 7)
    os._exit(0)
os.waitpid(pid, 0)
os.close(fd)
print("fork", open("mnt/fork", "rb").read().decode())
fd = os.open("mnt/py", os.O_RDWR)
try:
    mmap.mmap(fd, 100)  # shared and writable: the one kind of mapping the layer refuses (test_logfs_mmap.py)
    print("mmap served")
except OSError as e:
    print("mmap errno", e.errno)
PY
"""


@pytest.fixture(scope="module")
def worked(tmp_path_factory):
    work = tmp_path_factory.mktemp("logfs-tools")
    (work / "mnt").mkdir()
    (work / "extra").mkdir()
    src = "".join(f"{i} the quick brown fox {i * 7}\n" for i in range(60000))
    (work / "src.txt").write_text(src)
    env = {**os.environ, "WORK": str(work), **preload.env({work / "mnt": [work / "extra"]})}
    out = subprocess.run(["bash", "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    facts = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    return work, src.encode(), facts, out.stderr


def test_unix_tools(worked):
    work, src, facts, _ = worked
    assert facts["md5"] == hashlib.md5(src).hexdigest()
    assert int(facts["grep"]) == sum(b"7" in line for line in src.splitlines())
    assert int(facts["wc"]) == len(src)
    assert (work / "extracted.txt").read_bytes() == src
    assert facts["ls"] == f"- {len(src)}"                      # a regular file with the logical size
    assert facts["lsF"].split() == ["cp", "dd", "redirect", "sub/"]  # no "/" on containers
    assert facts["stat"] == f"{len(src)} regular file"
    assert facts["mode"] == "600"                               # chmod reaches the logical file's metadata
    assert facts["truncated"] == "1000" and facts["grown"] == "5000"
    assert facts["py"] == "5005 5005"
    assert facts["fork"] == "parent-child"


def test_containers_are_containers(worked):
    work, src, _, _ = worked
    for name in ("cp", "dd", "moved", "py", "sub/src.tar"):
        assert is_container(work / "mnt" / name), name
    assert not (work / "mnt" / "redirect").exists() and not (work / "mnt" / "gone").exists()
    assert not any((work / "extra").glob("gone*"))                  # rm removed it from every backend
    moved = Container.open(work / "mnt" / "moved").read()
    assert moved == src[:1000] + bytes(4000) + b"appended\n"
    assert Container.open(work / "mnt" / "cp").read() == src


def test_unsupported_calls_fail_loudly(worked):
    _, _, facts, stderr = worked
    assert facts["mmap"] == "errno 19"                              # ENODEV, not a mapping of the directory
    assert "1 mmap call(s) on containers could not be served" in stderr


def test_container_commands(worked, ioloom_cli, tmp_path):
    work, src, _, _ = worked
    cp = work / "mnt" / "cp"
    listed = ioloom_cli("container", "ls", work / "mnt").stdout
    assert str(cp) in listed and str(work / "mnt" / "sub" / "src.tar") in listed
    stat = ioloom_cli("container", "stat", "--json", cp).stdout
    assert f'"size": {len(src)}' in stat
    cat = subprocess.run([sys.executable, "-m", "ioloom", "container", "cat", str(cp)], capture_output=True,
                         timeout=60)
    assert cat.stdout == src
    ioloom_cli("container", "flatten", cp, tmp_path / "flat")
    assert (tmp_path / "flat").read_bytes() == src
    assert "OK" in ioloom_cli("container", "check", cp).stdout
    ioloom_cli("container", "rm", work / "mnt" / "dd")
    assert not (work / "mnt" / "dd").exists()
    bad = ioloom_cli("container", "stat", work / "src.txt", check=False)
    assert bad.returncode == 2 and "not a logfs container" in bad.stderr


def test_container_run(tmp_path, ioloom_cli):
    (tmp_path / "mnt").mkdir()
    ioloom_cli("container", "run", "-m", tmp_path / "mnt", "--", "sh", "-c", f"seq 1 1000 > {tmp_path}/mnt/x")
    assert Container.open(tmp_path / "mnt" / "x").read() == "".join(f"{i}\n" for i in range(1, 1001)).encode()
    bad = ioloom_cli("container", "run", "-m", tmp_path / "nowhere", "--", "true", check=False)
    assert bad.returncode == 2 and "is not a directory" in bad.stderr
    # another tool's preload stays, in front of the layer
    other = "libm.so.6"  # a harmless library stands for it
    shown = ioloom_cli("container", "run", "-m", tmp_path / "mnt", "--", "sh", "-c", 'printf %s "$LD_PRELOAD"',
                       env={"LD_PRELOAD": other}).stdout
    assert shown == f"{other}:{preload.library()}"


def test_check_finds_damage(worked, ioloom_cli):
    work, _, _, _ = worked
    py = work / "mnt" / "py"
    log = next(j.log_path for j in Container.open(py).journals)
    with open(log, "r+b") as f:                                     # flip one data byte of the first record
        f.seek(3)
        byte = f.read(1)
        f.seek(3)
        f.write(bytes([byte[0] ^ 0xFF]))
    out = ioloom_cli("container", "check", py, check=False)
    assert out.returncode == 1 and "data checksum mismatch" in out.stdout


def test_torn_record_append_is_skipped(worked, tmp_path):
    """A torn append in the middle of a record journal (part of a batch, then the next batches): every whole
    record after it is still found, and recover rebuilds an index that reads the same bytes and checks clean."""
    work, _, _, _ = worked
    copy = tmp_path / "dd"
    subprocess.run(["dd", f"if={work / 'src.txt'}", f"of=logfs:{copy}", "bs=4096", "status=none"], check=True,
                   env={**os.environ, **preload.env(chunk="65536")})
    (records,) = copy.glob("records.*")
    whole = [bytes(r) for r in journal_records(records)]
    assert len(whole) > 2                                            # a record per 64 KiB chunk of dd's run
    raw, size = records.read_bytes(), RECORD.itemsize
    records.write_bytes(raw[:size] + raw[size:size + 30] + raw[size:])  # 30 bytes of a torn record, then the rest
    assert [bytes(r) for r in journal_records(records)] == whole
    expected = Container.open(copy).read()
    recover(copy)
    assert Container.open(copy).read() == expected and check(copy).ok


def _container_cli(*args, limit_file_size: int | None = None) -> subprocess.CompletedProcess:
    """`ioloom container ARGS`, optionally under a file-size limit (writes past it fail as on a full disk)."""
    limit = (lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit_file_size,) * 2)) if limit_file_size else None
    return subprocess.run([sys.executable, "-m", "ioloom", "container", *map(str, args)], preexec_fn=limit,
                          capture_output=True, text=True, timeout=120)


def test_full_disk_during_flatten_keeps_the_target(worked, tmp_path):
    work, src, _, _ = worked
    target = tmp_path / "flat"
    target.write_bytes(b"the earlier file")
    out = _container_cli("flatten", work / "mnt" / "cp", target, limit_file_size=64 << 10)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert f"{target}: File too large; free space" in out.stderr  # the user's file named, not our temporary
    assert target.read_bytes() == b"the earlier file" and list(tmp_path.iterdir()) == [target]
    assert len(src) > 64 << 10 and Container.open(work / "mnt" / "cp").read() == src


def test_damaged_metadata_is_named_with_the_fix(worked, tmp_path):
    work, _, _, _ = worked
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "ioloom-logfs.meta").write_text("ioloom-logfs\nchunk 4194304\n")
    for command in ("stat", "recover"):
        out = _container_cli(command, broken)
        assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
        assert "ioloom-logfs.meta: the first line is not 'ioloom-logfs VERSION'" in out.stderr
        assert "rewrite it as docs/logfs-format.md describes" in out.stderr
    assert [p.name for p in broken.iterdir()] == ["ioloom-logfs.meta"]  # recover wrote nothing
    listed = _container_cli("ls", work / "mnt", broken)  # the sound containers still listed, the broken one named
    assert listed.returncode == 1 and str(work / "mnt" / "cp") in listed.stdout
    assert f"skipped {broken}:" in listed.stderr


def test_a_missing_log_is_named_with_the_check_to_run(tmp_path, ioloom_cli):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    ioloom_cli("container", "run", "-m", mnt, "--", "sh", "-c", f"seq 1 1000 > {mnt}/x")
    for log in (mnt / "x").glob("log.*"):
        log.unlink()
    for args in (("cat", mnt / "x"), ("flatten", mnt / "x", tmp_path / "out")):
        out = _container_cli(*args)
        assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
        assert "missing, but the index points into it; `ioloom container check`" in out.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["mnt"]  # flatten left neither a target nor a temporary
