"""ioloom: see, understand and fix the I/O of parallel (MPI and POSIX) programs.

The heavy parts (trace reader, analysis) are imported on first use so that `import ioloom` and the
command line start fast.
"""
from importlib import import_module

__version__ = "0.1.0"

_LAZY = {
    "open_trace": ("ioloom.trace", "open_trace"),
    "analyse": ("ioloom.analysis", "analyse"),
}


def __getattr__(name):
    if name in _LAZY:
        module, attribute = _LAZY[name]
        return getattr(import_module(module), attribute)
    raise AttributeError(f"module 'ioloom' has no attribute {name!r}")
