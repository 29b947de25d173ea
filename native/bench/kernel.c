/* What the kernels share: their file names and removing their files. */
#include "bench.h"

#include <stdio.h>
#include <unistd.h>

void bench_kernel_file(const struct bench_options *o, const char *suffix, char *out, size_t outlen) {
    snprintf(out, outlen, "%s.%s", o->path, suffix);
}

void bench_kernel_remove(MPI_Comm comm, const char *name) {
    int rank;
    MPI_Comm_rank(comm, &rank);
    MPI_Barrier(comm);
    if (rank == 0)
        unlink(name);
    MPI_Barrier(comm);
}
