"""Darshan logs (.darshan) as ioloom traces, read with PyDarshan, so `ioloom report x.darshan` works on logs
people already have.

What a Darshan log holds and what we make of it:
- DXT segments (DXT_POSIX, DXT_MPIIO; present when the job ran with DXT enabled) become events: one read or
  write per segment with its rank, file, offset, length and times. DXT does not name the call (pwrite or
  write, collective or not) and does not link a POSIX access to the MPI-IO call that issued it, so the
  cross-layer split and the RIOT POSIX bandwidth are not available for Darshan logs.
- The counters of every module (POSIX, MPI-IO, STDIO, HDF5...) are kept in `Trace.meta["darshan"]`, summed
  per module and per file, and shown in the report.
"""
from __future__ import annotations

from pathlib import Path

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


def _dxt_events(report, file_ids: dict) -> list[dict]:
    rows = []
    for module, (layer, write_op, read_op) in DXT.items():
        if module not in report.modules:
            continue
        for record in report.records[module].to_df():
            rank = int(record["rank"])
            for op, segments in ((write_op, record["write_segments"]), (read_op, record["read_segments"])):
                for seg in segments.itertuples(index=False):
                    rows.append({"t_start": int(seg.start_time * NS), "t_end": int(seg.end_time * NS), "rank": rank,
                                 "pid": rank, "tid": rank, "layer": layer, "op": op,
                                 "file_id": file_ids[record["id"]], "handle": -1, "offset": int(seg.offset),
                                 "req_bytes": int(seg.length), "ret_bytes": int(seg.length), "errno": 0, "aux": -1,
                                 "call_id": -1, "parent": -1, "coll_seq": -1})
    return rows


def darshan_trace(path: str | Path) -> Trace:
    """A Trace from a Darshan log: events from its DXT segments, counters in meta["darshan"]."""
    import darshan  # PyDarshan, imported only when a Darshan log is given

    try:
        report = darshan.DarshanReport(str(path), read_all=True)
    except Exception as err:  # PyDarshan raises plain exceptions for unreadable logs
        raise ValueError(f"{path}: not a readable Darshan log ({err}); check it with darshan-parser") from err
    names = dict(report.name_records)
    file_ids = {rid: i for i, rid in enumerate(names)}
    events = _dxt_events(report, file_ids)
    files = pa.Table.from_pylist([{"file_id": i, "path": names[rid], "dev": 0, "ino": 0}
                                  for rid, i in file_ids.items()], schema=FILE_SCHEMA)
    table = pa.Table.from_pylist(events, schema=EVENT_SCHEMA) if events else EVENT_SCHEMA.empty_table()
    job = report.metadata.get("job", {})
    meta = {"source": "darshan", "path": str(path), "exe": report.metadata.get("exe", ""),
            "darshan": {"job": {k: v for k, v in job.items() if k != "metadata"}, "modules_present": list(report.modules),
                        **_counters(report, names)}}
    problems = [] if events else [
        f"{Path(path).name}: the log has no DXT trace segments (run with DXT_ENABLE_IO_TRACE=1 to record them), "
        "so only its counters are reported; timelines, patterns and findings need events"]
    problems.append("Darshan logs do not link POSIX calls to the MPI-IO calls that issued them: no cross-layer split")
    trace = Trace.from_tables(table, files, meta)
    trace.problems.extend(problems)
    return trace
