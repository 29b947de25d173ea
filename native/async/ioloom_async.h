/* libioloom-async: the public C API. A simulation hands its output to the library, which writes it
 * synchronously, from a helper thread, or from dedicated cores (Dorier's Damaris, seed 002 Ch. 3-4), as its
 * YAML configuration says; the calls are the same in every mode. Every call returns IOLOOM_ASYNC_OK (0) or an
 * error code, and ioloom_async_error() says what went wrong in one line. docs/async.md has a complete example. */
#ifndef IOLOOM_ASYNC_H
#define IOLOOM_ASYNC_H

#include <stddef.h>
#include <mpi.h>
#include "ioloom_async_plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

#define IOLOOM_ASYNC_API __attribute__((visibility("default")))

enum ioloom_async_status {
    IOLOOM_ASYNC_OK = 0,
    IOLOOM_ASYNC_ECONFIG = 1, /* the configuration is wrong (on every rank, from initialize) */
    IOLOOM_ASYNC_EUSAGE = 2,  /* a call the configuration does not allow (unknown variable, wrong size, order) */
    IOLOOM_ASYNC_ESYSTEM = 3, /* the system refused (memory, threads, files) */
};

/* Collective over comm: reads the configuration; on any rank's error every rank gets ECONFIG and the message. */
IOLOOM_ASYNC_API int ioloom_async_initialize(const char *config_path, MPI_Comm comm);
/* Collective: a server runs the writer until its clients finalize, then returns with *is_client = 0 and must
 * call ioloom_async_finalize. A client returns at once with *is_client = 1. */
IOLOOM_ASYNC_API int ioloom_async_start(int *is_client);
/* The communicator of the clients only (comm itself in the synchronous and helper-thread modes). */
IOLOOM_ASYNC_API int ioloom_async_client_comm(MPI_Comm *clients);
/* Copies one block of a variable (nbytes must be its layout's size) for the current iteration. */
IOLOOM_ASYNC_API int ioloom_async_write(const char *variable, const void *data, size_t nbytes);
/* Zero copy: a buffer for the variable's block in the shared memory; fill it, commit, and clear when done
 * reading it (the library frees it only then). NULL on error (see ioloom_async_error). */
IOLOOM_ASYNC_API void *ioloom_async_alloc(const char *variable);
IOLOOM_ASYNC_API int ioloom_async_commit(const char *variable);
IOLOOM_ASYNC_API int ioloom_async_clear(const char *variable);
/* Sends an event declared in the configuration to the writer side. */
IOLOOM_ASYNC_API int ioloom_async_signal(const char *event);
/* Ends the current iteration of this client. */
IOLOOM_ASYNC_API int ioloom_async_end_iteration(void);
/* Collective over the initialize communicator: flushes, stops the writers, writes the index, frees all. */
IOLOOM_ASYNC_API int ioloom_async_finalize(void);
/* This client's block of a variable in the global domain, when its layout gives global extents and positions:
 * *ndims and the block's offset per dimension (C order, slowest first; offset holds IOLOOM_ASYNC_DIMS_MAX). */
#define IOLOOM_ASYNC_DIMS_MAX 8
IOLOOM_ASYNC_API int ioloom_async_block_position(const char *variable, int *ndims, long long *offset);
/* Bytes of one block of the variable (its layout's size), 0 when the variable is unknown. */
IOLOOM_ASYNC_API size_t ioloom_async_block_size(const char *variable);
/* Reads and checks a configuration as initialize does for a run of `clients` clients (its layouts, and in a global
 * domain every block inside the extents and none overlapping), without MPI and without writing anything: OK, or
 * ECONFIG with the message. What depends on the nodes (dedicated cores, the buffer per client) waits for
 * initialize. */
IOLOOM_ASYNC_API int ioloom_async_check(const char *config_path, int clients);
/* The last error, one line (empty when there was none). */
IOLOOM_ASYNC_API const char *ioloom_async_error(void);

/* For the Fortran module (ioloom_async.f90): the same calls with Fortran communicator handles, and alloc with a
 * status (IOLOOM_ASYNC_EUSAGE where alloc returns NULL). */
IOLOOM_ASYNC_API int ioloom_async_initialize_f(const char *config_path, MPI_Fint comm);
IOLOOM_ASYNC_API int ioloom_async_client_comm_f(MPI_Fint *clients);
IOLOOM_ASYNC_API int ioloom_async_alloc_f(const char *variable, void **block);
/* block_position in Fortran order into offset[0..capacity): EUSAGE when the layout has more dimensions. */
IOLOOM_ASYNC_API int ioloom_async_block_position_f(const char *variable, long long *offset, int capacity);
/* MPI_COMM_WORLD's Fortran handle, for the Python client (ioloom.async_io.client), which has no mpi.h. */
IOLOOM_ASYNC_API MPI_Fint ioloom_async_comm_world_f(void);

#ifdef __cplusplus
}
#endif
#endif
