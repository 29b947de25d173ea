"""The HTML report's prediction section (docs/predict.md, "In the HTML report") on a program traced for real: the
per-process figures, the main loop as the I/O skeleton, its two plots, and its bounds (--predict-ops)."""
from __future__ import annotations

import html
import re
import subprocess
import sys

import pytest

from test_predict_cli import LOOP
from test_report_html import CHROMIUM, chromium

MAIN_LOOP = ("repeat 60 x: open64 step_#.dat, 24 x write step_#.dat 64 KiB, pwrite64 step_#.dat 512 B, "
             "close step_#.dat")


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    root = tmp_path_factory.mktemp("predict-report")
    script, out = root / "loop.py", root / "out"
    script.write_text(LOOP)
    out.mkdir()
    subprocess.run([sys.executable, "-m", "ioloom", "run", "-o", str(root / "trace"), "--", sys.executable,
                    str(script), str(out)], check=True, capture_output=True, timeout=180)
    return root


def _section(page: str) -> str:
    match = re.search(r'<section id="prediction">(.*?)</section>', page, re.S)
    assert match, "no prediction section"
    return html.unescape(match.group(1))


def test_section_holds_figures_and_skeleton(traced, ioloom_cli):
    ioloom_cli("report", traced / "trace", "-o", traced / "report.html")
    page = (traced / "report.html").read_text()
    assert '<a href="#prediction">Prediction</a>' in page
    section = _section(page)
    assert MAIN_LOOP in section
    assert "pid " in section and "hit ratio % (Eq. 7.3)" in section and "contiguous baseline %" in section
    assert 'id="plot-predict-accuracy"' in section and 'id="plot-predict-grammar"' in section
    assert "the first 2,000 operations" not in section  # the loop's 1,620 operations and start-up reads fit


def test_bounds(traced, ioloom_cli):
    ioloom_cli("report", traced / "trace", "-o", traced / "cut.html", "--predict-ops", "100")
    section = _section((traced / "cut.html").read_text())
    assert "the first 100 operations" in section and "<td>100</td>" in section
    ioloom_cli("report", traced / "trace", "-o", traced / "none.html", "--predict-ops", "0")
    assert 'id="prediction"' not in (traced / "none.html").read_text()


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/install-deps.sh installs it)")
def test_section_draws_in_chromium(traced, ioloom_cli):
    page = traced / "report.html"
    if not page.exists():
        ioloom_cli("report", traced / "trace", "-o", page)
    dom, console = chromium(page, "--dump-dom")
    assert console == []
    section = _section(dom)
    assert len(re.findall(r'class="main-svg"', section)) >= 4  # both plots drew (two SVG layers each)
