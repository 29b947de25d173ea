/* The state of one open file, whichever backend opened it (only that backend's fields are used). */
#ifndef IOLOOM_BENCH_BACKEND_H
#define IOLOOM_BENCH_BACKEND_H

#include "bench.h"

struct bench_file {
    int fd;                                             /* POSIX */
    MPI_File fh;                                        /* MPI-IO */
    int collective;                                     /* MPI-IO, HDF5: collective data calls */
    int64_t h5_file, h5_dataset, h5_filespace, h5_xfer; /* HDF5 (hid_t) */
};

/* Reports a failed MPI call with its error string; returns BENCH_EXIT_IO. */
int bench_mpi_failed(const char *call, const char *name, int err);
/* The kernels' check of an MPI-IO call: when err is not MPI_SUCCESS, reports it and aborts the run. */
void bench_mpi_check(int err, const char *call, const char *name);

#endif
