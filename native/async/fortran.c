/* The C side of libioloom-async's Fortran bindings (ioloom_async.f90) and Python client (ioloom.async_io.client):
 * communicators cross as MPI_Fint, and alloc gives a status as every Fortran call does. */
#include "ioloom_async.h"

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
