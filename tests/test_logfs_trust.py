"""Crafted and damaged containers (issue 12): no metadata line, planted link, index entry or missing journal can make
a container tool or the preloaded layer delete, crash, hang or silently mislead. Each case runs through the Python
tools (`ioloom container`) and the C layer (a preloaded `rm`, `cat`) alike."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ioloom import paths
from ioloom.logfs import preload
from ioloom.logfs.format import (
    ENTRY,
    ENTRY_RULES,
    RECORD,
    Container,
    FormatError,
    entry_problems,
    fnv1a,
    read_meta,
    sum64_rows,
)
from ioloom.logfs.tools import _block, _write_sums, check, groups, recover

VECTORS = Path(__file__).parent / "vectors" / "logfs"
DATA = "".join(f"{i} the quick brown fox\n" for i in range(20000)).encode()


def container_cli(*args, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ioloom", "container", *map(str, args)], capture_output=True,
                          timeout=timeout)


def preloaded(*argv, timeout: float = 60, mounts=None, spread: str = "32") -> subprocess.CompletedProcess:
    """argv under the layer, as rank 0 (so that every writer of these tests writes the same group's log)."""
    return subprocess.run(list(map(str, argv)), capture_output=True, timeout=timeout,
                          env={**os.environ, **preload.env(mounts, spread=spread), "PMI_RANK": "0"})


def make(tmp_path: Path, name: str = "x", extras: int = 1, spread: str = "0") -> tuple[Path, list[Path]]:
    """A container mnt/NAME written through the layer, with `extras` extra backend roots: directories of its own
    (spread 0) or shared spread directories."""
    mnt = tmp_path / "mnt"
    roots = [tmp_path / f"extra{i}" for i in range(extras)]
    for d in (mnt, *roots):
        d.mkdir(exist_ok=True)
    (tmp_path / "src").write_bytes(DATA)  # in 8 KiB writes: a record each, one pattern in the index
    out = preloaded("dd", f"if={tmp_path / 'src'}", f"of={mnt / name}", "bs=8k", "status=none", mounts={mnt: roots},
                    spread=spread)
    assert out.returncode == 0, out.stderr
    return mnt / name, roots


def victim(tmp_path: Path) -> Path:
    v = tmp_path / "victim"
    v.mkdir()
    (v / "thesis.tex").write_text("years of work")
    return v


def intact(v: Path) -> bool:
    return (v / "thesis.tex").read_text() == "years of work"


# ---- item 1: nothing outside the container and its declared backends ----

@pytest.mark.parametrize("spread", ["0", "32"])
def test_the_metadata_records_where_its_backends_came_from(tmp_path, spread):
    c, roots = make(tmp_path, extras=2, spread=spread)
    meta = read_meta(c)
    lines = (c / "ioloom-logfs.meta").read_text().splitlines()
    assert f"origin {c.name}" in lines and f"backend {roots[0]}" in lines and f"backend {roots[1]}" in lines
    below = f"lf-spread/{fnv1a(meta.id) % 32:03x}" if spread != "0" else f"{c.name}.lf{meta.id}"
    assert meta.spread == int(spread) and meta.backends[1:] == [r / below for r in roots]
    assert all(b.is_dir() for b in meta.backends)
    assert Container.open(c).read() == DATA


@pytest.mark.parametrize("line, keep_id", [("backend {victim}", False), ("backend ../victim", False),
                                           ("backend ..", False), ("backend ..", True)])
def test_a_crafted_backend_line_deletes_nothing(tmp_path, line, keep_id):
    """Today's main deleted the directory a line added to ioloom-logfs.meta named (or the container's parent)."""
    v = victim(tmp_path)
    (tmp_path / "mnt").mkdir()
    (tmp_path / "mnt" / "victim").symlink_to(v)  # so that "../victim" from the container names it too
    c, _ = make(tmp_path, extras=1 if keep_id else 0)
    meta = c / "ioloom-logfs.meta"
    text = re.sub(r"extras (\d+)", lambda m: f"extras {int(m[1]) + 1}", meta.read_text())  # counted, as an
    meta.write_text(text + line.format(victim=v) + "\n")                                    # attacker would
    for args in (("cat", c), ("check", c), ("recover", c), ("flatten", c, tmp_path / "flat"), ("rm", c)):
        out = container_cli(*args)
        assert b"Traceback" not in out.stderr and intact(v), (args, out.stderr)
        if not keep_id:  # a line with no id and origin to check it against: refused, in one line
            assert out.returncode == 2 and b"is refused: an extra backend, but no valid" in out.stderr, out.stderr
    for argv in (("cat", f"logfs:{c}"), ("rm", f"logfs:{c}")):
        preloaded(*argv)
        assert intact(v) and (tmp_path / "mnt").is_dir()


@pytest.mark.parametrize("cut", ["the last backend line", "after the version line", "inside a backend line"])
def test_a_metadata_file_cut_short_is_refused(tmp_path, cut):
    """Today's main read a container whose metadata lost a backend line as if it had one backend fewer: check said
    OK and cat returned the file without that backend's data (fuzz finding L3)."""
    c, _ = make(tmp_path, extras=2)
    meta = c / "ioloom-logfs.meta"
    text = meta.read_text()
    meta.write_text({"the last backend line": text[:text.rstrip("\n").rindex("\n") + 1],
                     "after the version line": text[:text.index("\n") + 1], "inside a backend line": text[:-3]}[cut])
    for command in ("cat", "check"):
        out = container_cli(command, c)
        assert out.returncode == 2 and b"cut short?" in out.stderr and not out.stdout, out
    out = preloaded(sys.executable, "-c", READER, f"logfs:{c}")
    assert out.stdout.split() == [b"errno", b"5"] and b"cut short?" in out.stderr


@pytest.mark.parametrize("where", ["inside a backend path", "after a line", "after the last line"])
def test_a_nul_byte_in_the_metadata_is_refused_by_every_reader(tmp_path, where):
    """A NUL in a backend path made every Python tool raise ValueError ('embedded null byte', fuzz campaign seed
    1202, case 38515); one after the last line was read by the layer (its text ended there) and refused by the
    tools. Now both refuse the file, naming the NUL, and delete nothing."""
    c, roots = make(tmp_path, extras=1)
    meta = c / "ioloom-logfs.meta"
    text = meta.read_bytes()
    at = {"inside a backend path": text.index(b"backend ") + 12, "after a line": text.index(b"\n") + 1,
          "after the last line": len(text)}[where]
    meta.write_bytes(text[:at] + b"\0" + text[at:])
    for args in (("check", c), ("cat", c), ("rm", c)):
        out = container_cli(*args)
        assert out.returncode == 2 and b"it holds a NUL byte" in out.stderr and b"Traceback" not in out.stderr, out
    out = preloaded(sys.executable, "-c", READER, f"logfs:{c}")
    assert out.stdout.split() == [b"errno", b"5"] and b"it holds a NUL byte" in out.stderr, out
    assert meta.is_file() and all(r.is_dir() and any(r.iterdir()) for r in roots)


def test_a_missing_backend_directory_is_named_and_rm_finishes(tmp_path):
    c, _ = make(tmp_path, extras=2)
    backend = read_meta(c).backends[2]
    for f in backend.iterdir():
        f.unlink()
    backend.rmdir()  # as an interrupted rm leaves it
    out = container_cli("cat", c)
    assert out.returncode == 2 and b"its directory is missing" in out.stderr and not out.stdout
    assert container_cli("rm", c).returncode == 0 and not c.exists()
    assert not any((tmp_path / "extra0").iterdir())


@pytest.mark.parametrize("spread", ["0", "32"])
def test_an_extra_backend_holding_foreign_files_is_not_removed(tmp_path, spread):
    """A directory of its own holding a foreign file, or (shared spread directory) a foreign file named with the
    container's id: nothing is deleted. Another container's files in a shared directory stay, and so does it."""
    c, _ = make(tmp_path, spread=spread)
    meta = read_meta(c)
    backend = meta.backends[1]
    foreign = backend / f"{meta.prefix(backend)}notes.txt"
    if spread != "0":
        (backend / "another.log.r0").write_text("another container's")
    foreign.write_text("mine")
    for remove in (lambda: container_cli("rm", c), lambda: preloaded("rm", f"logfs:{c}")):
        out = remove()
        assert out.returncode != 0
        assert foreign.read_text() == "mine" and Container.open(c).read() == DATA  # nothing deleted
    assert f"holds '{foreign.name}', which logfs did not put there; nothing was deleted".encode() in \
        container_cli("rm", c).stderr
    foreign.unlink()
    assert container_cli("rm", c).returncode == 0 and not c.exists()
    assert [p.name for p in backend.iterdir()] == ["another.log.r0"] if spread != "0" else not backend.exists()


def test_a_backend_swapped_for_a_link_is_not_followed(tmp_path):
    v = victim(tmp_path)
    c, _ = make(tmp_path)
    backend = read_meta(c).backends[1]
    for f in backend.iterdir():
        f.rename(v / f.name)   # the victim now looks like the backend, reached through a link
    backend.rmdir()
    backend.symlink_to(v)
    for run in (lambda: container_cli("rm", c), lambda: preloaded("rm", f"logfs:{c}"),
                lambda: container_cli("cat", c)):
        out = run()
        assert out.returncode != 0 and intact(v)
    assert b"a symbolic link lies between its root and it" in container_cli("cat", c).stderr


def test_a_linked_log_is_never_read_or_written_through(tmp_path):
    """Today's `cat` printed the file a log.* link pointed to."""
    secret = tmp_path / "secret"
    secret.write_bytes(b"private key\n" * 10000)
    c, _ = make(tmp_path, extras=0)
    (log,) = c.glob("log.*")
    log.unlink()
    log.symlink_to(secret)
    out = container_cli("cat", c)
    assert out.returncode == 2 and b"private key" not in out.stdout
    assert b"a symbolic link where the container keeps its own file" in out.stderr
    out = preloaded("cat", f"logfs:{c}")
    assert out.returncode != 0 and b"private key" not in out.stdout
    appended = preloaded(sys.executable, "-c", f"open('logfs:{c}', 'ab').write(b'more')")  # the same group
    assert secret.read_bytes() == b"private key\n" * 10000, appended.stderr


# ---- item 2: a bad index never crashes or hangs a reader ----

FIELDS = list(ENTRY.names)
CASES = json.loads((VECTORS / "entries.json").read_text())


def test_entry_rules_are_the_same_in_c_and_python():
    entries = np.array([tuple(c["entry"][f] for f in FIELDS) for c in CASES], ENTRY)
    python = [ENTRY_RULES[i] if i >= 0 else None for i in entry_problems(entries)]
    lines = "".join(" ".join(str(c["entry"][f]) for f in FIELDS) + "\n" for c in CASES)
    c_side = subprocess.run([str(paths.native_bin("ioloom-logfs-tool")), "entry-problem"], input=lines,
                            capture_output=True, text=True, timeout=30, check=True).stdout.split()
    expected = [c["problem"] for c in CASES]
    assert python == expected
    assert [None if v == "ok" else v for v in c_side] == expected
    assert set(ENTRY_RULES) <= set(expected)  # every rule has a case that breaks it


def craft(c: Path, **fields: int) -> None:
    """The container's (single) index rewritten with its first entry's fields changed, sums made to match."""
    (j,) = groups(read_meta(c))  # the index as it is, entries not checked
    entries = j.entries.copy()
    for name, value in fields.items():
        entries[0][name] = value
    j.index_path.write_bytes(_block(int(j.writers[0]), entries))


@pytest.fixture(scope="module")
def plain_container(tmp_path_factory) -> Path:
    c, _ = make(tmp_path_factory.mktemp("crafted"), extras=0)
    return c


READER = r"""
import os, sys
try:
    fd = os.open(sys.argv[1], os.O_RDONLY)
    print(len(os.read(fd, 1 << 20)))
except OSError as err:
    print("errno", err.errno)
"""


@pytest.mark.parametrize("case", [c for c in CASES if c["problem"]], ids=lambda c: c["name"])
def test_a_crafted_entry_is_refused_by_every_reader(plain_container, tmp_path, case):
    """Today's main: SIGFPE in the reading program (stride 0), hangs, OverflowError and MemoryError."""
    c = tmp_path / "c"
    subprocess.run(["cp", "-a", plain_container, c], check=True)
    craft(c, **{k: v for k, v in case["entry"].items() if k not in ("stamp", "stamp_last", "data_sum", "file_id")})
    with pytest.raises(FormatError, match=f"has an invalid {case['problem']}.*`ioloom container recover`"):
        Container.open(c)
    out = preloaded(sys.executable, "-c", READER, f"logfs:{c}", timeout=30)
    assert out.returncode == 0 and out.stdout.split() == [b"errno", b"5"], out  # EIO, no signal
    assert b"call(s) on damaged or crafted containers refused (EIO)" in out.stderr
    (j,) = groups(read_meta(c))
    assert f"the first: {j.index_path}: index entry 0 of a block has an invalid {case['problem']}".encode() \
        in out.stderr, out.stderr
    out = container_cli("cat", c, timeout=30)
    assert out.returncode == 2 and b"Traceback" not in out.stderr and not out.stdout, out.stderr
    recover(c)                         # the record journal still describes the data: rebuilt, as it was
    assert Container.open(c).read() == DATA and check(c).ok


def test_stride_zero_no_longer_kills_the_reader(plain_container, tmp_path):
    c = tmp_path / "c"
    subprocess.run(["cp", "-a", plain_container, c], check=True)
    craft(c, count=5, stride=0)
    out = preloaded("cat", f"logfs:{c}")
    assert out.returncode == 1 and out.returncode != -signal.SIGFPE and b"Input/output error" in out.stderr


# ---- item 3: check says OK only when cat returns the right bytes ----

def _cut(path: Path, keep: int) -> None:
    os.truncate(path, keep)


DAMAGE = {
    "index deleted": lambda c: next(c.glob("index.*")).unlink(),
    "records deleted": lambda c: next(c.glob("records.*")).unlink(),
    "records emptied": lambda c: _cut(next(c.glob("records.*")), 0),
    "records cut short": lambda c: _cut(next(c.glob("records.*")), RECORD.itemsize + 20),  # the last write lost
    "log cut short": lambda c: _cut(next(c.glob("log.*")), len(DATA) // 2),
    "log deleted": lambda c: next(c.glob("log.*")).unlink(),
    "index cut short": lambda c: _cut(next(c.glob("index.*")), 40),
    "a log byte flipped": lambda c: _flip(next(c.glob("log.*")), len(DATA) // 3),
    "an entry's stamp changed": lambda c: craft(c, stamp=4096),  # reorders overlapping writes (fuzz finding L9)
}


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", DAMAGE)
def test_check_is_ok_only_when_cat_is_right(plain_container, tmp_path, damage):
    """Today's main printed OK with index.r1 deleted while cat returned nothing of the file."""
    c = tmp_path / "c"
    subprocess.run(["cp", "-a", plain_container, c], check=True)
    DAMAGE[damage](c)
    report = check(c)
    assert not report.ok, damage
    assert all("ioloom container recover" in p for p in report.problems), report.problems  # the repair, named
    stats = recover(c)
    assert check(c).ok, check(c).problems
    data = Container.open(c).read()
    if damage in ("index deleted", "records deleted", "records emptied", "records cut short", "index cut short",
                  "an entry's stamp changed"):
        assert data == DATA, damage  # nothing was lost: recover brought it all back
        assert bool(stats["rebuilt"]) == damage.startswith("records")
    else:
        assert data == DATA[:len(data)] or damage == "a log byte flipped"  # what remains, as it was written


def test_check_names_the_missing_index_and_its_repair(plain_container, tmp_path):
    c = tmp_path / "c"
    subprocess.run(["cp", "-a", plain_container, c], check=True)
    DAMAGE["index deleted"](c)
    out = container_cli("check", c)
    assert out.returncode == 1 and b"intact records, but index." in out.stdout and b"is missing" in out.stdout
    assert b"ioloom container recover" in out.stdout and b"OK" not in out.stdout


# ---- issue 14: logfs's own storage calls reach libc, never another preloaded tool ----

SHIM_SCRIPT = r"""
set -e
cd "$WORK"
printf 'one\ntwo\n' | tee logfs:c > /dev/null       # stdio writes (tee's fopen: the layer's cookie)
sed -n 2p logfs:c > sed.out                          # stdio reads and seeks
cat logfs:c > cat.out                                # reads: the index journals listed and loaded
stat -c %s logfs:c > stat.out                        # stat: the container's files scanned
cp logfs:c logfs:d                                   # copy_file_range served by reads and writes
rm logfs:c logfs:d                                   # unlink: the container's files listed and removed
head -c 20000 /dev/zero > logfs:e                    # writes past a 4 KiB chunk: write-behind's sync_file_range
rm logfs:e
"""


def shim_totals(counts: Path) -> dict[str, int]:
    """The shim's counts of calls from logfs, summed over the programs that reported (each appends a line)."""
    totals: dict[str, int] = {}
    for line in counts.read_text().splitlines():
        for item in line.split("logfs:", 1)[1].split():
            name, value = item.split("=")
            totals[name] = totals.get(name, 0) + int(value)
    return totals


def test_logfs_storage_calls_skip_other_preloaded_tools(tmp_path, logfs_shim):
    """Today's main: logfs's readdir, closedir, fstatat, unlinkat, read, write and lseek went through the PLT, so a
    tool preloaded in front of it (a tracer) saw the layer's own storage I/O as the program's. The same shim loaded
    after the layer sees its calls (at least one sync_file_range: the script's last file fills 4 KiB chunks)."""
    totals: dict[str, dict[str, int]] = {}
    for where in ("first", "after"):
        counts = tmp_path / f"counts-{where}"
        env = {**os.environ, "WORK": str(tmp_path), "LOGFS_SHIM_OUT": str(counts), "PMI_RANK": "0",
               **preload.env(preload_first=str(logfs_shim) if where == "first" else None, chunk="4096")}
        if where == "after":
            env["LD_PRELOAD"] += f":{logfs_shim}"
        out = subprocess.run(["bash", "-c", SHIM_SCRIPT], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert (tmp_path / "sed.out").read_text() == "two\n" and (tmp_path / "cat.out").read_text() == "one\ntwo\n"
        assert (tmp_path / "stat.out").read_text() == "8\n" and not (tmp_path / "c").exists()
        assert len(counts.read_text().splitlines()) >= 8                   # every program reported
        totals[where] = shim_totals(counts)
    assert totals["first"] and all(v == 0 for v in totals["first"].values()), totals["first"]
    assert totals["after"]["sync_file_range"] >= 1, totals["after"]


def test_a_run_of_one_write_with_any_pstride_is_summed(tmp_path):
    """A record of one write may hold any pstride (only the step between two writes); check summed its data
    through a stride it could not take above 2^63 and raised OverflowError (fuzz seed 1301, case 1284)."""
    data = bytes(range(256)) * 3
    log = tmp_path / "log"
    log.write_bytes(data)
    run = np.zeros(1, RECORD)[0]
    run["count"], run["length"], run["physical"], run["pstride"] = 1, 700, 10, (1 << 64) - 41
    with open(log, "rb") as f:
        sums = _write_sums(f, run, lambda done: None)
    expected = sum64_rows(np.frombuffer(data[10:710], np.uint8).reshape(1, 700))
    assert sums.tolist() == expected.tolist()
