"""Tracing and logfs together (LD_PRELOAD=libioloom-trace.so:libioloom-logfs.so): the trace shows the program's
logical I/O on the container and the physical I/O logfs does on its log and index underneath."""
from __future__ import annotations

import os

from ioloom.logfs import preload
from ioloom.trace import open_trace


def test_trace_shows_logical_and_physical_io(tmp_path, ioloom_cli):
    mount = tmp_path / "mnt"
    mount.mkdir()
    src = tmp_path / "src"
    src.write_bytes(bytes(range(256)) * 1000)
    env = {**preload.env({mount: []})}
    ioloom_cli("run", "-o", tmp_path / "trace", "--", "sh", "-c", f"cp {src} {mount}/x && cat {mount}/x > /dev/null",
               env={**os.environ, **env})
    trace = open_trace(tmp_path / "trace")
    events = trace.events().to_pandas().merge(trace.files.to_pandas()[["file_id", "path"]], on="file_id")
    logical = events[events.path == str(mount / "x")]
    logs = events[events.path.str.startswith(str(mount / "x" / "log."))]
    index = events[events.path.str.startswith(str(mount / "x" / "index."))]
    assert logical.op.isin(["copy_file_range", "write", "pwrite"]).any() and (logical.op == "read").any()
    assert logs[logs.op == "pwritev"].ret_bytes.sum() == 256_000 + 56      # the data and its record header
    assert logs[logs.op == "pread"].ret_bytes.sum() == 256_000             # the read-back, from the log
    assert (index.op == "writev").any()                                    # the index published at close
