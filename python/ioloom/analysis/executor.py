"""Runs the map step (`partition.summarise`) over a trace's streams: in this process, in local worker
processes (the default), or on a Dask cluster (`scheduler="tcp://host:port"`).

Streams carry a reader closure, so they travel to workers with cloudpickle (which Dask uses too); each worker
decodes its own stream, and only the small summaries come back.
"""
from __future__ import annotations

import os
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, as_completed, wait

import cloudpickle

from ioloom.analysis.partition import Options, Partial, summarise


def _run_pickled(payload: bytes) -> Partial:
    stream, options, share = cloudpickle.loads(payload)
    return summarise(stream, options, share)


def _local(streams, options: Options, share: float, workers: int) -> list[Partial]:
    if workers <= 1 or len(streams) <= 1:
        return [summarise(s, options, share) for s in streams]
    # At most `workers` streams in flight: Executor.map would pickle every stream up front.
    results: list[Partial | None] = [None] * len(streams)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        running = {}
        for i, stream in enumerate(streams):
            if len(running) >= workers:
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    results[running.pop(future)] = future.result()
            running[pool.submit(_run_pickled, cloudpickle.dumps((stream, options, share)))] = i
        for future in as_completed(running):
            results[running[future]] = future.result()
    return results


def _dask(streams, options: Options, share: float, address: str) -> list[Partial]:
    from distributed import Client  # imported here: Dask is only needed with --scheduler

    try:
        client = Client(address, timeout="5s")
    except OSError as err:
        raise ConnectionError(f"cannot reach the Dask scheduler at {address} ({err}); start one with "
                              f"`dask scheduler` and `dask worker {address}`, or drop --scheduler") from err
    with client:
        futures = client.map(summarise, streams, options=options, budget_share=share, pure=False)
        return client.gather(futures)


def map_streams(trace, options: Options, scheduler: str | None = None,
                workers: int | None = None) -> tuple[list[Partial], str]:
    """Summaries of every stream, and a description of where they were computed."""
    streams = list(trace.streams)
    share = 1.0 / max(1, len(streams))
    if scheduler:
        return _dask(streams, options, share, scheduler), f"dask cluster at {scheduler}"
    workers = workers if workers is not None else min(len(streams), os.cpu_count() or 1)
    kind = "local processes" if workers > 1 and len(streams) > 1 else "this process"
    return _local(streams, options, share, workers), f"{kind} ({max(1, min(workers, len(streams)))} workers)"
