"""The report's plots, one function per figure, each from an `Analysis` (plotly figures; drawn offline).

Big traces are drawn from the analysis's even subsample and from the MPI-IO calls kept in detail; each
figure says in its title when it shows a subset.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from ioloom.analysis.metrics import MB, NS
from ioloom.analysis.ops import KINDS, LAYERS, READ, WRITE
from ioloom.analysis.range_tables import CHILD_CATEGORIES, SIZE_BIN_NAMES

COLORS = {"read": "#2a9d8f", "write": "#e76f51", "lock": "#6d597a", "unlock": "#b56576", "other": "#c9ccd1",
          "mpiio": "#264653"}
# one colour per layer and direction, the same in every plot that draws them
SERIES_COLORS = {("mpiio", "read"): "#1d6f66", ("mpiio", "write"): "#a63c1f", ("posix", "read"): "#2a9d8f",
                 ("posix", "write"): "#e76f51", ("stdio", "read"): "#7cb518", ("stdio", "write"): "#e9a23b"}
VISIBLE = 600  # a timeline's bars are at least 1/VISIBLE of its time axis wide, so that calls of microseconds show
MAX_BARS = 4000     # bars per timeline figure; beyond this the figure shows the first calls and says so
MAX_POINTS = 6000   # points per access map
LAYER_LABELS = {"mpiio": "MPI-IO", "stdio": "stdio", "posix": "POSIX", "process": "process"}
MAX_FILES = 4       # access maps drawn (the files that moved the most bytes)
LAYOUT = dict(template="plotly_white", margin=dict(l=70, r=20, t=50, b=45), height=380,
              font=dict(family="Inter, Segoe UI, Helvetica, Arial, sans-serif", size=12),
              legend=dict(orientation="h", y=1.02, yanchor="bottom", x=1, xanchor="right"))


def _layout(fig: go.Figure, **extra) -> go.Figure:
    """The shared look, with per-figure settings on top."""
    fig.update_layout(**{**LAYOUT, **extra})
    return fig


def _seconds(ns) -> np.ndarray:
    return np.asarray(ns, dtype=np.float64) / NS


def _bars(y, t_start, t_end, name, color, hover, showlegend=True, min_s: float = 0.0) -> go.Bar:
    """Horizontal bars from t_start to t_end (ns) on categorical rows y, at least `min_s` wide (min_width)."""
    width = np.maximum(_seconds(np.asarray(t_end) - np.asarray(t_start)), min_s)
    return go.Bar(y=y, base=_seconds(t_start), x=width, orientation="h", name=name, marker_color=color,
                  hovertext=hover, hoverinfo="text", showlegend=showlegend, width=0.8)


def min_width(*frames: pd.DataFrame) -> float:
    """The narrowest bar a timeline of these calls (t_start, t_end in ns) draws, in seconds: 1/VISIBLE of its
    span; shorter calls would be narrower than a pixel and vanish (their hover text gives their own time)."""
    starts = [int(f["t_start"].min()) for f in frames if len(f)]
    ends = [int(f["t_end"].max()) for f in frames if len(f)]
    return (max(ends) - min(starts)) / NS / VISIBLE if starts else 0.0


def _series(layer: str, kind: str) -> tuple[str, str]:
    """A layer and direction's name and colour in the plots."""
    return f"{LAYER_LABELS.get(layer, layer)} {kind}", SERIES_COLORS.get((layer, kind), COLORS["other"])


def _app_samples(a) -> pd.DataFrame:
    """Sampled calls on the application's files (not libraries, /dev/shm segments, pipes)."""
    return a.samples[~a.samples["file_id"].isin(a.options.excluded_files)]


def _limit_note(shown: int, total: int) -> str:
    return "" if shown >= total else f" (first {shown:,} of {total:,} calls)"


def decomposition_timeline(a) -> go.Figure | None:
    """Per rank: each MPI-IO call, and under it the POSIX calls it issued coloured by category (Figs. 4.9-4.10)."""
    calls = a.calls.sort_values("t_start").head(MAX_BARS // 5)
    if calls.empty:
        return None
    kids = a.children.merge(calls[["rank", "call_id"]], on=["rank", "call_id"]).head(MAX_BARS)
    fig = go.Figure()
    shortest = min_width(calls, kids)
    hover = [f"rank {r} {op}<br>{b:,} bytes, {d * 1e3:.3f} ms<br>file {a.paths.get(f, f)}" for r, op, b, d, f in
             zip(calls["rank"], calls["op"], calls["bytes"], _seconds(calls["t_end"] - calls["t_start"]),
                 calls["file_id"])]
    fig.add_trace(_bars([f"rank {r} MPI-IO" for r in calls["rank"]], calls["t_start"], calls["t_end"], "MPI-IO call",
                        COLORS["mpiio"], hover, min_s=shortest))
    for code, name in enumerate(CHILD_CATEGORIES):
        part = kids[kids["category"] == code]
        if part.empty:
            continue
        hover = [f"rank {r} POSIX {name}<br>offset {o:,}, {b:,} bytes, {d * 1e6:.1f} µs" for r, o, b, d in
                 zip(part["rank"], part["offset"], part["bytes"], _seconds(part["t_end"] - part["t_start"]))]
        fig.add_trace(_bars([f"rank {r} POSIX" for r in part["rank"]], part["t_start"], part["t_end"], name,
                            COLORS[name], hover, min_s=shortest))
    rows = sorted({f"rank {r} {lane}" for r in calls["rank"] for lane in ("MPI-IO", "POSIX")},
                  key=lambda s: (int(s.split()[1]), s.endswith("POSIX")), reverse=True)
    total = int(a.splits["calls"].sum())
    _layout(fig, barmode="overlay", title="MPI-IO calls and the POSIX calls under them"
                      + _limit_note(len(calls), total), xaxis_title="time (s)",
                      height=max(320, 28 * len(rows) + 120))
    fig.update_yaxes(categoryorder="array", categoryarray=rows)
    return fig


def split_bars(a) -> go.Figure | None:
    """Share of each MPI-IO operation's time in POSIX read, write, lock, unlock and other (Fig. 4.8)."""
    if a.splits.empty:
        return None
    frame = a.splits.groupby("op")[[f"{c}_ns" for c in CHILD_CATEGORIES]].sum()
    if not frame[[f"{c}_ns" for c in CHILD_CATEGORIES[:4]]].to_numpy().any():
        return None  # no POSIX call was traced under MPI-IO (a Darshan log, or POSIX not traced)
    total = frame.sum(axis=1).replace(0, 1)
    fig = go.Figure()
    for c in CHILD_CATEGORIES:
        share = frame[f"{c}_ns"] / total * 100
        fig.add_trace(go.Bar(x=frame.index, y=share, name=c, marker_color=COLORS[c],
                             hovertemplate="%{x}<br>" + c + ": %{y:.1f}%<extra></extra>"))
    _layout(fig, barmode="stack", title="Where MPI-IO time went (share of call time)",
                      yaxis_title="% of MPI-IO call time")
    return fig


def rank_colours(ranks) -> tuple[dict, dict]:
    """A discrete colour scale over the ranks present (one step per rank, Turbo's colours, so 1000 ranks read
    as well as 4): the marker's colorscale/cmin/cmax and its colour bar, ticks on ranks (at most ~16 ticks).
    Markers are coloured by the rank's position in `ranks` (sorted)."""
    n = len(ranks)
    colours = sample_colorscale("Turbo", [i / max(n - 1, 1) for i in range(n)])
    scale = [step for i, c in enumerate(colours) for step in ((i / n, c), ((i + 1) / n, c))]
    every = max(1, -(-n // 16))
    ticks = list(range(0, n, every))
    bar = dict(title="rank", thickness=12, tickvals=ticks, ticktext=[str(int(ranks[i])) for i in ticks])
    return dict(colorscale=scale, cmin=-0.5, cmax=n - 0.5), bar


def access_maps(a) -> list[go.Figure]:
    """Offset against time per file, coloured by rank on a discrete scale, for the files that moved the most
    bytes (calls on no file, such as pipes read by fd -1, have no map)."""
    samples = _app_samples(a)
    samples = samples[samples["file_id"] >= 0]
    if samples.empty:
        return []
    busiest = samples.groupby("file_id")["bytes"].sum().sort_values(ascending=False).head(MAX_FILES).index
    figs = []
    for file_id in busiest:
        part = samples[(samples["file_id"] == file_id) & (samples["nested"] == 0)]
        if part.empty:
            part = samples[samples["file_id"] == file_id]
        part = part.iloc[np.linspace(0, len(part) - 1, min(len(part), MAX_POINTS)).astype(int)]
        ranks = np.sort(part["rank"].unique())
        scale, bar = rank_colours(ranks)
        fig = go.Figure()
        for kind, symbol in ((READ, "circle-open"), (WRITE, "circle")):
            pts = part[part["kind"] == kind]
            if pts.empty:
                continue
            fig.add_trace(go.Scatter(
                x=_seconds(pts["t_start"]), y=pts["offset"], mode="markers", name=KINDS[kind],
                marker=dict(symbol=symbol, size=6, color=np.searchsorted(ranks, pts["rank"]),
                            showscale=not fig.data, colorbar=bar, **scale),  # one colour bar per map
                customdata=np.stack([pts["rank"], pts["bytes"], [LAYERS[i] for i in pts["layer"]]], axis=1),
                hovertemplate="rank %{customdata[0]}<br>t=%{x:.6f} s<br>offset %{y:,}<br>"
                              "%{customdata[1]:,} bytes (%{customdata[2]})<extra>" + KINDS[kind] + "</extra>"))
        _layout(fig, title=f"Access map: {a.paths.get(int(file_id), f'file {int(file_id)}')}", xaxis_title="time (s)",
                yaxis_title="file offset (bytes)")
        figs.append(fig)
    return figs


def concurrent_writes(a) -> go.Figure | None:
    """POSIX writes of every rank on the busiest shared file as bars in time: a staircase means the file
    system (or a lock) served them one after another (Wright Fig. 5.1). None when no file is written by two
    ranks or more: there is no concurrency to show."""
    shared = [p["file_id"] for p in a.patterns if p["processes"] > 1]
    samples = _app_samples(a)
    writes = samples[(samples["layer"] == 0) & (samples["kind"] == WRITE) & samples["file_id"].isin(shared)]
    writes = writes[writes.groupby("file_id")["rank"].transform("nunique") > 1]
    if writes.empty:
        return None
    file_id = writes.groupby("file_id")["bytes"].sum().idxmax()
    part = writes[writes["file_id"] == file_id].sort_values("t_start").head(MAX_BARS)
    hover = [f"rank {r} write<br>offset {o:,}, {b:,} bytes, {d * 1e6:.1f} µs" for r, o, b, d in
             zip(part["rank"], part["offset"], part["bytes"], _seconds(part["t_end"] - part["t_start"]))]
    fig = go.Figure(_bars([f"rank {r}" for r in part["rank"]], part["t_start"], part["t_end"], "POSIX write",
                          COLORS["write"], hover, min_s=min_width(part)))
    ranks = sorted(part["rank"].unique(), reverse=True)
    # the time axis in the layout's bottom margin: with automargin its tick labels (which change as the plot's width
    # does) can make Plotly resize the plot again and again ("Too many auto-margin redraws" on some traces)
    _layout(fig, title=f"Concurrent POSIX writes on {a.paths.get(int(file_id), file_id)}",
            xaxis_title="time (s)", xaxis_automargin=False, height=max(300, 26 * len(ranks) + 120))
    fig.update_yaxes(categoryorder="array", categoryarray=[f"rank {r}" for r in ranks])
    return fig


def size_histograms(a) -> go.Figure | None:
    """Request sizes in Darshan's bins, per layer and direction, on the application's files (as the counters
    table; the MPI runtime's and the system's files are left out)."""
    hist = a.histogram[~a.histogram["file_id"].isin(a.options.excluded_files)]
    if hist.empty:
        return None
    fig = go.Figure()
    for (layer, kind), part in hist.groupby(["layer", "kind"]):
        counts = part.groupby("bin")["count"].sum().reindex(range(len(SIZE_BIN_NAMES)), fill_value=0)
        name, colour = _series(LAYERS[layer], KINDS[kind])
        fig.add_trace(go.Bar(x=list(SIZE_BIN_NAMES), y=counts.to_numpy(), name=name, marker_color=colour,
                             hovertemplate="%{x}: %{y:,} requests<extra>" + name + "</extra>"))
    _layout(fig, barmode="group", title="Request sizes (Darshan's bins, bytes)", showlegend=True,
            yaxis_title="requests", xaxis_title="size bin")
    return fig


def bandwidth_over_time(a) -> go.Figure | None:
    """MB/s per time bin over the whole run, per layer and direction, on the application's files; a bin where
    nothing moved is zero, and a call's bytes are spread over its duration."""
    bins = a.timebins
    if bins.empty or not a.bin_width_ns:
        return None
    width = a.bin_width_ns
    first = int(a.processes["t_first"].min()) // width * width
    last = max(int(a.processes["t_last"].max()), int(bins["t_ns"].max())) // width * width
    edges = np.arange(first, last + width, width, dtype=np.int64)  # every bin of the run, and where the last ends
    fig = go.Figure()
    for (layer, kind), part in bins.groupby(["layer", "kind"]):
        moved = part.groupby("t_ns")["bytes"].sum().reindex(edges, fill_value=0).to_numpy()
        rate = moved / MB / (width / NS)
        rate[-1] = rate[-2] if len(rate) > 1 else rate[-1]  # the closing edge repeats the last bin's value
        name, colour = _series(LAYERS[layer], KINDS[kind])
        fig.add_trace(go.Scatter(x=_seconds(edges), y=rate, mode="lines", line_shape="hv", name=name,
                                 line_color=colour,
                                 hovertemplate="t=%{x:.4f} s<br>%{y:,.1f} MB/s<extra>" + name + "</extra>"))
    _layout(fig, title=f"Bandwidth over time ({width / NS * 1e3:.3g} ms bins)", xaxis_title="time (s)",
            yaxis_title="MB/s (MB = 1024² bytes)", showlegend=True)
    return fig


def lock_timeline(a) -> go.Figure | None:
    """Record locks per rank on the application's files (as the locks table; OMPIO's lock probes on its
    .locktest files are the MPI runtime's): waiting (request to grant) and holding (grant to release)."""
    locks = a.locks[~a.locks["file_id"].isin(a.options.excluded_files)]
    locks = locks.dropna(subset=["t_release"]).sort_values("t_request").head(MAX_BARS // 2)
    if locks.empty:
        return None
    rows = [f"rank {r}" for r in locks["rank"]]
    fig = go.Figure()
    fig.add_trace(_bars(rows, locks["t_request"], locks["t_acquired"], "waiting for lock", COLORS["lock"],
                        [f"rank {r} waits {w / 1e3:.1f} µs for [{o:,}, +{n:,})" for r, w, o, n in
                         zip(locks["rank"], locks["wait_ns"], locks["offset"], locks["length"])]))
    fig.add_trace(_bars(rows, locks["t_acquired"], locks["t_release"], "holding lock", COLORS["unlock"],
                        [f"rank {r} holds [{o:,}, +{n:,}) for {h / 1e3:.1f} µs" for r, o, n, h in
                         zip(locks["rank"], locks["offset"], locks["length"], locks["held_ns"])]))
    _layout(fig, barmode="overlay", title="Record locks: waiting and holding", xaxis_title="time (s)")
    return fig


def all_figures(a) -> list[tuple[str, go.Figure]]:
    """(section id, figure) in report order, skipping figures the trace has no data for."""
    figs = [("timeline", decomposition_timeline(a)), ("split", split_bars(a)),
            ("concurrent", concurrent_writes(a)), ("locks", lock_timeline(a)),
            ("sizes", size_histograms(a)), ("bandwidth", bandwidth_over_time(a))]
    figs += [(f"access-{i}", fig) for i, fig in enumerate(access_maps(a))]
    return [(name, fig) for name, fig in figs if fig is not None]


def samples_note(a) -> str:
    """What subset the plots show."""
    total = int(a.processes["events"].sum()) if len(a.processes) else 0
    shown = len(a.samples)
    return (f"Plots show {shown:,} sampled data calls of {total:,} events" if shown < total else
            f"Plots show all {total:,} events") + "; metrics and findings use every event."


def frame_html(frame: pd.DataFrame) -> str:
    return frame.to_html(index=False, border=0, classes="table", float_format=lambda v: f"{v:,.4g}")
