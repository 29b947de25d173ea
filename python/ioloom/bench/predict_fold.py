"""`ioloom bench predict`'s table of traces folded in the tracer (`ioloom run --fold`, docs/trace-format.md "FOLDED
chunks"): the demo's program and the CM1-, GTC-, Nek5000- and LAMMPS-like kernels traced with folding at each time
resolution asked for, their bytes per event (all ranks, the stream files as written), split into the folded
chunks' structure (shapes, tokens, rules, headers), their times, and everything else (file tables, INFO), beside
the same program traced unfolded. Every folded chunk is unfolded again in the tracer and compared with the EVENTS
chunk of its rows (IOLOOM_FOLD_CHECK=1): the table says how many events were checked and how many differed."""
from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

from ioloom import mpi, paths

FOLDED, HEADER = 5, struct.Struct("<III")
DEMO = paths.REPO_ROOT / "examples" / "strided_mpiio.c"


def demo_binary(impl: mpi.MpiImpl, work: Path) -> list[str] | None:
    """The demo's program (scripts/demo.sh: 64 blocks of 4 KiB per rank, strided, MPI-IO) built for `impl`; its
    command line without the output file, or None when the source or the compiler is missing."""
    if not DEMO.is_file() or not shutil.which(impl.mpicc):
        return None
    exe = work / f"strided_mpiio-{impl.name}"
    done = subprocess.run([impl.mpicc, "-O2", "-o", str(exe), str(DEMO)], capture_output=True)
    return [str(exe)] if done.returncode == 0 else None


def stream_parts(trace: Path) -> dict:
    """Bytes of a trace's stream files: in all, in FOLDED chunks' structure and times; events, and the INFO's fold
    counts summed over the streams."""
    from ioloom.trace import open_trace
    from ioloom.trace.folded_chunk import parts

    total = structure = times = 0
    for path in trace.glob("*.ioloom"):
        data = path.read_bytes()
        total += len(data)
        pos = 16
        while pos + HEADER.size <= len(data):
            kind, length, _ = HEADER.unpack_from(data, pos)
            if kind == FOLDED:
                made, timed = parts(data[pos + HEADER.size:pos + HEADER.size + length])
                structure += HEADER.size + made
                times += timed
            pos += HEADER.size + length
    loaded = open_trace(trace)
    counts = {key: sum(int(s.info.get(key, 0)) for s in loaded.streams)
              for key in ("folded_events", "fold_checked_events", "fold_check_failed_events")}
    plain = sum(int(v) for s in loaded.streams for k, v in s.info.items() if k.startswith("fold_fallback:"))
    events = max(loaded.meta["events"], 1)
    return {"events": loaded.meta["events"], "bytes_per_event": total / events,
            "structure": structure / events, "times": times / events,
            "other": (total - structure - times) / events, "plain_events": plain, **counts,
            "problems": len(loaded.problems)}


def print_fold(report: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    quanta = report["fold_quanta"]
    table = Table(title="Folded in the tracer (ioloom run --fold; IOLOOM_FOLD_CHECK=1): bytes per event, all ranks, "
                        "stream files as written; folded = structure + times + other (file tables, INFO)")
    for column in ("program", "events", "unfolded", *(f"Q={q:,} ns: folded (structure + times)" for q in quanta),
                   "events checked, differing"):
        table.add_column(column, justify="left" if column == "program" else "right")
    for name, row in report["tracer_fold"].items():
        cells = [f"{f['bytes_per_event']:.2f} ({f['structure']:.3f} + {f['times']:.2f})" for f in row["quanta"]]
        checked = sum(f["fold_checked_events"] for f in row["quanta"])
        failed = sum(f["fold_check_failed_events"] for f in row["quanta"])
        table.add_row(name, f"{row['quanta'][0]['events']:,}", f"{row['unfolded']:.2f}", *cells,
                      f"{checked:,}, {failed:,}")
    Console(width=200).print(table)


def fold_env(quantum: int) -> dict[str, str]:
    return {"IOLOOM_FOLD": "1", "IOLOOM_FOLD_QUANTUM_NS": str(quantum), "IOLOOM_FOLD_CHECK": "1"}


def unfolded_bytes(trace: Path) -> float:
    from ioloom.trace import open_trace

    events = max(open_trace(trace).meta["events"], 1)
    return sum(p.stat().st_size for p in trace.glob("*.ioloom")) / events
