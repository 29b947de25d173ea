"""ioloom.outputs: a file the user opens is replaced only by a complete one, and a failed write leaves neither a
half-written file nor a temporary behind, on a real full disk and when the text cannot be encoded."""
from __future__ import annotations

import json

import pytest

from ioloom import outputs


def test_save_creates_parents_and_replaces_whole(tmp_path):
    path = tmp_path / "deep" / "report.json"
    assert outputs.save_json({"a": 1}, path) == path and json.loads(path.read_text()) == {"a": 1}
    outputs.save("second", path)
    assert path.read_text() == "second" and [p.name for p in path.parent.iterdir()] == ["report.json"]


def test_a_failed_write_keeps_the_earlier_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "page.html"
    outputs.save("<p>earlier</p>", path)
    with pytest.raises(UnicodeEncodeError):
        outputs.save("<p>\ud800</p>", path)  # a lone surrogate cannot be written as UTF-8
    assert path.read_text() == "<p>earlier</p>" and [p.name for p in tmp_path.iterdir()] == ["page.html"]


def test_a_full_disk_keeps_the_earlier_file_and_frees_what_the_attempt_took(small_fs):
    path = small_fs("64k") / "sweep.json"
    outputs.save_json({"round": 1}, path)
    with pytest.raises(OSError, match="No space left"):
        outputs.save("x" * (1 << 20), path)
    assert json.loads(path.read_text()) == {"round": 1} and [p.name for p in path.parent.iterdir()] == [path.name]


def test_a_figure_page_opens_offline(tmp_path):
    import plotly.graph_objects as go

    page = outputs.save_figure(go.Figure(go.Scatter(x=[1, 2], y=[3, 4])), tmp_path / "f.html").read_text()
    inlined = page.startswith("<html>") and "Plotly.newPlot" in page and "<script src=" not in page
    assert inlined, page[:300]  # not the whole page: plotly.js inlined is megabytes
