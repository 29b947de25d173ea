"""`ioloom bench drishti`: Drishti's triggers mapped to ioloom's checks (findings.drishti_map), the docs' table of
that map, and the command on real programs. Tests that need Drishti (the benchmark-only extra
`ioloom[bench-drishti]`) skip without it; the command's own logic is tested without it."""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ioloom import mpi
from ioloom.analysis.findings import CHECKS, DRISHTI_UNCHECKED, drishti_map

ROOT = Path(__file__).parents[1]
COLLECTIVE_LOG = ROOT / "tests" / "vectors" / "darshan" / "mpich-collective-dxt.darshan"  # pattern_findings collective
needs_drishti = pytest.mark.skipif(importlib.util.find_spec("drishti") is None,
                                   reason="drishti-io is not installed (pip install 'ioloom[bench-drishti]')")
needs_mpich = pytest.mark.skipif("mpich" not in {i.name for i in mpi.implementations()}, reason="needs MPICH")


def _doc_table(title: str) -> dict[str, str]:
    doc = (ROOT / "docs" / "analysis.md").read_text()
    table = doc[doc.index(title):].split("\n\n")[1]
    return dict(re.findall(r"^\| ([SPM]\d\d) \| (.+?) \|$", table, re.M))


def test_every_trigger_is_covered_or_explained_once():
    triggers = drishti_map()
    assert [t for t, codes in triggers.items() if not codes] == list(DRISHTI_UNCHECKED)
    assert {code for codes in triggers.values() for code in codes} == {
        code for check in CHECKS if check.drishti for code in check.codes}
    assert triggers["P05"] == ("small-reads",) and triggers["P06"] == ("small-writes",)  # one direction each
    assert triggers["P19"] == ("rank-imbalance", "shared-file-imbalance")


def test_docs_list_the_map():
    """docs/analysis.md's table of Drishti's triggers is the map in findings.py, row for row."""
    rows = _doc_table("Drishti's triggers (drishti-io 0.8)")
    expected = {t: ", ".join(f"`{c}`" for c in codes) or f"none: {DRISHTI_UNCHECKED[t]}"
                for t, codes in drishti_map().items()}
    assert rows == expected


@needs_drishti
def test_drishti_has_the_triggers_we_map():
    """The installed Drishti's trigger codes (its config module's INSIGHTS_* constants) are those we map."""
    config = Path(importlib.util.find_spec("drishti").origin).parent / "includes" / "config.py"
    theirs = set(re.findall(r"^INSIGHTS_\w+ = '([SPM]\d\d)'", config.read_text(), re.M))
    assert theirs == set(drishti_map())


def _bench(tmp_path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "ioloom", "bench", "drishti", "--markdown", "--dir", str(tmp_path),
                           *args], capture_output=True, text=True, timeout=600,
                          env={k: v for k, v in os.environ.items() if k != "DARSHAN_LIB"})
    assert done.returncode == 0, done.stderr
    return done


def _cells(out: str, trigger: str) -> list[str]:
    line = next(line for line in out.splitlines() if line.startswith(f"| {trigger} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


@pytest.mark.mpi
@needs_mpich
def test_without_darshan_ioloom_still_answers(tmp_path):
    """No Darshan library nor log: the command says what it needs and gives ioloom's column for a real run."""
    done = _bench(tmp_path, "--programs", "pattern:stdio", "--mpi", "mpich")
    assert "no Darshan library" in done.stdout
    trigger, checks, drishti, ours = _cells(done.stdout, "S01")
    assert (checks, drishti, ours) == ("stdio-heavy", "n/a", "stdio-heavy")
    assert _cells(done.stdout, "P07")[1] == "none"
    assert not list(tmp_path.iterdir()), "the runs are removed without --keep"


@pytest.mark.mpi
@needs_mpich
def test_bad_log_argument_is_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "ioloom", "bench", "drishti", "--darshan-log", "demo"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "PROGRAM=PATH" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.mpi
@needs_mpich
@needs_drishti
def test_drishti_beside_ioloom_on_the_collective_run(tmp_path):
    """Drishti on a real Darshan log of pattern_findings' collective run (4 MPICH ranks) beside ioloom's own
    trace of the same program: Drishti notes the collective writes (M05) and flags blocking I/O (M07); ioloom's
    overlap check stays silent on this short run, and neither sees independent writes (M03)."""
    done = _bench(tmp_path, "--programs", "pattern:collective", "--mpi", "mpich", "--darshan-log",
                  f"pattern:collective={COLLECTIVE_LOG}")
    assert _cells(done.stdout, "M05")[2] == "fired"
    assert _cells(done.stdout, "M07")[2:] == ["fired", "–"]
    assert _cells(done.stdout, "M03")[2:] == ["–", "–"]
