"""`ioloom probe report`'s HTML page, in the main report's style and as self-contained (plotly.js inlined): the
per-target table, histograms per target, throughput per hour of the day, violins per day, the correlation
matrix with |r| >= 0.4 marked and its clusters, throughput against request size, and the advice."""
from __future__ import annotations

import html
import time

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ioloom.analysis.metrics import human_bytes
from ioloom.probe.analysis import STRONG, Summary, background_modes, preferred_targets, request_medians, select
from ioloom.report import _card, _plot, _section, page
from ioloom.report.figures import frame_html

SECTIONS = (("summary", "Targets"), ("time", "Over time"), ("correlation", "Correlation"),
            ("requests", "Request size"), ("advice", "Advice"))
MBPS = 1e6


def _config_text(config: dict) -> str:
    return (f"{human_bytes(config['request_bytes'])} requests, {config['writers']} writer(s), "
            + ("with fsync" if config["fsync"] else "without fsync (the page cache may have absorbed the writes)"))


def _table(s: Summary) -> str:
    t = s.per_target
    flags = [", ".join((["slow"] if name in s.slow else []) + ([f"{int(m)} modes"] if m > 1 else []))
             for name, m in zip(t.index, t["modes"])]
    return frame_html(pd.DataFrame({
        "target": t.index, "samples": t["samples"].astype(int), "median MB/s": t["median"] / MBPS,
        "min MB/s": t["min"] / MBPS, "max MB/s": t["max"] / MBPS, "CV": t["cv"],
        "best request": [human_bytes(int(v)) for v in t["best_request"]], "flags": flags}))


def _histograms(chosen: pd.DataFrame) -> go.Figure:
    names = sorted(chosen["target"].unique())[:24]
    cols = min(4, len(names))
    rows = -(-len(names) // cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=names)
    for i, name in enumerate(names):
        fig.add_trace(go.Histogram(x=chosen.loc[chosen["target"] == name, "throughput"] / MBPS, nbinsx=20,
                                   name=name, showlegend=False), row=i // cols + 1, col=i % cols + 1)
    fig.update_xaxes(title_text="MB/s")
    return fig.update_layout(height=220 * rows, margin=dict(t=40, b=30), template="plotly_white")


def _by_hour(chosen: pd.DataFrame) -> go.Figure:
    local = pd.to_datetime(chosen["time_ns"], unit="ns", utc=True)
    fig = go.Figure()
    for name, part in chosen.assign(hour=local.dt.hour).groupby("target"):
        fig.add_trace(go.Box(x=part["hour"], y=part["throughput"] / MBPS, name=str(name)))
    return fig.update_layout(boxmode="group", xaxis_title="hour of the day (UTC)", yaxis_title="MB/s",
                             template="plotly_white", height=380)


def _by_day(chosen: pd.DataFrame) -> go.Figure:
    day = pd.to_datetime(chosen["time_ns"], unit="ns", utc=True).dt.strftime("%Y-%m-%d")
    fig = go.Figure()
    for name, part in chosen.assign(day=day).groupby("day"):
        fig.add_trace(go.Violin(y=part["throughput"] / MBPS, name=str(name), box_visible=True,
                                meanline_visible=True, points="all"))
    return fig.update_layout(xaxis_title="day (UTC), all targets", yaxis_title="MB/s", template="plotly_white",
                             height=380, showlegend=False)


def _heatmap(s: Summary) -> go.Figure:
    r = s.correlation
    values = r.to_numpy()
    text = np.where(np.abs(values) >= STRONG, np.char.add(np.round(values, 2).astype(str), " ●"),
                    np.round(values, 2).astype(str))
    fig = go.Figure(go.Heatmap(z=values, x=list(r.columns), y=list(r.index), zmin=-1, zmax=1, colorscale="RdBu",
                               reversescale=True, text=text, texttemplate="%{text}", colorbar_title="r"))
    return fig.update_layout(template="plotly_white", height=max(320, 32 * len(r) + 120),
                             yaxis_autorange="reversed")


def _requests(frame: pd.DataFrame, config: dict) -> go.Figure:
    medians = request_medians(frame, config)
    fig = go.Figure()
    for name, part in medians.groupby("target"):
        fig.add_trace(go.Scatter(x=part["request_bytes"], y=part["throughput"] / MBPS, mode="lines+markers",
                                 name=str(name)))
    return fig.update_layout(xaxis_type="log", xaxis_title="request size (bytes)", yaxis_title="median MB/s",
                             template="plotly_white", height=380)


def _advice(frame: pd.DataFrame, s: Summary) -> str:
    preferred = preferred_targets(s)
    modes = background_modes(frame, s.config)
    items = [f"<li><b>Stripe over</b>, in this order: {html.escape(', '.join(preferred))} "
             "(<code>ioloom advise striping --probe</code> places Wan's 64 MiB chunks on them).</li>"]
    if s.slow:
        items.append(f"<li><b>Avoid</b> {html.escape(', '.join(s.slow))}: median below half the best target's.</li>")
    for group in s.clusters:
        items.append(f"<li><b>Move together</b> (average r &ge; {STRONG}): {html.escape(', '.join(group))}; "
                     "spread consecutive stripes across such groups.</li>")
    toml = "[background]\nmodes = " + str(modes).replace(" ", "")
    return (f"<ul>{''.join(items)}</ul><h3>As background load for ioloom sim</h3>"
            f"<pre>{html.escape(toml)}</pre>")


def render(frame: pd.DataFrame, s: Summary, store_name: str) -> str:
    chosen = select(frame, s.config)
    first, last = (time.strftime("%Y-%m-%d %H:%M", time.gmtime(t / 1e9)) for t in (frame["time_ns"].min(),
                                                                                   frame["time_ns"].max()))
    cards = "".join(_card(v, k) for v, k in ((len(s.per_target), "targets"), (len(frame), "measurements"),
                                             (frame.groupby(["campaign", "round"]).ngroups, "rounds"),
                                             (len(s.clusters), "correlated groups"), (len(s.slow), "slow targets")))
    lead = f"Figures below use {html.escape(_config_text(s.config))}; measured {first} to {last} UTC."
    body = "".join([
        _section("summary", "Targets", lead, f'<div class="cards">{cards}</div>' + _table(s)
                 + _plot(_histograms(chosen), "histograms")),
        _section("time", "Over time", "Throughput per hour of the day (UTC) and per day.",
                 _plot(_by_hour(chosen), "by-hour") + _plot(_by_day(chosen), "by-day")),
        _section("correlation", "Correlation", f"Pearson r between targets over the rounds both were measured in; "
                 f"● marks |r| &ge; {STRONG} (Wan's threshold), targets in cluster order.",
                 _plot(_heatmap(s), "correlation-matrix")),
        _section("requests", "Request size", "Median throughput per request size; the best per target is in the "
                 "table above.", _plot(_requests(frame, s.config), "request-sizes")),
        _section("advice", "Advice", "What to do with these targets.", _advice(frame, s)),
    ])
    return page("ioloom probe report", store_name, SECTIONS, body)
