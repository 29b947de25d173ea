"""Darshan logs (.darshan) as ioloom traces, read with PyDarshan, so `ioloom report x.darshan` works on logs
people already have.

What a Darshan log holds and what we make of it:
- DXT segments (DXT_POSIX, DXT_MPIIO; present when the job ran with DXT enabled) become events: one read or
  write per segment with its rank, file, offset, length and times. DXT does not name the call (pwrite or
  write, collective or not) and does not link a POSIX access to the MPI-IO call that issued it, so the
  cross-layer split and the RIOT POSIX bandwidth are not available for Darshan logs. The segments are read
  column-wise (one numpy copy per record), so a log of millions of segments imports in seconds.
- The counters of every module (POSIX, MPI-IO, STDIO, HDF5...) are kept in `Trace.meta["darshan"]`, summed
  per module and per file, and shown in the report.
"""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from ioloom.trace.model import EVENT_SCHEMA, FILE_SCHEMA, Trace

NS = 1_000_000_000
DXT = {"DXT_POSIX": ("posix", "write", "read"), "DXT_MPIIO": ("mpiio", "MPI_File_write", "MPI_File_read")}
COUNTERS = ("BYTES_READ", "BYTES_WRITTEN", "READS", "WRITES", "OPENS")
FCOUNTERS = ("F_READ_TIME", "F_WRITE_TIME", "F_META_TIME")


def _prefix(module: str) -> str:
    return module.replace("-", "")  # "MPI-IO" counters are named MPIIO_*


def _module_frame(report, module: str) -> pd.DataFrame | None:
    """rank, id and the common counters of a module, one row per (rank, file) record."""
    try:
        frames = report.records[module].to_df()
    except (KeyError, ValueError, TypeError):
        return None
    if not isinstance(frames, dict) or "counters" not in frames:
        return None
    p = _prefix(module)
    counters, fcounters = frames["counters"], frames.get("fcounters", pd.DataFrame())
    out = counters[["rank", "id"]].copy()
    for name in COUNTERS:
        if f"{p}_{name}" in counters:
            out[name.lower()] = counters[f"{p}_{name}"].clip(lower=0)
    for name in FCOUNTERS:
        if f"{p}_{name}" in fcounters:
            out[name.lower()[2:] + "_s"] = fcounters[f"{p}_{name}"].clip(lower=0).to_numpy()
    out["mpiio_reads"] = counters.filter(regex=r"^MPIIO_(INDEP|COLL|SPLIT|NB)_READS$").sum(axis=1) if p == "MPIIO" else 0
    out["mpiio_writes"] = counters.filter(regex=r"^MPIIO_(INDEP|COLL|SPLIT|NB)_WRITES$").sum(axis=1) if p == "MPIIO" else 0
    if p == "MPIIO":
        out["reads"], out["writes"] = out.pop("mpiio_reads"), out.pop("mpiio_writes")
    else:
        out = out.drop(columns=["mpiio_reads", "mpiio_writes"])
    out.insert(0, "module", module)
    return out


def _counters(report, names: dict) -> dict:
    """Per module totals and per file rows of the common counters."""
    frames = [f for f in (_module_frame(report, m) for m in report.modules if not m.startswith("DXT")) if f is not None]
    if not frames:
        return {"modules": [], "files": []}
    table = pd.concat(frames, ignore_index=True).fillna(0)
    table["path"] = table["id"].map(names).fillna("<unknown>")
    numeric = [c for c in table.columns if c not in ("module", "rank", "id", "path")]
    modules = table.groupby("module")[numeric].sum().reset_index()
    modules.insert(1, "records", table.groupby("module").size().to_numpy())
    files = table.groupby(["module", "path"])[numeric].sum().reset_index()
    files.insert(2, "ranks", table.groupby(["module", "path"])["rank"].nunique().to_numpy())
    files = files.sort_values(["bytes_written", "bytes_read"] if "bytes_read" in files else ["ranks"],
                              ascending=False)
    return {"modules": modules.to_dict("records"), "files": files.to_dict("records")}


# One DXT segment as darshan-util lays it out after a struct dxt_file_record (darshan-dxt-log-format.h).
SEGMENT = np.dtype([("offset", "<i8"), ("length", "<i8"), ("start_time", "<f8"), ("end_time", "<f8")])


def _dxt_records(report, module: str, problems: list[str]):
    """(file record id, rank, writes, reads) for each DXT record of `module`, the segments as SEGMENT arrays; a
    record darshan-util cannot read (a truncated or damaged log) ends them, with a line in `problems`.

    PyDarshan's own DXT reader builds a Python dict per segment, which is most of the time a large log takes;
    this reads the same records through its darshan-util binding and copies each record's segments at once."""
    from darshan.backend import cffi_backend as backend

    ffi, lib = backend.ffi, backend.libdutil
    index = backend.log_get_modules(report.log)[module]["idx"]
    header = ffi.sizeof("struct dxt_file_record")
    if ffi.sizeof("struct segment_info") != SEGMENT.itemsize:
        raise RuntimeError("this PyDarshan lays DXT segments out differently; install the darshan version "
                           "pyproject.toml pins")
    buf = ffi.new("void **")  # NULL: darshan-util allocates the record (it would write into a buffer given)
    read = 0
    while (got := lib.darshan_log_get_record(report.log["handle"], index, buf)) > 0:
        try:
            record = ffi.cast("struct dxt_file_record *", buf[0])
            writes, reads = record.write_count, record.read_count
            raw = ffi.buffer(ffi.cast("char *", buf[0]) + header, (writes + reads) * SEGMENT.itemsize)
            segments = np.frombuffer(raw, dtype=SEGMENT).copy()
            record_id, rank = record.base_rec.id, record.base_rec.rank
        finally:
            lib.darshan_free(buf[0])
            buf[0] = ffi.NULL
        read += 1
        yield record_id, rank, segments[:writes], segments[writes:]
    if got < 0:
        problems.append(f"{module}: darshan-util could not read the log after {read} of its records (the log is "
                        "truncated or damaged), so the events of the files after them are missing")


def _dxt_events(report, file_ids: dict, problems: list[str]) -> pa.Table:
    """One event per DXT segment (POSIX, then MPI-IO; per record its writes, then its reads), built column-wise."""
    parts = []  # (segments, rank, file_id, layer, op): one run of events that share all but the segment
    for module, (layer, write_op, read_op) in DXT.items():
        if module not in report.modules:
            continue
        for record_id, rank, writes, reads in _dxt_records(report, module, problems):
            if record_id in file_ids:  # a record without a name record is dropped, as PyDarshan does
                parts += [(segs, rank, file_ids[record_id], layer, op)
                          for op, segs in ((write_op, writes), (read_op, reads)) if len(segs)]
    if not parts:
        return EVENT_SCHEMA.empty_table()
    segments, ranks, files, layers, ops = zip(*parts)
    each = [len(s) for s in segments]

    def repeated(values, dtype) -> np.ndarray:
        return np.repeat(np.asarray(values, dtype=dtype), each)

    def dictionary(values, column: str) -> pa.DictionaryArray:
        names = list(dict.fromkeys(values))  # in order of first appearance, as pa.Table.from_pylist builds it
        codes = repeated([names.index(v) for v in values], EVENT_SCHEMA.field(column).type.index_type.to_pandas_dtype())
        return pa.DictionaryArray.from_arrays(codes, pa.array(names, pa.string()))

    seg = np.concatenate(segments)
    rank, none = repeated(ranks, np.int32), np.full(len(seg), -1, dtype=np.int64)
    return pa.Table.from_pydict({
        "t_start": (seg["start_time"] * NS).astype(np.int64), "t_end": (seg["end_time"] * NS).astype(np.int64),
        "rank": rank, "pid": rank, "tid": rank, "layer": dictionary(layers, "layer"), "op": dictionary(ops, "op"),
        "file_id": repeated(files, np.int32), "handle": none, "offset": seg["offset"], "req_bytes": seg["length"],
        "ret_bytes": seg["length"], "errno": np.zeros(len(seg), dtype=np.int32), "aux": none, "call_id": none,
        "parent": none, "coll_seq": none}, schema=EVENT_SCHEMA)


@contextlib.contextmanager
def _c_stderr_silenced():
    """Descriptor 2 pointed at /dev/null for the block (C libraries write there directly), then restored."""
    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def darshan_trace(path: str | Path) -> Trace:
    """A Trace from a Darshan log: events from its DXT segments, counters in meta["darshan"]."""
    import darshan  # PyDarshan, imported only when a Darshan log is given

    failure = None
    with _c_stderr_silenced():  # libdarshan-util prints "Error: ..." lines of its own: ours below says it
        try:
            report = darshan.DarshanReport(str(path), read_all=False)
            report.read_all_generic_records()  # the counters; the DXT segments are read below, column-wise
            names = dict(report.name_records)
            file_ids = {rid: i for i, rid in enumerate(names)}
            problems: list[str] = []
            table = _dxt_events(report, file_ids, problems)
        except Exception as err:  # PyDarshan raises plain exceptions for unreadable logs
            failure = f"{path}: not a readable Darshan log ({err}); check it with darshan-parser"
    if failure:  # (raised here: a half-opened report is closed, quietly, as the except block ends)
        raise ValueError(failure)
    files = pa.Table.from_pylist([{"file_id": i, "path": names[rid], "dev": 0, "ino": 0}
                                  for rid, i in file_ids.items()], schema=FILE_SCHEMA)
    job = report.metadata.get("job", {})
    meta = {"source": "darshan", "path": str(path), "exe": report.metadata.get("exe", ""),
            "darshan": {"job": {k: v for k, v in job.items() if k != "metadata"}, "modules_present": list(report.modules),
                        **_counters(report, names)}}
    if table.num_rows == 0 and not problems:
        problems.append(f"{Path(path).name}: the log has no DXT trace segments (run with DXT_ENABLE_IO_TRACE=1 to "
                        "record them), so only its counters are reported; timelines, patterns and findings need events")
    problems.append("Darshan logs do not link POSIX calls to the MPI-IO calls that issued them: no cross-layer split")
    trace = Trace.from_tables(table, files, meta)
    trace.problems.extend(problems)
    return trace
