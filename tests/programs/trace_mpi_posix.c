/* An MPI program for `ioloom run` tests: each rank writes 4 blocks of 1000 bytes to FILE with POSIX pwrite at
 * rank-strided offsets, then one MPI_File_write_at of 500 bytes per rank, so the trace has both layers. The MPI
 * file name carries PREFIX, if given (ROMIO's file-system prefix, e.g. "ufs:").
 * usage: trace_mpi_posix FILE [PREFIX] */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    static char buf[1000];
    int fd = open(argv[1], O_CREAT | O_WRONLY, 0644);
    long failed = 0;
    for (int i = 0; i < 4; i++) failed += pwrite(fd, buf, 1000, (long)(i * size + rank) * 1000) != 1000;
    close(fd);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_File fh;
    char name[4096];
    snprintf(name, sizeof name, "%s%s", argc > 2 ? argv[2] : "", argv[1]);
    MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    MPI_File_write_at(fh, 100000 + rank * 500, buf, 500, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_close(&fh);
    MPI_Finalize();
    return failed != 0;
}
