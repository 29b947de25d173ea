"""Progress of long work (analysing or exporting a large trace) on the terminal: a rich progress bar on
stderr when stderr is a terminal and the user did not ask for --quiet, nothing at all in pipes and files."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

QUIET_HELP = "Print no progress (it is shown only on a terminal anyway)."


@contextmanager
def events(total: int, description: str, quiet: bool = False) -> Iterator[Callable[[int], None]]:
    """A function to call with each number of events done, drawn as a bar of `total` events; a no-op when
    stderr is not a terminal, when `quiet`, or when there is nothing to count."""
    from rich.console import Console

    console = Console(stderr=True)
    if quiet or not console.is_terminal or total <= 0:
        yield lambda done: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("events"),
                  TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda done: bar.advance(task, done)


def trace_events(trace) -> int:
    """The events a trace's streams say they hold (0 when they do not say)."""
    return sum(int(stream.info.get("events") or 0) for stream in trace.streams)
