/* The demo program: every rank writes its blocks of one shared file interleaved with the other ranks'
 * (Boito's "SFSA strided", the pattern that hurts most), independently, then reads them back collectively.
 * Under MPICH's ROMIO the independent strided writes become data-sieving cycles (lock, read, write, unlock),
 * which the trace and the report make visible.
 * usage: strided_mpiio FILE [blocks_per_rank] [block_bytes] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc < 2) {
        if (rank == 0) fprintf(stderr, "usage: %s FILE [blocks_per_rank] [block_bytes]\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int blocks = argc > 2 ? atoi(argv[2]) : 64;
    int block = argc > 3 ? atoi(argv[3]) : 4096;
    char *buf = malloc(block);
    memset(buf, 'a' + rank % 26, block);

    MPI_File fh;
    MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    for (int i = 0; i < blocks; i++) {
        MPI_Offset offset = ((MPI_Offset)i * nranks + rank) * block;
        MPI_File_write_at(fh, offset, buf, block, MPI_BYTE, MPI_STATUS_IGNORE);
    }
    MPI_File_sync(fh);
    for (int i = 0; i < blocks; i++) {
        MPI_Offset offset = ((MPI_Offset)i * nranks + rank) * block;
        MPI_File_read_at_all(fh, offset, buf, block, MPI_BYTE, MPI_STATUS_IGNORE);
        if (buf[0] != 'a' + rank % 26) {
            fprintf(stderr, "rank %d: block %d read back wrong\n", rank, i);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    MPI_File_close(&fh);
    free(buf);
    MPI_Finalize();
    return 0;
}
