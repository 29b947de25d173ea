"""`ioloom predict TRACE`: run the predictor over each process of a trace and print how well it predicted (the
figures of docs/predict.md, "Metrics"), the grammar's growth and its main loop as an I/O skeleton."""
from __future__ import annotations

import json
import time
from pathlib import Path

import typer

from ioloom.predict.model import Options
from ioloom.shown import percent, shown

PHASES_SHOWN = 8  # phases listed per process by --phases (JSON: all)


def analyse(trace_path: Path, options: Options, rank: int | None = None, phases: bool = False) -> list[dict]:
    """Per process of the trace (or only `rank`): its figures, skeleton and main loop (and with `phases`, its I/O
    phases as the prediction interface foresaw them)."""
    from ioloom.stats_cli import load_or_exit

    return analyse_trace(load_or_exit(trace_path), options, rank, phases=phases)


def analyse_trace(trace, options: Options, rank: int | None = None, limit: int | None = None,
                  processes: int | None = None, phases: bool = False) -> list[dict]:
    """analyse() on a loaded trace; at most `limit` operations per process (the first ones) and the first
    `processes` processes when given (the HTML report's bounds)."""
    from ioloom.predict.metrics import evaluate
    from ioloom.predict.online import online_figures
    from ioloom.predict.phases import phase_figures, predicted_phases
    from ioloom.predict.skeleton import Skeleton
    from ioloom.predict.source import process_operations

    out: list[dict] = []
    for process in process_operations(trace, limit):
        if rank is not None and process.label != f"rank {rank}":
            continue
        if processes is not None and len(out) == processes:
            break
        symbols = process.symbols
        start = time.process_time()
        figures, model = evaluate(process.operations, symbols.kinds, symbols.places, options)
        figures["model_us_per_op"] = 1e6 * (time.process_time() - start) / max(len(process.operations), 1)
        skeleton = Skeleton(model.grammar, symbols.names, model.sizes.whole, model.sequence.lengths)
        out.append({"process": process.label, "context": process.context, "stacks_unused": process.stacks_unused,
                    **figures, "main_loop": skeleton.main_loop(), "skeleton": skeleton.full(),
                    "online": online_figures(process.side, process.calls),
                    "side_problems": process.side.problems if process.side else []})
        if phases:
            found = predicted_phases(process, options)
            out[-1]["phases"] = {**phase_figures(found), "list": [p._asdict() for p in found]}
    return out


def _growth(sizes: list[list[int]] | list[tuple[int, int]]) -> str:
    return " ".join(f"{ops:,}:{size}" for ops, size in sizes)


def _context(p: dict) -> str:
    from ioloom.predict.source import CONTEXT

    if p["context"] != CONTEXT:
        return f"{p['context']}: stacks of {p['online']['frames']} frames from the side stream"
    return f"{p['context']}: {p['stacks_unused'] or 'the trace records no call stacks'}"


def print_online(o: dict | None) -> None:
    """The tracer's own model (IOLOOM_PREDICT=1), from the side stream."""
    from ioloom.predict.online import limits_reached

    echo = typer.echo
    if o is None:
        return
    if o["symbols_past_cap"]:
        echo(f"  stack symbols past the tracer's limit: {o['symbols_past_cap']:,} calls share one symbol")
    if not o["predicting"]:
        echo(f"  in the tracer                   {o['calls']:,} calls, {o['stack_symbols']} stack symbols; no "
             "prediction (IOLOOM_PREDICT=1 predicts in the tracer)")
        return
    echo(f"  in the tracer (online)          symbol accuracy {percent(o['symbol_accuracy_pct'])} over {o['calls']:,} "
         f"calls (last window {percent(o['symbol_accuracy_last_window_pct'])}), {o['stack_symbols']} stack symbols, "
         f"grammar {o['grammar_size']} symbols; the Python model on the same symbols "
         f"{percent(o['python_symbol_accuracy_pct'])}, the same predictions on "
         f"{percent(o['same_predictions_pct'])} of calls")
    for limit in limits_reached(o):
        echo(f"  {limit}")


def print_process(p: dict) -> None:
    echo = typer.echo
    echo(f"{p['process']}: {p['operations']:,} operations, {p['symbols']} symbols ({_context(p)})")
    for problem in p["side_problems"]:
        echo(f"  side stream: {problem}")
    print_online(p["online"])
    if p["operations"] < 2:
        echo("  nothing to predict (fewer than two operations)")
        return
    converged = p["converged_at_operation"]
    echo(f"  symbol accuracy (10-op window)  {percent(p['symbol_accuracy_pct'])} (last window "
         f"{percent(p['symbol_accuracy_last_window_pct'])}, " +
         (f"100% from operation {converged:,})" if converged else "never 100%)"))
    size = "-" if p["size_error_mean"] is None else f"mean {p['size_error_mean']:.4f}"
    echo(f"  size error (Eq. 7.2)            {size}, exact {percent(p['size_exact_pct'])}")
    echo(f"  offset accuracy                 {percent(p['offset_accuracy_pct'])} (contiguous baseline "
         f"{percent(p['offset_contiguous_pct'])})")
    echo(f"  hit ratio (Eq. 7.3)             {percent(p['hit_ratio_pct'])}")
    error, immediate = (shown(p[key], ".6f", unit=" s") for key in ("time_error_s", "time_error_immediate_reaccess_s"))
    echo(f"  time error                      {error} (immediate reaccess {immediate}); transitions: "
         f"{p['transitions_immediate']} immediate, {p['transitions_distant']} distant")
    echo(f"  grammar size (ops:symbols)      {_growth(p['grammar_size'])}; {p['grammar_rules']} rules")
    if p["grammar_past_cap"]:
        echo(f"  grammar cap reached: the last {p['grammar_past_cap']:,} operations were predicted from the frozen "
             "grammar (raise --grammar-cap to learn them)")
    if p["sizes_fallen_back"] or p["offsets_fallen_back"]:
        echo(f"  local grammars past --distinct-values: {p['sizes_fallen_back']} size (mean kept), "
             f"{p['offsets_fallen_back']} offset (consecutive assumed)")
    echo(f"  main loop                       {p['main_loop'] or '(no repeat)'}")
    echo(f"  skeleton                        {p['skeleton']}")
    if "phases" in p:
        print_phases(p["phases"])


def print_phases(f: dict) -> None:
    """The I/O phases as the prediction interface foresaw them (`--phases`): figures, then the first phases."""
    echo = typer.echo
    end, span = (shown(f[key], ".6f", unit=" s") for key in ("end_error_mean_s", "phase_mean_s"))
    echo(f"  I/O phases (interface)          {f['phases']:,}; length predicted right "
         f"{percent(f['length_right_pct'])} of {f['lengths_predicted']:,} predicted, bytes written right "
         f"{percent(f['written_right_pct'])}; end error mean {end} (a phase lasts {span} on average)")
    for p in f["list"][:PHASES_SHOWN]:
        echo(f"    from operation {p['first'] + 1:,}: {p['operations']:,} operations (predicted "
             f"{shown(p['predicted_operations'])}), {p['written']:,} B written (predicted "
             f"{shown(p['predicted_written'])}), {(p['end_ns'] - p['start_ns']) / 1e9:.6f} s")
    if len(f["list"]) > PHASES_SHOWN:
        echo(f"    ... {len(f['list']) - PHASES_SHOWN:,} more (--json lists them all)")


def command(trace: Path = typer.Argument(..., help="A trace directory (`ioloom run -o DIR`)."),
            rank: int = typer.Option(None, "--rank", help="Only this MPI rank."),
            grammar_cap: int = typer.Option(Options.grammar_cap, "--grammar-cap", min=16,
                                            help="Symbols the main grammar may hold; past it, it stops learning."),
            distinct_values: int = typer.Option(Options.distinct_values, "--distinct-values", min=1,
                                                help="Distinct sizes (offset changes) a local grammar keeps before "
                                                     "its fallback (mean size, consecutive offset)."),
            distant_ms: float = typer.Option(Options.distant_ns / 1e6, "--distant-ms", min=0,
                                             help="Average inter-arrival time from which a transition is distant."),
            phases: bool = typer.Option(False, "--phases", help="Also the I/O phases as the prediction interface "
                                                                 "foresaw them (their length and end)."),
            as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON.")) -> None:
    """Predict each process's next I/O operation from its past ones (Omnisc'IO) and say how well it did."""
    options = Options(grammar_cap, distinct_values, int(distant_ms * 1e6))
    processes = analyse(trace, options, rank, phases)
    if not processes:
        typer.echo(f"ioloom: {trace}: no process{'' if rank is None else f' of rank {rank}'} in this trace; "
                   "check --rank", err=True)
        raise typer.Exit(2)
    if as_json:
        typer.echo(json.dumps({"processes": processes}, indent=1))
        return
    for process in processes:
        print_process(process)
