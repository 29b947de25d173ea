"""Running programs over logfs: the environment that preloads the layer and declares the mounts."""
from __future__ import annotations

import os
from pathlib import Path

from ioloom import paths


def library() -> Path:
    return paths.native_lib("ioloom-logfs")


def roots_value(mounts: dict[str | os.PathLike, list[str | os.PathLike]]) -> str:
    """IOLOOM_LOGFS_ROOTS for {mount: [extra backend, ...]}."""
    parts = []
    for mount, extras in mounts.items():
        parts.append(os.fspath(mount) + ("=" + ",".join(os.fspath(e) for e in extras) if extras else ""))
    return ":".join(parts)


def env(mounts: dict[str | os.PathLike, list[str | os.PathLike]] | None = None, preload_first: str | None = None,
        **settings: str) -> dict[str, str]:
    """Environment additions: LD_PRELOAD (after `preload_first`, e.g. the tracer), the mounts, and any
    IOLOOM_LOGFS_<NAME> settings given as keyword arguments (fanout="node", chunk="1M")."""
    preload = [p for p in (preload_first, os.fspath(library())) if p]
    out = {"LD_PRELOAD": ":".join(preload)}
    if mounts:
        out["IOLOOM_LOGFS_ROOTS"] = roots_value(mounts)
    out.update({f"IOLOOM_LOGFS_{k.upper()}": v for k, v in settings.items()})
    return out
