"""What the report and `ioloom stats` call things, on real programs under MPICH (tests/programs/pattern_findings.c):
sharing classes, strides, plot titles, the rank colour scale, file paths instead of ids, collective numbers,
what the aggregators column claims, and paths that a narrow terminal or rich's markup would eat.
"""
from __future__ import annotations

import html
import os
import re
import subprocess
import sys

import pytest

from conftest import MpiRunner
from ioloom import mpi as mpi_impls
from ioloom.analysis import analyse
from ioloom.analysis.synthetic import Builder
from ioloom.report import collective_label, figures, render

RANKS = 4


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """{mode: trace dir} under MPICH (its ROMIO reports cb_nodes), data under a directory named with brackets."""
    if "mpich" not in {impl.name for impl in mpi_impls.implementations()}:
        pytest.skip("needs MPICH")
    runner = MpiRunner(mpi_impls.by_name("mpich"))
    exe = runner.compile("pattern_findings.c")
    root = tmp_path_factory.mktemp("labels")
    out = {}
    for mode in ("bcast-input", "blocking", "uneven", "script"):
        data = root / f"run[{mode}]"
        data.mkdir()
        out[mode] = root / f"trace-{mode}"
        runner.trace(RANKS, [exe, mode, data], out[mode], timeout=300)
    out["root"] = root
    return out


@pytest.mark.mpi
def test_an_input_every_rank_reads_is_a_shared_read_not_strided(traced):
    a = analyse(traced["bcast-input"], workers=1)
    pattern = next(p for p in a.to_json()["patterns"] if p["path"].endswith("/input"))
    assert pattern["sharing"] == "N-1 shared read (processes read the same bytes)" and not pattern["interleaved"]
    assert pattern["order"] == "sequential" and pattern["stride"] is None
    page = render(a)
    assert ">None<" not in page and "N-1 shared read" in page


@pytest.mark.mpi
def test_an_input_script_read_with_fgets_by_every_rank_is_a_sequential_shared_read(traced):
    a = analyse(traced["script"], workers=1)
    pattern = next(p for p in a.to_json()["patterns"] if p["path"].endswith("/in.script"))
    assert pattern["sharing"] == "N-1 shared read (processes read the same bytes)"
    assert pattern["order"] == "sequential" and pattern["processes"] == RANKS


@pytest.mark.mpi
def test_collectives_say_when_two_phase_was_skipped(traced):
    """Contiguous blocks with MPI_File_write_at_all: ROMIO (cb_nodes=1) lets every rank write its own part, so
    the four ranks that moved data are not aggregators."""
    a = analyse(traced["blocking"], workers=1)
    page = render(a)
    assert f"skipped: {RANKS} ranks wrote their own parts (cb_nodes=1)" in page
    assert "#1 of opening 0" in page and "aggregators</th>" not in page


def test_collective_numbers_are_split_into_opening_and_number():
    assert collective_label((1 << 32) | 3) == "#3 of opening 1"
    assert collective_label(5) == "#5 of opening 0"


@pytest.mark.mpi
def test_spread_across_ranks_names_files_and_the_colour_bar_is_discrete(traced):
    a = analyse(traced["uneven"], workers=1)
    page = render(a)
    spread = page[page.index("Spread across ranks"):]
    assert "run[uneven]/shared" in html.unescape(spread[:4000])
    maps = figures.access_maps(a)
    assert maps
    for fig in maps:
        marker = fig.data[0].marker
        assert marker.colorbar.tickvals == tuple(range(RANKS))
        assert marker.colorbar.ticktext == tuple(map(str, range(RANKS)))
        stops = [colour for _, colour in marker.colorscale]
        assert len(stops) == 2 * RANKS and all(stops[2 * i] == stops[2 * i + 1] for i in range(RANKS))
        assert len(set(stops)) == RANKS  # one colour per rank, steps not a gradient
        assert sum(1 for trace in fig.data if trace.marker.showscale) == 1


def test_no_access_map_for_calls_on_no_file():
    """Reads of a pipe or stdin have no file (file_id -1): they get no 'Access map: -1'."""
    b = Builder()
    f = b.file("/data/out")
    for i in range(8):
        b.call(0, "posix", "read", i * 10, i * 10 + 5, -1, i * 4096, 4096)
        b.call(0, "posix", "pwrite", i * 10 + 6, i * 10 + 8, f, i * 100, 100)
    titles = [fig.layout.title.text for fig in figures.access_maps(analyse(b.trace(), workers=1))]
    assert titles == ["Access map: /data/out"]


@pytest.mark.mpi
def test_stats_at_80_columns_keeps_whole_paths_and_their_brackets(traced):
    out = subprocess.run([sys.executable, "-m", "ioloom", "stats", str(traced["uneven"])], capture_output=True,
                         text=True, env={**os.environ, "COLUMNS": "80"}, timeout=300)
    assert out.returncode == 0, out.stderr
    assert all(len(line) <= 80 for line in out.stdout.splitlines())
    joined = re.sub(r"\s+", "", out.stdout)
    path = str(traced["root"] / "run[uneven]" / "shared")
    assert re.sub(r"\s+", "", path) in joined  # whole, brackets kept (folded, never cut)
    assert re.sub(r"\s+", "", f"shared-file-imbalance: {RANKS} ranks write the shared file {path}") in joined


def test_no_findings_lists_every_check_and_its_thresholds(tmp_path):
    """A run with nothing to report says what was looked for, in the report and in `ioloom stats`."""
    from ioloom.analysis.findings import CHECKS, T

    b = Builder()
    b.call(0, "posix", "pwrite", 0, 1000, b.file("/data/out"), 0, 1 << 20)
    a = analyse(b.trace(), workers=1)
    assert a.findings == []
    page = html.unescape(render(a))
    assert f"No findings: none of the {len(CHECKS)} checks below matched this trace." in page
    for check in CHECKS:
        assert check.looks_for in page and all(T.shown(name) in page for name in check.thresholds)
    assert "stdio_share = 10%" in page and "S01" in page

