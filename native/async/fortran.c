/* The C side of libioloom-async's Fortran bindings (ioloom_async.f90) and Python client (ioloom.async_io.client):
 * communicators cross as MPI_Fint, and alloc gives a status as every Fortran call does. */
#include "async_internal.h"

int ioloom_async_initialize_f(const char *config_path, MPI_Fint comm) {
    return ioloom_async_initialize(config_path, MPI_Comm_f2c(comm));
}

/* alloc with a status, as Fortran's calls end with one: NULL is a mistaken call (its message in ioloom_async_error). */
int ioloom_async_alloc_f(const char *variable, void **block) {
    *block = ioloom_async_alloc(variable);
    return *block ? IOLOOM_ASYNC_OK : IOLOOM_ASYNC_EUSAGE;
}

MPI_Fint ioloom_async_comm_world_f(void) { return MPI_Comm_c2f(MPI_COMM_WORLD); }

int ioloom_async_client_comm_f(MPI_Fint *clients) {
    MPI_Comm c;
    int rc = ioloom_async_client_comm(&c);
    if (rc == IOLOOM_ASYNC_OK) *clients = MPI_Comm_c2f(c);
    return rc;
}

/* The block's position in Fortran order (the first dimension first) into offset, which holds capacity values: the
 * Fortran module needs no dimension limit of its own. */
int ioloom_async_block_position_f(const char *variable, long long *offset, int capacity) {
    long long c_order[IOLOOM_ASYNC_DIMS_MAX];
    int ndims, rc = ioloom_async_block_position(variable, &ndims, c_order);
    if (rc != IOLOOM_ASYNC_OK) return rc;
    if (ndims > capacity)
        return async_fail(IOLOOM_ASYNC_EUSAGE,
                          "ioloom_async_block_position: '%.100s' has %d dimensions, more than offset's %d values",
                          variable, ndims, capacity);
    for (int d = 0; d < ndims; d++) offset[d] = c_order[ndims - 1 - d];
    return IOLOOM_ASYNC_OK;
}
