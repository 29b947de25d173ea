"""The files users write to describe a run (sim's platform files and job mixes, bench sweep's grids): YAML when the
name ends in .yaml or .yml, else TOML, read the same way by every command that takes one."""
from __future__ import annotations

import tomllib
from pathlib import Path

YAML_SUFFIXES = (".yaml", ".yml")


def read(path: str | Path, what: str, error: type[Exception]) -> dict:
    """The parsed file `what` (e.g. "platform file"), a table of keys; else one `error` that names the file and says
    what is wrong with it."""
    import yaml  # only commands that read a file pay for the import

    is_yaml = Path(path).suffix in YAML_SUFFIXES
    try:
        text = Path(path).read_text()
        doc = yaml.safe_load(text) if is_yaml else tomllib.loads(text)
    except OSError as e:
        raise error(f"cannot read {what} {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise error(f"{what} {path} is not UTF-8 text (byte {e.start}); save it as UTF-8") from None
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as e:
        raise error(f"{what} {path} is not valid {'YAML' if is_yaml else 'TOML'}: {' '.join(str(e).split())}") \
            from None
    if not isinstance(doc, dict):
        raise error(f"{what} {path} must be a table of sections and keys, not {type(doc).__name__}")
    return doc
