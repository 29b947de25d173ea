"""A replayed trace's I/O phases as the prediction interface foresees them on a clock (docs/sim.md, "Predicted
phases"): each rank's operations, with the call names and paths the trace gave them and their times on that clock
(the trace's own, or the simulator's), fed in order to `ioloom.predict.phases.foreseen`. `ioloom sim run --trace
--phases` prints the phases traced and simulated with the ends predicted on the simulated clock;
`ioloom sim coord --trace-a/--trace-b` announces them to the coordinator (ioloom.sim.announce)."""
from __future__ import annotations

import numpy as np

from ioloom.predict.model import Options
from ioloom.predict.phases import Call, PredictedPhase, foreseen, phase_figures
from ioloom.shown import percent, shown
from ioloom.sim.workload import KINDS, Workload, rank_rows

SHOWN = 8  # phases printed per rank (--json: all)
SECONDS = ".6f"  # seconds as printed


def _calls(w: Workload, rows: np.ndarray, times: np.ndarray) -> list[Call]:
    """One rank's operations as the predictor takes them, at `times` (seconds, per operation: start and end)."""
    assert w.calls is not None and w.paths is not None  # a replayed trace (workload.from_trace)
    ops = w.ops[rows]
    ns = np.round(times[rows] * 1e9).astype(np.int64)
    writes = ops["kind"] == KINDS["write"]
    data = writes | (ops["kind"] == KINDS["read"])
    offsets = np.where(data, ops["offset"], -1)
    aux = np.where(data, writes.astype(np.int64), -1)  # a copy's or aio result's direction: 1 write, 0 read
    paths = [w.paths[f] for f in ops["file"].tolist()]
    return [Call(*fields) for fields in zip(w.calls[rows].astype(str).tolist(), paths, offsets.tolist(),
                                             ops["length"].tolist(), ns[:, 0].tolist(), ns[:, 1].tolist(),
                                             aux.tolist(), strict=True)]


def rank_phases(w: Workload, times: np.ndarray, options: Options | None = None
                ) -> list[tuple[np.ndarray, list[PredictedPhase]]]:
    """Per rank, its operations' indices and its phases foreseen at `times` (a phase's `first` indexes the
    rank's operations)."""
    return [(rows, foreseen(_calls(w, rows, times), options)) for rows in rank_rows(w.ops)]


def _phase_row(traced: PredictedPhase, simulated: PredictedPhase) -> dict:
    return {"first": traced.first, "operations": traced.operations, "written": traced.written,
            "predicted_operations": simulated.predicted_operations, "traced_s": (traced.end_ns - traced.start_ns) / 1e9,
            "simulated_start_s": simulated.start_ns / 1e9, "simulated_end_s": simulated.end_ns / 1e9,
            "predicted_end_s": None if simulated.predicted_end_ns is None else simulated.predicted_end_ns / 1e9}


def replay_phases(w: Workload, simulated: np.ndarray, options: Options | None = None) -> list[dict]:
    """Per rank of a replayed trace: its phases on the trace's clock and on the simulator's (the same operations:
    the simulator replays the trace's gaps, so the same gaps split them, unless a gap of nearly `distant_ns`
    crosses it) with the predictor's figures on each, and each phase's traced and simulated time beside the end
    predicted on the simulated clock."""
    assert w.recorded is not None  # a replayed trace (workload.from_trace)
    out = []
    for (rows, traced), (_, sim) in zip(rank_phases(w, w.recorded, options), rank_phases(w, simulated, options)):
        same = [p.first for p in traced] == [p.first for p in sim]
        out.append({"rank": int(w.ops["rank"][rows[0]]), "operations": int(rows.size),
                    "traced": phase_figures(traced), "simulated": phase_figures(sim), "same_phases": same,
                    "list": [_phase_row(t, s) for t, s in zip(traced, sim)] if same else
                    [_phase_row(s, s) | {"traced_s": None} for s in sim]})
    return out


def print_replay_phases(ranks: list[dict]) -> None:
    """The text of `ioloom sim run --trace --phases`."""
    print("I/O phases per rank (docs/predict.md): the end foreseen at each phase's first call, on the simulated clock")
    for r in ranks:
        s, t = r["simulated"], r["traced"]
        print(f"rank {r['rank']}: {s['phases']:,} phases ({'the same' if r['same_phases'] else 'NOT the same'} "
              f"operations as traced); length right {percent(s['length_right_pct'])} of {s['lengths_predicted']:,} "
              f"predicted; end error mean {shown(s['end_error_mean_s'], SECONDS)} simulated (phases of "
              f"{shown(s['phase_mean_s'], SECONDS)}), {shown(t['end_error_mean_s'], SECONDS)} traced (phases of "
              f"{shown(t['phase_mean_s'], SECONDS)})")
        print(f"  {'first op':>8} {'ops':>6} {'predicted':>9} {'traced s':>10} {'simulated s':>11} "
              f"{'sim. end s':>11} {'predicted end s':>15}")
        for p in r["list"][:SHOWN]:
            simulated = p["simulated_end_s"] - p["simulated_start_s"]
            print(f"  {p['first'] + 1:>8,} {p['operations']:>6,} {shown(p['predicted_operations']):>9} "
                  f"{shown(p['traced_s'], SECONDS):>10} {shown(simulated, SECONDS):>11} "
                  f"{shown(p['simulated_end_s'], SECONDS):>11} {shown(p['predicted_end_s'], SECONDS):>15}")
        if len(r["list"]) > SHOWN:
            print(f"  ... {len(r['list']) - SHOWN:,} more (--json lists them all)")
