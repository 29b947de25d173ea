"""Progress of long work (analysing or exporting a large trace, reading or repairing a large container, a
benchmark's steps) on the terminal: a rich progress bar on stderr when stderr is a terminal and the user did not
ask for --quiet, nothing at all in pipes and files."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

import typer

QUIET_HELP = "Print no progress (it is shown only on a terminal anyway)."
QUIET_OPTION = typer.Option(False, "--quiet", "-q", help=QUIET_HELP)

Advance = Callable[[int], None]  # called with the amount of work just done (events, bytes)
Bar = Callable[[int | None], AbstractContextManager[Advance]]  # a bar of a total, as silent() and bar() make


def silent(total: int | None = None) -> AbstractContextManager[Advance]:
    """What a library function draws when its caller asked for no progress: nothing."""
    return nullcontext(lambda done: None)


@contextmanager
def bar(total: int | None, description: str, unit: str = "events", quiet: bool = False,
        refresh: float = 10) -> Iterator[Advance]:
    """A function to call with each amount of work done, drawn as a bar of `total` `unit`s ("events", counted,
    or "bytes", in KiB/MiB/GiB with the rate) `refresh` times a second; `total` None when the length is not known
    (the bar pulses and the elapsed time runs). A no-op when stderr is not a terminal, when `quiet`, or when there
    is nothing to do."""
    from rich.console import Console

    console = Console(stderr=True)
    if quiet or not console.is_terminal or total is not None and total <= 0:
        yield lambda done: None
        return
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TransferSpeedColumn,
    )

    amounts = (DownloadColumn(binary_units=True), TransferSpeedColumn()) if unit == "bytes" else \
        (MofNCompleteColumn(), TextColumn(unit))
    with Progress(TextColumn("{task.description}"), BarColumn(), *(amounts if total else ()), TimeElapsedColumn(),
                  console=console, transient=True,
                  refresh_per_second=refresh) as drawn:
        task = drawn.add_task(description, total=total)
        yield lambda done: drawn.advance(task, done)


def events(total: int, description: str, quiet: bool = False) -> AbstractContextManager[Advance]:
    """bar() of `total` events."""
    return bar(total, description, "events", quiet)


def trace_events(trace) -> int:
    """The events a trace's streams say they hold (0 when they do not say)."""
    return sum(int(stream.info.get("events") or 0) for stream in trace.streams)
