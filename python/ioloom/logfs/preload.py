"""Running programs over logfs: the environment that preloads the layer and declares the mounts, and has collective
MPI-IO leave each rank's data to the rank itself (no two-phase exchange: each rank's data goes to its own log)."""
from __future__ import annotations

import os
from pathlib import Path

from ioloom import paths

# Collective buffering off in ROMIO (MPICH's MPI-IO, Open MPI's romio component), read from this file.
ROMIO_HINTS = Path(__file__).with_name("romio-hints")


def own_log_collectives() -> dict[str, str]:
    """Settings that make collective MPI-IO calls do each rank's I/O in the rank itself, without the two-phase
    exchange through aggregators: over logfs each rank's data then goes straight to its own log, as PLFS's MPI-IO
    driver did (Open MPI's OMPIO: the `individual` fcoll component; ROMIO: collective buffering disabled by
    hints). ROMIO's hints also turn off data sieving on writes: it wrote a noncontiguous view's pieces as one
    read-modify-write of their whole span under a record lock, which a log stores as new data (the holes' old
    bytes again) and the layer takes as a sync point. A setting already in the environment is kept; a hint the
    program passes to MPI_File_open overrides the file's."""
    wanted = {"OMPI_MCA_fcoll": "individual", "ROMIO_HINTS": str(ROMIO_HINTS)}
    return {k: v for k, v in wanted.items() if k not in os.environ}


def library() -> Path:
    return paths.native_lib("ioloom-logfs")


def roots_value(mounts: dict[str | os.PathLike, list[str | os.PathLike]]) -> str:
    """IOLOOM_LOGFS_ROOTS for {mount: [extra backend, ...]}."""
    parts = []
    for mount, extras in mounts.items():
        parts.append(os.fspath(mount) + ("=" + ",".join(os.fspath(e) for e in extras) if extras else ""))
    return ":".join(parts)


def env(mounts: dict[str | os.PathLike, list[str | os.PathLike]] | None = None, preload_first: str | None = None,
        two_phase: bool = False, **settings: str) -> dict[str, str]:
    """Environment additions: LD_PRELOAD (after `preload_first`, e.g. the tracer), the mounts, own_log_collectives()
    unless `two_phase` (MPI's own collective buffering kept), and any IOLOOM_LOGFS_<NAME> settings given as keyword
    arguments (fanout="node", chunk="1M")."""
    preload = [p for p in (preload_first, os.fspath(library())) if p]
    out = {"LD_PRELOAD": ":".join(preload), **({} if two_phase else own_log_collectives())}
    if mounts:
        out["IOLOOM_LOGFS_ROOTS"] = roots_value(mounts)
    out.update({f"IOLOOM_LOGFS_{k.upper()}": v for k, v in settings.items()})
    return out
