"""`ioloom bench predict`'s table of traces folded in the tracer (`ioloom run --fold`, docs/trace-format.md "FOLDED
chunks"): the demo's program and the CM1-, GTC-, Nek5000- and LAMMPS-like kernels traced with folding at each time
resolution asked for, their bytes per event (all ranks, the stream files as written), split into the folded
chunks' structure (shapes, tokens, rules, headers), their times, the file table and everything else (INFO, OPS), beside
the same program traced unfolded. Every folded chunk is unfolded again in the tracer and compared with the EVENTS
chunk of its rows (IOLOOM_FOLD_CHECK=1): the table says how many events were checked and how many differed."""
from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

from ioloom import paths


def stream_parts(trace: Path) -> dict:
    """Bytes of a trace's stream files: in all, in FOLDED chunks' structure and times, in the file table (FILES and
    FILE_DELTAS chunks); events, and the INFO's fold counts summed over the streams."""
    from ioloom.bench.fuzz import chunks
    from ioloom.trace.folded_chunk import parts
    from ioloom.trace.reader import stream_problems
    from ioloom.trace.stream_file import CHUNK_HEADER, FILE_DELTAS, FILES, FOLDED, read_stream_file

    total = structure = times = files = 0
    residuals: tuple[Counter, Counter] = (Counter(), Counter())
    streams = [read_stream_file(path) for path in sorted(trace.glob("*.ioloom"))]
    for stream in streams:  # the file's bytes as the reader holds them (unfolded chunks follow): read once
        data = stream.data[:stream.path.stat().st_size].tobytes()
        total += len(data)
        for pos, kind, length in chunks(data)[1]:
            if kind == FOLDED:
                made, *columns = parts(data[pos + CHUNK_HEADER.size:pos + CHUNK_HEADER.size + length])
                structure += CHUNK_HEADER.size + made
                times += length - made
                for seen, column in zip(residuals, columns):
                    seen.update(column)
            files += (CHUNK_HEADER.size + length) * (kind in (FILES, FILE_DELTAS))
    counts = {key: sum(int(s.info.get(key, 0)) for s in streams)
              for key in ("folded_events", "fold_checked_events", "fold_check_failed_events")}
    plain = sum(int(v) for s in streams for k, v in s.info.items() if k.startswith("fold_fallback:"))
    events = sum(s.events for s in streams)
    problems = sum(len(stream_problems(s)) for s in streams)
    per = max(events, 1)
    return {"events": events, "bytes_per_event": total / per, "structure": structure / per, "times": times / per,
            "files": files / per, "other": (total - structure - times - files) / per, "plain_events": plain,
            **counts, "times_entropy_bits": sum(map(entropy_bits, residuals)) / max(sum(residuals[0].values()), 1),
            "problems": problems}


def entropy_bits(counts: Counter) -> float:
    """The bits the values counted take at their empirical entropy (zero order, over all of them): what no code of
    one value at a time can go under, its table of values aside."""
    n = sum(counts.values())
    return -sum(k * math.log2(k / n) for k in counts.values()) if n else 0.0


def print_fold(report: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    quanta = report["fold_quanta"]
    table = Table(title="Folded in the tracer (ioloom run --fold; IOLOOM_FOLD_CHECK=1): bytes per event, all ranks, "
                        "stream files as written; folded (structure + times + file table; the rest is INFO, OPS and "
                        "EVENTS chunks written plain; H: the times' empirical entropy, bytes per folded event)")
    for column in ("program", "events", "unfolded", *(f"Q={q:,} ns: folded" for q in quanta),
                   "events checked, differing"):
        table.add_column(column, justify="left" if column == "program" else "right")
    for name, row in report["tracer_fold"].items():
        cells = [f"{f['bytes_per_event']:.2f} ({f['structure']:.2f} + {f['times']:.2f} + {f['files']:.2f}; "
                 f"H {f.get('times_entropy_bits', 0) / 8:.2f})" for f in row["quanta"]]
        checked = sum(f["fold_checked_events"] for f in row["quanta"])
        failed = sum(f["fold_check_failed_events"] for f in row["quanta"])
        table.add_row(name, f"{row['quanta'][0]['events']:,}", f"{row['unfolded']:.2f}", *cells,
                      f"{checked:,}, {failed:,}")
    Console(width=200).print(table)


def fold_env(quantum: int) -> dict[str, str]:
    return {"IOLOOM_FOLD": "1", "IOLOOM_FOLD_QUANTUM_NS": str(quantum), "IOLOOM_FOLD_CHECK": "1"}


def trace_loop(steps: int, work: Path, env: dict[str, str] | None, tag: str) -> Path:
    """ioloom-predict-loop (a file per step: open, a header, 7 blocks of 4 KiB, close; then 512 bytes appended to a
    log) for `steps` steps, one process, under `ioloom run` with the tracer's settings `env`; the trace directory."""
    out, trace = work / f"loop{tag}-files", work / f"loop{tag}-trace"
    out.mkdir()
    command = [sys.executable, "-m", "ioloom", "run", "-o", str(trace), "--",
               str(paths.native_bin("ioloom-predict-loop")), str(out), str(steps)]
    subprocess.run(command, capture_output=True, check=True, timeout=900, env={**os.environ, **(env or {})})
    shutil.rmtree(out)  # a file per step: gone before the next run makes its own
    return trace


def unfolded_bytes(trace: Path) -> float:
    from ioloom.trace import open_trace

    events = max(open_trace(trace).meta["events"], 1)
    return sum(p.stat().st_size for p in trace.glob("*.ioloom")) / events
