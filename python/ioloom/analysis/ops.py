"""What each traced call is: a read, a write, a metadata call, a record lock or unlock, a sync or other.

Classification works on the dictionary of op names (a few dozen strings), never row by row, so it costs
nothing on a trace of 10^8 events: `kind_codes(op_column, aux)` maps the dictionary once and takes.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

KINDS = ("read", "write", "meta", "lock", "unlock", "sync", "other")
READ, WRITE, META, LOCK, UNLOCK, SYNC, OTHER = range(len(KINDS))
LAYERS = ("posix", "stdio", "mpiio", "process")
LAYER_CODE = {name: code for code, name in enumerate(LAYERS)}

_META = {"open", "open64", "openat", "openat64", "__open_2", "__open64_2", "creat", "creat64", "close",
         "stat", "stat64", "lstat", "lstat64", "fstat", "fstat64", "fstatat", "fstatat64", "statx", "newfstatat",
         "__xstat", "__xstat64", "__lxstat", "__lxstat64", "__fxstat", "__fxstat64", "lseek", "lseek64",
         "unlink", "unlinkat", "rename", "renameat", "mkdir", "rmdir", "access", "faccessat", "ftruncate",
         "ftruncate64", "truncate", "dup", "dup2", "dup3", "fopen", "fopen64", "fdopen", "freopen", "fclose",
         "fseek", "fseeko", "fseeko64", "ftell", "rewind", "opendir", "closedir", "readdir",
         "MPI_File_open", "MPI_File_close", "MPI_File_set_view", "MPI_File_set_size", "MPI_File_preallocate",
         "MPI_File_get_size", "MPI_File_seek", "MPI_File_seek_shared", "MPI_File_delete", "MPI_File_set_info",
         "MPI_File_set_atomicity"}
_SYNC = {"fsync", "fdatasync", "sync_file_range", "fflush", "msync", "MPI_File_sync"}
_LOCKS = {"fcntl", "fcntl64", "lockf", "flock"}
F_UNLCK = 2  # struct flock l_type of an unlock on Linux; the tracer stores l_type in `aux` for record locks


def _name_kind(name: str) -> int:
    if name in _META:
        return META
    if name in _SYNC:
        return SYNC
    if name in _LOCKS:
        return LOCK
    low = name.lower()
    if "read" in low or low in ("fgets", "fgetc", "getc", "fscanf", "getline", "getdelim"):
        return READ
    if "write" in low or low in ("fputs", "fputc", "putc", "fprintf", "vfprintf", "copy_file_range", "sendfile"):
        return WRITE
    return OTHER


def dictionary_kinds(dictionary: pa.Array) -> np.ndarray:
    """Kind code of each op name in a dictionary."""
    return np.array([_name_kind(name) for name in dictionary.to_pylist()], dtype=np.int8)


def kind_codes(op: pa.ChunkedArray | pa.Array, aux: np.ndarray) -> np.ndarray:
    """Kind code per event. Record-lock calls whose lock type (aux) is F_UNLCK are unlocks."""
    op = op.combine_chunks() if isinstance(op, pa.ChunkedArray) else op
    if not pa.types.is_dictionary(op.type):
        op = op.dictionary_encode()
    table = dictionary_kinds(op.dictionary)
    indices = op.indices.to_numpy(zero_copy_only=False)
    kinds = table[indices] if len(table) else np.full(len(indices), OTHER, np.int8)
    kinds[(kinds == LOCK) & (aux == F_UNLCK)] = UNLOCK
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
