"""The probe store: a directory of Parquet files, one per round of a campaign, each written to a temporary name,
fsynced and renamed into place, so a campaign that is interrupted (or a disk that fills) keeps every earlier round
whole. Every file carries the format's name and version in its schema metadata (docs/probe.md, "Store").

`COLUMNS` is the one statement of the columns: the Arrow schema, the docs' table (checked by a test) and the
readers all come from it.
"""
from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa

FORMAT, VERSION = "ioloom-probe", 1
# name: (Arrow type, meaning)
COLUMNS: dict[str, tuple[pa.DataType, str]] = {
    "campaign": (pa.string(), "the campaign's id (its start, UTC, and the host)"),
    "round": (pa.int32(), "round number within the campaign, from 0"),
    "time_ns": (pa.int64(), "when the measurement started, ns since the epoch (UTC); simulated targets: the "
                            "campaign's start plus the simulated time"),
    "host": (pa.string(), "the machine that ran the measurement"),
    "target": (pa.string(), "the target's name as given (a directory, `ost:N@DIR`, `sim:N`)"),
    "kind": (pa.string(), "dir, ost or sim"),
    "request_bytes": (pa.int64(), "bytes per write request"),
    "writers": (pa.int32(), "processes writing to the target at once, each its own file"),
    "fsync": (pa.bool_(), "each writer called fsync before its clock stopped (else the page cache may have "
                          "absorbed the writes)"),
    "bytes": (pa.int64(), "bytes written by all writers"),
    "seconds": (pa.float64(), "from the first writer's first write to the last writer's end (after fsync)"),
    "throughput": (pa.float64(), "bytes / seconds, bytes per second"),
    "slowest_writer_seconds": (pa.float64(), "the longest single writer's time, first write to end"),
}
SCHEMA = pa.schema([(name, kind) for name, (kind, _) in COLUMNS.items()],
                   metadata={b"format": FORMAT.encode(), b"version": str(VERSION).encode()})


class StoreError(ValueError):
    """A store that cannot be read or written; the message names the file and what to do."""


def append(store: Path, campaign: str, round_number: int, rows: list[dict]) -> Path:
    """Writes one round's rows as a new file of the store, atomically; returns its path."""
    import pyarrow.parquet as pq

    store.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    final = store / f"round-{campaign}-{round_number:06d}.parquet"
    tmp = final.with_suffix(".parquet.tmp")
    try:
        pq.write_table(table, tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        tmp.replace(final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(store, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return final


def _read_one(path: Path) -> pa.Table:
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowInvalid) as e:
        raise StoreError(f"{path}: not a readable Parquet file ({e}); move it out of the store and run again") from None
    meta = schema.metadata or {}
    if meta.get(b"format") != FORMAT.encode():
        raise StoreError(f"{path}: not a file of an ioloom probe store; move it out of the store and run again")
    version = meta.get(b"version", b"?").decode(errors="replace")
    if version != str(VERSION):
        raise StoreError(f"{path}: probe store version {version}, this ioloom reads version {VERSION}: "
                         "use the ioloom that wrote it, or a newer one")
    return pq.read_table(path, schema=SCHEMA)


def load(store: Path):
    """Every measurement of the store as a pandas DataFrame (columns: COLUMNS), oldest first."""
    store = Path(store)
    if not store.is_dir():
        raise StoreError(f"{store}: no probe store there; make one with `ioloom probe run -o {store} TARGET...`")
    files = sorted(store.glob("round-*.parquet"))
    if not files:
        raise StoreError(f"{store}: the store holds no measurement yet; run `ioloom probe run -o {store} TARGET...`")
    frame = pa.concat_tables([_read_one(f) for f in files]).to_pandas()
    return frame.sort_values(["time_ns", "target"], kind="stable").reset_index(drop=True)
