"""`ioloom export` of a real traced command, and the analysis of a truncated trace."""
from __future__ import annotations

import csv
import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

import ioloom
from ioloom.analysis import analyse

CLI = [sys.executable, "-m", "ioloom"]


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    """dd writing 1 MiB in 64 KiB blocks, then reading it back, traced by `ioloom run`."""
    root = tmp_path_factory.mktemp("export")
    data = root / "data.bin"
    script = f"dd if=/dev/zero of={data} bs=64k count=16 status=none && dd if={data} of=/dev/null bs=64k status=none"
    subprocess.run([*CLI, "run", "-o", str(root / "trace"), "--", "sh", "-c", script], check=True,
                   capture_output=True, timeout=120)
    return root / "trace"


def _events(trace_dir) -> int:
    return sum(s.read(["t_start"]).num_rows for s in ioloom.open_trace(trace_dir).streams)


def test_perfetto_export_has_every_event_nested_by_thread(trace, tmp_path):
    out = tmp_path / "t.json"
    subprocess.run([*CLI, "export", str(trace), "--format", "perfetto", "-o", str(out)], check=True, timeout=120)
    doc = json.loads(out.read_text())
    calls = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    names = [e for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"]
    assert len(calls) == _events(trace)
    assert len(names) == len(ioloom.open_trace(trace).streams)
    writes = [e for e in calls if e["name"] == "write" and e["args"]["file"] == str(trace.parent / "data.bin")]
    assert len(writes) == 16 and all(e["args"]["bytes"] == 65536 for e in writes)
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in calls)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_table_exports_keep_every_event_and_the_file_paths(trace, tmp_path, fmt):
    subprocess.run([*CLI, "export", str(trace), "--format", fmt, "-o", str(tmp_path)], check=True, timeout=120)
    if fmt == "parquet":
        events = pq.read_table(tmp_path / "events.parquet").to_pylist()
    else:
        with open(tmp_path / "events.csv", newline="") as f:
            events = list(csv.DictReader(f))
    assert len(events) == _events(trace)
    data = [e for e in events if e["path"] == str(trace.parent / "data.bin") and e["op"] == "write"]
    assert len(data) == 16 and {int(e["ret_bytes"]) for e in data} == {65536}
    assert (tmp_path / f"files.{fmt}").stat().st_size > 0


def test_truncated_trace_reports_what_it_could_read(trace, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    streams = sorted(trace.iterdir())
    for s in streams:
        (broken / s.name).write_bytes(s.read_bytes())
    victim = max(broken.iterdir(), key=lambda p: p.stat().st_size)
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size * 2 // 3])
    result = analyse(broken, workers=1).to_json()
    assert any(victim.name in p for p in result["summary"]["problems"]), result["summary"]["problems"]
    assert result["summary"]["events"] > 0
    out = subprocess.run([*CLI, "report", str(broken), "-o", str(tmp_path / "r.html")], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0 and victim.name in out.stderr
    page = (tmp_path / "r.html").read_text()
    listed = victim.name in page
    assert listed


def test_workers_reread_each_stream_file_on_the_whole_traces_clock_and_file_ids(trace):
    """What local workers decode from a stream file alone equals that stream as the whole trace reads it."""
    from ioloom.analysis.executor import StreamFile

    whole = ioloom.open_trace(trace)
    alone = StreamFile.of(whole)
    assert alone is not None and len(alone) == len(whole.streams) >= 2  # sh and the two dd
    for mine, theirs in zip(alone, whole.streams):
        assert mine.read().equals(theirs.read())
