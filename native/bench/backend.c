/* What the backends share: choosing one, the hints as an MPI_Info, reporting a failed MPI call. */
#include "backend.h"

int bench_mpi_failed(const char *call, const char *name, int err) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(err, text, &len);
    bench_error("%s %s: %.*s", call, name, len, text);
    return BENCH_EXIT_IO;
}

void bench_mpi_check(int err, const char *call, const char *name) {
    if (err == MPI_SUCCESS) return;
    bench_mpi_failed(call, name, err);
    bench_abort_io();
}

MPI_Info bench_hints_info(const struct bench_options *o) {
    if (o->nhints == 0) return MPI_INFO_NULL;
    MPI_Info info;
    MPI_Info_create(&info);
    for (int i = 0; i < o->nhints; i++) MPI_Info_set(info, o->hints[i].key, o->hints[i].value);
    return info;
}

const struct bench_backend *bench_backend(enum bench_api api) {
    switch (api) {
        case API_POSIX:
            return &bench_posix_backend;
        case API_MPIIO:
            return &bench_mpiio_backend;
#ifdef IOLOOM_BENCH_HDF5
        case API_HDF5:
            return &bench_hdf5_backend;
#endif
        default:
            return NULL;
    }
}
