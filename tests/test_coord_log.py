"""The preloaded client's log (coord.jsonl, ioloom.coord.log): read by the names the C writes (version 2, each
announcement an object; tests/test_coord_predict.py checks a real run's), and a log of version 1 (each
announcement a list, no "version") read by the same names; a newer version is refused in one line."""
import json

import pytest

from ioloom.coord import log

# A line as preload.c wrote it before version 2.
V1_LINE = ('{"pid": 7, "phases": 2, "waits": 0, "waited_seconds": 0.000000, "timeouts": 0, "lost": 0, '
           '"bytes": 3072, "first_start": 1.000000, "last_end": 2.000000, "announced": '
           '[[1024, "first_write", 0.000000, "none", 0.010000, "first_calls", 1024, 0.020000], '
           '[1024, "previous", 0.020000, "history", 0.000000, "none", 2048, 0.030000]]}')


def test_version_1_is_read_by_the_names_of_version_2(tmp_path):
    path = tmp_path / "coord.jsonl"
    path.write_text(V1_LINE + "\n")
    (row,) = log.read(path)
    assert row["bytes"] == 3072 and row["lost"] == 0
    first, second = row["announced"]
    assert first == {"bytes": 1024, "bytes_from": "first_write", "seconds": 0.0, "seconds_from": "none",
                     "revised_seconds": 0.01, "revised_from": "first_calls", "bytes_written": 1024,
                     "active_seconds": 0.02}
    assert (second["bytes_from"], second["bytes_written"]) == ("previous", 2048)


def test_no_log_is_no_process_and_a_newer_version_is_refused(tmp_path):
    assert log.read(tmp_path / "coord.jsonl") == []
    path = tmp_path / "coord.jsonl"
    path.write_text(json.dumps({"version": log.VERSION + 1, "announced": [{"bytes": 1}]}) + "\n")
    with pytest.raises(log.LogError, match=f"version {log.VERSION + 1} of the coordination log"):
        log.read(path)


def test_a_line_cut_short_is_named_in_one_line(tmp_path):
    """A last line cut short (a full disk, a process killed while writing) is refused with its place, not a
    JSONDecodeError's traceback."""
    path = tmp_path / "coord.jsonl"
    path.write_text(V1_LINE + "\n" + V1_LINE[:40] + "\n")
    with pytest.raises(log.LogError, match=r"coord\.jsonl:2: not a line of JSON .*cut short"):
        log.read(path)
