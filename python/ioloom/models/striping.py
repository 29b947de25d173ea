"""Striping and MPI-IO hint advice for one access pattern on a shared Lustre-like file system.

Sources: Wright 2014 Ch. 6 (stripe count against contention, Eqs. 6.2-6.6; stripes a multiple of the I/O
block; data sieving and collective buffering, Ch. 4), Wan et al. Sec. VI (64 MB chunks placed on target
(i + j) mod D_total).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from ioloom.models import _check, contention

MiB = 1024 * 1024
STRIPE_ALIGN = 64 * 1024     # Lustre stripe sizes are multiples of 64 KiB
WAN_CHUNK = 64 * MiB         # Wan: above 64 MB per process per target, throughput fell
PLFS_GOOD_LOAD = 3.0         # Wright Fig. 6.3: up to about 3 tasks per target still performed well


@dataclass(frozen=True)
class Pattern:
    """Who writes what: `writers` processes each write `bytes_per_writer` in requests of `request_size`."""
    writers: int
    bytes_per_writer: int
    request_size: int
    shared_file: bool = True
    contiguous: bool = True   # each writer's requests form one contiguous segment (SFSA non-strided)

    def __post_init__(self):
        _check.count("writers", self.writers)
        _check.count("bytes_per_writer", self.bytes_per_writer)
        _check.count("request_size", self.request_size)
        if self.request_size > self.bytes_per_writer:
            raise ValueError(f"request_size ({self.request_size}) must not exceed bytes_per_writer "
                             f"({self.bytes_per_writer})")


V = TypeVar("V")


@dataclass(frozen=True)
class Advice(Generic[V]):
    """A recommended value (a count, a size, a hint's text, a plan) and why."""
    value: V
    reason: str


@dataclass
class StripingAdvice:
    stripe_count: Advice[int]
    stripe_size: Advice[int]
    hints: dict[str, Advice]
    log_layer: Advice
    chunks: Advice
    expected_load: float
    plan: list[dict] = field(default_factory=list)


def stripe_size(pattern: Pattern) -> Advice[int]:
    """A multiple of the request size (Wright Sec. 6.1), at least 1 MiB, a multiple of 64 KiB, at most 64 MiB."""
    q = pattern.request_size
    size = q * max(1, math.ceil(MiB / q))
    size = math.ceil(size / STRIPE_ALIGN) * STRIPE_ALIGN
    if size > WAN_CHUNK:
        return Advice(WAN_CHUNK, f"requests of {_mib(q)} are larger than 64 MiB; Wan measured the best "
                                 "throughput per target at or below 64 MiB per process, so stripe at 64 MiB "
                                 "and split each request into 64 MiB chunks")
    if size % q == 0:
        why = f"{size // q} request(s) of {_mib(q)} fill one stripe exactly, so no request straddles two targets"
    else:
        why = (f"requests of {_mib(q)} cannot be aligned to the 64 KiB stripe granularity; {_mib(size)} is the "
               "smallest aligned size holding a whole request")
    return Advice(size, why)


def stripe_count(pattern: Pattern, targets: int, jobs: int, max_load: float, size: int) -> tuple[Advice[int], float]:
    """The largest count that the data can fill and that keeps the mean target load (Eqs. 6.2-6.4) with
    `jobs` such jobs at or below `max_load`."""
    if not pattern.shared_file:
        load = contention.plfs_load(pattern.writers * jobs, targets, stripes_per_file=1).d_load
        return Advice(1, f"{pattern.writers * jobs} files (one per writer, {jobs} job(s)) already spread over the "
                         f"targets; one stripe each gives a mean load of {load:.3f} (Eqs. 6.5-6.6 with R = 1), "
                         "more stripes only add collisions"), load
    total = pattern.writers * pattern.bytes_per_writer
    fill = max(1, min(targets, math.ceil(total / size)))
    if jobs == 1:
        return Advice(fill, f"alone on the file system the widest striping is fastest (Wright Fig. 6.2); "
                            f"{_mib(total)} per file fills {fill} stripe(s) of {_mib(size)}"), 1.0
    best = 1
    for r in range(1, fill + 1):
        if contention.ost_load([r] * jobs, targets)[-1].d_load <= max_load:
            best = r
    load = contention.ost_load([best] * jobs, targets)[-1].d_load
    return Advice(best, f"with {jobs} such jobs on {targets} targets, {best} stripe(s) each keeps the mean "
                        f"target load at {load:.3f} (Eqs. 6.2-6.4, limit {max_load:g}); wider striping adds "
                        "collisions that slow every job (Wright Table 6.3)"), load


def romio_hints(pattern: Pattern, count: int, size: int, nodes: int) -> dict[str, Advice]:
    """cb_nodes, cb_buffer_size, romio_cb_write and romio_ds_write for this pattern."""
    small = pattern.request_size < size
    cb_nodes = max(1, min(nodes, count))
    hints: dict[str, Advice] = {
        "cb_nodes": Advice(cb_nodes, f"one aggregator per stripe target (at most one per node, {nodes} node(s)) "
                                     "so each target is written by a single client without lock contention"),
        "cb_buffer_size": Advice(size, "one stripe per collective-buffering round, so each aggregator "
                                       "writes whole, aligned stripes"),
    }
    if pattern.shared_file and (small or not pattern.contiguous):
        hints["romio_cb_write"] = Advice("enable", f"requests of {_mib(pattern.request_size)} are "
                                         + ("smaller than a stripe" if small else "interleaved between writers")
                                         + ": collective buffering merges them into large aligned writes")
    else:
        hints["romio_cb_write"] = Advice("disable", "each writer already issues whole-stripe contiguous "
                                         "requests; aggregating them only adds a data exchange")
    hints["romio_ds_write"] = Advice("disable", "data sieving turns strided independent writes into locked "
                                     "read-modify-write cycles of 512 KiB; disabling it gave about 2x on "
                                     "FLASH-IO (Wright Figs. 4.9-4.10)" if not pattern.contiguous else
                                     "writes are contiguous, so sieving has no holes to fill and only adds "
                                     "locking")
    return hints


def log_layer(pattern: Pattern, targets: int, size: int) -> Advice:
    """Whether a PLFS-like log layer helps: it turns a shared file into one log per writer (Wright Ch. 5),
    which helps small or unaligned shared-file writes until the per-writer files overload the targets
    (Eqs. 6.5-6.6)."""
    load = contention.plfs_load(pattern.writers, targets).d_load
    if not pattern.shared_file:
        return Advice(False, "each writer already has its own file; a log layer would add an index and nothing else")
    aligned = pattern.request_size % size == 0 and pattern.contiguous
    if aligned:
        return Advice(False, "requests are stripe-aligned and contiguous; the shared file is already written "
                             "without lock conflicts")
    if load > PLFS_GOOD_LOAD:
        return Advice(False, f"{pattern.writers} writers would create files loading each target {load:.3f}x "
                             f"(Eq. 6.6), above the {PLFS_GOOD_LOAD:g} at which Wright saw performance fall")
    return Advice(True, f"unaligned or interleaved shared-file writes serialise on target locks; per-writer "
                        f"logs remove that, and {pattern.writers} writers load each target only {load:.3f}x "
                        f"(Eq. 6.6)")


def chunk_plan(pattern: Pattern, targets: int, show: int = 8, order: list[str] | None = None
               ) -> tuple[Advice, list[dict]]:
    """Wan Sec. VI: split each writer's data into 64 MiB chunks; chunk j of writer i goes to target
    (i + j) mod D_total, so consecutive chunks of a writer and equal chunks of neighbours never meet. With
    `order` (targets by preference, e.g. from a probe store), to the ((i + j) mod n)-th of them instead."""
    if pattern.bytes_per_writer <= WAN_CHUNK:
        return Advice(None, f"each writer writes {_mib(pattern.bytes_per_writer)}, not more than the 64 MiB "
                            "Wan found fast; no refactoring needed"), []
    chunks = math.ceil(pattern.bytes_per_writer / WAN_CHUNK)
    plan = [{"writer": i, "chunk": j, "offset": j * WAN_CHUNK,
             "bytes": min(WAN_CHUNK, pattern.bytes_per_writer - j * WAN_CHUNK),
             "target": order[(i + j) % len(order)] if order else (i + j) % targets}
            for i in range(min(show, pattern.writers)) for j in range(chunks)]
    rule = "the ((writer + chunk) mod n)-th preferred target" if order else "(writer + chunk) mod targets"
    return Advice({"chunk_size": WAN_CHUNK, "chunks_per_writer": chunks, "target": rule},
                  f"each writer writes {_mib(pattern.bytes_per_writer)}, above the 64 MiB per process where Wan "
                  f"saw throughput fall; {chunks} chunks of 64 MiB on rotated targets spread the load"), plan


def advise(pattern: Pattern, targets: int, jobs: int = 1, nodes: int | None = None, max_load: float = 1.25,
           order: list[str] | None = None) -> StripingAdvice:
    """All striping recommendations for `pattern` on `targets` storage targets shared with `jobs` jobs; `order`:
    the targets to place chunks on, by preference (a probe store's)."""
    targets = _check.count("targets", targets)
    jobs = _check.count("jobs", jobs)
    nodes = pattern.writers if nodes is None else _check.count("nodes", nodes)
    max_load = _check.positive("max_load", max_load)
    if max_load < 1:
        raise ValueError(f"max_load must be >= 1 (1 means no two jobs share a target), got {max_load}")
    size = stripe_size(pattern)
    count, load = stripe_count(pattern, targets, jobs, max_load, size.value)
    chunks, plan = chunk_plan(pattern, targets, order=order)
    layer = log_layer(pattern, targets, size.value)
    hints = with_log_layer(romio_hints(pattern, count.value, size.value, nodes), layer)
    return StripingAdvice(count, size, hints, layer, chunks, load, plan)


def with_log_layer(hints: dict[str, Advice], layer: Advice) -> dict[str, Advice]:
    """The hints made consistent with the log layer's advice: where the layer is advised, collective buffering is
    not (each rank's pieces go to its own log as they are; under two-phase an aggregator rewrites the whole span of
    the ranks' pieces in every call, and a log keeps all of it: docs/logfs-format.md, Hints)."""
    cb_write = hints["romio_cb_write"]
    if not layer.value or cb_write.value != "enable":
        return hints
    reason = ("over the log layer advised below (ioloom run --logfs, which disables it already) each rank writes "
              "its own pieces to its own log with nothing to merge; collective buffering would make aggregators "
              "log the whole span of the ranks' pieces in every call, several times the data "
              "(docs/logfs-format.md, Hints). Only on the plain shared file, without the layer: enable, since "
              + cb_write.reason)
    return {**hints, "romio_cb_write": Advice("disable", reason)}


def _mib(n: int) -> str:
    return f"{n / MiB:g} MiB" if n >= MiB else f"{n / 1024:g} KiB" if n >= 1024 else f"{n} B"
