"""Reading ioloom traces: `open_trace(path)` returns a `Trace` (see model.py for the columns)."""
from ioloom.trace.model import EVENT_SCHEMA, FILE_SCHEMA, LAYERS, Stream, Trace, TraceDamaged
from ioloom.trace.reader import TraceNotFound, open_trace

__all__ = ["EVENT_SCHEMA", "FILE_SCHEMA", "LAYERS", "Stream", "Trace", "TraceDamaged", "TraceNotFound", "open_trace"]
