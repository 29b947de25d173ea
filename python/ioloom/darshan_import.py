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
import re
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from ioloom.trace.model import EVENT_SCHEMA, FILE_SCHEMA, Trace

NS = 1_000_000_000
DXT = {"DXT_POSIX": ("posix", "write", "read"), "DXT_MPIIO": ("mpiio", "MPI_File_write", "MPI_File_read")}
COUNTED_BY = {"DXT_POSIX": "POSIX", "DXT_MPIIO": "MPI-IO"}  # the counter module that counts every DXT module's calls
COUNTERS = ("BYTES_READ", "BYTES_WRITTEN", "READS", "WRITES", "OPENS")
FCOUNTERS = ("F_READ_TIME", "F_WRITE_TIME", "F_META_TIME")


def _prefix(module: str) -> str:
    return module.replace("-", "")  # "MPI-IO" counters are named MPIIO_*


def _counter(counters: pd.DataFrame, prefix: str, name: str) -> pd.Series | None:
    """A counter summed over its per-kind variants: MPIIO_READS is MPIIO_INDEP_READS + _COLL_ + _SPLIT_ + _NB_,
    MPIIO_OPENS is MPIIO_INDEP_OPENS + MPIIO_COLL_OPENS; POSIX_READS is itself."""
    found = counters.filter(regex=rf"^{prefix}_((INDEP|COLL|SPLIT|NB)_)?{name}$")
    return found.clip(lower=0).sum(axis=1) if found.shape[1] else None


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
        column = _counter(counters, p, name)
        if column is not None:
            out[name.lower()] = column
    for name in FCOUNTERS:
        if f"{p}_{name}" in fcounters:
            out[name.lower()[2:] + "_s"] = fcounters[f"{p}_{name}"].clip(lower=0).to_numpy()
    out.insert(0, "module", module)
    return out


def _counters(report, names: dict, nprocs: int) -> dict:
    """Per module totals and per file rows of the common counters. A record of rank -1 is a file every process
    of the job opened (Darshan reduces those to one shared record): it counts all `nprocs` ranks."""
    frames = [f for f in (_module_frame(report, m) for m in report.modules if not m.startswith("DXT")) if f is not None]
    if not frames:
        return {"modules": [], "files": []}
    table = pd.concat(frames, ignore_index=True).fillna(0)
    table["path"] = table["id"].map(names).fillna("<unknown>")
    numeric = [c for c in table.columns if c not in ("module", "rank", "id", "path")]
    modules = table.groupby("module")[numeric].sum().reset_index()
    modules.insert(1, "records", table.groupby("module").size().to_numpy())
    files = table.groupby(["module", "path"])[numeric].sum().reset_index()
    ranks = table.groupby(["module", "path"])["rank"].agg(lambda r: nprocs if (r < 0).any() else r.nunique())
    files.insert(2, "ranks", ranks.to_numpy())
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


def _dxt_events(report, file_ids: dict, problems: list[str], segments_read: dict) -> pa.Table:
    """One event per DXT segment (POSIX, then MPI-IO; per record its writes, then its reads), built column-wise.
    segments_read[(module, "reads" | "writes")] counts every segment read."""
    parts = []  # (segments, rank, file_id, layer, op): one run of events that share all but the segment
    for module, (layer, write_op, read_op) in DXT.items():
        if module not in report.modules:
            continue
        for record_id, rank, writes, reads in _dxt_records(report, module, problems):
            for key, segs in (("writes", writes), ("reads", reads)):
                segments_read[module, key] = segments_read.get((module, key), 0) + len(segs)
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
def _c_stderr_captured():
    """Descriptor 2 pointed at a temporary file for the block (C libraries write there directly), then restored;
    yields a list that holds what was written once the block ends."""
    sys.stderr.flush()
    said: list[str] = []
    with tempfile.TemporaryFile() as sink:
        saved = os.dup(2)
        try:
            os.dup2(sink.fileno(), 2)
            yield said
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            said.append(sink.read().decode(errors="replace"))


# darshan-util's words for a module written by a newer Darshan than it reads: darshan-logutils.c for every
# module, darshan-dxt-logutils.c for the DXT ones (which names the module with a space: "DXT POSIX")
NEWER_FORMAT = (re.compile(r"invalid (?P<module>\S+) module log format version \(expected (?P<reads>\d+), "
                           r"got (?P<got>\d+)\)"),
                re.compile(r"Invalid (?P<module>DXT \S+) module version number \(got (?P<got>\d+)\)"))


def _newer_formats(said: str) -> list[str]:
    """One line per module the installed darshan-util refused because a newer Darshan wrote it."""
    import darshan

    found = {m["module"].replace(" ", "_"): (m["got"], m.groupdict().get("reads"))
             for pattern in NEWER_FORMAT for m in pattern.finditer(said)}
    return [f"{module}: the log's records are format {got}, written by a Darshan newer than the installed "
            f"PyDarshan {darshan.__version__}" + (f" (which reads format {reads})" if reads else "")
            + ", so they are not imported; read the log with a newer PyDarshan (pip install -U darshan) or that "
            "Darshan's darshan-parser" for module, (got, reads) in found.items()]


def _coverage(segments_read: dict, modules: list[dict], present) -> list[dict]:
    """Per DXT module the log has and direction: its segments against the operations the counters count (DXT
    stops recording when its per-process buffer is full; the counters count every call)."""
    counted = {row["module"]: row for row in modules}
    return [{"module": module, "direction": key, "segments": int(segments_read.get((module, key), 0)),
             "operations": int(counted[COUNTED_BY[module]].get(key, 0))}
            for module in DXT if module in present and COUNTED_BY[module] in counted for key in ("writes", "reads")
            if segments_read.get((module, key)) or counted[COUNTED_BY[module]].get(key)]


def _partial(coverage: list[dict]) -> list[str]:
    return [f"{c['module']}: the log holds {c['segments']:,} {c['direction'][:-1]} segments of the "
            f"{c['operations']:,} {COUNTED_BY[c['module']]} {c['direction']} its counters count "
            f"({1 - c['segments'] / c['operations']:.1%} missing): DXT keeps a bounded number of segments per "
            "process (2 MiB of them, about 65,000, unless Darshan was built with a larger --with-mod-mem), so events, "
            "timelines, patterns and findings cover only the first part of the run; the counters are complete"
            for c in coverage if c["segments"] < c["operations"]]


def darshan_trace(path: str | Path) -> Trace:
    """A Trace from a Darshan log: events from its DXT segments, counters in meta["darshan"]."""
    import darshan  # PyDarshan, imported only when a Darshan log is given

    failure = None
    with _c_stderr_captured() as said:  # libdarshan-util prints "Error: ..." lines of its own: ours say it
        try:
            report = darshan.DarshanReport(str(path), read_all=False)
            report.read_all_generic_records()  # the counters; the DXT segments are read below, column-wise
            names = dict(report.name_records)
            file_ids = {rid: i for i, rid in enumerate(names)}
            problems: list[str] = []
            segments_read: dict = {}
            table = _dxt_events(report, file_ids, problems, segments_read)
        except Exception as err:  # PyDarshan raises plain exceptions for unreadable logs
            failure = f"{path}: not a readable Darshan log ({err}); check it with darshan-parser"
    newer = _newer_formats("".join(said))
    if failure:  # (raised here: a half-opened report is closed, quietly, as the except block ends)
        raise ValueError(f"{path}: {newer[0]}" if newer else failure)
    if newer:  # a DXT module of a newer format stops the reading: say why instead of "truncated or damaged"
        problems[:] = [p for p in problems if p.split(":")[0] not in {line.split(":")[0] for line in newer}] + newer
    files = pa.Table.from_pylist([{"file_id": i, "path": names[rid], "dev": 0, "ino": 0}
                                  for rid, i in file_ids.items()], schema=FILE_SCHEMA)
    job = report.metadata.get("job", {})
    counters = _counters(report, names, int(job.get("nprocs") or 0))
    coverage = _coverage(segments_read, counters["modules"], report.modules) if not newer else []
    problems += _partial(coverage)
    meta = {"source": "darshan", "path": str(path), "exe": report.metadata.get("exe", ""),
            "darshan": {"job": {k: v for k, v in job.items() if k != "metadata"},
                        "modules_present": list(report.modules), "dxt_coverage": coverage, **counters}}
    if table.num_rows == 0 and not problems:
        problems.append(f"{Path(path).name}: the log has no DXT trace segments (run with DXT_ENABLE_IO_TRACE=1 to "
                        "record them), so only its counters are reported; timelines, patterns and findings need events")
    problems.append("Darshan logs do not link POSIX calls to the MPI-IO calls that issued them: no cross-layer split")
    trace = Trace.from_tables(table, files, meta)
    trace.problems.extend(problems)
    return trace
