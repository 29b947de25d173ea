/* A library that sets a file's view inside another MPI call, as a tool or an I/O library calling the PMPI_ names may:
 * its MPI_File_sync first sets the view to bytes from displacement 8 (PMPI_File_set_view), then syncs. Preloaded after
 * ioloom's wrappers (as `ioloom run` orders them), that set_view reaches the tracer inside its MPI_File_sync and
 * passes through untraced. At MPI_Finalize it prints how many views it set. Build as a shared library (-shared -fPIC).
 * Threads may sync at once: the count is atomic. */
#include <mpi.h>
#include <stdio.h>

static int views;

int MPI_File_sync(MPI_File fh) {
    int rc = PMPI_File_set_view(fh, 8, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
    if (rc != MPI_SUCCESS) return rc;
    __atomic_add_fetch(&views, 1, __ATOMIC_RELAXED);
    return PMPI_File_sync(fh);
}

int MPI_Finalize(void) {
    printf("view_tool: %d views set inside MPI_File_sync\n", __atomic_load_n(&views, __ATOMIC_SEQ_CST));
    fflush(stdout);
    return PMPI_Finalize();
}
