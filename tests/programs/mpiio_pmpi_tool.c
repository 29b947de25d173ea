/* A minimal PMPI tool, as profilers are written: it defines MPI_File_write_at and MPI_Finalize, counts, and
 * calls the PMPI_ names. Preloaded with ioloom's MPI wrappers in either order, both must see each call once.
 * Build as a shared library (-shared -fPIC). Threads may write at once: the count is atomic. */
#include <mpi.h>
#include <stdio.h>

static int counted;

int MPI_File_write_at(MPI_File fh, MPI_Offset offset, const void *buf, int count, MPI_Datatype datatype,
                      MPI_Status *status) {
    __atomic_add_fetch(&counted, 1, __ATOMIC_RELAXED);
    return PMPI_File_write_at(fh, offset, buf, count, datatype, status);
}

int MPI_Finalize(void) {
    int rank = -1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    printf("pmpi_tool: rank %d counted %d MPI_File_write_at\n", rank, __atomic_load_n(&counted, __ATOMIC_SEQ_CST));
    fflush(stdout);
    return PMPI_Finalize();
}
