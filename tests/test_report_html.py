"""The HTML report of a real traced MPI run, opened in headless Chromium: no console errors, the plots drew,
nothing is fetched from the network. The screenshot is kept in build/tests/report-screenshot.png."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from conftest import COMPILED, MpiRunner
from ioloom import mpi as mpi_impls

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOT = COMPILED / "report-screenshot.png"


def _preferred_mpi() -> MpiRunner:
    """MPICH when present: its ROMIO data-sieves, so the report has every figure to draw."""
    found = {impl.name: impl for impl in mpi_impls.implementations()}
    return MpiRunner(found.get("mpich") or next(iter(found.values())))


def chromium(page, *flags: str) -> tuple[str, list[str]]:
    """Load `page` headless, let its scripts run; (DOM after scripts, console messages)."""
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                           "--v=0", "--virtual-time-budget=15000", *flags, page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return done.stdout, console


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A traced run of the data-sieving program on 4 ranks, and `ioloom report` of it."""
    runner = _preferred_mpi()
    root = tmp_path_factory.mktemp("report")
    exe = runner.compile("pattern_findings.c")
    (root / "data").mkdir()
    launch = runner.command(4, [exe, "strided-view", root / "data"])
    cli = [sys.executable, "-m", "ioloom"]
    subprocess.run([*cli, "run", "-o", str(root / "trace"), "--", *launch], env=runner.env(), check=True,
                   capture_output=True, timeout=180)
    out = subprocess.run([*cli, "report", str(root / "trace"), "-o", str(root / "report.html"), "--json",
                          str(root / "findings.json")], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return root


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/install-deps.sh installs it)")
def test_console_detection_catches_a_broken_page(tmp_path):
    page = tmp_path / "broken.html"
    page.write_text("<html><body><script>undefinedFunction();</script></body></html>")
    _, console = chromium(page, "--dump-dom")
    assert any("undefinedFunction" in line for line in console)


@pytest.mark.mpi
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/install-deps.sh installs it)")
def test_report_loads_without_errors_and_draws_its_plots(report):
    page = report / "report.html"
    dom, console = chromium(page, "--dump-dom")
    assert console == []
    plots = len(re.findall(r'class="main-svg"', dom))
    # timeline, time split, concurrent writes, locks, sizes, bandwidth, access map(s): each draws SVG layers
    assert len(re.findall(r'class="plotly-graph-div', dom)) >= 7
    assert plots >= 7 * 2
    mentions_sieving = "data-sieving" in dom and "romio_ds_write=disable" in dom
    assert mentions_sieving
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    chromium(page, f"--screenshot={SCREENSHOT}", "--window-size=1400,6000")
    assert SCREENSHOT.stat().st_size > 50_000


@pytest.mark.mpi
def test_report_is_self_contained_and_writes_findings_json(report):
    html = (report / "report.html").read_text()
    # booleans, not `in` on the 5 MB page: pytest would diff the whole page on failure
    external = re.search(r'<(script|link|img|iframe)[^>]+(src|href)=["\']?(https?:)?//', html) is not None
    inline_plotly = html.count("<script") >= 2 and "Plotly.newPlot" in html[-len(html) // 2:]
    assert not external, "the report must load nothing from the network"
    assert inline_plotly
    assert len(html) < 12_000_000
    findings = json.loads((report / "findings.json").read_text())
    assert {f["code"] for f in findings} >= {"data-sieving"}
    for f in findings:
        assert set(f) == {"code", "severity", "message", "evidence", "advice"}
        assert set(f["evidence"]) == {"ranks", "files", "window_s", "counts"}


def test_report_of_a_missing_trace_says_what_to_do(tmp_path):
    out = subprocess.run([sys.executable, "-m", "ioloom", "report", str(tmp_path / "nothing")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "ioloom run -o" in out.stderr and "Traceback" not in out.stderr
