/* Prints, from every rank, which loaded object defines the progress call its MPI's waits call (argv[1]:
 * ucp_worker_progress, MPICH's, by default; opal_progress, Open MPI's): libucp or libopen-pal when ranks wait as
 * their MPI has them, libioloom-idle-yield when the launch preloaded the idle yield (test_mpi_launch). */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <libgen.h>
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    int rank, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    Dl_info info = {0};
    const char *name = argc > 1 ? argv[1] : "ucp_worker_progress";
    void *progress = dlsym(RTLD_DEFAULT, name);
    char *from = progress && dladdr(progress, &info) && info.dli_fname ? basename((char *)info.dli_fname) : "none";
    printf("rank %d sum %d %s from %s\n", rank, sum, name, from);
    MPI_Finalize();
    return 0;
}
