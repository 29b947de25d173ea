/* Blocking MPI-IO data calls and split collectives: explicit offset, individual, shared and ordered
 * pointers, independent and collective, and their MPI-4 large-count `_c` forms where the MPI has them. */
#include "mpiio.h"

/* A blocking read: bytes from the status (ours when the caller ignores it: a read stops short at the end of
 * file). */
#define MPIIO_RUN_READ(ARGS)                   \
    {                                          \
        MPI_Status local;                      \
        status = mpiio_status(status, &local); \
        rc = next(MPIIO_ARGS ARGS);            \
        mpiio_data_finish(&call, rc, status);  \
    }

/* A blocking write: the caller's status as it is, MPI_STATUS_IGNORE included (mpiio_write_finish). */
#define MPIIO_RUN_WRITE(ARGS)                  \
    {                                          \
        rc = next(MPIIO_ARGS ARGS);            \
        mpiio_write_finish(&call, rc, status); \
    }

/* RUN: MPIIO_RUN_READ or MPIIO_RUN_WRITE. */
#define MPIIO_AT(NAME, BUF, COUNT_T, COLL, RUN) \
    MPIIO_EXPLICIT_CALL(NAME, BUF, COUNT_T, COLL, MPI_Status *status, status, RUN)
#define MPIIO_POINTER(NAME, BUF, COUNT_T, POS, COLL, RUN) \
    MPIIO_POINTER_CALL(NAME, BUF, COUNT_T, POS, COLL, MPI_Status *status, status, RUN)

/* A split collective's begin: recorded at once (ret_bytes -1), remembered on the file for its _end. */
#define MPIIO_RUN_SPLIT_BEGIN(ARGS)                    \
    {                                                  \
        rc = next(MPIIO_ARGS ARGS);                    \
        mpiio_data_initiated(&call, rc, &file->split); \
    }

#define MPIIO_AT_BEGIN(NAME, BUF, COUNT_T)                                                                \
    MPIIO_DATA_WRAPPER(NAME, EXPLICIT, 1,                                                                 \
                       (MPI_File fh, MPI_Offset offset, BUF * buf, COUNT_T count, MPI_Datatype datatype), \
                       (fh, offset, buf, count, datatype), offset, MPIIO_RUN_SPLIT_BEGIN)

#define MPIIO_POINTER_BEGIN(NAME, BUF, COUNT_T, POS)                                                 \
    MPIIO_DATA_WRAPPER(NAME, POS, 1, (MPI_File fh, BUF * buf, COUNT_T count, MPI_Datatype datatype), \
                       (fh, buf, count, datatype), -1, MPIIO_RUN_SPLIT_BEGIN)

/* A split collective's end: the completion of the begin remembered on the file. */
#define MPIIO_SPLIT_END(NAME, BUF)                                                                   \
    static int traced_##NAME(__typeof__(&P##NAME) next, MPI_File fh, BUF *buf, MPI_Status *status) { \
        struct mpiio_file *file;                                                                     \
        if (!mpiio_enter()) return next(fh, buf, status);                                            \
        int rc;                                                                                      \
        if ((file = mpiio_file_find(fh)) && file->split.call_id) {                                   \
            struct mpiio_pending begun = file->split;                                                \
            file->split.call_id = 0;                                                                 \
            struct mpiio_call call;                                                                  \
            MPI_Status local;                                                                        \
            status = mpiio_status(status, &local);                                                   \
            mpiio_call_start(&call, IOLOOM_OP_##NAME, file);                                         \
            rc = next(fh, buf, status);                                                              \
            if (rc == MPI_SUCCESS)                                                                   \
                mpiio_complete(&call, &begun, status);                                               \
            else                                                                                     \
                mpiio_call_finish(&call, rc);                                                        \
        } else {                                                                                     \
            rc = next(fh, buf, status);                                                              \
        }                                                                                            \
        mpiio_leave();                                                                               \
        return rc;                                                                                   \
    }                                                                                                \
    MPIIO_BOTH_NAMES(NAME, (MPI_File fh, BUF * buf, MPI_Status * status), (fh, buf, status))

/* The calls with a count, once with int and once (MPI >= 4) with MPI_Count: C is "" or "_c". */
#define MPIIO_COUNTED_CALLS(C, COUNT_T)                                                       \
    MPIIO_AT(MPI_File_read_at##C, void, COUNT_T, 0, MPIIO_RUN_READ)                           \
    MPIIO_AT(MPI_File_write_at##C, const void, COUNT_T, 0, MPIIO_RUN_WRITE)                   \
    MPIIO_AT(MPI_File_read_at_all##C, void, COUNT_T, 1, MPIIO_RUN_READ)                       \
    MPIIO_AT(MPI_File_write_at_all##C, const void, COUNT_T, 1, MPIIO_RUN_WRITE)               \
    MPIIO_POINTER(MPI_File_read##C, void, COUNT_T, INDIVIDUAL, 0, MPIIO_RUN_READ)             \
    MPIIO_POINTER(MPI_File_write##C, const void, COUNT_T, INDIVIDUAL, 0, MPIIO_RUN_WRITE)     \
    MPIIO_POINTER(MPI_File_read_all##C, void, COUNT_T, INDIVIDUAL, 1, MPIIO_RUN_READ)         \
    MPIIO_POINTER(MPI_File_write_all##C, const void, COUNT_T, INDIVIDUAL, 1, MPIIO_RUN_WRITE) \
    MPIIO_POINTER(MPI_File_read_shared##C, void, COUNT_T, SHARED, 0, MPIIO_RUN_READ)          \
    MPIIO_POINTER(MPI_File_write_shared##C, const void, COUNT_T, SHARED, 0, MPIIO_RUN_WRITE)  \
    MPIIO_POINTER(MPI_File_read_ordered##C, void, COUNT_T, SHARED, 1, MPIIO_RUN_READ)         \
    MPIIO_POINTER(MPI_File_write_ordered##C, const void, COUNT_T, SHARED, 1, MPIIO_RUN_WRITE) \
    MPIIO_AT_BEGIN(MPI_File_read_at_all_begin##C, void, COUNT_T)                              \
    MPIIO_AT_BEGIN(MPI_File_write_at_all_begin##C, const void, COUNT_T)                       \
    MPIIO_POINTER_BEGIN(MPI_File_read_all_begin##C, void, COUNT_T, INDIVIDUAL)                \
    MPIIO_POINTER_BEGIN(MPI_File_write_all_begin##C, const void, COUNT_T, INDIVIDUAL)         \
    MPIIO_POINTER_BEGIN(MPI_File_read_ordered_begin##C, void, COUNT_T, SHARED)                \
    MPIIO_POINTER_BEGIN(MPI_File_write_ordered_begin##C, const void, COUNT_T, SHARED)

MPIIO_COUNTED_CALLS(, int)
#if MPI_VERSION >= 4
MPIIO_COUNTED_CALLS(_c, MPI_Count)
#endif

MPIIO_SPLIT_END(MPI_File_read_at_all_end, void)
MPIIO_SPLIT_END(MPI_File_write_at_all_end, const void)
MPIIO_SPLIT_END(MPI_File_read_all_end, void)
MPIIO_SPLIT_END(MPI_File_write_all_end, const void)
MPIIO_SPLIT_END(MPI_File_read_ordered_end, void)
MPIIO_SPLIT_END(MPI_File_write_ordered_end, const void)
