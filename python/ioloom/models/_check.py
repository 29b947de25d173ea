"""Argument checks shared by the models: refuse impossible input with a message naming the parameter."""
from __future__ import annotations

import math


def positive(name: str, value: float, *, allow_zero: bool = False) -> float:
    """`value` as a float, refused unless it is finite and > 0 (or >= 0 when allow_zero)."""
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite number {bound}, got {value!r}")
    return float(value)


def count(name: str, value: int, *, minimum: int = 1) -> int:
    """`value` as an int, refused unless it is a whole number >= minimum."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value < minimum:
        raise ValueError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    return int(value)


def probability(name: str, value: float) -> float:
    """`value` as a float, refused unless it lies in [0, 1]."""
    if not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
    return float(value)


def stripe_request(name: str, value: int, targets: int) -> int:
    """A stripe request: a whole number of targets between 1 and the number of targets there are."""
    value = count(name, value)
    if value > targets:
        raise ValueError(f"{name}={value} asks for more targets than exist (targets={targets}); "
                         f"use at most {targets}")
    return value
