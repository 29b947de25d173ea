"""`ioloom sim run --html PATH`: a simulation's figures on one self-contained page in the main report's style
(report.page, plotly.js inlined): the jobs' bench figures, per-operation latency histograms, per-rank and
per-target throughput over time, and the Pearson correlation matrix of the targets' throughput (|r| >= 0.4 is
what Wan keeps)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ioloom.report import _card, _plot, _section, page
from ioloom.report.figures import frame_html
from ioloom.sim import results
from ioloom.sim.engine import Outcome
from ioloom.sim.workload import KINDS

SECTIONS = (("summary", "Jobs"), ("latency", "Latency"), ("time", "Over time"), ("correlation", "Correlation"))
MIBPS = float(1 << 20)
MOST_RANKS = 256  # ranks drawn in the per-rank heatmap (evenly chosen beyond)


def _jobs_table(docs: list[dict], names: list[str]) -> str:
    rows = [{"job": name, "op": p["op"], "rep": p["rep"], "ranks": d["nranks"], "start s": d["simulator"]["start"],
             "MiB": p["bytes"] / MIBPS, "span s": p["span"], "effective MiB/s": p["effective_bw"] / MIBPS,
             "raw MiB/s": p["raw_bw"] / MIBPS, "access MiB/s": p["access_bw"] / MIBPS}
            for name, d in zip(names, docs) for p in d["phases"]]
    return frame_html(pd.DataFrame(rows))


def _latency(o: Outcome) -> go.Figure:
    names = {v: k for k, v in KINDS.items() if k != "barrier"}
    took = o.times[:, 1] - o.times[:, 0]
    fig = go.Figure()
    for kind, name in names.items():
        mine = took[o.workload.ops["kind"] == kind]
        if mine.size:
            fig.add_trace(go.Histogram(x=mine * 1e3, name=f"{name} ({mine.size:,})", opacity=0.7, nbinsx=60))
    return fig.update_layout(barmode="overlay", xaxis_title="ms per call", yaxis_title="calls", yaxis_type="log",
                             template="plotly_white", height=380)


def _heatmap(edges: np.ndarray, series: np.ndarray, label: str, names) -> go.Figure:
    fig = go.Figure(go.Heatmap(z=series / MIBPS, x=(edges[:-1] + edges[1:]) / 2, y=[str(n) for n in names],
                               colorbar=dict(title="MiB/s")))  # names as categories: one row each, no gaps
    return fig.update_layout(xaxis_title="simulated s", yaxis_title=label, template="plotly_white",
                             height=min(900, 200 + 12 * len(series)))


def _correlation(busy: np.ndarray, matrix: np.ndarray) -> go.Figure:
    names = [str(t) for t in busy]
    fig = go.Figure(go.Heatmap(z=matrix, x=names, y=names, zmin=-1, zmax=1, colorscale="RdBu", reversescale=True))
    return fig.update_layout(xaxis_title="target", yaxis_title="target", template="plotly_white", height=520)


def render(o: Outcome, names: list[str], title: str) -> str:
    """The page of an outcome whose jobs are bench patterns or a job mix."""
    docs = [results.job_document(o, j) for j in range(len(names))]
    edges, targets = results.target_series(o)
    _, ranks = results.rank_series(o)
    shown = np.unique(np.linspace(0, ranks.shape[0] - 1, min(MOST_RANKS, ranks.shape[0])).astype(int))
    busy, matrix = results.target_correlation(targets)
    moved = np.flatnonzero(targets.sum(axis=1) > 0)
    strong = int((np.abs(matrix[np.triu_indices(len(busy), 1)]) >= 0.4).sum()) if len(busy) > 1 else 0
    cards = "".join(_card(v, k) for v, k in ((len(names), "jobs"), (f"{o.workload.ops.size:,}", "operations"),
                                             (f"{o.pieces.size:,}", "flows"),
                                             (f"{o.simulated_time:.4g} s", "simulated")))
    body = "".join((
        _section("summary", "Jobs", "Each job's phases as ioloom bench io reports them.",
                 f'<div class="cards">{cards}</div>' + _jobs_table(docs, names)),
        _section("latency", "Latency", "Time per call, per kind of call (barriers left out).",
                 _plot(_latency(o), "latency-histogram")),
        _section("time", "Over time", "Throughput per rank (jobs in order; at most 256 drawn) and per target that "
                 "moved data; a call's or flow's bytes spread over its duration.",
                 _plot(_heatmap(edges, ranks[shown], "rank", shown), "rank-series")
                 + _plot(_heatmap(edges, targets[moved], "target", moved), "target-series")),
        _section("correlation", "Correlation", f"Pearson r between the throughput series of the {len(busy)} targets "
                 f"that moved data; {strong} pairs have |r| >= 0.4.",
                 _plot(_correlation(busy, matrix), "correlation-matrix")),
    ))
    return page("ioloom sim", title, SECTIONS, body)
