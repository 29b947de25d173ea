/* A view that only one rank sets with a filetype extent above 2^30 bytes (docs/replay.md, "MPI-IO replayed as
 * MPI-IO"), on 2 ranks: FILE opened by both; rank 0's filetype is one byte in 2^31, rank 1's plain bytes; then each
 * writes 64 bytes collectively and closes. Both set_view and write_at_all are collective: a replay that skipped
 * either on rank 0 would leave rank 1 waiting. */
#include <mpi.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_File fh;
    MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    MPI_Datatype sparse = MPI_BYTE;
    if (rank == 0) MPI_Type_create_resized(MPI_BYTE, 0, (MPI_Aint)1 << 31, &sparse), MPI_Type_commit(&sparse);
    MPI_File_set_view(fh, 0, MPI_BYTE, sparse, "native", MPI_INFO_NULL);
    char buf[64] = {0};
    MPI_File_write_at_all(fh, rank ? 4096 : 0, buf, rank ? 64 : 1, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_close(&fh);
    if (sparse != MPI_BYTE) MPI_Type_free(&sparse);
    MPI_Finalize();
    return 0;
}
