"""A replay written out as a bench configuration (docs/replay.md, "As a bench configuration"): one TOML file that
holds a trace's replay (its manifest and every script) and the original's footprint (bytes per file, calls per
operation, the calls a replay does not make; each process's calls in order are its script's), so that `ioloom
bench replay CONFIG` can run it anywhere, time it and check it without the trace."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from ioloom import docfile, outputs
from ioloom.replay.compare import Footprint, script_sequences
from ioloom.replay.script import VERSION, build

CONFIG_VERSION = 2
KEY = "ioloom_replay_bench"  # the configuration's version: the key that says what the file is


class ConfigError(ValueError):
    """The file is not a replay configuration this ioloom reads; the message says what to do."""


def _value(value) -> str:
    """A TOML value: strings as JSON writes them (TOML's basic strings have the same escapes), lists and tables
    inline."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k), ensure_ascii=False)} = {_value(v)}"
                               for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    assert isinstance(value, (str, int)) and not isinstance(value, bool), value  # all a manifest holds, but None
    return json.dumps(value, ensure_ascii=False)


def _script(text: str) -> str:
    """A script as a TOML multi-line basic string, one line of it per line."""
    return '"""\n' + "\n".join(json.dumps(line, ensure_ascii=False)[1:-1] for line in text.splitlines()) + '\n"""'


def text(manifest: dict, scripts: dict[str, str], original: Footprint) -> str:
    lines = [f"# A replay of {manifest['trace']} for `ioloom bench replay` (docs/replay.md).",
             f"{KEY} = {CONFIG_VERSION}", "", "[manifest]"]
    lines += [f"{key} = {_value(value)}" for key, value in manifest.items() if value is not None]
    lines += ["", "[original]  # what `ioloom bench replay --check` holds the replay's trace to",
              f"bytes = {_value(original.bytes)}", f"calls = {_value(dict(sorted(original.calls.items())))}",
              f"processes = {original.processes}",
              f"not_reproduced = {_value(dict(sorted(original.not_reproduced.items())))}", "", "[scripts]"]
    lines += [f"{json.dumps(name)} = {_script(script)}" for name, script in scripts.items()]
    return "\n".join(lines) + "\n"


def write(trace_path: Path, path: Path, level: str = "posix") -> dict:
    """Writes the bench configuration of a trace's replay at a level to `path`; the manifest."""
    from ioloom.replay.compare import footprint
    from ioloom.stats_cli import load_or_exit

    manifest, scripts = build(trace_path, level)
    outputs.save(text(manifest, scripts, footprint(load_or_exit(trace_path), level)), path)
    return manifest


def load(path: Path) -> tuple[dict, dict[str, str], Footprint]:
    """A configuration's manifest, scripts and the original's footprint; ConfigError if it is not one."""
    raw = docfile.read(path, "replay configuration", ConfigError)
    if raw.get(KEY) != CONFIG_VERSION:
        raise ConfigError(f"{path}: not a replay configuration of version {CONFIG_VERSION} (no `{KEY} = "
                          f"{CONFIG_VERSION}`); write it again with `ioloom replay config`")
    try:
        manifest, scripts, original = raw["manifest"], raw["scripts"], raw["original"]
        whole = manifest["version"] == VERSION and all(p["script"] in scripts for p in manifest["processes"])
        footprint = Footprint(original["bytes"], Counter(original["calls"]), original["processes"],
                              script_sequences(manifest, scripts), Counter(original.get("not_reproduced", {})))
    except (KeyError, TypeError, ValueError, IndexError):
        whole = False
    if not whole:
        raise ConfigError(f"{path}: a replay configuration with missing or mismatched parts; write it again with "
                          "`ioloom replay config`")
    return {"mpi": None, **manifest}, scripts, footprint
