/* Operation codes. One X-macro list is the single source: it gives the enum, and the writer stores the
 * code -> name table in every trace, so readers never hard-code codes. Append new operations at the end
 * of their section; codes are per trace, not a stable ABI.
 *
 * X(ENUM_SUFFIX, "name recorded in the trace")
 */
#ifndef IOLOOM_OPS_H
#define IOLOOM_OPS_H

/* Process life: init/finalize, fork, exec, thread start. (process.c, mpiio.c) */
#define IOLOOM_PROCESS_OPS(X) \
    X(PROCESS_START, "process_start") \
    X(PROCESS_EXIT, "process_exit")

/* POSIX (posix.c). */
#define IOLOOM_POSIX_OPS(X) \
    X(OPEN, "open")

/* stdio (stdio.c). */
#define IOLOOM_STDIO_OPS(X) \
    X(FOPEN, "fopen")

/* MPI (mpiio.c): MPI_Init/Finalize and every MPI_File_* call; names are the MPI function names. */
#define IOLOOM_MPI_OPS(X) \
    X(MPI_INIT, "MPI_Init")

#define IOLOOM_ALL_OPS(X) IOLOOM_PROCESS_OPS(X) IOLOOM_POSIX_OPS(X) IOLOOM_STDIO_OPS(X) IOLOOM_MPI_OPS(X)

enum ioloom_op {
#define IOLOOM_OP_ENUM(suffix, name) IOLOOM_OP_##suffix,
    IOLOOM_ALL_OPS(IOLOOM_OP_ENUM)
#undef IOLOOM_OP_ENUM
    IOLOOM_OP_COUNT
};

#endif
