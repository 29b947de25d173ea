"""A figure that may be unknown, as text output writes it: its value in a format (divided by a scale, with a unit
after it), or "-" when it is None. One writer for every command that prints such figures."""
from __future__ import annotations


def shown(value: float | None, fmt: str = ",", scale: float = 1, unit: str = "") -> str:
    """`shown(1234)` '1,234'; `shown(0.5, ".1f", unit="%")` '0.5%'; `shown(3 << 20, ".3f", 2**20)` '3.000';
    `shown(None, ...)` '-'."""
    if value is None:
        return "-"
    return f"{value if scale == 1 else value / scale:{fmt}}{unit}"


def percent(value: float | None) -> str:
    """A percentage to one decimal ('97.5%'), or '-'."""
    return shown(value, ".1f", unit="%")
