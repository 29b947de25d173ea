/* Non-blocking MPI-IO: each rank writes BLOCKS blocks with MPI_File_iwrite_at completed by MPI_Wait, then reads
 * them back with MPI_File_iread_at completed by polling MPI_Test. The bytes move at completion, so the analysis
 * must count them there, once, and count each call once.
 * usage: nonblocking_io FILE BLOCKS BLOCK_BYTES */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, nranks, blocks = atoi(argv[2]), block = atoi(argv[3]);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    char *buf = malloc(block);
    memset(buf, 'a' + rank, block);
    MPI_File fh;
    MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    for (int i = 0; i < blocks; i++) {
        MPI_Request request;
        MPI_File_iwrite_at(fh, ((MPI_Offset)i * nranks + rank) * block, buf, block, MPI_BYTE, &request);
        MPI_Wait(&request, MPI_STATUS_IGNORE);
    }
    MPI_File_sync(fh);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < blocks; i++) {
        MPI_Request request;
        int done = 0;
        MPI_File_iread_at(fh, ((MPI_Offset)i * nranks + rank) * block, buf, block, MPI_BYTE, &request);
        while (!done) MPI_Test(&request, &done, MPI_STATUS_IGNORE);
        if (buf[0] != 'a' + rank) MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_File_close(&fh);
    free(buf);
    MPI_Finalize();
    return 0;
}
