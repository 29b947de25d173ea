"""Tracing and logfs together (LD_PRELOAD=libioloom-trace.so:libioloom-logfs.so): the trace shows the program's
logical I/O on the container and the physical I/O logfs does on its log and index underneath."""
from __future__ import annotations

import os

from ioloom.logfs import preload
from ioloom.logfs.format import RECORD
from ioloom.trace import open_trace


def traced_events(trace_dir):
    trace = open_trace(trace_dir)
    return trace.events().to_pandas().merge(trace.files.to_pandas()[["file_id", "path"]], on="file_id")


def test_trace_shows_logical_and_physical_io(tmp_path, ioloom_cli):
    mount = tmp_path / "mnt"
    mount.mkdir()
    src = tmp_path / "src"
    src.write_bytes(bytes(range(256)) * 1000)
    env = {**preload.env({mount: []})}
    ioloom_cli("run", "-o", tmp_path / "trace", "--", "sh", "-c", f"cp {src} {mount}/x && cat {mount}/x > /dev/null",
               env={**os.environ, **env})
    events = traced_events(tmp_path / "trace")
    logical = events[events.path == str(mount / "x")]
    logs = events[events.path.str.startswith(str(mount / "x" / "log."))]
    index = events[events.path.str.startswith(str(mount / "x" / "index."))]
    assert logical.op.isin(["copy_file_range", "write", "pwrite"]).any() and (logical.op == "read").any()
    records = events[events.path.str.startswith(str(mount / "x" / "records."))]
    assert logs[logs.op == "pwrite"].ret_bytes.sum() == 256_000             # the data alone, nothing beside it
    writes, journal = (logs.op == "pwrite").sum(), records[records.op == "write"].ret_bytes.sum()
    assert journal % RECORD.itemsize == 0 and 0 < journal <= RECORD.itemsize * writes  # a record per run, batched
    assert len(records) <= writes
    assert logs[logs.op == "pread"].ret_bytes.sum() == 256_000             # the read-back, from the log
    assert (index.op == "writev").any()                                    # the index published at close


def test_run_over_logfs_records_logical_offsets(tmp_path, ioloom_cli):
    """`ioloom run --logfs DIR`: dd's sequential writes land at their logical offsets in the trace (the tracer
    asks the layer below it for the position, not the kernel, which only knows the container's directory)."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    ioloom_cli("run", "-o", tmp_path / "trace", "--logfs", mount, "--", "sh", "-c",
               f"dd if=/dev/zero of={mount}/f bs=64k count=8 2>/dev/null && cat {mount}/f > /dev/null")
    assert (mount / "f").is_dir(), "without the layer, the file is a container directory"
    events = traced_events(tmp_path / "trace")
    logical = events[events.path == str(mount / "f")]
    writes = logical[logical.op == "write"]
    assert writes.offset.tolist() == [i * 65536 for i in range(8)]
    reads = logical[(logical.op == "read") & (logical.ret_bytes > 0)]
    assert reads.ret_bytes.sum() == 8 * 65536 and (reads.offset >= 0).all()
