"""Figures that hold on a noisy, shared machine: medians with their range over interleaved rounds, ratios taken
round by round (each round's run against the baseline run next to it), and a distribution-free confidence
interval of a median from order statistics. The bench commands report these rather than best-of figures or
means, which one disturbed round moves either way. Standard library only: the bench commands' help must not
load numpy."""
from __future__ import annotations

import math
import os
import statistics

# Published figures take at least this many interleaved rounds; fewer only when asked for a quick look.
PUBLISHED_ROUNDS = 10


def load_average() -> str:
    """The machine's load average over 1, 5 and 15 minutes ("0.52, 0.41, 0.30"), printed beside every timing so a
    reader can tell a quiet machine from a busy one."""
    return ", ".join(f"{figure:.2f}" for figure in os.getloadavg())


def spread(values) -> dict:
    """{"median", "min", "max", "rounds"} of per-round values."""
    values = [float(v) for v in values]
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "rounds": values}


def per_round(numerators, denominators) -> list[float]:
    """numerator / denominator of each round: a ratio to the baseline measured in the same round."""
    return [float(a) / float(b) for a, b in zip(numerators, denominators, strict=True)]


def median_interval(values, level: float = 0.95) -> dict:
    """The median of `values` and a distribution-free interval for it: the order statistics (k-th smallest,
    k-th largest) with the largest k whose coverage, 1 - 2 P(Binomial(n, 1/2) < k), is at least `level`. With
    too few values for that level, [min, max] and the (smaller) coverage it has, e.g. 87.5% for 4 values:
    {"median", "low", "high", "confidence", "n"}."""
    x = sorted(float(v) for v in values)
    n = len(x)
    if n == 0:
        raise ValueError("no values: a median needs at least one round")

    def coverage(k: int) -> float:
        return 1.0 - 2.0 * sum(math.comb(n, i) for i in range(k)) / 2.0 ** n
    k = 1
    while k + 1 <= (n + 1) // 2 and coverage(k + 1) >= level:
        k += 1
    return {"median": statistics.median(x), "low": x[k - 1], "high": x[n - k],
            "confidence": coverage(k), "n": n}


def rounds_allowed(rounds: int, quick: bool, option: str = "--reps") -> str | None:
    """Why `rounds` is too few for published figures (None when it is enough, or when `quick`)."""
    if quick or rounds >= PUBLISHED_ROUNDS:
        return None
    return (f"{option} {rounds}: figures to publish take at least {PUBLISHED_ROUNDS} interleaved rounds on a shared "
            f"machine; add --quick for a quick look with fewer")
