/* ioloom-predict-kernels KERNEL DIR STEPS COMPUTE_MS: runs one synthetic application (kernels.h) on every rank
 * of MPI_COMM_WORLD, its files in DIR. ioloom-predict-kernels --gtc-limits: gtc's most ranks and steps, without MPI
 * (`ioloom bench predict` refuses more up front). */
#include "kernels.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const usage = "usage: ioloom-predict-kernels {cm1-posix|cm1-gzip|cm1-mpiio|gtc|gtc-stress|nek5000|"
                                 "nek5000-stress|lammps|lammps-stress} DIR STEPS COMPUTE_MS\n"
                                 "       ioloom-predict-kernels --gtc-limits\n";

/* The kernels other than CM1's, each as the thesis describes the application and a -stress variant, harsher. */
static const struct {
    const char *name;
    int (*run)(const struct run *);
    int stress;
} kernels[] = {
    {"gtc", kernel_gtc, 0},       {"gtc-stress", kernel_gtc, 1},
    {"nek5000", kernel_nek, 0},   {"nek5000-stress", kernel_nek, 1},
    {"lammps", kernel_lammps, 0}, {"lammps-stress", kernel_lammps, 1},
};

static int dispatch(struct run *r) {
    if (strncmp(r->kernel, "cm1-", 4) == 0) return kernel_cm1(r);
    for (size_t i = 0; i < sizeof kernels / sizeof *kernels; i++)
        if (strcmp(r->kernel, kernels[i].name) == 0) {
            r->stress = kernels[i].stress;
            return kernels[i].run(r);
        }
    fprintf(stderr, "ioloom-predict-kernels: unknown kernel %s\n%s", r->kernel, usage);
    return 2;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--gtc-limits") == 0) return gtc_limits();
    MPI_Init(&argc, &argv);
    if (argc != 5 || atoi(argv[3]) < 1 || atoi(argv[4]) < 0) {
        fputs(usage, stderr);
        MPI_Finalize();
        return 2;
    }
    struct run r = {argv[1], argv[2], atoi(argv[3]), atoi(argv[4]), 0, 1, 0};
    MPI_Comm_rank(MPI_COMM_WORLD, &r.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &r.nranks);
    int status = dispatch(&r);
    MPI_Finalize();
    return status;
}
