"""Event tables built by hand, in the trace contract's schema: for unit tests of the arithmetic (every
number is known in advance) and for converters. Times are in ns; each rank is its own process (pid 1000+rank).
"""
from __future__ import annotations

import pyarrow as pa

from ioloom.trace.model import EVENT_SCHEMA, FILE_SCHEMA, Trace

F_SETLKW = 7
F_WRLCK, F_UNLCK = 1, 2


class Builder:
    """Append calls one by one; `trace()` returns an in-memory Trace."""

    def __init__(self):
        self.rows: list[dict] = []
        self.paths: dict[str, int] = {}
        self.next_call: dict[int, int] = {}

    def file(self, path: str) -> int:
        return self.paths.setdefault(path, len(self.paths))

    def call(self, rank: int, layer: str, op: str, t0: int, t1: int, file_id: int = -1, offset: int = -1,
             size: int = -1, ret: int | None = None, aux: int = -1, parent: int = -1, coll_seq: int = -1,
             pid: int | None = None) -> int:
        """Record one call; returns its call_id on the MPI-IO layer, else -1."""
        pid = 1000 + rank if pid is None else pid
        call_id = -1
        if layer == "mpiio":
            call_id = self.next_call.get(pid, 0)
            self.next_call[pid] = call_id + 1
        self.rows.append({"t_start": t0, "t_end": t1, "rank": rank, "pid": pid, "tid": pid, "layer": layer,
                          "op": op, "file_id": file_id, "handle": 3, "offset": offset, "req_bytes": size,
                          "ret_bytes": (max(size, 0) if ret is None else ret), "errno": 0, "aux": aux,
                          "call_id": call_id, "parent": parent, "coll_seq": coll_seq})
        return call_id

    def sieved_write(self, rank: int, t0: int, file_id: int, offset: int, size: int, buffer: int,
                     step: int = 1000) -> int:
        """An independent MPI_File_write_at done by data sieving: lock, read, write, unlock per buffer."""
        cycles = max(1, -(-size // buffer))
        t_end = t0 + step * (4 * cycles + 1)
        call = self.call(rank, "mpiio", "MPI_File_write_at", t0, t_end, file_id, offset, size)
        t = t0 + step // 2
        for i in range(cycles):
            lo = offset + i * buffer
            for op, aux, length in (("fcntl", F_SETLKW | F_WRLCK << 16, buffer), ("pread", -1, buffer),
                                    ("pwrite", -1, buffer), ("fcntl", F_SETLKW | F_UNLCK << 16, buffer)):
                self.call(rank, "posix", op, t, t + step - 1, file_id, lo, length, aux=aux, parent=call,
                          ret=0 if op == "fcntl" else length)
                t += step
        return call

    def plain_write(self, rank: int, t0: int, t1: int, file_id: int, offset: int, size: int,
                    mpi_op: str | None = "MPI_File_write_at", coll_seq: int = -1) -> None:
        """A write at `offset`: through MPI-IO with one POSIX pwrite under it, or (mpi_op None) POSIX only."""
        parent = -1
        if mpi_op:
            parent = self.call(rank, "mpiio", mpi_op, t0, t1, file_id, offset, size, coll_seq=coll_seq)
        self.call(rank, "posix", "pwrite", t0 + 1, t1 - 1, file_id, offset, size, parent=parent)

    def trace(self) -> Trace:
        events = pa.Table.from_pylist(self.rows, schema=EVENT_SCHEMA) if self.rows else EVENT_SCHEMA.empty_table()
        files = pa.Table.from_pylist([{"file_id": i, "path": p, "dev": 1, "ino": 100 + i}
                                      for p, i in self.paths.items()], schema=FILE_SCHEMA)
        return Trace.from_tables(events, files, {"synthetic": True})
