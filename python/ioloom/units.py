"""Sizes and lists of numbers as users write them, on command lines and in TOML or YAML files: one reading for
every command. k, m, g, t (and KiB, MiB, GiB, TiB) are powers of 1024, as ioloom-bench reads them; KB, MB, GB are
powers of 1000. An error is a UnitError (a ValueError) whose message names the option and what to write instead."""
from __future__ import annotations

import re
from collections.abc import Callable

UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1000, "kib": 1024, "m": 1024 ** 2, "mb": 1000 ** 2, "mib": 1024 ** 2,
         "g": 1024 ** 3, "gb": 1000 ** 3, "gib": 1024 ** 3, "t": 1024 ** 4, "tb": 1000 ** 4, "tib": 1024 ** 4}
SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*")


class UnitError(ValueError):
    """A size or a list the user wrote that cannot be read."""


def size(text: str | int, name: str) -> int:
    """'64MiB', '4m', '1.5GB' or a byte count (a string or an int from a file), as bytes; at least 1."""
    if isinstance(text, int) and not isinstance(text, bool) and text > 0:
        return text
    match = SIZE.fullmatch(str(text))
    bytes_ = int(float(match[1]) * UNITS[match[2].lower()]) if match and match[2].lower() in UNITS else 0
    if bytes_ < 1:
        raise UnitError(f"{name} {text!r}: use a size above 0 such as 4m, 512KiB, 1.5GB or 1048576")
    return bytes_


def numbers(text: str, name: str, kind: Callable[[str], float] = int, also: tuple = ()) -> list:
    """'1,4,16' -> [1, 4, 16]: values above 0 separated by commas, each read by `kind`;
    the values in `also` are accepted too (e.g. -1 for 'all targets')."""
    try:
        values = [kind(part.strip()) for part in text.split(",")]
    except ValueError:
        values = []
    if not values or any(v <= 0 and v not in also for v in values):
        raise UnitError(f"{name} {text!r}: give values above 0 separated by commas, e.g. 1,4,16 (sizes: 1m,4m)")
    return values


def sizes(text: str, name: str) -> list[int]:
    """'1m,4MiB' -> [1048576, 4194304]: sizes above 0 separated by commas."""
    return numbers(text, name, lambda part: size(part, name))
