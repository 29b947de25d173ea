"""`ioloom bench fuzz` (issue 12): the harness's mutations are what they claim (crafted fields pass the
checksums, so they reach the validation behind them; the guard stops a tool that would delete outside the
container), and a bounded sample of cases ends with no crash, hang, uncaught exception or wrong result."""
from __future__ import annotations

import os
import random
import shutil
import struct
import tempfile
from pathlib import Path

import numpy as np
import pytest

from ioloom.bench import fuzz
from ioloom.logfs.format import RECORD, header_sum, parse_journal
from ioloom.logfs.tools import journal_records
from ioloom.trace.stream_file import read_stream_file

SAMPLE = 1000  # cases of each kind in `make test` (the full campaign: docs/bench.md, "Fuzzing")
# Failure classes of /work/coord/fuzz-findings.md still open: the sample of that kind is expected to fail until
# they are fixed. None are left: trace (seed 12, 1,000 cases: 0 of each) and container (L9 fixed by check).
OPEN: dict[str, str] = {}


@pytest.fixture(scope="module")
def scratch():
    root = Path(tempfile.mkdtemp(prefix="ioloom-test-fuzz-", dir=fuzz._scratch()))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def seeds(scratch) -> fuzz.Seeds:
    return fuzz.make_seeds(scratch / "seeds", 3)


def test_a_case_and_its_verdicts_depend_on_the_seed_alone(seeds, scratch):
    """Two campaigns of one seed on the same seeds, in directories of other lengths and with other numbers of
    workers (a case lands in another worker's directory), draw the same cases and every tool reaches the same
    outcome on each; the streams are named by the order their processes started, not by their pids."""
    assert [Path(n).name for n in seeds.streams] == ["0-sh.ioloom", "1-dd.ioloom", "2-cat.ioloom", "3-dd.ioloom"]
    runs = []
    for workdir, workers in ((scratch / "same", 1), (scratch / "same-seed-in-a-longer-directory", 2)):
        runner = fuzz.Campaign(seeds, 5, workdir, workers, timeout=10, only=None)
        try:
            results = runner.run(range(200))
        finally:
            runner.close()
        runs.append(sorted((r["number"], r["what"], r["outcome"], [d[:2] for d in r["details"]]) for r in results))
    assert runs[0] == runs[1]


def test_crafted_chunks_pass_the_crc(seeds, tmp_path):
    """An INFO value or an EVENTS field changed with the CRC recomputed is read as a valid chunk (no checksum
    problem): what it reaches is the reader's validation of the field, not the checksum."""
    data = seeds.files[seeds.streams[0]]
    _, found = fuzz.chunks(data)
    info = next(c for c in found if c[1] == fuzz.INFO)
    crafted, _ = fuzz.mutate_info(random.Random(1), data, info, seeds.crc)
    path = tmp_path / "s.ioloom"
    path.write_bytes(crafted)
    assert not [p for p in read_stream_file(path).problems if "checksum" in p]
    path.write_bytes(data[:info[0] + 20] + bytes([data[info[0] + 20] ^ 1]) + data[info[0] + 21:])
    assert any("checksum" in p for p in read_stream_file(path).problems)


def test_crafted_records_pass_the_header_sum(seeds, tmp_path):
    """Every field of a record journal's record set to a huge value with the header sum recomputed (as
    mutate_records does): the record still parses, with that field changed (the harness's field offsets are the
    format's)."""
    name = next(n for n in seeds.files if Path(n).name.startswith("records."))
    data = seeds.files[name]
    assert len(data) % fuzz.RECORD_SIZE == 0 and fuzz.RECORD_SIZE == RECORD.itemsize
    for field, offset, fmt in fuzz.RECORD_FIELDS:
        value = (1 << 8 * struct.calcsize(fmt)) - 2 if field != "version" else 3
        changed = data[:offset] + struct.pack(fmt, value) + data[offset + struct.calcsize(fmt):]
        head = np.frombuffer(changed[:fuzz.RECORD_SIZE], RECORD)[0]
        (tmp_path / "records.x").write_bytes(changed[:12] + struct.pack("<I", header_sum(head)) + changed[16:])
        first = next(journal_records(tmp_path / "records.x"))
        assert int(first[field]) == value, field


def test_crafted_index_entries_pass_the_sums(seeds):
    """Every field of every index entry set to a huge value with the sums recomputed: the block still parses."""
    name = next(n for n in seeds.files if Path(n).name.startswith("index."))
    data = seeds.files[name]
    whole, _ = parse_journal(data)
    for field, offset, fmt in fuzz.ENTRY_FIELDS:
        changed = data[:32 + offset] + struct.pack(fmt, (1 << 8 * struct.calcsize(fmt)) - 2) + data[32 + offset +
                                                                                                  struct.calcsize(fmt):]
        blocks, _ = parse_journal(fuzz._with_sums(changed))
        assert len(blocks) == len(whole), field
        assert len(parse_journal(changed)[0]) < len(whole), field  # without the sums it would stop there


def test_guard_stops_changes_outside(tmp_path):
    inside, outside = tmp_path / "container", tmp_path / "outside"
    for d in (inside, outside):
        (d / "sub").mkdir(parents=True)
        (d / "sub" / "f").write_text("x")
    with fuzz.Guard([inside]):
        shutil.rmtree(inside / "sub")
        for act in (lambda: shutil.rmtree(outside), lambda: os.unlink(outside / "sub" / "f"),
                    lambda: open(outside / "new", "w"), lambda: os.replace(inside, outside / "moved")):
            with pytest.raises(fuzz.Escape):
                act()
    assert (outside / "sub" / "f").read_text() == "x" and not (inside / "sub").exists()


@pytest.mark.parametrize("kind", ["trace", "container"])
def test_bounded_sample(kind, request, scratch):
    """SAMPLE cases of one kind, run as `ioloom bench fuzz --only KIND` does."""
    if kind in OPEN:
        request.applymarker(pytest.mark.xfail(reason=OPEN[kind], strict=False))
    counts, failing = fuzz.campaign(seed=12, cases=SAMPLE, workdir=scratch / kind, only=kind, timeout=10)
    assert counts["cases"] == SAMPLE
    assert counts["ok"] + counts["clean"] == SAMPLE, [(r["number"], r["outcome"], r["what"], r["details"])
                                                      for r in failing[:10]]
