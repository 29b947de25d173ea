"""An mpi4py program: every rank writes BLOCK bytes at rank * BLOCK with File.Write_at_all, reads them back
with File.Read_at, and checks them. mpi4py calls the C MPI_File_* functions, which the tracer interposes.
Usage: python3 mpiio_mpi4py.py FILE (Debian's python3-mpi4py, built against Open MPI)."""
import sys

from mpi4py import MPI

BLOCK = 4000

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
data = bytes((rank * 7 + i) % 256 for i in range(BLOCK))
fh = MPI.File.Open(comm, sys.argv[1], MPI.MODE_CREATE | MPI.MODE_RDWR)
fh.Write_at_all(rank * BLOCK, data)
back = bytearray(BLOCK)
fh.Read_at(rank * BLOCK, back)
fh.Close()
if bytes(back) != data:
    print(f"rank {rank}: read wrong data", file=sys.stderr)
    comm.Abort(1)
if rank == 0:
    print(f"mpiio_mpi4py: {comm.Get_size()} ranks ok")
