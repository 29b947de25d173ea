/* Failing MPI-IO calls, with what the program can see of them: the MPI error class and errno. Run traced and
 * untraced, the printed lines must be identical (the tracer changes no result and no errno; asking the library
 * about a null datatype itself would abort the program).
 * Usage: mpiio_errno DIR (an existing directory; DIR/missing/x does not exist). One rank. */
#include <errno.h>
#include <mpi.h>
#include <stdio.h>

static void report(const char *what, int rc) {
    int saved = errno, class = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &class);
    printf("%s: class %d errno %d\n", what, class, saved);
}

int main(int argc, char **argv) {
    char missing[4200], readonly[4200];
    MPI_File fh;
    int data[16] = {0};
    MPI_Init(&argc, &argv);
    if (argc != 2) MPI_Abort(MPI_COMM_WORLD, 2);
    snprintf(missing, sizeof missing, "%s/missing/x", argv[1]);
    snprintf(readonly, sizeof readonly, "%s/readonly.dat", argv[1]);
    errno = 0;
    report("open missing", MPI_File_open(MPI_COMM_SELF, missing, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
    MPI_File_open(MPI_COMM_SELF, readonly, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    MPI_File_write_at(fh, 0, data, 16, MPI_INT, MPI_STATUS_IGNORE);
    MPI_File_close(&fh);
    MPI_File_open(MPI_COMM_SELF, readonly, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    errno = 0;
    report("write on read-only", MPI_File_write_at(fh, 0, data, 16, MPI_INT, MPI_STATUS_IGNORE));
    errno = 0;
    report("read past the end", MPI_File_read_at(fh, 1000, data, 16, MPI_INT, MPI_STATUS_IGNORE));
    errno = 0;
    report("read a null datatype", MPI_File_read_at(fh, 0, data, 16, MPI_DATATYPE_NULL, MPI_STATUS_IGNORE));
    errno = 0;
    report("view of a null etype",
           MPI_File_set_view(fh, 0, MPI_DATATYPE_NULL, MPI_DATATYPE_NULL, "native", MPI_INFO_NULL));
    MPI_File_close(&fh);
    MPI_Finalize();
    return 0;
}
