/* ioloom-predict-kernels KERNEL DIR STEPS COMPUTE_MS: runs one synthetic application (kernels.h) on every rank
 * of MPI_COMM_WORLD, its files in DIR. */
#include "kernels.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const usage =
    "usage: ioloom-predict-kernels {cm1-posix|cm1-gzip|cm1-mpiio|gtc|nek5000|lammps} DIR STEPS COMPUTE_MS\n";

static int dispatch(const struct run *r) {
    if (strncmp(r->kernel, "cm1-", 4) == 0) return kernel_cm1(r);
    if (strcmp(r->kernel, "gtc") == 0) return kernel_gtc(r);
    if (strcmp(r->kernel, "nek5000") == 0) return kernel_nek(r);
    if (strcmp(r->kernel, "lammps") == 0) return kernel_lammps(r);
    fprintf(stderr, "ioloom-predict-kernels: unknown kernel %s\n%s", r->kernel, usage);
    return 2;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    if (argc != 5 || atoi(argv[3]) < 1 || atoi(argv[4]) < 0) {
        fputs(usage, stderr);
        MPI_Finalize();
        return 2;
    }
    struct run r = {argv[1], argv[2], atoi(argv[3]), atoi(argv[4]), 0, 1};
    MPI_Comm_rank(MPI_COMM_WORLD, &r.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &r.nranks);
    int status = dispatch(&r);
    MPI_Finalize();
    return status;
}
