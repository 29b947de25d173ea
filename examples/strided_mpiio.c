/* The demo program: every rank writes its blocks of one shared file interleaved with the other ranks'
 * (Boito's "SFSA strided", the pattern that hurts most), then reads them back.
 *
 * Phase 1 writes through a strided file view with independent MPI_File_write calls of several blocks each:
 * one call covers a non-contiguous region, so MPICH's ROMIO turns it into data-sieving cycles (lock, read
 * the whole extent, patch it, write it back, unlock), which the trace decomposes and the report flags.
 * Phase 2 writes the same blocks with independent MPI_File_write_at calls, one small request per block.
 * Phase 3 reads everything back collectively (MPI_File_read_at_all) and checks it.
 * usage: strided_mpiio FILE [blocks_per_rank] [block_bytes] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BLOCKS_PER_CALL = 8 };

static void check(int rc, const char *what) {
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len;
        MPI_Error_string(rc, msg, &len);
        fprintf(stderr, "strided_mpiio: %s: %s\n", what, msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

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
    if (blocks <= 0 || block <= 0 || blocks % BLOCKS_PER_CALL) {
        if (rank == 0) fprintf(stderr, "blocks_per_rank must be a positive multiple of %d, block_bytes positive\n",
                               BLOCKS_PER_CALL);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char *buf = malloc((size_t)block * BLOCKS_PER_CALL);
    memset(buf, 'a' + rank % 26, (size_t)block * BLOCKS_PER_CALL);

    MPI_File fh;
    check(MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh), "open");

    /* Phase 1: this rank's blocks through a strided view, BLOCKS_PER_CALL blocks per independent write. */
    MPI_Datatype strided;
    MPI_Type_vector(blocks, block, block * nranks, MPI_BYTE, &strided);
    MPI_Type_commit(&strided);
    check(MPI_File_set_view(fh, (MPI_Offset)rank * block, MPI_BYTE, strided, "native", MPI_INFO_NULL), "set_view");
    for (int i = 0; i < blocks; i += BLOCKS_PER_CALL)
        check(MPI_File_write(fh, buf, block * BLOCKS_PER_CALL, MPI_BYTE, MPI_STATUS_IGNORE), "write");
    check(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL), "set_view");
    MPI_Type_free(&strided);

    /* Phase 2: the same blocks, one small independent write each. */
    for (int i = 0; i < blocks; i++) {
        MPI_Offset offset = ((MPI_Offset)i * nranks + rank) * block;
        check(MPI_File_write_at(fh, offset, buf, block, MPI_BYTE, MPI_STATUS_IGNORE), "write_at");
    }
    check(MPI_File_sync(fh), "sync");

    /* Phase 3: read back collectively and check. */
    for (int i = 0; i < blocks; i++) {
        MPI_Offset offset = ((MPI_Offset)i * nranks + rank) * block;
        memset(buf, 0, block);
        check(MPI_File_read_at_all(fh, offset, buf, block, MPI_BYTE, MPI_STATUS_IGNORE), "read_at_all");
        for (int j = 0; j < block; j++)
            if (buf[j] != 'a' + rank % 26) {
                fprintf(stderr, "rank %d: block %d byte %d read back wrong\n", rank, i, j);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
    }
    check(MPI_File_close(&fh), "close");
    free(buf);
    MPI_Finalize();
    return 0;
}
