"""The HTML report: one self-contained file (plotly.js inlined from the pinned plotly package, no network),
built from an `Analysis`. `render(analysis)` returns the page; `write(analysis, path)` saves it."""
from __future__ import annotations

import html
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template

import pandas as pd
import plotly.io as pio
from plotly.offline import get_plotlyjs

from ioloom import __version__, outputs
from ioloom.analysis.metrics import human_bytes
from ioloom.report import figures, prediction

SECTIONS = (("summary", "Summary"), ("findings", "Findings"), ("crosslayer", "MPI-IO → POSIX"),
            ("concurrency", "Concurrency & locks"), ("access", "Access patterns"), ("sizes", "Sizes & bandwidth"),
            ("health", "Trace health"))


def _esc(value) -> str:
    return html.escape(str(value))


def _card(value, label) -> str:
    return f'<div class="card"><div class="v">{_esc(value)}</div><div class="k">{_esc(label)}</div></div>'


def _secs(value: float) -> str:
    """Seconds at a readable scale: 0, 85 µs, 12.3 ms, 4.21 s."""
    if not value:
        return "0"
    return f"{value * 1e6:,.0f} µs" if value < 1e-3 else f"{value * 1e3:,.1f} ms" if value < 1 else f"{value:,.2f} s"


SHORT_CALLS = (f"In the timelines a call is at least 1/{figures.VISIBLE} of the time axis wide, so that calls of "
               "microseconds show; hover over one for its own duration.")


def _mbps(value) -> str:
    """A bandwidth in MB/s: one decimal, or three significant digits under 1 (never 0.0 for bytes moved)."""
    if value is None:
        return "–"
    return f"{value:,.1f}" if value >= 1 or value == 0 else f"{value:.3g}"


def _plot(fig, div_id: str) -> str:
    return '<div class="plot">' + pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=div_id,
                                              config={"displaylogo": False}) + "</div>"


def _section(anchor: str, title: str, lead: str, content: str) -> str:
    return f'<section id="{anchor}"><h2>{_esc(title)}</h2><p class="lead">{lead}</p>{content}</section>'


def _layers_table(io: dict) -> str:
    """Darshan's job summary per module: each layer's files, bytes and seconds on the application's files."""
    rows = pd.DataFrame([{"layer": figures.LAYER_LABELS.get(r["layer"], r["layer"]),
                          "issued by": "the program" if r["issued_by"] == "application" else "MPI-IO calls",
                          "files": r["files"], "calls": f"{r['ops']:,}", "read": human_bytes(r["read_bytes"]),
                          "written": human_bytes(r["write_bytes"]), "read time": _secs(r["read_s"]),
                          "write time": _secs(r["write_s"]), "other time": _secs(r["other_s"])} for r in io["layers"]])
    system, logfs = io["system_files"], io["logfs_files"]
    beneath = (f'; {logfs["files"]} files of logfs beneath the program\'s containers (its logs and journals: '
               f'{human_bytes(logfs["write_bytes"])} written, {human_bytes(logfs["read_bytes"])} read)'
               if logfs["files"] else "")
    note = (f'<p class="note">Not counted above: {system["files"]} system and MPI-runtime files (libraries, '
            f'shared-memory segments, pipes: {human_bytes(system["write_bytes"])} written, '
            f'{human_bytes(system["read_bytes"])} read){beneath}. Seconds are summed over ranks; the program\'s '
            "rows never count a byte twice; the MPI-IO calls' POSIX row is the same data at the layer below. Other "
            "time: metadata, sync, locks and, for MPI-IO, waiting for other ranks.</p>")
    return (figures.frame_html(rows) if len(rows) else "<p>No file was read or written.</p>") + note


def _files_table(io: dict, limit: int = 40) -> str:
    files = io["files"]
    rows = pd.DataFrame([{"file": f["path"] or f["file_id"], "layers": f["layers"],
                          "read": human_bytes(f["read_bytes"]), "written": human_bytes(f["write_bytes"]),
                          "time": _secs(f["seconds"]), "POSIX under MPI-IO": human_bytes(f["under_mpiio_bytes"])}
                         for f in files[:limit]])
    shown = "" if len(files) <= limit else f" (the {limit} busiest of {len(files):,})"
    return (f"<h3>Per file{shown}</h3>" + figures.frame_html(rows)) if len(rows) else ""


def _summary(a, result: dict) -> str:
    s, bw, io = result["summary"], result["bandwidth"], result["io"]
    own = io["application"]
    through = " + ".join(figures.LAYER_LABELS.get(layer, layer) for layer in own["layers"]) or "no layer"
    cards = "".join([_card(f"{s['ranks'] or s['processes']}", "MPI ranks" if s["ranks"] else "processes"),
                     _events_card(s),
                     _card(len(io["files"]), f"files of the program ({s['files']:,} traced in all)"),
                     _card(f"{s['duration_s']:.3f} s", "run time (Darshan job)" if s.get("darshan", {}).get(
                         "counters_only") else "traced span"),
                      _moved_card(result, own["write_bytes"], "bytes_written", "written", through),
                     _moved_card(result, own["read_bytes"], "bytes_read", "read", through),
                     _card(len(result["findings"]), "findings")])
    rows = pd.DataFrame([{"direction": d, "moved": human_bytes(b["aggregate_bytes"]),
                          "aggregate (MB/s)": _mbps(b["aggregate_MBps"]),
                          "data window (MB/s)": _mbps(b["data_window_MBps"]),
                          "perceived MPI (MB/s)": _mbps(b["perceived_mpi_MBps"]),
                          "effective MPI (MB/s)": _mbps(b["effective_mpi_MBps"]),
                          "effective POSIX (MB/s)": _mbps(b["effective_posix_MBps"]),
                          "POSIX bytes": human_bytes(b["posix_bytes"]), "RIOT figures from": b["bytes_counted"]}
                         for d, b in bw.items()])
    lead = ("Bytes and time per layer as Darshan's job summary shows them per module, and per file. Bandwidths "
            "(MB = 1024² bytes; docs/analysis.md names each): <b>aggregate</b> = bytes the program moved / earliest "
            "open to latest close of the phase over all ranks (IOR's bandwidth, fs_test's effective); <b>data "
            "window</b> = the same over first data call to last (fs_test's raw); then Wright's RIOT figures: "
            "perceived MPI = Σ<sub>r</sub> B<sub>r</sub>/T<sub>r</sub><sup>MPI</sup>, effective MPI = ΣB / "
            "ΣT<sup>MPI</sup>, with B the bytes the MPI-IO calls moved and T their summed time; effective POSIX = "
            "ΣB<sup>POSIX</sup> / ΣT<sup>POSIX</sup> over the POSIX calls under them, a serial-equivalent figure "
            "(about 1/N of the aggregate on N ranks).")
    return _section("summary", "Summary", lead, f'<div class="cards">{cards}</div><h3>I/O per layer</h3>'
                    + _layers_table(io) + _files_table(io) + "<h3>Bandwidth</h3>" + figures.frame_html(rows))


def _counter_bytes(result: dict, counter: str) -> tuple[int, str]:
    """What a Darshan log's counters say the program moved, and the modules counted: the top one (MPI-IO,
    else POSIX), plus stdio."""
    modules = {m["module"]: m for m in result.get("darshan", {}).get("modules", [])}
    top = [name for name in ("MPI-IO", "POSIX") if name in modules][:1] + [name for name in ("STDIO",)
                                                                          if name in modules]
    return sum(int(modules[name][counter]) for name in top), " + ".join(top)


def _moved_card(result: dict, moved: int, counter: str, verb: str, through: str) -> str:
    """Bytes written or read by the program; for a Darshan log without events or with partial ones, what its
    counters say instead or beside them."""
    darshan = result["summary"].get("darshan", {})
    counted, modules = _counter_bytes(result, counter)
    if darshan.get("counters_only"):
        return _card(human_bytes(counted), f"{verb} by the program (Darshan's counters: {modules})")
    if darshan.get("dxt_partial"):
        return _card(human_bytes(moved), f"{verb} by the program ({through}); in the DXT segments kept, of "
                                         f"{human_bytes(counted)} in Darshan's counters")
    return _card(human_bytes(moved), f"{verb} by the program ({through})")


def _events_card(s: dict) -> str:
    """Events, and for a Darshan log whether they are all of the run (DXT stops when its buffer is full)."""
    darshan = s.get("darshan")
    if darshan and darshan["counters_only"]:
        return _card("counters only", "the Darshan log has no DXT events")
    if darshan and darshan["dxt_partial"]:
        return _card(f"{s['events']:,}", f"events: partial, DXT kept {darshan['dxt_segments']:,} of "
                                         f"{darshan['operations_counted']:,} operations counted")
    return _card(f"{s['events']:,}", "events")


def _findings(result: dict) -> str:
    items = []
    for f in result["findings"]:
        evidence = _esc(json.dumps(f["evidence"], indent=1))
        items.append(f'<div class="finding {f["severity"]}"><div class="sev">{_esc(f["severity"])} · '
                     f'{_esc(f["code"])}</div><div class="msg">{_esc(f["message"])}</div>'
                     f'<div class="advice"><b>Advice:</b> {_esc(f["advice"])}</div>'
                     f'<details><summary>Evidence</summary><pre>{evidence}</pre></details></div>')
    checks = result["checks"]
    table = figures.frame_html(pd.DataFrame([{
        "check": ", ".join(c["codes"]), "looks for": c["looks_for"],
        "fires at or above": "; ".join(c["thresholds_shown"]) or "whenever seen",
        "Drishti": ", ".join(c["drishti"]) or "–",
        "result": ", ".join(c["fired"]) or "nothing found"} for c in checks]))
    if items:
        body = "".join(items) + (f"<details><summary>The {len(checks)} checks and their thresholds</summary>"
                                 f"{table}</details>")
    elif result["summary"].get("darshan", {}).get("counters_only"):
        body = (f"<p>No check could run: the {len(checks)} checks below look at I/O calls, and this Darshan log "
                "holds counters only (no DXT events; run with DXT_ENABLE_IO_TRACE=1 to record them).</p>" + table)
    else:
        body = (f'<p class="ok">No findings: none of the {len(checks)} checks below matched this trace.</p>' + table)
    return _section("findings", "Findings", "Problems the trace shows, with evidence and the change that "
                    "removes each; thresholds are in docs/analysis.md.", body)


def _figures_for(names, figs) -> str:
    return "".join(_plot(fig, f"plot-{name}") for name, fig in figs if any(name.startswith(n) for n in names))


def _crosslayer(a, result, figs) -> str:
    table = pd.DataFrame([{"op": c["op"], "file": a.paths.get(c["file_id"], c["file_id"]), "calls": c["calls"],
                           "ranks": c["ranks"], "seconds": c["seconds"], "bytes": c["bytes"],
                           **{f"POSIX {k}": v for k, v in c["posix_ops"].items()},
                           "sieved": c["sieving_calls"]} for c in result["crosslayer"]])
    hints = mpiio_hints(a)
    colls = pd.DataFrame([{"op": c["op"], "file": a.paths.get(c["file_id"], c["file_id"]),
                           "collective": collective_label(c["coll_seq"]), "ranks": c["ranks"],
                           "seconds": c["seconds"], "bytes": c["bytes"],
                           "ranks that moved data": ", ".join(f"{g['rank']}: {human_bytes(g['bytes'])}"
                                                              for g in c["aggregators"]),
                           "two-phase": two_phase(c, hints.get(a.paths.get(c["file_id"], ""), {}))}
                          for c in result["collectives"][:50]])
    body = _figures_for(("timeline", "split"), figs)
    body += "<h3>MPI-IO operations</h3>" + (figures.frame_html(table) if len(table) else "<p>No MPI-IO calls.</p>")
    if len(colls):
        body += ("<h3>Collectives (first 50)</h3><p class='lead'>Collective n of the k-th opening of the file. "
                 "With two-phase I/O the ranks that moved data are the aggregators (cb_nodes of them); when every "
                 "rank moved its own part, the library skipped two-phase (ROMIO does when the ranks' requests do "
                 "not interleave).</p>" + figures.frame_html(colls))
    return _section("crosslayer", "MPI-IO calls decomposed into POSIX calls",
                    "Each MPI-IO call with the POSIX calls it issued (linked by the tracer, not guessed from time), "
                    f"as in Wright's Figs. 4.8-4.10. {SHORT_CALLS}", body)


def collective_label(coll_seq: int) -> str:
    """coll_seq = opening << 32 | collective number on that opening (docs/trace-format.md), as people read it."""
    return f"#{coll_seq & 0xFFFFFFFF} of opening {coll_seq >> 32}"


def mpiio_hints(a) -> dict[str, dict[str, str]]:
    """The MPI-IO hints the library reported per file (note.mpiio.hints:<path>, first process that has them)."""
    out: dict[str, dict[str, str]] = {}
    for info in (a.processes["info"] if "info" in a.processes else []):
        for key, value in info.items():
            if key.startswith("note.mpiio.hints:"):
                pairs = (line.split("=", 1) for line in str(value).splitlines() if "=" in line)
                out.setdefault(key.split(":", 1)[1], dict(pairs))
    return out


def two_phase(collective: dict, hints: dict[str, str]) -> str:
    movers = len(collective["aggregators"])
    nodes = hints.get("cb_nodes")
    if not movers:
        return "no data moved"
    if nodes and nodes.isdigit() and movers > int(nodes):
        moved = "read" if "read" in str(collective.get("op", "")) else "wrote"
        return f"skipped: {movers} ranks {moved} their own parts (cb_nodes={nodes})"
    return f"{movers} aggregator(s)" + (f" (cb_nodes={nodes})" if nodes else "")


def _concurrency(a, result, figs) -> str:
    locks = pd.DataFrame([{**lock, "file": a.paths.get(lock["file_id"], lock["file_id"])}
                          for lock in result["locks"]])
    body = _figures_for(("concurrent", "locks"), figs)
    if not any(name == "concurrent" for name, _ in figs):
        body = "<p>No file was written by two ranks or more: no concurrent writes to show.</p>" + body
    body += figures.frame_html(locks.drop(columns="file_id")) if len(locks) else "<p>No record locks were taken.</p>"
    return _section("concurrency", "Concurrent writes and locks",
                    "A staircase of writes from different ranks means they were served one after another "
                    f"(Wright Fig. 5.1). {SHORT_CALLS}", body)


def _access(a, result, figs) -> str:
    pats = pd.DataFrame(result["patterns"])
    if len(pats):
        pats = pats[["path", "sharing", "processes", "order", "stride", "requests", "small_requests",
                     "misaligned_requests", "posix_requests"]]
        pats["stride"] = [f"{int(v):,} bytes" if pd.notna(v) else "–" for v in pats["stride"]]
    body = (figures.frame_html(pats) if len(pats) else "<p>No data was moved.</p>") + _figures_for(("access",), figs)
    return _section("access", "Access patterns", "Per file: sharing class (Boito: SFSA strided / non-strided, "
                    "MFWA), order, small and stripe-misaligned requests; then where in each file every rank "
                    "read or wrote over time.", body)


def _sizes(a, result, figs) -> str:
    counters = pd.DataFrame([{"layer": c["layer"], "file": a.paths.get(c["file_id"], c["file_id"]),
                              "direction": c["direction"], "ops": c["ops"], "bytes": c["bytes"],
                              "sequential": c["sequential"], "consecutive": c["consecutive"],
                              "common sizes": ", ".join(f"{s['size']}×{s['count']}" for s in c["access_sizes"]),
                              "common strides": ", ".join(f"{s['stride']}×{s['count']}" for s in c["strides"])}
                             for c in result["darshan_counters"]])
    spread = pd.DataFrame(result["rank_spread"])
    if len(spread):
        spread.insert(0, "file", [a.paths.get(i, f"file {i}") for i in spread.pop("file_id")])
    body = _figures_for(("sizes", "bandwidth"), figs)
    if len(counters):
        body += "<h3>Darshan-style counters</h3>" + figures.frame_html(counters)
    if len(spread):
        body += "<h3>Spread across ranks</h3>" + figures.frame_html(spread)
    return _section("sizes", "Request sizes and bandwidth over time", "Counters as Darshan defines them, computed "
                    "from the events. Bandwidth over time: every bin of the run, on the application's files, each "
                    "call's bytes spread over its duration; POSIX includes the calls MPI-IO issued.", body)


def _health(a, result) -> str:
    s = result["summary"]
    lines = [f"<li class='problem'>{_esc(p)}</li>" for p in s["problems"]]
    lines.append(f"<li>{s['dropped_events']:,} events dropped by the tracer; {s['excluded_calls']:,} calls on "
                 "paths its filters exclude (/proc, /sys...) were counted, not traced.</li>")
    lines.append(f"<li>{_esc(figures.samples_note(a))}</li>")
    if s["detail_limited"]:
        lines.append(f"<li>MPI-IO calls kept in detail for the timeline and collectives: {len(a.calls):,}; "
                     "totals use every call.</li>")
    lines.append(f"<li>Analysed in {_esc(s['executor'])}.</li>")
    darshan = a.meta.get("darshan")
    extra = ""
    if darshan:
        extra = ("<h3>Darshan log</h3>" + figures.frame_html(pd.DataFrame(darshan["modules"]))
                 + (figures.frame_html(pd.DataFrame(darshan["files"][:200])) if darshan["files"] else ""))
    return _section("health", "Trace health", "What could not be read or was left out.",
                    f"<ul>{''.join(lines)}</ul>{extra}")


def _prediction(predicted: Predicted) -> str:
    body, figs = prediction.section(predicted.processes, predicted.limit, predicted.total)
    plots = "".join(_plot(fig, f"plot-{name}") for name, fig in figs)
    return _section("prediction", "Prediction of the I/O (Omnisc'IO)",
                    "Per process, a grammar of its I/O operations learnt as they come predicts each next one "
                    "(docs/predict.md): <b>hit ratio</b> = how much of the predicted segment [offset, offset + size) "
                    "overlaps the real one (Eq. 7.3); <b>symbols right</b> = operation and file predicted right, "
                    "also over a sliding window of ten operations; <b>size error</b> = |predicted - real| / real "
                    "(Eq. 7.2); <b>offsets right</b> against the <b>contiguous baseline</b> (each access starting "
                    "where the last one on the file ended); time error against immediate reaccess; the grammar's "
                    "size; and the grammar's main loop, written out as the program's I/O skeleton.",
                    body + plots)


@dataclass
class Predicted:
    """The predictor's figures per process for the report's prediction section (predict.cli.analyse_trace), the
    operations learnt at most per process and the number of processes in the trace."""
    processes: list[dict]
    limit: int
    total: int


def _asynchronous(split: dict) -> str:
    """libioloom-async's layer (ioloom.async_io.traced): the I/O time the simulation saw beside the time its writers
    spent out of its sight."""
    cards = (_card(_secs(split["visible_seconds"]), f"visible: {split['calls']:,} library calls")
             + _card(_secs(split["hidden_seconds"]), "hidden: stores on a helper thread or dedicated rank")
             + _card(_secs(split["inside_seconds"]), "stores inside the calls (synchronous)")
             + _card(f"{split['untied_stores']:,}", "stores whose call is not in the trace")
             + _card(human_bytes(split["store_bytes_written_below"]),
                     f"written by the writers' own {split['store_calls_below']:,} calls during the stores"))
    rows = pd.DataFrame([{"client": c["client"], "calls": c["calls"], "visible": _secs(c["visible_seconds"]),
                          "hidden": _secs(c["hidden_seconds"]), "hidden bytes": human_bytes(c["hidden_bytes"])}
                         for c in split["clients"]])
    return _section("async", "Asynchronous output (libioloom-async)",
                    "The simulation's calls into libioloom-async are the I/O time it saw; each store of a block on "
                    "the writer side is tied to the call that gave the block (the tracer's call ids, not times), "
                    "and is hidden when it ran on another thread or rank than that call.",
                    f'<div class="cards">{cards}</div>' + figures.frame_html(rows) + _writer_side(split))


def _writer_side(split: dict) -> str:
    """When the writer side worked: how long after the simulation ended an iteration the writers were done with it,
    plugin runs, and per iteration (times from the first async event)."""
    if not split["writer_iterations"] and not split["plugin_runs"]:
        return ""
    lag, most = split["lag_median_seconds"], _secs(split["lag_max_seconds"] or 0)
    cards = (_card(_secs(lag) if lag is not None else "-",
                   f"median from a client's end of iteration to the writer's (max {most}, "
                   f"{split['tied_writer_iterations']:,} of {split['writer_iterations']:,} tied)")
             + _card(_secs(split["plugin_seconds"]), f"{split['plugin_runs']:,} plugin runs on the writer side"))
    rows = pd.DataFrame([{"iteration": it["iteration"],
                          "clients ended at": "-" if it["clients_ended"] is None else _secs(it["clients_ended"]),
                          "writer done at": "-" if it["writer_done"] is None else _secs(it["writer_done"]),
                          "stores": _secs(it["store_seconds"]), "plugins": _secs(it["plugin_seconds"])}
                         for it in split["iterations"]])
    return ("<h3>When the writer side worked</h3>"
            f'<div class="cards">{cards}</div>' + figures.frame_html(rows))


def render(a, title: str = "ioloom report", subtitle: str = "", predicted: Predicted | None = None,
           asynchronous: dict | None = None) -> str:
    result = a.to_json(calls=False)
    figs = figures.all_figures(a)
    parts = [_summary(a, result), _findings(result), _crosslayer(a, result, figs), _concurrency(a, result, figs),
             _access(a, result, figs), _sizes(a, result, figs)]
    sections = list(SECTIONS)
    if predicted is not None:
        parts.append(_prediction(predicted))
        sections.insert(-1, ("prediction", "Prediction"))
    if asynchronous is not None:
        parts.append(_asynchronous(asynchronous))
        sections.insert(-1, ("async", "Async output"))
    return page(title, subtitle, sections, "".join(parts) + _health(a, result))


def page(title: str, subtitle: str, sections, body: str) -> str:
    """A self-contained page in the report's style: `sections` are the (anchor, label) pairs of the navigation bar,
    `body` the sections' HTML (other pages, such as `ioloom probe report`'s, are built with it too)."""
    nav = "".join(f'<a href="#{anchor}">{label}</a>' for anchor, label in sections)
    template = Template(resources.files("ioloom.report").joinpath("template.html").read_text())
    return template.substitute(title=_esc(title), subtitle=_esc(subtitle), nav=nav, body=body,
                               plotlyjs=get_plotlyjs(), version=__version__)


def write(a, path: Path, title: str = "ioloom report", subtitle: str = "",
          predicted: Predicted | None = None, asynchronous: dict | None = None) -> Path:
    return outputs.save(render(a, title, subtitle, predicted, asynchronous), path)
