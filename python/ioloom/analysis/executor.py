"""Runs the map step (`partition.summarise`) over a trace's streams: in this process, in local worker
processes (the default), or on a Dask cluster (`scheduler="tcp://host:port"`).

Streams carry a reader closure, so they travel to workers with cloudpickle (which Dask uses too); each worker
decodes its own stream, and only the small summaries come back. On a Dask cluster a stream of more than
`Options.split_rows` events is also cut into parts (ranges of its chunks, `StreamReader.parts`) summarised by
different workers and joined in order (`partition.join_parts`), with the result of one worker reading it all.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, as_completed, wait
from dataclasses import dataclass
from pathlib import Path

import cloudpickle
import numpy as np
import pyarrow as pa

from ioloom.analysis.partition import Options, Partial, bad_cuts, join_parts, summarise, summarise_part
from ioloom.trace.model import RANGE_ROWS
from ioloom.trace.varint import THREADS_VARIABLE


@dataclass
class StreamFile:
    """A stream of an on-disk trace that the worker reads from its own file, so that only a path travels to
    it, not the stream's bytes. The worker decodes it on the whole trace's clock (its epoch) and file table: a
    file is the same entry when its path and device/inode match, or by path alone when its inode was never
    learnt (as `open_trace` merges them)."""
    path: str
    pid: int
    rank: int
    info: dict
    epoch_ns: int
    file_ids: dict  # (path, dev, ino) of the whole trace's file table -> its file_id
    path_ids: dict  # path -> the file_id an entry with no inode joins

    def reader(self):
        from ioloom.trace.reader import StreamReader
        from ioloom.trace.stream_file import read_stream_file

        stream = read_stream_file(Path(self.path))
        lookup = np.full(max(stream.files, default=-1) + 1, -1, np.int32)
        for local, key in stream.files.items():
            lookup[local] = self.file_ids.get(key, self.path_ids.get(key[0], -1))
        return StreamReader(stream, lookup, self.epoch_ns, self.rank, self.pid)

    def read(self, columns=None) -> pa.Table:
        return self.reader().read(columns)

    def ranges(self, columns=None, rows: int = RANGE_ROWS) -> Iterator[pa.Table]:
        return self.reader().ranges(columns, rows)

    @classmethod
    def of(cls, trace) -> list[StreamFile] | None:
        """The trace's streams as StreamFiles, or None when they do not come from stream files."""
        paths = [s.info.get("path") for s in trace.streams]
        if trace.meta.get("epoch_ns") is None or not all(p and Path(p).is_file() for p in paths):
            return None
        rows = list(zip(*(trace.files.column(c).to_pylist() for c in ("file_id", "path", "dev", "ino"))))
        file_ids = {(path, dev, ino): i for i, path, dev, ino in rows}
        path_ids = {}
        for i, path, dev, ino in rows:  # the reader's rule: an entry with an inode, else the first of the path
            if dev or ino or path not in path_ids:
                path_ids[path] = i
        return [cls(p, s.pid, s.rank, s.info, trace.meta["epoch_ns"], file_ids, path_ids)
                for p, s in zip(paths, trace.streams)]


@dataclass
class StreamPart:
    """A part of a stream file (`StreamReader.parts`): its worker decodes only the chunks that hold the part's
    events. `after`: where the part ends (the earliest start after it; None for the stream's last part)."""
    stream: StreamFile
    part: tuple

    @property
    def rank(self) -> int:
        return self.stream.rank

    @property
    def pid(self) -> int:
        return self.stream.pid

    @property
    def info(self) -> dict:
        return self.stream.info

    @property
    def after(self) -> int | None:
        return self.part[1]

    def ranges(self, columns=None, rows: int = RANGE_ROWS) -> Iterator[pa.Table]:
        return self.stream.reader().ranges(columns, rows, self.part)

    def joined(self, later: StreamPart) -> StreamPart:
        """This part and the one after it as one part."""
        return StreamPart(self.stream, (self.part[0], *later.part[1:]))


def plan_parts(stream: StreamFile, rows: int, part_rows: int) -> list[StreamPart]:
    """`stream` cut into parts of at least `part_rows` events (of ranges of `rows`)."""
    return [StreamPart(stream, part) for part in stream.reader().parts(rows, part_rows)]


def split_map(streams: list, options: Options, share: float, submit: Callable, gather: Callable) -> list[Partial]:
    """Summaries of every stream, a stream of more than `options.split_rows` events in parts. submit(function,
    *arguments) starts a task and gather(tasks) waits for their results (a Dask client's, or plain calls).
    Parts that cannot be summarised apart (partition.bad_cuts) are joined and summarised again."""
    big = [i for i, s in enumerate(streams) if isinstance(s, StreamFile) and _events(s) > options.split_rows]
    planned = gather([submit(plan_parts, streams[i], options.range_rows, options.split_rows) for i in big])
    parts = dict(zip(big, planned))
    whole = {i: submit(summarise, s, options, share) for i, s in enumerate(streams) if i not in parts}
    running = {i: [submit(summarise_part, p, options, share) for p in ps] for i, ps in parts.items()}
    results = dict(zip(whole, gather(list(whole.values()))))
    for i, tasks in running.items():
        results[i] = _joined(parts[i], gather(tasks), options, share, submit, gather)
    return [results[i] for i in range(len(streams))]


def _joined(parts: list[StreamPart], summaries: list, options: Options, share: float, submit: Callable,
            gather: Callable) -> Partial:
    """join_parts of a stream's parts, after joining those across a bad cut and summarising them again."""
    while bad := set(bad_cuts(summaries)):
        merged: list[tuple[StreamPart, object]] = []
        for i, (part, summary) in enumerate(zip(parts, summaries)):
            if i in bad:
                merged[-1] = (merged[-1][0].joined(part), None)
            else:
                merged.append((part, summary))
        parts = [part for part, _ in merged]
        again = {i: submit(summarise_part, part, options, share) for i, (part, summary) in enumerate(merged)
                 if summary is None}
        done = dict(zip(again, gather(list(again.values()))))
        summaries = [done.get(i, summary) for i, (_, summary) in enumerate(merged)]
    return join_parts(summaries)


def _run_pickled(payload: bytes) -> Partial:
    stream, options, share = cloudpickle.loads(payload)
    return summarise(stream, options, share)


def _share_cpus(workers: int) -> None:
    """In a worker process: the trace decoder's threads are this worker's share of the CPUs, not all of them."""
    os.environ.setdefault(THREADS_VARIABLE, str(max(1, len(os.sched_getaffinity(0)) // workers)))


def _events(stream) -> int:
    return int(stream.info.get("events") or 0)


def _local(streams, options: Options, share: float, workers: int, progress: Callable[[int], None]) -> list[Partial]:
    if workers <= 1 or len(streams) <= 1:
        serial = []
        for stream in streams:
            serial.append(summarise(stream, options, share))
            progress(_events(stream))
        return serial
    # At most `workers` streams in flight: Executor.map would pickle every stream up front.
    results: dict[int, Partial] = {}  # stream's position -> its partial
    with ProcessPoolExecutor(max_workers=workers, initializer=_share_cpus, initargs=(workers,)) as pool:
        running: dict[Future, int] = {}
        for i, stream in enumerate(streams):
            if len(running) >= workers:
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    done = running.pop(future)
                    results[done] = future.result()
                    progress(_events(streams[done]))
            running[pool.submit(_run_pickled, cloudpickle.dumps((stream, options, share)))] = i
        for future in as_completed(running):
            results[running[future]] = future.result()
            progress(_events(streams[running[future]]))
    return [results[i] for i in range(len(streams))]


def connect(address: str):
    """A Dask client of the scheduler at `address` (--scheduler); an address that cannot be reached, or is not
    an address, is the user's error, told in one line."""
    from distributed import Client  # imported here: Dask is only needed with --scheduler

    try:
        return Client(address, timeout="5s")
    except (OSError, ValueError) as err:
        raise ConnectionError(f"cannot reach the Dask scheduler at {address} ({err}); give its address as "
                              f"tcp://HOST:PORT, start one with `dask scheduler` and `dask worker ADDRESS`, or drop "
                              "--scheduler") from None


def _dask(streams, options: Options, share: float, address: str) -> list[Partial]:
    with connect(address) as client:
        return split_map(streams, options, share, lambda function, *args: client.submit(function, *args, pure=False),
                         client.gather)


def plan(trace, remote: bool = False) -> list:
    """What the workers get: the stream files by path when the trace has them (several streams, or workers
    elsewhere: `remote`), else the streams themselves (in-memory traces travel with cloudpickle)."""
    streams = list(trace.streams)
    return (StreamFile.of(trace) if len(streams) > 1 or remote else None) or streams


def map_streams(streams: list, options: Options, scheduler: str | None = None, workers: int | None = None,
                progress: Callable[[int], None] | None = None) -> tuple[list[Partial], str]:
    """Summaries of every stream (see `plan`), and a description of where they were computed. `progress` is
    called with each finished stream's number of events."""
    share = 1.0 / max(1, len(streams))
    progress = progress or (lambda done: None)
    if scheduler:
        partials = _dask(streams, options, share, scheduler)
        progress(sum(_events(s) for s in streams))
        return partials, f"dask cluster at {scheduler}"
    workers = workers if workers is not None else min(len(streams), os.cpu_count() or 1)
    kind = "local processes" if workers > 1 and len(streams) > 1 else "this process"
    return _local(streams, options, share, workers, progress), f"{kind} ({max(1, min(workers, len(streams)))} workers)"
