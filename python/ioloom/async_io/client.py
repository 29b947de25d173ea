"""libioloom-async's client calls from Python (docs/async.md, "Python client"): a Python simulation started with
mpiexec hands numpy arrays to the library, by copy (`write`) or in place (`alloc`, `commit`, `clear`), in whichever
mode, buffer and writer its configuration chooses, through ctypes over libioloom-async-<mpi>.so (the MPI the
process was started under, or the one named). MPI is started here (MPI_Init of the library's own libmpi) unless
the program started it, and then finalized here too; no mpi4py is needed, and a communicator of mpi4py is taken as
its Fortran handle (`comm.py2f()`), as the library's Fortran calls take it.

    with Client("cm1.yaml") as io:           # initialize and start; a server writes in start until its clients end
        if io.is_client:
            for it in range(10):
                io.write("theta", theta)      # a C-contiguous copy of the array is handed over
                u = io.alloc("u")             # the block itself in the library's memory, in the layout's shape
                u[...] = -it
                io.commit("u"); io.clear("u")
                io.end_iteration()
                                              # finalize (and MPI_Finalize, if MPI was started here) at the end
"""
from __future__ import annotations

import ctypes
import os

import numpy as np

from ioloom import paths

STATUS = {1: "configuration", 2: "usage", 3: "system"}  # ioloom_async.h's codes
DIMS_MAX = 8  # ioloom_async.h's IOLOOM_ASYNC_DIMS_MAX


class AsyncError(RuntimeError):
    """A call libioloom-async refused: its status (1 configuration, 2 usage, 3 system) and message."""

    def __init__(self, status: int, message: str):
        super().__init__(f"libioloom-async ({STATUS.get(status, status)} error): {message}")
        self.status = status


def launched_under() -> str:
    """The MPI whose launcher started this process, from the variables each one sets."""
    if "OMPI_COMM_WORLD_SIZE" in os.environ:
        return "openmpi"
    if "PMI_SIZE" in os.environ or "PMI_RANK" in os.environ:
        return "mpich"
    raise AsyncError(2, "start the program with Open MPI's or MPICH's mpiexec, or name the MPI: Client(..., "
                        "mpi='openmpi')")


def check(config: str | os.PathLike, clients: int, mpi: str) -> None:
    """Reads and checks a configuration as initialize does for a run of `clients` clients (layouts, and in a global
    domain every block inside the extents and none overlapping), without MPI ranks: AsyncError when it is wrong."""
    lib = ctypes.CDLL(str(paths.native_lib(f"ioloom-async-{mpi}")))
    lib.ioloom_async_error.restype = ctypes.c_char_p
    status = lib.ioloom_async_check(os.fsencode(config), ctypes.c_int(clients))
    if status:
        raise AsyncError(status, lib.ioloom_async_error().decode(errors="replace"))


class Client:
    """One process's libioloom-async: `is_client` after start; a server's start returns when its clients ended."""

    def __init__(self, config: str | os.PathLike, comm_f: int | None = None, mpi: str | None = None):
        self.mpi = mpi or launched_under()
        self._lib = lib = ctypes.CDLL(str(paths.native_lib(f"ioloom-async-{self.mpi}")), mode=ctypes.RTLD_GLOBAL)
        lib.ioloom_async_alloc.restype = ctypes.c_void_p
        lib.ioloom_async_error.restype = ctypes.c_char_p
        lib.ioloom_async_block_size.restype = ctypes.c_size_t
        lib.ioloom_async_write.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
        started = ctypes.c_int()
        lib.MPI_Initialized(ctypes.byref(started))
        self._owns_mpi = not started.value
        if self._owns_mpi:
            lib.MPI_Init(None, None)
        self._finalized = False
        world = lib.ioloom_async_comm_world_f() if comm_f is None else comm_f
        self._call(lib.ioloom_async_initialize_f(os.fsencode(config), ctypes.c_int(world)), during_init=True)
        is_client = ctypes.c_int()
        self._call(lib.ioloom_async_start(ctypes.byref(is_client)))
        self.is_client = bool(is_client.value)

    def _call(self, status: int, during_init: bool = False) -> None:
        if status == 0:
            return
        error = AsyncError(status, self._lib.ioloom_async_error().decode(errors="replace"))
        if during_init and self._owns_mpi:  # initialize failed on every rank: nothing of the library is left
            self._lib.MPI_Finalize()
            self._finalized = True
        raise error

    def client_comm(self) -> int:
        """The communicator of the clients only, as a Fortran handle (mpi4py: MPI.Comm.f2py(handle))."""
        handle = ctypes.c_int()
        self._call(self._lib.ioloom_async_client_comm_f(ctypes.byref(handle)))
        return handle.value

    @property
    def rank(self) -> int:
        """This client's rank among the clients: its blocks' id in the output."""
        comm, rank = self.client_comm(), ctypes.c_int()
        if self.mpi == "openmpi":  # MPI_Comm is a pointer; MPICH's is the int its Fortran handle is (no f2c symbol)
            self._lib.MPI_Comm_f2c.restype, self._lib.MPI_Comm_f2c.argtypes = ctypes.c_void_p, [ctypes.c_int]
            self._lib.MPI_Comm_rank.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
            comm = self._lib.MPI_Comm_f2c(comm)
        self._lib.MPI_Comm_rank(comm, ctypes.byref(rank))
        return rank.value

    def position(self, variable: str) -> tuple[int, ...]:
        """This client's block of `variable` in the global domain: its offset per dimension (the layout's global and
        position, evaluated for this client's rank)."""
        ndims, offset = ctypes.c_int(), (ctypes.c_longlong * DIMS_MAX)()
        self._call(self._lib.ioloom_async_block_position(variable.encode(), ctypes.byref(ndims), offset))
        return tuple(offset[:ndims.value])

    def write(self, variable: str, array) -> None:
        """Hands over a copy of one block of `variable` (its layout's size in bytes, in C order)."""
        block = np.ascontiguousarray(array)
        self._call(self._lib.ioloom_async_write(variable.encode(), block.ctypes.data, block.nbytes))

    def alloc(self, variable: str, dtype=np.float64, shape: tuple[int, ...] | None = None) -> np.ndarray:
        """Zero copy: the variable's block in the library's memory as a writable array (1-D without `shape`); fill
        it, commit it, and clear it once the program no longer reads it (the array must not be used after)."""
        name = variable.encode()
        address = self._lib.ioloom_async_alloc(name)
        if not address:
            self._call(2)
        nbytes = self._lib.ioloom_async_block_size(name)
        block = np.ctypeslib.as_array((ctypes.c_char * nbytes).from_address(address)).view(np.dtype(dtype))
        return block.reshape(shape) if shape is not None else block

    def commit(self, variable: str) -> None:
        self._call(self._lib.ioloom_async_commit(variable.encode()))

    def clear(self, variable: str) -> None:
        self._call(self._lib.ioloom_async_clear(variable.encode()))

    def signal(self, event: str) -> None:
        self._call(self._lib.ioloom_async_signal(event.encode()))

    def end_iteration(self) -> None:
        self._call(self._lib.ioloom_async_end_iteration())

    def finalize(self) -> None:
        """Collective: hands everything over, stops the writers, writes the global index; then MPI_Finalize when MPI
        was started here. Once only."""
        if self._finalized:
            return
        self._finalized = True
        status = self._lib.ioloom_async_finalize()
        if self._owns_mpi:
            self._lib.MPI_Finalize()
        self._call(status)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.finalize()
