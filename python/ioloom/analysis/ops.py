"""What each traced call is: a read, a write, a metadata call, a record lock or unlock, a sync or other.

Classification works on the dictionary of op names (a few dozen strings), never row by row, so it costs
nothing on a trace of 10^8 events: `kind_codes(op_column, aux)` maps the dictionary once and takes.
"""
from __future__ import annotations

from functools import cache

import numpy as np
import pyarrow as pa

from ioloom.trace.model import LAYERS
from ioloom.trace.ops import AIO_RESULTS, COPIES, direction

KINDS = ("read", "write", "meta", "lock", "unlock", "sync", "other")
READ, WRITE, META, LOCK, UNLOCK, SYNC, OTHER = range(len(KINDS))
LAYER_CODE = {name: code for code, name in enumerate(LAYERS)}

_MPI_META = {"MPI_File_open", "MPI_File_close", "MPI_File_set_view", "MPI_File_set_size", "MPI_File_preallocate",
             "MPI_File_get_size", "MPI_File_seek", "MPI_File_seek_shared", "MPI_File_delete", "MPI_File_set_info",
             "MPI_File_set_atomicity"}
_META_WORDS = ("open", "creat", "close", "stat", "seek", "tell", "rewind", "unlink", "rename", "mkdir", "rmdir",
               "access", "truncate", "dup", "fileno")
_SYNC = {"fsync", "fdatasync", "sync_file_range", "fflush", "fflush_unlocked", "msync", "MPI_File_sync"}
_FCNTL = {"fcntl", "fcntl64"}
# fcntl events carry aux = cmd | l_type << 16 | l_whence << 24 for record-lock commands (docs/trace-format.md).
_SET_LOCK_CMDS = (6, 7, 37, 38)  # F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW on Linux
F_UNLCK = 2


@cache  # a stream's op names come again with each of its ranges
def _name_kind(name: str) -> int:
    """Kind of an op name; fcntl starts as LOCK and kind_codes() tells locks, unlocks and others apart."""
    if name in _SYNC:
        return SYNC
    if name in _FCNTL:
        return LOCK
    if name in _MPI_META:
        return META
    # Which calls move data is the tracer's knowledge (ioloom.trace.ops). A kernel copy is recorded twice;
    # it starts as a write (its destination side) and kind_codes() turns its source side into a read (aux 0), as
    # it does an aio_return of a read (aux LIO_READ = 0).
    moves = direction(name, aux=1)
    if moves:
        return READ if moves == "read" else WRITE
    if any(word in name.lower() for word in _META_WORDS):
        return META
    return OTHER


def dictionary_kinds(dictionary: pa.Array) -> np.ndarray:
    """Kind code of each op name in a dictionary."""
    return np.array([_name_kind(name) for name in dictionary.to_pylist()], dtype=np.int8)


def kind_codes(op: pa.ChunkedArray | pa.Array, aux: np.ndarray) -> np.ndarray:
    """Kind code per event. fcntl calls are locks when they set a record lock, unlocks when its type is
    F_UNLCK, and other calls (F_GETFL, F_GETLK...) otherwise."""
    op = op.combine_chunks() if isinstance(op, pa.ChunkedArray) else op
    if not pa.types.is_dictionary(op.type):
        op = op.dictionary_encode()
    table = dictionary_kinds(op.dictionary)
    indices = op.indices.to_numpy(zero_copy_only=False)
    kinds = table[indices] if len(table) else np.full(len(indices), OTHER, np.int8)
    copies = np.array([name in COPIES or name in AIO_RESULTS for name in op.dictionary.to_pylist()] or [False], bool)
    kinds[copies[indices] & (aux == 0)] = READ
    kinds[copies[indices] & (aux < 0)] = OTHER  # an aio request submitted before tracing: direction unknown
    fcntl = kinds == LOCK
    sets_lock = np.isin(aux & 0xFFFF, _SET_LOCK_CMDS)
    kinds[fcntl & ~sets_lock] = OTHER
    kinds[fcntl & sets_lock & ((aux >> 16) & 0xFF == F_UNLCK)] = UNLOCK
    return kinds


def layer_codes(layer: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Layer code per event (index into LAYERS)."""
    layer = layer.combine_chunks() if isinstance(layer, pa.ChunkedArray) else layer
    if not pa.types.is_dictionary(layer.type):
        layer = layer.dictionary_encode()
    table = np.array([LAYER_CODE.get(name, LAYER_CODE["process"]) for name in layer.dictionary.to_pylist()],
                     dtype=np.int8)
    return table[layer.indices.to_numpy(zero_copy_only=False)] if len(table) else np.zeros(len(layer), np.int8)


def op_names(op: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, list[str]]:
    """(per-event index into names, names) for an op column, so op names travel as small integers."""
    op = op.combine_chunks() if isinstance(op, pa.ChunkedArray) else op
    if not pa.types.is_dictionary(op.type):
        op = op.dictionary_encode()
    return op.indices.to_numpy(zero_copy_only=False).astype(np.int32), op.dictionary.to_pylist()


def is_collective(name: str) -> bool:
    """MPI-IO collective data calls (write_all, read_at_all, the split *_all_begin/end, ordered)."""
    return name.startswith("MPI_File_") and ("_all" in name or "ordered" in name)
