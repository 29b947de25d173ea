"""`ioloom export TRACE --format perfetto|parquet|csv|folded`: a trace in formats other tools open, or folded.

perfetto: Chrome trace-event JSON (ui.perfetto.dev, chrome://tracing). One process per rank, one thread per
traced thread; POSIX calls nest under the MPI-IO call that issued them because they run inside it on the
same thread. parquet / csv: events.<ext> (every event column, op and layer as text, plus the file path) and
files.<ext>. Streams are written one range of events at a time (`Stream.ranges`), so memory stays that of
one range whatever the trace's size. folded: the trace as one file folded by the predictor's grammar, which
`open_trace` (and so every `ioloom` command) reads as the trace itself (docs/trace-format.md, "Folded traces").
"""
from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path

import typer

from ioloom import progress
from ioloom.stats_cli import QUIET_OPTION, load_or_exit


class Format(StrEnum):
    perfetto = "perfetto"
    parquet = "parquet"
    csv = "csv"
    folded = "folded"


def _plain_columns(table):
    """Dictionary columns as plain strings (CSV cannot hold dictionaries; readers prefer plain text)."""
    import pyarrow as pa

    for i, f in enumerate(table.schema):
        if pa.types.is_dictionary(f.type):
            table = table.set_column(i, f.name, table.column(i).cast(pa.string()))
    return table


def _with_paths(table, files):
    """The events with each one's file path (null where it has no file), looked up column-wise."""
    import pyarrow.compute as pc

    rows = pc.index_in(table.column("file_id"), value_set=files.column("file_id"))
    return table.append_column("path", pc.take(files.column("path"), rows))


def _nothing(done: int) -> None:
    """The progress callback when nobody watches."""


def tables(trace, out: Path, fmt: Format, progress=_nothing) -> list[Path]:
    """events.<fmt> and files.<fmt> in directory `out`; `progress` is called with each range's events."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    out.mkdir(parents=True, exist_ok=True)
    events_path, files_path = out / f"events.{fmt.value}", out / f"files.{fmt.value}"
    writer = None
    try:
        for table in (table for stream in trace.streams for table in stream.ranges()):
            part = _with_paths(_plain_columns(table), trace.files)
            if writer is None:
                writer = (pq.ParquetWriter(events_path, part.schema) if fmt is Format.parquet
                          else pacsv.CSVWriter(events_path, part.schema))
            writer.write_table(part)
            progress(len(part))
    finally:
        if writer is not None:
            writer.close()
    if writer is None:
        events_path.write_text("")
    files = trace.files
    (pq.write_table if fmt is Format.parquet else pacsv.write_csv)(files, files_path)
    return [events_path, files_path]


def _perfetto_events(stream, paths: dict):
    label = f"rank {stream.rank}" if stream.rank >= 0 else f"pid {stream.pid}"
    yield {"name": "process_name", "ph": "M", "pid": stream.pid, "args": {"name": label}}
    yield {"name": "process_sort_index", "ph": "M", "pid": stream.pid, "args": {"sort_index": stream.rank}}
    columns = ["t_start", "t_end", "tid", "layer", "op", "file_id", "offset", "req_bytes", "ret_bytes", "errno",
               "call_id", "parent", "coll_seq"]
    for row in (row for table in stream.ranges(columns) for row in _plain_columns(table).to_pylist()):
        args = {"layer": row["layer"], "file": paths.get(row["file_id"]), "offset": row["offset"],
                "bytes": row["ret_bytes"], "requested": row["req_bytes"]}
        args.update({k: row[k] for k in ("errno", "call_id", "parent", "coll_seq") if row[k] not in (-1, 0)})
        yield {"name": row["op"], "cat": row["layer"], "ph": "X", "ts": row["t_start"] / 1000,
               "dur": max(row["t_end"] - row["t_start"], 0) / 1000, "pid": stream.pid, "tid": row["tid"],
               "args": args}


def perfetto(trace, out: Path, progress=_nothing) -> list[Path]:
    """Chrome trace-event JSON, written event by event; `progress` is called with each stream's events."""
    paths = dict(zip(trace.files.column("file_id").to_pylist(), trace.files.column("path").to_pylist()))
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w") as f:
        f.write('{"displayTimeUnit": "ns", "traceEvents": [\n')
        first = True
        for stream in trace.streams:
            for event in _perfetto_events(stream, paths):
                f.write(("" if first else ",\n") + json.dumps(event, separators=(",", ":")))
                first = False
            progress(int(stream.info.get("events") or 0))
        f.write("\n]}\n")
    return [out]


def fold(trace, out: Path, quantum: int, progress=_nothing) -> Path:
    """The folded trace (ioloom.trace.folded) in directory `out`, which `ioloom` commands open as a trace."""
    from ioloom.trace import folded

    out.mkdir(parents=True, exist_ok=True)
    path = out / folded.NAME
    header = folded.write(trace, path, quantum, progress)
    events = sum(s["events"] for s in header["streams"])
    typer.echo(f"folded: {events:,} events in {path.stat().st_size:,} bytes "
               f"({path.stat().st_size / max(events, 1):.2f} per event)", err=True)
    return path


def command(trace: Path = typer.Argument(..., help="Trace directory (ioloom run -o DIR)."),
            fmt: Format = typer.Option(..., "--format", "-f", help="perfetto, parquet, csv or folded."),
            output: Path = typer.Option(None, "-o", "--output",
                                        help="Output file (perfetto) or directory (parquet, csv, folded); "
                                             "default: next to the trace."),
            time_quantum: int = typer.Option(1, "--time-quantum-ns", min=1,
                                             help="folded: store times in units of this many ns (1: exact; "
                                                  "more rounds them down, and only them)."),
            quiet: bool = QUIET_OPTION) -> None:
    """Export a trace: Perfetto/Chrome trace JSON, Parquet/CSV tables of events and files, or a folded trace
    (the predictor's grammar over its events; `ioloom` opens it as the trace)."""
    loaded = load_or_exit(trace)
    with progress.events(progress.trace_events(loaded), f"exporting {trace.name}", quiet) as advance:
        if fmt is Format.perfetto:
            written = perfetto(loaded, output or trace.with_name(trace.name + ".perfetto.json"), advance)
        elif fmt is Format.folded:
            written = [fold(loaded, output or trace.with_name(trace.name + "-folded"), time_quantum, advance)]
        else:
            written = tables(loaded, output or trace.with_name(trace.name + f"-{fmt.value}"), fmt, advance)
    for path in written:
        typer.echo(str(path))
    for problem in loaded.problems:
        typer.echo(f"ioloom: trace problem: {problem}", err=True)
