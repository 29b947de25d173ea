/* Non-blocking MPI-IO calls (MPI_File_i*): the initiation is recorded at once, with ret_bytes -1, and its
 * request is remembered so that the MPI_Wait/MPI_Test call that completes it records the bytes
 * (mpiio_completion.c). */
#include "mpiio.h"

#define MPIIO_RUN_NONBLOCKING(ARGS)                                   \
    {                                                                 \
        struct mpiio_pending pending;                                 \
        rc = next(MPIIO_ARGS ARGS);                                   \
        mpiio_data_initiated(&call, rc, &pending);                    \
        if (rc == MPI_SUCCESS) mpiio_request_add(*request, &pending); \
    }

#define MPIIO_IAT(NAME, BUF, COUNT_T, COLL) \
    MPIIO_EXPLICIT_CALL(NAME, BUF, COUNT_T, COLL, MPI_Request *request, request, MPIIO_RUN_NONBLOCKING)
#define MPIIO_IPOINTER(NAME, BUF, COUNT_T, POS, COLL) \
    MPIIO_POINTER_CALL(NAME, BUF, COUNT_T, POS, COLL, MPI_Request *request, request, MPIIO_RUN_NONBLOCKING)

/* C is "" or "_c" (MPI-4 large count), as in mpiio_data.c. */
#define MPIIO_NONBLOCKING_CALLS(C, COUNT_T)                                    \
    MPIIO_IAT(MPI_File_iread_at##C, void, COUNT_T, 0)                          \
    MPIIO_IAT(MPI_File_iwrite_at##C, const void, COUNT_T, 0)                   \
    MPIIO_IAT(MPI_File_iread_at_all##C, void, COUNT_T, 1)                      \
    MPIIO_IAT(MPI_File_iwrite_at_all##C, const void, COUNT_T, 1)               \
    MPIIO_IPOINTER(MPI_File_iread##C, void, COUNT_T, INDIVIDUAL, 0)            \
    MPIIO_IPOINTER(MPI_File_iwrite##C, const void, COUNT_T, INDIVIDUAL, 0)     \
    MPIIO_IPOINTER(MPI_File_iread_all##C, void, COUNT_T, INDIVIDUAL, 1)        \
    MPIIO_IPOINTER(MPI_File_iwrite_all##C, const void, COUNT_T, INDIVIDUAL, 1) \
    MPIIO_IPOINTER(MPI_File_iread_shared##C, void, COUNT_T, SHARED, 0)         \
    MPIIO_IPOINTER(MPI_File_iwrite_shared##C, const void, COUNT_T, SHARED, 0)

MPIIO_NONBLOCKING_CALLS(, int)
#if MPI_VERSION >= 4
MPIIO_NONBLOCKING_CALLS(_c, MPI_Count)
#endif
