"""Files ioloom writes for the user to open (reports, figure pages, JSON results, platform files): each is written
beside its final name and renamed into place, so a crash or a full disk never leaves a half-written file where the
user looks, and an earlier file of that name stays whole until the new one is complete."""
from __future__ import annotations

import json
from pathlib import Path


def save(content: str, path: Path | str) -> Path:
    """Writes `content` (UTF-8) to `path` through a temporary beside it; the parent is created if missing."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(content, encoding="utf-8")
    except BaseException:  # a full disk, an interrupt: the earlier file stays, no temporary is left behind
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(path)
    return path


def save_json(value, path: Path | str) -> Path:
    """`value` as indented JSON (see save)."""
    return save(json.dumps(value, indent=1), path)


def save_figure(figure, path: Path | str) -> Path:
    """A plotly figure as a self-contained HTML page (plotly.js inlined: it opens offline; see save)."""
    return save(figure.to_html(include_plotlyjs=True, full_html=True), path)
