"""What a probe store says: each target's distribution and best request size, the Pearson correlation between
targets with |r| >= 0.4 marked and clustered (Wan's threshold), multimodality, and the load a simulator or the
striping advice can use. Definitions: docs/probe.md, "What the report computes"."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

STRONG = 0.4          # Wan: targets whose throughputs correlate with |r| >= 0.4 move together
SLOW = 0.5            # a target whose median is below half the best target's is slow
MIN_SAMPLES = 8       # fewer measurements than this say nothing about modes
MODE_FLOOR = 0.1      # a density peak lower than this share of the highest is not a mode
CONFIG = ["request_bytes", "writers", "fsync"]


@dataclass
class Summary:
    config: dict                       # the configuration the per-target figures are taken from
    per_target: pd.DataFrame           # index target: samples, median, mean, min, max, cv, modes, best_request
    correlation: pd.DataFrame          # targets x targets, in cluster order
    clusters: list[list[str]]          # groups of targets with average r >= STRONG (singletons left out)
    slow: list[str] = field(default_factory=list)


def main_config(frame: pd.DataFrame) -> dict:
    """The configuration measured most often (ties: one writer, the largest request, fsync), the one whose
    rounds the correlation and the modes are computed on."""
    counts = frame.groupby(CONFIG).size().reset_index(name="n")
    counts = counts.sort_values(["n", "writers", "request_bytes", "fsync"], ascending=[False, True, False, False])
    best = counts.iloc[0]
    return {k: (bool(best[k]) if k == "fsync" else int(best[k])) for k in CONFIG}


def select(frame: pd.DataFrame, config: dict) -> pd.DataFrame:
    mask = np.logical_and.reduce([frame[k] == v for k, v in config.items()])
    return frame[mask]


def modes(values: np.ndarray) -> int:
    """How many modes the distribution of `values` has: the peaks of its Gaussian kernel density (Scott's
    bandwidth) higher than MODE_FLOOR of the highest; 1 for too few or identical values."""
    from scipy.signal import find_peaks
    from scipy.stats import gaussian_kde

    if values.size < MIN_SAMPLES or np.ptp(values) <= 1e-9 * max(abs(values.max()), 1.0):
        return 1
    grid = np.linspace(values.min() - np.ptp(values) * 0.2, values.max() + np.ptp(values) * 0.2, 512)
    density = gaussian_kde(values)(grid)
    peaks, _ = find_peaks(density, height=MODE_FLOOR * density.max())
    return max(1, int(peaks.size))


def request_medians(frame: pd.DataFrame, config: dict) -> pd.DataFrame:
    """Median throughput per target and request size, with the writers and fsync of `config`."""
    same = frame[(frame["writers"] == config["writers"]) & (frame["fsync"] == config["fsync"])]
    return same.groupby(["target", "request_bytes"])["throughput"].median().reset_index()


def best_requests(frame: pd.DataFrame, config: dict) -> pd.Series:
    """Per target, the request size with the highest median throughput (same writers and fsync as `config`)."""
    medians = request_medians(frame, config)
    return medians.loc[medians.groupby("target")["throughput"].idxmax()].set_index("target")["request_bytes"]


def correlation(frame: pd.DataFrame) -> pd.DataFrame:
    """Pearson r between targets over the rounds both were measured in (at least 3), NaN where undefined."""
    wide = frame.pivot_table(index=["campaign", "round"], columns="target", values="throughput", aggfunc="median")
    return wide.corr(method="pearson", min_periods=3)


def cluster(r: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Targets in dendrogram order, and the groups that move together: average r at least STRONG (average
    linkage on 1 - r, cut at 1 - STRONG; anti-correlated targets are far apart, they never slow down together)."""
    from scipy.cluster.hierarchy import fcluster, leaves_list, linkage
    from scipy.spatial.distance import squareform

    names = list(r.columns)
    if len(names) < 2:
        return names, []
    distance = 1.0 - r.fillna(0.0).to_numpy()
    np.fill_diagonal(distance, 0.0)
    tree = linkage(squareform(np.clip((distance + distance.T) / 2, 0.0, 2.0), checks=False), method="average")
    order = [names[i] for i in leaves_list(tree)]
    labels = fcluster(tree, t=1.0 - STRONG, criterion="distance")
    groups: dict[int, list[str]] = {}
    for name in order:
        groups.setdefault(int(labels[names.index(name)]), []).append(name)
    return order, [g for g in groups.values() if len(g) > 1]


def summarise(frame: pd.DataFrame, config: dict | None = None) -> Summary:
    config = config or main_config(frame)
    chosen = select(frame, config)
    stats = chosen.groupby("target")["throughput"].agg(samples="size", median="median", mean="mean", min="min",
                                                       max="max", std="std")
    stats["cv"] = stats["std"].fillna(0.0) / stats["mean"]
    stats["modes"] = chosen.groupby("target")["throughput"].agg(lambda v: modes(v.to_numpy()))
    stats["best_request"] = best_requests(frame, config).reindex(stats.index)
    r = correlation(chosen)
    order, groups = cluster(r)
    slow = sorted(stats.index[stats["median"] < SLOW * stats["median"].max()])
    return Summary(config, stats.drop(columns="std"), r.loc[order, order], groups, slow)


def background_modes(frame: pd.DataFrame, config: dict | None = None, steps: int = 10) -> list[list[float]]:
    """The share of its best each target delivered, pooled over targets, as `ioloom sim`'s background.modes:
    [capacity left, weight] per share rounded to the nearest 1/steps (each measurement divided by its target's
    highest; at least 1/steps, which the simulator needs above 0)."""
    chosen = select(frame, config or main_config(frame))
    share = chosen["throughput"] / chosen.groupby("target")["throughput"].transform("max")
    levels = np.clip(np.round(share.to_numpy() * steps), 1, steps).astype(int)
    counts = np.bincount(levels, minlength=steps + 1)
    return [[round(level / steps, 3), int(counts[level])] for level in range(1, steps + 1) if counts[level]]


def preferred_targets(summary: Summary) -> list[str]:
    """Targets to stripe over, best first, slow ones left out, and members of one correlated cluster spread apart
    (taken round robin across clusters), so that consecutive chunks land on targets that do not slow down
    together."""
    healthy = summary.per_target.drop(index=summary.slow).sort_values("median", ascending=False)
    group_of = {t: i for i, g in enumerate(summary.clusters) for t in g}
    queues: dict[object, list[str]] = {}
    for t in healthy.index:
        queues.setdefault(group_of.get(t, t), []).append(t)
    order: list[str] = []
    while any(queues.values()):
        for key in list(queues):
            if queues[key]:
                order.append(queues[key].pop(0))
    return order
