/* What the kernels share: file names, removing files, and the timed open and close of their MPI-IO files. */
#include "backend.h"

#include <stdio.h>
#include <string.h>

void bench_kernel_file(const struct bench_options *o, const char *suffix, char *out, size_t outlen) {
    snprintf(out, outlen, "%s.%s", o->path, suffix);
}

void bench_kernel_remove(MPI_Comm comm, const char *name) {
    int rank;
    MPI_Comm_rank(comm, &rank);
    MPI_Barrier(comm);
    if (rank == 0) bench_unlink(name);
    MPI_Barrier(comm);
}

void bench_kernel_open(const struct bench_options *o, MPI_Comm comm, const char *name, int writing,
                       struct bench_report *r, MPI_File *fh, struct bench_times *t) {
    memset(t, 0, sizeof *t);
    MPI_Info info = bench_hints_info(o);
    double start = t->start = bench_phase_begin(o, comm);
    int err = MPI_File_open(comm, name, writing ? MPI_MODE_CREATE | MPI_MODE_WRONLY : MPI_MODE_RDONLY, info, fh);
    if (info != MPI_INFO_NULL) MPI_Info_free(&info);
    bench_mpi_check(err, "MPI_File_open", name);
    t->open = bench_now() - start;
    MPI_Info after;
    MPI_File_get_info(*fh, &after);
    bench_report_hints(r, after);
    MPI_Info_free(&after);
}

void bench_kernel_close(const struct bench_options *o, MPI_File *fh, int writing, struct bench_times *t) {
    if (writing && o->fsync) {
        double s0 = bench_now();
        bench_mpi_check(MPI_File_sync(*fh), "MPI_File_sync", "");
        t->sync = bench_now() - s0;
    }
    double c0 = bench_now();
    bench_mpi_check(MPI_File_close(fh), "MPI_File_close", "");
    t->close = bench_now() - c0;
    t->total = bench_now() - t->start;
    t->end = bench_wallclock();
}
