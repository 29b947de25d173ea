/* Writes with MPI-IO, then leaves without MPI_Finalize (exit from main after a barrier), as crashing or
 * careless programs do: the trace must still hold the MPI-IO events. Usage: mpiio_no_finalize FILE */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int rank, data[1000] = {0};
    MPI_File fh;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc != 2) MPI_Abort(MPI_COMM_WORLD, 2);
    MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    MPI_File_write_at_all(fh, (MPI_Offset)rank * (MPI_Offset)sizeof data, data, 1000, MPI_INT, MPI_STATUS_IGNORE);
    MPI_File_close(&fh);
    MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d leaves without MPI_Finalize\n", rank);
    fflush(stdout);
    exit(0);
}
