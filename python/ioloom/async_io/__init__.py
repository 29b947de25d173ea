"""ioloom.async_io: the Python side of libioloom-async (docs/async.md).

`open(path)` reads an output the library wrote: the global index `<directory>/<name>.json` and, for each writer,
its data file and the index of the blocks in it. Each block comes back as a read-only numpy array viewing the
data file (no copy), by variable, iteration and block (the client's rank among the clients):

    out = ioloom.async_io.open("out/cm1.json")
    theta = out.read("theta", iteration=3, block=0)      # numpy, shape and dtype of theta's layout
    for it in out.iterations("theta"): ...
    out["theta"][3]                                       # {block: array} of iteration 3

The reader (ioloom.async_io.reader) imports numpy when `open` is called, so that `ioloom async --help` does not;
the command line lives in ioloom.async_io.cli. A Python simulation writes through the library with
ioloom.async_io.client.Client."""
from __future__ import annotations

from pathlib import Path


class AsyncOutputError(ValueError):
    """An output that is not libioloom-async's, or is damaged."""


def open(path: str | Path):  # noqa: A001  (the reader's documented name, like io.open)
    """The output (ioloom.async_io.reader.Output) whose global index is `path`: its .json, or its directory."""
    from ioloom.async_io.reader import Output
    return Output(path)
