"""File semantics through the layer (issue 15): each operation is done on a plain file and on a container under a
mount, and the results compared (the plain file is the oracle)."""
from __future__ import annotations

import ctypes
import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import build_program
from ioloom import paths
from ioloom.logfs import preload
from ioloom.logfs.format import Container, is_container


def under_layer_and_plain(tmp_path: Path, script: str) -> tuple[Path, Path, str, str]:
    """Runs the bash script in a plain directory and in a mount (the layer preloaded): (plain dir, mount, the
    plain run's stdout, the layer's)."""
    plain, mnt = tmp_path / "plain", tmp_path / "mnt"
    outs = []
    for d, env in ((plain, {}), (mnt, preload.env({mnt: []}))):
        d.mkdir()
        out = subprocess.run(["bash", "-c", script], cwd=d, env={**os.environ, **env}, capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, (d, out.stderr)
        outs.append(out.stdout)
    return plain, mnt, *outs


SHELL_REDIRECTIONS = r"""
set -e
echo hi >> f
echo second >> f
printf '%s\n' third >> f
{ echo a; echo b; } > g
echo replaced > g2; echo again > g2
echo to-stderr 2>> h >&2
read line < f; echo "$line" > i
echo out
"""


def test_shell_builtin_redirections(tmp_path):
    """Today's main: `echo hi >> mnt/f` failed with EBADF (the builtin writes through bash's own stdout FILE)."""
    plain, mnt, plain_out, layer_out = under_layer_and_plain(tmp_path, SHELL_REDIRECTIONS)
    assert layer_out == plain_out == "out\n"
    for name in ("f", "g", "g2", "h", "i"):
        assert is_container(mnt / name), name
        assert Container.open(mnt / name).read() == (plain / name).read_bytes(), name


SYMLINKS = r"""
set -e
echo data > f
ln -s f l
stat -c '%F %s' l
stat -L -c '%F %s' l
readlink l
cat l
python3 -c "import os; print(os.path.islink('l'), os.path.isfile('l'), os.lstat('l').st_size)"
tar -cf ../$(basename $PWD).tar f l
tar -tvf ../$(basename $PWD).tar | awk '{print $1, $6, $7, $8}'
cp -a l l2
stat -c %F l2
mv l2 l3
stat -c %F l3
echo other > g
ln -s g l4
mv l4 l3
readlink l3
cat g
rm l3 l
ls
cat f
"""


def test_symbolic_links_to_containers_stay_links(tmp_path):
    """Today's main: lstat followed a link to a container and said 'regular file', so tar stored the link as a
    file and cp -a copied the data; rm of the link went for the container."""
    plain, mnt, plain_out, layer_out = under_layer_and_plain(tmp_path, SYMLINKS)
    assert layer_out == plain_out
    assert "symbolic link 1" in layer_out and "lrwxrwxrwx l -> f" in layer_out
    assert Container.open(mnt / "f").read() == (plain / "f").read_bytes() == b"data\n"
    assert not (mnt / "l").exists() and not (mnt / "l").is_symlink()


TIMES_AND_FIELDS = r"""
set -e
touch -d '2001-02-03 04:05:06' new
printf data > f
touch -d '2002-03-04 05:06:07' f
stat -c 'set %Y %s %h %F' new f
touch -a -d '2003-01-01 00:00:00' f
stat -c 'atime %X mtime %Y' f
printf more >> f
python3 -c "import os, time; print('written', os.stat('f').st_mtime > time.time() - 60)"
python3 - <<'PY'
import os
os.utime("f", ns=(1234567890123456789, 1134567890123456789))
print("utime", os.stat("f").st_atime_ns, os.stat("f").st_mtime_ns)
PY
python3 - <<'PY'
import os
fd = os.open("f", os.O_WRONLY | os.O_APPEND)
os.write(fd, b"tail")
os.utime(fd, ns=(1000000000, 2000000000))   # futimens after a write not yet published
os.close(fd)
print("futimens", os.stat("f").st_mtime_ns, os.fstat(os.open("f", os.O_RDONLY)).st_mtime_ns)
PY
tar -cf ../$(basename $PWD).tar f new
mkdir x && cd x && tar -xf ../../$(basename $(dirname $PWD)).tar && stat -c 'tar %n %Y %s' f new && cd ..
cp -a f copy && stat -c 'cp %Y %s %a' copy
chmod 600 f && stat -c 'mode %a %A' f
chown 1234:5678 f && stat -c 'chown %u %g %a' f
cp -a f owned && stat -c 'cp owner %u %g' owned
python3 - <<'PY'
import os
for mode, uid in ((0o6755, -1), (0o2745, 0), (0o4700, 7)):   # the kernel drops suid, and sgid with g+x
    os.chmod("f", mode)
    os.chown("f", uid, -1)
    print("chown", oct(mode), oct(os.stat("f").st_mode & 0o7777), os.stat("f").st_uid)
fd = os.open("f", os.O_RDONLY)
os.chmod("f", 0o4755)
os.fchown(fd, 42, 43)
print("fchown", oct(os.fstat(fd).st_mode & 0o7777), os.fstat(fd).st_uid, os.stat("f").st_gid)
os.chmod("f", 0o640)   # by path, under the open descriptor
print("chmod under fstat", oct(os.fstat(fd).st_mode & 0o7777))
os.symlink("f", "link")
os.lchown("link", 8, 9)
print("lchown", os.lstat("link").st_uid, os.stat("link").st_uid, os.stat("f").st_uid)
import ctypes   # fchownat(AT_FDCWD, "", -1, -1, AT_EMPTY_PATH): the working directory itself
print("empty path", ctypes.CDLL(None).fchownat(-100, b"", -1, -1, 0x1000))
PY
chmod 600 f
dd if=/dev/zero of=big bs=64k count=16 status=none && stat -c 'big %s %b' big
truncate -s 1G sparse && stat -c 'sparse %s %b' sparse
before=$(stat -c %i f); mv f g; after=$(stat -c %i g); echo "ino $([ "$before" = "$after" ] && echo same)"
python3 - <<'PY'
import os
s, f = os.stat("g"), os.fstat(os.open("g", os.O_RDONLY))
fields = ("st_ino", "st_size", "st_mtime_ns", "st_blocks", "st_mode")
print("fstat", all(getattr(s, k) == getattr(f, k) for k in fields))
PY
"""


def test_times_modes_and_stat_fields(tmp_path):
    """Today's main: utimensat and futimens returned 0 but stat kept the old mtime (the newest of the container's
    files), so touch -d, tar -x, cp -a and rsync lost every mtime; fstat counted blocks differently from stat. A chown
    through the layer left the set-user-ID bit that the kernel drops from a plain file (chown 6755 -> 6755, not
    755): the layer did not see chown at all, the kernel changed the container's directory, whose bits it keeps.
    fstat of an open container kept the mode it had at open after a chmod by path."""
    plain, mnt, plain_out, layer_out = under_layer_and_plain(tmp_path, TIMES_AND_FIELDS)
    assert layer_out == plain_out
    for line in ("set 981173106 0 1 regular empty file", "written True", "utime 1234567890123456789 "
                 "1134567890123456789", "futimens 2000000000 2000000000", "tar f 2 12", "tar new 981173106 0",
                 "cp 2 12 644", "mode 600 -rw-------",
                 "chown 1234 5678 600", "cp owner 1234 5678", "chown 0o6755 0o755 1234", "chown 0o2745 0o2745 0",
                 "chown 0o4700 0o700 7", "fchown 0o755 42 43", "chmod under fstat 0o640", "lchown 8 42 42",
                 "empty path 0", "big 1048576 2048", "sparse 1073741824 0", "ino same",
                 "fstat True"):
        assert line in layer_out.splitlines(), line  # the plain file's answers, which the layer gave too


# The source tree is outside the mount (beside the run's directory), the copies inside it. Every time in the source is
# set to a whole second in the past: rsync takes times within the same second as equal and leaves them, on a plain
# directory too.
RSYNC = r"""
set -e
src=../src.$(basename $PWD)
mkdir -p $src/d && cd $src
printf data > f && printf 'other\n' > g && seq 1 20000 > d/big
ln -s f l && ln -s ../f d/up && ln -s d dl
touch -h -d '2001-02-03 04:05:06' f g d/big l d/up dl d .
cd - > /dev/null
echo first; rsync -a --itemize-changes $src/ t/ | sort
echo second; rsync -a --itemize-changes $src/ t/; echo end
rsync -a --stats $src/ t/ | grep -E '^(Number of regular files transferred|Total transferred file size)'
printf changed > $src/f && ln -sfn g $src/l && ln -sfn g $src/d/up
touch -h -d '2002-03-04 05:06:07' $src/f $src/l $src/d/up $src/d $src
echo third; rsync -a --itemize-changes $src/ t/ | sort
echo fourth; rsync -a --itemize-changes $src/ t/; echo end
find t -printf '%P %y %T@ %m %l\n' | sort
find t -type f -printf '%P %s\n' | sort
cat t/l t/dl/big | cksum
rsync -a t/ ../back.$(basename $PWD)/ && diff -r --no-dereference $src ../back.$(basename $PWD) && echo back
"""


@pytest.mark.skipif(shutil.which("rsync") is None, reason="rsync is missing (scripts/install-deps.sh installs it)")
def test_rsync_into_a_mount_twice_as_into_a_plain_directory(tmp_path):
    """rsync -a of a tree with symbolic links to files (containers in the mount), again unchanged, then after the
    source changed (a file rewritten, links pointed elsewhere): the same itemized changes as into a plain directory,
    nothing re-sent by an unchanged run (every mtime kept), and the tree read back out of the mount by rsync equal to
    the source. Issue 15, before its fixes: the second rsync failed ("rename ... Not a directory": lstat followed the
    link to the container) and every run re-sent every file (utimensat left the mtime)."""
    plain, mnt, plain_out, layer_out = under_layer_and_plain(tmp_path, RSYNC)
    assert layer_out == plain_out
    assert "second\nend\nNumber of regular files transferred: 0\nTotal transferred file size: 0 bytes\n" in layer_out
    assert "\nfourth\nend\n" in layer_out and layer_out.endswith("back\n")
    for name in ("f", "g", "d/big"):
        assert is_container(mnt / "t" / name) and Container.open(mnt / "t" / name).read() == \
            (plain / "t" / name).read_bytes(), name
    assert (mnt / "t" / "l").is_symlink() and os.readlink(mnt / "t" / "l") == "g"


ACCESS = r"""
set -e
for mode in 644 755 600 000 111; do
    printf x > f$mode && chmod $mode f$mode
    echo "$mode r$(test -r f$mode && echo 1 || echo 0) w$(test -w f$mode && echo 1 || echo 0)" \
         "x$(test -x f$mode && echo 1 || echo 0)"
    python3 -c "import os; print('$mode', *(os.access('f$mode', m) for m in (os.R_OK, os.X_OK, os.F_OK)))"
done
"""


def test_access_follows_the_logical_mode(tmp_path):
    """Today's main answered access() from the container directory's bits (rwx for the layer): `test -x` said a
    0644 file was executable."""
    _, _, plain_out, layer_out = under_layer_and_plain(tmp_path, ACCESS)
    assert layer_out == plain_out
    assert "644 r1 w1 x0" in layer_out and "755 r1 w1 x1" in layer_out


UMASKS = r"""
set -e
for m in 022 077 002 000; do
    (umask $m; python3 -c "
import os
os.close(os.open('a$m', os.O_CREAT | os.O_WRONLY, 0o666))
os.umask(0o027)
os.close(os.open('b$m', os.O_CREAT | os.O_WRONLY, 0o666))")
done
stat -c '%n %a' a* b*
"""


def test_new_files_take_the_umask_as_on_a_plain_directory(tmp_path):
    """The layer follows umask() calls and reads the first umask of /proc/self/status (it no longer sets it to 0
    and back at every create, a moment in which other threads' creates got no umask): modes match the plain
    directory's, for the umask a process starts with and one it sets."""
    _, _, plain_out, layer_out = under_layer_and_plain(tmp_path, UMASKS)
    assert layer_out == plain_out
    assert "a077 600" in layer_out and "b000 640" in layer_out


CREATE_IN_MISSING_DIR = r"""
import os, sys
try:
    os.close(os.open(sys.argv[1] + "/missing/f", os.O_WRONLY | os.O_CREAT, 0o644))
    print("created")
except OSError as err:
    print("errno", err.errno)
"""


def test_a_create_in_a_missing_directory_fails_as_on_a_plain_directory(tmp_path):
    """open(O_CREAT) of mnt/missing/f fails with ENOENT and makes nothing, as in a plain directory (the oracle);
    today's main made the directory `missing` and the container."""
    mount, plain = tmp_path / "mnt", tmp_path / "plain"
    mount.mkdir()
    plain.mkdir()
    expected = subprocess.run(["python3", "-c", CREATE_IN_MISSING_DIR, plain], capture_output=True, text=True)
    got = subprocess.run(["python3", "-c", CREATE_IN_MISSING_DIR, mount], capture_output=True, text=True,
                         env={**os.environ, **preload.env({mount: []})})
    assert got.stdout == expected.stdout == "errno 2\n" and not os.listdir(mount)


CONCURRENT_CREATES = r"""
import json, multiprocessing as mp, os, sys, threading
target, processes, threads, rounds, files = sys.argv[1], *map(int, sys.argv[2:6])

def writer(barrier, slot, errors):
    for k in range(rounds):
        barrier.wait()   # every writer starts the round's new files at once, in the same order
        for j in range(files):
            try:
                fd = os.open(f"{target}/f{k}.{j}", os.O_WRONLY | os.O_CREAT, 0o644)
                os.pwrite(fd, bytes([65 + slot]) * 64, slot * 64)
                os.close(fd)
            except OSError as err:
                errors.append(f"{k}.{j} writer {slot}: {err}")

def process(barrier, p, out):
    errors = []
    pool = [threading.Thread(target=writer, args=(barrier, p * threads + t, errors)) for t in range(threads)]
    for t in pool: t.start()
    for t in pool: t.join()
    out.put(errors)

ctx = mp.get_context("fork")
barrier, out = ctx.Barrier(processes * threads), ctx.Queue()
procs = [ctx.Process(target=process, args=(barrier, p, out)) for p in range(processes)]
for p in procs: p.start()
print(json.dumps(sum((out.get() for _ in procs), [])))
for p in procs: p.join()
"""


def test_concurrent_creators_of_one_file_all_open_it(tmp_path):
    """8 writers (4 processes of 2 threads) open 2,000 new files with O_CREAT, each file by all of them at once,
    and write their own 64 bytes of it: on a plain file (the oracle) every open succeeds. Today's main: 5-6 opens
    of 2,000 files failed, with EISDIR (an opener saw the container's directory, renamed into place by another
    creator between its two looks) and EIO (two threads parsed metadata with strtok at once). tmpfs when there is
    one: the race is the same on any file system, and rounds are 10x faster there."""
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else tmp_path
    with tempfile.TemporaryDirectory(dir=base) as scratch:
        plain, mnt = Path(scratch) / "plain", Path(scratch) / "mnt"
        for d, env in ((plain, {}), (mnt, preload.env({mnt: []}))):
            d.mkdir()
            out = subprocess.run([sys.executable, "-c", CONCURRENT_CREATES, str(d), "4", "2", "200", "10"],
                                 env={**os.environ, **env}, capture_output=True, text=True, timeout=300)
            assert out.returncode == 0, out.stderr
            assert json.loads(out.stdout) == [], d
        names = sorted(os.listdir(plain))
        assert len(names) == 2000 and sorted(os.listdir(mnt)) == names   # no temporary left behind
        for name in names:
            assert Container.open(mnt / name).read() == (plain / name).read_bytes(), name


SPELLINGS = r"""
import os, sys
top = sys.argv[1]
for i, path in enumerate(sys.argv[2:]):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, b"file %d" % i)
    os.close(fd)
    print(os.stat(path).st_size, os.path.isdir(path))
"""


def test_every_spelling_of_a_path_into_the_mount_reaches_the_layer(tmp_path):
    """A path outside every mount passes through on a short test (the layer's cost outside its roots); the paths that
    name something in the mount all the same, through `..`, `.`, `//` or a trailing slash, are the layer's, and a
    sibling sharing the mount's name as a prefix is not. Oracle: the same names in a plain directory hold the same
    bytes, each a regular file."""
    mount, other = tmp_path / "mnt", tmp_path / "other"
    mount.mkdir()
    other.mkdir()
    (tmp_path / "mnt2").mkdir()
    names = {"a": f"{other}/../mnt/a", "b": f"{mount}/./b", "c": f"{tmp_path}//mnt//c", ".d": f"{mount}/.d",
             "..e": f"{mount}/..e", "f": f"{mount}/sub/../f"}
    (mount / "sub").mkdir()
    out = subprocess.run([sys.executable, "-c", SPELLINGS, str(tmp_path), *names.values(), f"{tmp_path}/mnt2/g"],
                         env={**os.environ, **preload.env({mount: []})}, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:-1] == ["6 False"] * (len(names) + 1)   # regular files of 6 bytes to the program
    for i, name in enumerate(names):
        assert is_container(mount / name) and Container.open(mount / name).read() == b"file %d" % i, name
    assert (tmp_path / "mnt2" / "g").is_file() and (tmp_path / "mnt2" / "g").read_bytes() == b"file 6"


STATS = r"""
import json, os, sys
for _ in range(int(sys.argv[2])):
    st = os.stat(sys.argv[1])
print(json.dumps([st.st_size, st.st_blocks]))
"""


def test_a_stat_lists_the_container_once(tmp_path, logfs_shim):
    """A stat of a container (OMPIO stats the file it has just opened, at every MPI_File_open) loads the writers'
    indexes and adds up their logs' blocks in one listing of its directory: today's main listed it twice (the
    indexes, then the logs). Counted by a tool preloaded after the layer, which the layer's own calls reach (one
    run of 3 stats against one of 1: the process's start lists its descriptors); the size is the plain file's, the
    blocks what the logs take."""
    plain, mnt = tmp_path / "plain", tmp_path / "mnt"
    plain.mkdir()
    mnt.mkdir()
    for d, env in ((plain, {}), (mnt, preload.env({mnt: []}))):
        for rank, at in ((0, 0), (1, 70000)):   # two writers: two index journals and two logs
            script = f"import os; fd = os.open('{d}/f', os.O_WRONLY | os.O_CREAT); os.pwrite(fd, b'x' * 65536, {at})"
            subprocess.run([sys.executable, "-c", script], env={**os.environ, **env, "PMI_RANK": str(rank)},
                           check=True)
    listings = []
    for stats in (1, 3):
        counts = tmp_path / f"counts{stats}"
        env = {**os.environ, **preload.env({mnt: []}), "LOGFS_SHIM_OUT": str(counts)}
        env["LD_PRELOAD"] += f":{logfs_shim}"
        out = subprocess.run([sys.executable, "-c", STATS, mnt / "f", str(stats)], env=env, capture_output=True,
                             text=True, check=True)
        size, blocks = json.loads(out.stdout)
        assert size == (plain / "f").stat().st_size == 70000 + 65536
        assert blocks == sum(p.stat().st_blocks for p in (mnt / "f").glob("log.*")) > 0
        (line,) = counts.read_text().splitlines()
        listings.append(int(dict(item.split("=") for item in line.split("logfs:", 1)[1].split())["closedir"]))
    assert listings[1] - listings[0] == 2, listings   # one listing per stat


WRITES = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT)
for i in range(int(sys.argv[2])):
    os.write(fd, bytes([i % 251]) * 65536)
os.close(fd)
"""


def test_a_full_chunk_of_the_log_is_handed_to_the_device(tmp_path, logfs_shim):
    """Write-behind: each time a writer's reservation (a chunk) is full, the pages it filled are handed to the
    device (sync_file_range, SYNC_FILE_RANGE_WRITE); without write-behind they all stay dirty. 224 writes of 64 KiB
    with 1 MiB chunks: every full chunk, 13 of 14 MiB; none with IOLOOM_LOGFS_WRITE_BEHIND=0. Counted by a tool
    preloaded after the layer, which the layer's own calls reach; the bytes equal the plain file's."""
    chunk, writes = 1 << 20, 224
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run([sys.executable, "-c", WRITES, tmp_path / "plain", str(writes)], check=True)
    behind = {}
    for setting in ("1", "0"):
        counts = tmp_path / f"counts{setting}"
        env = {**os.environ, **preload.env({mnt: []}), "LOGFS_SHIM_OUT": str(counts), "PMI_RANK": "0",
               "IOLOOM_LOGFS_WRITE_BEHIND": setting, "IOLOOM_LOGFS_CHUNK": str(chunk)}
        env["LD_PRELOAD"] += f":{logfs_shim}"
        subprocess.run([sys.executable, "-c", WRITES, mnt / f"f{setting}", str(writes)], env=env, check=True)
        (line,) = counts.read_text().splitlines()
        items = dict(item.split("=") for item in line.split("logfs:", 1)[1].split())
        behind[setting] = int(items["sync_file_range"]), int(items["sync_file_range_bytes"])
        assert Container.open(mnt / f"f{setting}").read() == (tmp_path / "plain").read_bytes()
    full = (writes * 65536 - 1) // chunk   # the chunks another one followed (the last one is only synced)
    assert behind == {"1": (full, full * chunk), "0": (0, 0)}, behind


def test_write_behind_failing_leaves_writes_and_errno_alone(tmp_path, logfs_shim):
    """sync_file_range failing (ENOSYS under seccomp or where it does not exist, EIO from an earlier writeback)
    fails no write and changes no errno: a C program sets errno before each of its 64 KiB writes and checks it
    after (the layer left sync_file_range's errno there). After ENOSYS the writer stops trying; after EIO (the
    device may come back) it tries at every chunk. The bytes equal the plain file's either way."""
    exe = build_program("logfs_write_errno.c")
    chunk, writes = 1 << 20, 64
    subprocess.run([exe, tmp_path / "plain", str(writes)], check=True)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    calls = {}
    for name, number in (("ENOSYS", errno.ENOSYS), ("EIO", errno.EIO)):
        counts = tmp_path / f"counts{name}"
        env = {**os.environ, **preload.env({mnt: []}), "LOGFS_SHIM_OUT": str(counts), "PMI_RANK": "0",
               "IOLOOM_LOGFS_CHUNK": str(chunk), "LOGFS_SHIM_SYNC_FAIL": str(number)}
        env["LD_PRELOAD"] += f":{logfs_shim}"
        out = subprocess.run([exe, mnt / name, str(writes)], env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        (line,) = counts.read_text().splitlines()
        calls[name] = int(dict(item.split("=") for item in line.split("logfs:", 1)[1].split())["sync_file_range"])
        assert Container.open(mnt / name).read() == (tmp_path / "plain").read_bytes()
    assert calls == {"ENOSYS": 1, "EIO": (writes * 65536 - 1) // chunk}, calls


# Run as nobody (group nogroup, also in group users) in a directory of its own: `sg` is root's set-group-ID
# directory (files made in it are in group root, which nobody is not in), `rootf` a file of root's (mode 0666).
NOT_ROOT = r"""
set -e
show() { stat -c "$1 %a %U %G" "$2"; }
printf x > f
chmod 4755 f && printf y >> f && show write-suid f
chmod 6755 f && printf y >> f && show write-sgid-gx f
chmod 2745 f && printf y >> f && show write-sgid-in-group f
chmod 6755 f && truncate -s 2 f && show truncate f
chmod 4755 f && : > f && show open-trunc f
chmod 4755 f && python3 -c "import os; os.write(os.open('f', os.O_WRONLY), b'')" && show empty-write f
python3 - <<'PY'
import os
fd = os.open("f", os.O_WRONLY)
os.chmod("f", 0o6755)   # by path, after the open: the write still drops the bits
os.write(fd, b"z")
print("chmod after open", oct(os.fstat(fd).st_mode & 0o7777))
os.fchmod(fd, 0o4755)
os.ftruncate(fd, 1)
print("fchmod ftruncate", oct(os.stat("f").st_mode & 0o7777))
PY
chmod 6755 f && chgrp users f && show chgrp-gx f
chmod 2745 f && chgrp nogroup f && show chgrp-in-group f
chown root f 2>&1 || echo refused
chgrp root f 2>&1 || echo refused
chmod 2755 f && show chmod-sgid-own-group f
printf x > sg/h && show created-in-sg sg/h
chmod 2755 sg/h && show chmod-sgid-other-group sg/h
chmod 4755 sg/h && chown nobody sg/h && show chown-same-owner sg/h
python3 -c "import os; os.close(os.open('sg/n', os.O_CREAT | os.O_WRONLY, 0o2775))" && show create-sgid sg/n
python3 -c "import os; os.close(os.open('n2', os.O_CREAT | os.O_WRONLY, 0o2775))" && show create-sgid-own n2
chmod 600 rootf 2>&1 || echo refused
chown nobody rootf 2>&1 || echo refused
"""

# Root's file whose mode lets nobody write it: the layer cannot, the container's directory being root's alone.
OTHER_USERS_FILE = "printf more >> rootf; echo $?; cat rootf; echo"   # not ending with an exec: bash's counts print


def test_set_id_bits_and_owners_as_the_kernel_treats_a_user_without_privileges():
    """The kernel drops a file's set-user-ID bit, and its set-group-ID bit when group-executable, at a write, truncate
    or open with O_TRUNC by a process without CAP_FSETID (not at an empty write); at a chown also the set-group-ID bit
    of a file outside the caller's groups, at a chmod the set-group-ID bit it asks for on such a file, and at a create
    in a set-group-ID directory of another group the set-group-ID bit of a group-executable mode; chown to another
    user, chgrp to a group the caller is not in, and a chmod or chown of another user's file fail with EPERM. Run as
    nobody (CI runs as root): the same script in a plain directory is the oracle. Today's main kept 4755 after nobody's
    writes, and the set-group-ID bits of these chmods and creates. Another user's file that nobody may write is refused
    (EACCES, counted): the layer cannot create nobody's log in root's container directory."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("runs a part as nobody: needs root and setpriv")
    with tempfile.TemporaryDirectory(dir="/tmp") as scratch:   # tmp_path's parents are root's alone (0700)
        os.chmod(scratch, 0o755)
        outs = []
        for name, env in (("plain", {}), ("mnt", preload.env({Path(scratch) / "mnt": []}))):
            d = Path(scratch) / name
            (d / "sg").mkdir(parents=True)
            env = {**os.environ, **env, "LC_ALL": "C"}
            subprocess.run(["bash", "-c", "printf r > rootf && chmod 666 rootf"], cwd=d, env=env, check=True)
            os.chown(d, 65534, 65534)
            os.chmod(d / "sg", 0o2777)
            as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--groups=65534,100", "--inh-caps=-all", "bash",
                         "-c"]
            out = subprocess.run([*as_nobody, NOT_ROOT], cwd=d, env=env, capture_output=True, text=True, timeout=60)
            assert out.returncode == 0, (name, out.stderr)
            other = subprocess.run([*as_nobody, OTHER_USERS_FILE], cwd=d, env=env, capture_output=True, text=True,
                                   timeout=60)
            outs.append((out.stdout, other.stdout, other.stderr))
        assert outs[1][0] == outs[0][0]
    assert outs[0][1:] == ("0\nrmore\n", "")
    assert outs[1][1] == "1\nr\n" and "write error: Permission denied" in outs[1][2]
    assert "1 other call(s) on containers could not be served" in outs[1][2]
    for line in ("write-suid 755 nobody nogroup", "write-sgid-gx 755 nobody nogroup",
                 "write-sgid-in-group 2745 nobody nogroup", "truncate 755 nobody nogroup",
                 "open-trunc 755 nobody nogroup", "empty-write 4755 nobody nogroup", "chmod after open 0o755",
                 "fchmod ftruncate 0o755",
                 "chgrp-gx 755 nobody users", "chgrp-in-group 2745 nobody nogroup",
                 "chmod-sgid-own-group 2755 nobody nogroup", "created-in-sg 644 nobody root",
                 "chmod-sgid-other-group 755 nobody root", "chown-same-owner 755 nobody root",
                 "create-sgid 755 nobody root", "create-sgid-own 2755 nobody nogroup"):
        assert line in outs[0][0].splitlines(), (line, outs[0][0])


UNLINKED_OPEN = r"""
set -e
python3 - <<'PY'
import os
with open("u", "wb") as w:
    w.write(b"still here")
fd = os.open("u", os.O_RDONLY)
os.unlink("u")
print("unlinked read", os.read(fd, 100), os.path.exists("u"), os.fstat(fd).st_nlink)
fd2 = os.open("u2", os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd2, b"written before")
os.unlink("u2")
os.write(fd2, b" and after")
print("unlinked rw", os.pread(fd2, 100, 0), os.fstat(fd2).st_nlink)
os.close(fd2)
with open("r", "wb") as w:
    w.write(b"old")
fd3 = os.open("r", os.O_RDONLY)   # left open at exit
with open("r.new", "wb") as w:
    w.write(b"new")
os.rename("r.new", "r")
print("replaced", os.read(fd3, 10), open("r", "rb").read())
fd4 = os.open("m", os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd4, b"moved ")
os.rename("m", "m2")
os.write(fd4, b"and written")
os.close(fd4)
print("renamed open", open("m2", "rb").read())
os.rename("m2", "m2")
print("renamed onto itself", open("m2", "rb").read())
PY
ls -A
touch -d 2001-01-01 e && : > e && [ "$(stat -c %Y e)" -gt 978307200 ] && echo "open-trunc of an empty file: mtime moved"
printf abc > g && touch -d 2001-01-01 g
python3 -c "import os; os.posix_fallocate(os.open('g', os.O_WRONLY), 0, 2)"
[ "$(stat -c %Y g)" -gt 978307200 ] && echo "fallocate inside the size: mtime moved"
"""


def test_an_open_file_unlinked_or_replaced_is_still_read_and_written(tmp_path):
    """A file unlinked (or renamed over) while the process holds it open keeps its bytes for its descriptors, reads and
    writes, with no name left (st_nlink 0), and is gone once closed or at exit; a file renamed while open is written
    under its new name. Today's main read b'' from the unlinked file (its container was removed), failed the write
    with ENOENT, and kept the mtime where the kernel's O_TRUNC of an empty file and a fallocate inside the size move
    it; a rename of a container onto itself removed it (rename's unlink of its target)."""
    _, _, plain_out, layer_out = under_layer_and_plain(tmp_path, UNLINKED_OPEN)
    assert layer_out == plain_out
    for line in ("unlinked read b'still here' False 0", "unlinked rw b'written before and after' 0",
                 "replaced b'old' b'new'", "renamed open b'moved and written'",
                 "renamed onto itself b'moved and written'", "m2", "r",
                 "open-trunc of an empty file: mtime moved", "fallocate inside the size: mtime moved"):
        assert line in layer_out.splitlines(), line
    assert len(layer_out.splitlines()) == 9   # ls -A: m2 and r, nothing hidden



def test_the_library_renames_a_container_onto_another_name_of_itself_as_a_no_op(tmp_path):
    """lf_rename(from, to) with two names of one container ("c" and "./c") does nothing, as rename(2) does; it
    removed its target first, and so the container, when the two paths were not the same string."""
    lib = ctypes.CDLL(str(paths.native_lib("ioloom-logfs")))
    lib.lf_open.restype = ctypes.c_void_p
    lib.lf_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
    lib.lf_pwrite.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64]
    lib.lf_close.argtypes = [ctypes.c_void_p]
    c = tmp_path / "c"
    f = lib.lf_open(str(c).encode(), os.O_CREAT | os.O_WRONLY, 0o644, None)
    assert f and lib.lf_pwrite(f, b"data", 4, 0) == 4 and lib.lf_close(f) == 0
    assert lib.lf_rename(str(c).encode(), f"{tmp_path}/./c".encode()) == 0
    assert Container.open(c).read() == b"data"

UNLINKED_HIDDEN_AND_RENAMES = r"""
python3 - <<'PY'
import os
os.mkdir("work")   # a file unlinked while open, then every name of its directory (rm -rf would)
fd = os.open("work/t", os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"data")
os.unlink("work/t")
for name in os.listdir("work"):
    os.unlink(os.path.join("work", name))
os.write(fd, b" and more")
print("hidden name unlinked, read", os.pread(fd, 20, 0), os.fstat(fd).st_nlink)
os.close(fd)
print("after close", os.listdir("work"))
os.rmdir("work")
with open("t", "wb") as w:
    w.write(b"target")
os.mkdir("adir")
for source in ("nope", "adir"):
    try:
        os.rename(source, "t")
    except OSError as e:
        print("rename", source, "failed", e.errno, "target kept", open("t", "rb").read())
fd = os.open("b", os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"keep")
os.unlink("b")
hidden = [n for n in os.listdir(".") if n.startswith(".ioloom-unlinked.")]
if hidden:
    os.rename(hidden[0], "b-again")
os.close(fd)
print("named again, after close", open("b-again", "rb").read() if hidden else "no hidden name")
if hidden:
    os.unlink("b-again")
PY
ls -A
"""


def test_the_hidden_name_unlinked_or_renamed_and_failed_renames_lose_nothing(tmp_path):
    """The hidden name of a file unlinked while open, unlinked in turn (rm -rf of its directory), keeps the file for
    its descriptor until the close, which removes it; a rename that fails (missing source, a directory onto a file)
    keeps its target; the hidden name renamed to a name again is a file like any other after the close. The layer
    before: the unlink of the hidden name renamed the container onto itself, removing it (pread ENOENT); the failed
    renames removed the target first; the close removed the file renamed back."""
    _, _, plain_out, layer_out = under_layer_and_plain(tmp_path, UNLINKED_HIDDEN_AND_RENAMES)
    assert "named again, after close b'keep'" in layer_out.splitlines()
    assert layer_out.replace("after close b'keep'", "after close no hidden name") == plain_out
    for line in ("hidden name unlinked, read b'data and more' 0", "after close []",
                 f"rename nope failed {errno.ENOENT} target kept b'target'",
                 f"rename adir failed {errno.ENOTDIR} target kept b'target'", "adir", "t"):
        assert line in plain_out.splitlines(), line


DIRECTORY_RENAMED = r"""
python3 - <<'PY'
import os
os.mkdir("d")
fd = os.open("d/f", os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"hello")
gone = os.open("d/g", os.O_RDWR | os.O_CREAT, 0o644)
os.write(gone, b"unlinked")
os.unlink("d/g")
os.rename("d", "e")
os.pwrite(fd, b"XY", 5)
os.pwrite(gone, b" too", 8)
print("directory renamed", os.pread(fd, 20, 0), os.pread(gone, 20, 0))
os.close(fd)
os.close(gone)
print(sorted(os.listdir("e")))
PY
"""


def test_files_open_in_a_renamed_directory_are_still_read_and_written(tmp_path):
    """A directory renamed while files in it are open (one of them unlinked): their descriptors keep reading and
    writing them, under the new name. The layer before: reads failed with ENOENT (its handles named the old
    path)."""
    _, _, plain_out, layer_out = under_layer_and_plain(tmp_path, DIRECTORY_RENAMED)
    assert layer_out == plain_out == "directory renamed b'helloXY' b'unlinked too'\n['f']\n"


FORKED_AFTER_UNLINK = r"""
python3 - <<'PY'
import os
fd = os.open("a", os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"hello")
os.unlink("a")
r, w = os.pipe()
child = os.fork()
if child == 0:
    os.read(r, 1)   # once the parent closed its descriptor
    os.pwrite(fd, b"XY", 5)
    print("child after the parent's close", os.pread(fd, 20, 0), flush=True)
    os.close(fd)
    os._exit(0)
os.close(fd)
os.write(w, b"x")
os.waitpid(child, 0)
print(sorted(os.listdir(".")))
PY
"""


def test_a_child_keeps_a_file_unlinked_before_the_fork_after_the_parent_closes_it(tmp_path):
    """A file unlinked while open, then a fork: the parent's close leaves it to the child, whose close removes it.
    The layer before: the parent's close removed it (the child's pwrite failed with ENOENT, its pread read 0
    bytes)."""
    _, _, plain_out, layer_out = under_layer_and_plain(tmp_path, FORKED_AFTER_UNLINK)
    assert layer_out == plain_out == "child after the parent's close b'helloXY'\n[]\n"


ACCESS_TIMES = r"""
set -e
export TZ=UTC
printf data > f && touch -a -d '2001-01-01' f
stat -c 'stat keeps %X' f
cat f > /dev/null && [ "$(stat -c %X f)" -gt 978307200 ] && echo "a read marks it (older than the mtime)"
a=$(stat -c %X f) && cat f > /dev/null && [ "$(stat -c %X f)" = "$a" ] && echo "a second read leaves it (relatime)"
touch -a -d '2001-01-01' f
python3 -c "import os; os.read(os.open('f', os.O_RDONLY | os.O_NOATIME), 4)" && stat -c 'O_NOATIME keeps %X' f
python3 -c "import os; os.open('f', os.O_RDONLY)" && stat -c 'an open alone keeps %X' f
cat f > /dev/null && [ "$(stat -c %X f)" -gt 978307200 ] && echo "marked again"
"""


def test_reads_mark_the_access_time_as_on_a_plain_file(tmp_path):
    """A read marks the access time by the mount's rule (relatime here: when it is older than the mtime or ctime), an
    open, a stat or an O_NOATIME read do not. Today's main never marked it (reads were as under noatime)."""
    flags = os.statvfs(tmp_path).f_flag
    if not flags & os.ST_RELATIME or flags & (os.ST_NOATIME | os.ST_NODIRATIME):
        pytest.skip("the expected lines are relatime's")
    _, _, plain_out, layer_out = under_layer_and_plain(tmp_path, ACCESS_TIMES)
    assert layer_out == plain_out
    assert layer_out.splitlines() == ["stat keeps 978307200", "a read marks it (older than the mtime)",
                                      "a second read leaves it (relatime)", "O_NOATIME keeps 978307200",
                                      "an open alone keeps 978307200", "marked again"]
