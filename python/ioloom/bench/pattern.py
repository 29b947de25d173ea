"""The bytes and layout ioloom-bench writes (docs/bench.md, "Data pattern" and "Layout"), as numpy arithmetic.

The C program (native/bench/fill.c, pattern.c) and this module implement the same definitions, so a test, or
another part of ioloom (logfs, the tracer), can check any file the benchmark wrote without trusting it.
"""
from __future__ import annotations

import numpy as np

SALT = np.uint64(0x5A5A0000A5A50000)
PATTERNS = ("strided", "contiguous", "fpp", "nfiles")


def expected_bytes(offsets: np.ndarray, writers: np.ndarray | int) -> np.ndarray:
    """The byte at each file offset when `writers` (rank per offset, or one rank) wrote it."""
    offsets = np.asarray(offsets, dtype=np.uint64)
    writers = np.asarray(writers, dtype=np.uint64)
    words = ((offsets >> np.uint64(3)) | ((writers + np.uint64(1)) << np.uint64(44))) ^ SALT
    return ((words >> ((offsets & np.uint64(7)) * np.uint64(8))) & np.uint64(0xFF)).astype(np.uint8)


def file_names(path: str, pattern: str, nranks: int, segments: int) -> list[str]:
    """The files of a pattern, in file-index order (pattern.c: bench_file_name)."""
    if pattern in ("strided", "contiguous"):
        return [path]
    if pattern == "fpp":
        return [f"{path}.{rank:08d}" for rank in range(nranks)]
    return [f"{path}.{rank:08d}.{seg:08d}" for rank in range(nranks) for seg in range(segments)]


def file_size(pattern: str, nranks: int, block: int, segments: int) -> int:
    """Bytes in each file after a complete write phase."""
    return {"strided": block * segments * nranks, "contiguous": block * segments * nranks,
            "fpp": block * segments, "nfiles": block}[pattern]


def writers(pattern: str, nranks: int, block: int, segments: int, file_index: int) -> np.ndarray:
    """Which rank wrote each byte of file `file_index` (the inverse of the layout)."""
    offsets = np.arange(file_size(pattern, nranks, block, segments), dtype=np.uint64)
    if pattern == "strided":  # segment s holds one block of every rank: offset (s*N + r)*B
        return (offsets // np.uint64(block)) % np.uint64(nranks)
    if pattern == "contiguous":  # rank r owns [r*S*B, (r+1)*S*B)
        return offsets // np.uint64(block * segments)
    owner = file_index if pattern == "fpp" else file_index // segments
    return np.full(offsets.shape, owner, dtype=np.uint64)


def expected_file(pattern: str, nranks: int, block: int, segments: int, file_index: int = 0) -> np.ndarray:
    """The whole content file `file_index` must have: the oracle the tests compare files against."""
    who = writers(pattern, nranks, block, segments, file_index)
    return expected_bytes(np.arange(who.size, dtype=np.uint64), who)
