"""The report's prediction section (docs/predict.md, "In the HTML report"): per process, how well the predictor
(Omnisc'IO) foresaw each I/O operation, the grammar's size as operations came, and its main loop written out as
the program's I/O skeleton. Built from `ioloom.predict.cli.analyse_trace`'s figures."""
from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from ioloom.predict.online import limits_reached
from ioloom.report import figures


def _pct(value) -> str:
    return "–" if value is None else f"{value:.1f}"


def _seconds(value) -> str:
    return "–" if value is None else f"{value:.4f}"


def table(processes: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([{
        "process": p["process"], "operations": f"{p['operations']:,}", "symbols": p["symbols"],
        "hit ratio % (Eq. 7.3)": _pct(p["hit_ratio_pct"]),
        "symbols right %": _pct(p["symbol_accuracy_pct"]),
        "last window of 10 %": _pct(p["symbol_accuracy_last_window_pct"]),
        "size error (Eq. 7.2)": "–" if p["size_error_mean"] is None else f"{p['size_error_mean']:.4f}",
        "offsets right %": _pct(p["offset_accuracy_pct"]),
        "contiguous baseline %": _pct(p["offset_contiguous_pct"]),
        "time error s (immediate reaccess)": f"{_seconds(p['time_error_s'])} "
                                            f"({_seconds(p['time_error_immediate_reaccess_s'])})",
        "grammar (rules)": f"{p['grammar_size'][-1][1] if p['grammar_size'] else 0} ({p['grammar_rules']})",
    } for p in processes])


def _lines(processes: list[dict], key: str, title: str, y_title: str, log_x: bool) -> go.Figure | None:
    colours = sample_colorscale("Turbo", [i / max(len(processes) - 1, 1) for i in range(len(processes))])
    fig = go.Figure()
    for index, p in enumerate(processes):
        points = p[key]
        if points:
            fig.add_trace(go.Scatter(x=[x for x, _ in points], y=[y for _, y in points], mode="lines",
                                     name=p["process"], line=dict(color=colours[index], width=1.5)))
    if not fig.data:
        return None
    return figures._layout(fig, title=title, xaxis_title="operation", yaxis_title=y_title,
                           xaxis_type="log" if log_x else "linear")


def accuracy_figure(processes: list[dict]) -> go.Figure | None:
    """Symbol accuracy over the sliding window of ten operations (the thesis's Fig. 7.2), per process."""
    fig = _lines(processes, "symbol_window", "Symbols predicted right, over the last 10 operations",
                 "symbols right (%)", False)
    return fig.update_yaxes(range=[-2, 102]) if fig else None


def grammar_figure(processes: list[dict]) -> go.Figure | None:
    """The grammar's size as operations come (Fig. 7.3), per process."""
    return _lines(processes, "grammar_size", "Grammar size (symbols in all rules)", "symbols", True)


def skeletons(processes: list[dict]) -> str:
    """Each distinct main loop once, with the processes whose grammar has it, and their full skeletons."""
    groups: dict[str, list[dict]] = {}
    for p in processes:
        groups.setdefault(p["main_loop"] or "", []).append(p)
    items = []
    for loop, members in groups.items():
        who = ", ".join(p["process"] for p in members)
        text = html.escape(loop) if loop else "(no repeat: the grammar found no loop)"
        full = html.escape(members[0]["skeleton"])
        items.append(f"<li><b>{html.escape(who)}</b>: <code>{text}</code><details><summary>whole skeleton"
                     f"</summary><code>{full}</code></details></li>")
    return f"<ul class='skeleton'>{''.join(items)}</ul>"


def section(processes: list[dict], limit: int, total: int) -> tuple[str, list[tuple[str, go.Figure]]]:
    """The section's body and its figures (named for their plot ids)."""
    if not any(p["operations"] >= 2 for p in processes):
        return "<p>No process made two I/O operations on the application's files: nothing to predict.</p>", []
    shown = "" if total <= len(processes) else f" The first {len(processes)} of {total} processes are shown."
    cut = [p["process"] for p in processes if p["operations"] == limit]
    note = (f" {', '.join(cut)}: the first {limit:,} operations (`ioloom report --predict-ops`)." if cut else "")
    context, why = processes[0]["context"], processes[0].get("stacks_unused")
    said = f"{context} ({why or 'the trace records no call stacks'})" if context == "operation+file" else \
        f"{context} (from the processes' side streams)"
    limits = "".join(f"<p class='note'>{html.escape(p['process'])}: {html.escape(limit)}.</p>"
                     for p in processes for limit in limits_reached(p["online"] or {}))
    body = (f"<p class='note'>Symbols: {html.escape(said)}.{shown}{note}</p>" + limits
            + figures.frame_html(table(processes)) + "<h3>I/O skeleton: each process's main loop</h3>"
            + skeletons(processes))
    figs = [(name, fig) for name, fig in (("predict-accuracy", accuracy_figure(processes)),
                                          ("predict-grammar", grammar_figure(processes))) if fig is not None]
    return body, figs
