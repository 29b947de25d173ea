/* Operation codes. One X-macro list is the single source: it gives the enum, and the writer stores the
 * code -> name table in every trace, so readers never hard-code codes. Append new operations at the end
 * of their section; codes are per trace, not a stable ABI.
 *
 * X(ENUM_SUFFIX, "name recorded in the trace", CLASS)
 *
 * CLASS is what the call does, the one statement of it (the analysis's op kinds, python/ioloom/analysis/ops.py
 * and python/ioloom/trace/ops.py, are checked against it by tests/test_ops_table.py):
 *   READ, WRITE  moves bytes (ret_bytes) from a file into memory, or out of memory into a file
 *   COPY         a copy inside the kernel, recorded twice: aux 0 its source side (a read), aux 1 its destination
 *   AIO          collects an asynchronous request's bytes: aux LIO_READ (0) a read, LIO_WRITE (1) a write
 *   META         names, opens, closes, describes or positions a file without moving its data
 *   SYNC         makes written data durable
 *   LOCK         may set or release a record lock (fcntl: which, its aux tells)
 *   OTHER        anything else (process life, maps, request submission and completion, MPI set-up)
 */
#ifndef IOLOOM_OPS_H
#define IOLOOM_OPS_H

/* Process life: init/finalize, fork, exec, thread start. (process.c, mpiio.c) */
#define IOLOOM_PROCESS_OPS(X)                \
    X(PROCESS_START, "process_start", OTHER) \
    X(PROCESS_EXIT, "process_exit", OTHER)   \
    X(FORK, "fork", OTHER)                   \
    X(EXEC, "exec", OTHER)                   \
    X(SIGNAL, "signal", OTHER)

/* POSIX (posix.c). */
#define IOLOOM_POSIX_OPS(X)                     \
    X(OPEN, "open", META)                       \
    X(OPEN64, "open64", META)                   \
    X(OPENAT, "openat", META)                   \
    X(OPENAT64, "openat64", META)               \
    X(CREAT, "creat", META)                     \
    X(CREAT64, "creat64", META)                 \
    X(U_OPEN_2, "__open_2", META)               \
    X(U_OPEN64_2, "__open64_2", META)           \
    X(U_OPENAT_2, "__openat_2", META)           \
    X(U_OPENAT64_2, "__openat64_2", META)       \
    X(CLOSE, "close", META)                     \
    X(DUP, "dup", META)                         \
    X(DUP2, "dup2", META)                       \
    X(DUP3, "dup3", META)                       \
    X(FCNTL, "fcntl", LOCK)                     \
    X(FCNTL64, "fcntl64", LOCK)                 \
    X(READ, "read", READ)                       \
    X(U_READ_CHK, "__read_chk", READ)           \
    X(WRITE, "write", WRITE)                    \
    X(PREAD, "pread", READ)                     \
    X(U_PREAD_CHK, "__pread_chk", READ)         \
    X(PREAD64, "pread64", READ)                 \
    X(U_PREAD64_CHK, "__pread64_chk", READ)     \
    X(PWRITE, "pwrite", WRITE)                  \
    X(PWRITE64, "pwrite64", WRITE)              \
    X(READV, "readv", READ)                     \
    X(WRITEV, "writev", WRITE)                  \
    X(PREADV, "preadv", READ)                   \
    X(PREADV64, "preadv64", READ)               \
    X(PWRITEV, "pwritev", WRITE)                \
    X(PWRITEV64, "pwritev64", WRITE)            \
    X(PREADV2, "preadv2", READ)                 \
    X(PREADV64V2, "preadv64v2", READ)           \
    X(PWRITEV2, "pwritev2", WRITE)              \
    X(PWRITEV64V2, "pwritev64v2", WRITE)        \
    X(LSEEK, "lseek", META)                     \
    X(LSEEK64, "lseek64", META)                 \
    X(FSYNC, "fsync", SYNC)                     \
    X(FDATASYNC, "fdatasync", SYNC)             \
    X(FTRUNCATE, "ftruncate", META)             \
    X(FTRUNCATE64, "ftruncate64", META)         \
    X(TRUNCATE, "truncate", META)               \
    X(TRUNCATE64, "truncate64", META)           \
    X(COPY_FILE_RANGE, "copy_file_range", COPY) \
    X(SENDFILE, "sendfile", COPY)               \
    X(SENDFILE64, "sendfile64", COPY)           \
    X(MMAP, "mmap", OTHER)                      \
    X(MMAP64, "mmap64", OTHER)                  \
    X(MUNMAP, "munmap", OTHER)                  \
    X(MSYNC, "msync", SYNC)                     \
    X(STAT, "stat", META)                       \
    X(STAT64, "stat64", META)                   \
    X(LSTAT, "lstat", META)                     \
    X(LSTAT64, "lstat64", META)                 \
    X(FSTAT, "fstat", META)                     \
    X(FSTAT64, "fstat64", META)                 \
    X(FSTATAT, "fstatat", META)                 \
    X(FSTATAT64, "fstatat64", META)             \
    X(STATX, "statx", META)                     \
    X(U_XSTAT, "__xstat", META)                 \
    X(U_XSTAT64, "__xstat64", META)             \
    X(U_LXSTAT, "__lxstat", META)               \
    X(U_LXSTAT64, "__lxstat64", META)           \
    X(U_FXSTAT, "__fxstat", META)               \
    X(U_FXSTAT64, "__fxstat64", META)           \
    X(U_FXSTATAT, "__fxstatat", META)           \
    X(U_FXSTATAT64, "__fxstatat64", META)       \
    X(ACCESS, "access", META)                   \
    X(FACCESSAT, "faccessat", META)             \
    X(UNLINK, "unlink", META)                   \
    X(UNLINKAT, "unlinkat", META)               \
    X(RENAME, "rename", META)                   \
    X(RENAMEAT, "renameat", META)               \
    X(MKDIR, "mkdir", META)                     \
    X(MKDIRAT, "mkdirat", META)                 \
    X(RMDIR, "rmdir", META)                     \
    X(AIO_READ, "aio_read", OTHER)              \
    X(AIO_READ64, "aio_read64", OTHER)          \
    X(AIO_WRITE, "aio_write", OTHER)            \
    X(AIO_WRITE64, "aio_write64", OTHER)        \
    X(LIO_LISTIO, "lio_listio", OTHER)          \
    X(LIO_LISTIO64, "lio_listio64", OTHER)      \
    X(AIO_ERROR, "aio_error", OTHER)            \
    X(AIO_ERROR64, "aio_error64", OTHER)        \
    X(AIO_RETURN, "aio_return", AIO)            \
    X(AIO_RETURN64, "aio_return64", AIO)        \
    X(AIO_SUSPEND, "aio_suspend", OTHER)        \
    X(AIO_SUSPEND64, "aio_suspend64", OTHER)

/* stdio (stdio.c). */
#define IOLOOM_STDIO_OPS(X)                               \
    X(FOPEN, "fopen", META)                               \
    X(FOPEN64, "fopen64", META)                           \
    X(FDOPEN, "fdopen", META)                             \
    X(FREOPEN, "freopen", META)                           \
    X(FREOPEN64, "freopen64", META)                       \
    X(FCLOSE, "fclose", META)                             \
    X(FREAD, "fread", READ)                               \
    X(FREAD_UNLOCKED, "fread_unlocked", READ)             \
    X(U_FREAD_CHK, "__fread_chk", READ)                   \
    X(U_FREAD_UNLOCKED_CHK, "__fread_unlocked_chk", READ) \
    X(FWRITE, "fwrite", WRITE)                            \
    X(FWRITE_UNLOCKED, "fwrite_unlocked", WRITE)          \
    X(PRINTF, "printf", WRITE)                            \
    X(FPRINTF, "fprintf", WRITE)                          \
    X(VPRINTF, "vprintf", WRITE)                          \
    X(VFPRINTF, "vfprintf", WRITE)                        \
    X(U_PRINTF_CHK, "__printf_chk", WRITE)                \
    X(U_FPRINTF_CHK, "__fprintf_chk", WRITE)              \
    X(U_VPRINTF_CHK, "__vprintf_chk", WRITE)              \
    X(U_VFPRINTF_CHK, "__vfprintf_chk", WRITE)            \
    X(PUTS, "puts", WRITE)                                \
    X(FPUTS, "fputs", WRITE)                              \
    X(FPUTS_UNLOCKED, "fputs_unlocked", WRITE)            \
    X(PUTC, "putc", WRITE)                                \
    X(FPUTC, "fputc", WRITE)                              \
    X(PUTC_UNLOCKED, "putc_unlocked", WRITE)              \
    X(FPUTC_UNLOCKED, "fputc_unlocked", WRITE)            \
    X(PUTCHAR, "putchar", WRITE)                          \
    X(PUTCHAR_UNLOCKED, "putchar_unlocked", WRITE)        \
    X(GETC, "getc", READ)                                 \
    X(FGETC, "fgetc", READ)                               \
    X(GETC_UNLOCKED, "getc_unlocked", READ)               \
    X(FGETC_UNLOCKED, "fgetc_unlocked", READ)             \
    X(GETCHAR, "getchar", READ)                           \
    X(GETCHAR_UNLOCKED, "getchar_unlocked", READ)         \
    X(FGETS, "fgets", READ)                               \
    X(FGETS_UNLOCKED, "fgets_unlocked", READ)             \
    X(U_FGETS_CHK, "__fgets_chk", READ)                   \
    X(U_FGETS_UNLOCKED_CHK, "__fgets_unlocked_chk", READ) \
    X(GETLINE, "getline", READ)                           \
    X(GETDELIM, "getdelim", READ)                         \
    X(FSEEK, "fseek", META)                               \
    X(FSEEKO, "fseeko", META)                             \
    X(FSEEKO64, "fseeko64", META)                         \
    X(FTELL, "ftell", META)                               \
    X(FTELLO, "ftello", META)                             \
    X(FTELLO64, "ftello64", META)                         \
    X(REWIND, "rewind", META)                             \
    X(FFLUSH, "fflush", SYNC)                             \
    X(FFLUSH_UNLOCKED, "fflush_unlocked", SYNC)           \
    X(FILENO, "fileno", META)                             \
    X(FILENO_UNLOCKED, "fileno_unlocked", META)           \
    X(U_GETDELIM, "__getdelim", READ)

/* MPI (mpiio_*.c): MPI_Init/Finalize, every MPI_File_* call and the request completions (MPI_Wait/MPI_Test
 * families). The enum suffix is the MPI function name itself, so the wrappers paste IOLOOM_OP_##name and a
 * wrapper without an op (or a misspelt one) does not compile. The MPI-4 large-count `_c` names are listed even
 * when the MPI in use lacks them: this list must not depend on which MPI the tracer was built against. */
#define IOLOOM_MPI_OPS(X)                                                    \
    X(MPI_File_read_at, "MPI_File_read_at", READ)                            \
    X(MPI_File_write_at, "MPI_File_write_at", WRITE)                         \
    X(MPI_File_read_at_all, "MPI_File_read_at_all", READ)                    \
    X(MPI_File_write_at_all, "MPI_File_write_at_all", WRITE)                 \
    X(MPI_File_read, "MPI_File_read", READ)                                  \
    X(MPI_File_write, "MPI_File_write", WRITE)                               \
    X(MPI_File_read_all, "MPI_File_read_all", READ)                          \
    X(MPI_File_write_all, "MPI_File_write_all", WRITE)                       \
    X(MPI_File_read_shared, "MPI_File_read_shared", READ)                    \
    X(MPI_File_write_shared, "MPI_File_write_shared", WRITE)                 \
    X(MPI_File_read_ordered, "MPI_File_read_ordered", READ)                  \
    X(MPI_File_write_ordered, "MPI_File_write_ordered", WRITE)               \
    X(MPI_File_iread_at, "MPI_File_iread_at", READ)                          \
    X(MPI_File_iwrite_at, "MPI_File_iwrite_at", WRITE)                       \
    X(MPI_File_iread_at_all, "MPI_File_iread_at_all", READ)                  \
    X(MPI_File_iwrite_at_all, "MPI_File_iwrite_at_all", WRITE)               \
    X(MPI_File_iread, "MPI_File_iread", READ)                                \
    X(MPI_File_iwrite, "MPI_File_iwrite", WRITE)                             \
    X(MPI_File_iread_all, "MPI_File_iread_all", READ)                        \
    X(MPI_File_iwrite_all, "MPI_File_iwrite_all", WRITE)                     \
    X(MPI_File_iread_shared, "MPI_File_iread_shared", READ)                  \
    X(MPI_File_iwrite_shared, "MPI_File_iwrite_shared", WRITE)               \
    X(MPI_File_read_at_all_begin, "MPI_File_read_at_all_begin", READ)        \
    X(MPI_File_write_at_all_begin, "MPI_File_write_at_all_begin", WRITE)     \
    X(MPI_File_read_all_begin, "MPI_File_read_all_begin", READ)              \
    X(MPI_File_write_all_begin, "MPI_File_write_all_begin", WRITE)           \
    X(MPI_File_read_ordered_begin, "MPI_File_read_ordered_begin", READ)      \
    X(MPI_File_write_ordered_begin, "MPI_File_write_ordered_begin", WRITE)   \
    X(MPI_File_read_at_all_end, "MPI_File_read_at_all_end", READ)            \
    X(MPI_File_write_at_all_end, "MPI_File_write_at_all_end", WRITE)         \
    X(MPI_File_read_all_end, "MPI_File_read_all_end", READ)                  \
    X(MPI_File_write_all_end, "MPI_File_write_all_end", WRITE)               \
    X(MPI_File_read_ordered_end, "MPI_File_read_ordered_end", READ)          \
    X(MPI_File_write_ordered_end, "MPI_File_write_ordered_end", WRITE)       \
    X(MPI_File_open, "MPI_File_open", META)                                  \
    X(MPI_File_close, "MPI_File_close", META)                                \
    X(MPI_File_delete, "MPI_File_delete", META)                              \
    X(MPI_File_sync, "MPI_File_sync", SYNC)                                  \
    X(MPI_File_set_size, "MPI_File_set_size", META)                          \
    X(MPI_File_preallocate, "MPI_File_preallocate", META)                    \
    X(MPI_File_get_size, "MPI_File_get_size", META)                          \
    X(MPI_File_seek, "MPI_File_seek", META)                                  \
    X(MPI_File_seek_shared, "MPI_File_seek_shared", META)                    \
    X(MPI_File_set_view, "MPI_File_set_view", META)                          \
    X(MPI_File_set_info, "MPI_File_set_info", META)                          \
    X(MPI_File_set_atomicity, "MPI_File_set_atomicity", META)                \
    X(MPI_Wait, "MPI_Wait", OTHER)                                           \
    X(MPI_Waitall, "MPI_Waitall", OTHER)                                     \
    X(MPI_Waitany, "MPI_Waitany", OTHER)                                     \
    X(MPI_Waitsome, "MPI_Waitsome", OTHER)                                   \
    X(MPI_Test, "MPI_Test", OTHER)                                           \
    X(MPI_Testall, "MPI_Testall", OTHER)                                     \
    X(MPI_Testany, "MPI_Testany", OTHER)                                     \
    X(MPI_Testsome, "MPI_Testsome", OTHER)                                   \
    X(MPI_Init, "MPI_Init", OTHER)                                           \
    X(MPI_Init_thread, "MPI_Init_thread", OTHER)                             \
    X(MPI_Finalize, "MPI_Finalize", OTHER)                                   \
    X(MPI_File_read_at_c, "MPI_File_read_at_c", READ)                        \
    X(MPI_File_write_at_c, "MPI_File_write_at_c", WRITE)                     \
    X(MPI_File_read_at_all_c, "MPI_File_read_at_all_c", READ)                \
    X(MPI_File_write_at_all_c, "MPI_File_write_at_all_c", WRITE)             \
    X(MPI_File_read_c, "MPI_File_read_c", READ)                              \
    X(MPI_File_write_c, "MPI_File_write_c", WRITE)                           \
    X(MPI_File_read_all_c, "MPI_File_read_all_c", READ)                      \
    X(MPI_File_write_all_c, "MPI_File_write_all_c", WRITE)                   \
    X(MPI_File_read_shared_c, "MPI_File_read_shared_c", READ)                \
    X(MPI_File_write_shared_c, "MPI_File_write_shared_c", WRITE)             \
    X(MPI_File_read_ordered_c, "MPI_File_read_ordered_c", READ)              \
    X(MPI_File_write_ordered_c, "MPI_File_write_ordered_c", WRITE)           \
    X(MPI_File_iread_at_c, "MPI_File_iread_at_c", READ)                      \
    X(MPI_File_iwrite_at_c, "MPI_File_iwrite_at_c", WRITE)                   \
    X(MPI_File_iread_at_all_c, "MPI_File_iread_at_all_c", READ)              \
    X(MPI_File_iwrite_at_all_c, "MPI_File_iwrite_at_all_c", WRITE)           \
    X(MPI_File_iread_c, "MPI_File_iread_c", READ)                            \
    X(MPI_File_iwrite_c, "MPI_File_iwrite_c", WRITE)                         \
    X(MPI_File_iread_all_c, "MPI_File_iread_all_c", READ)                    \
    X(MPI_File_iwrite_all_c, "MPI_File_iwrite_all_c", WRITE)                 \
    X(MPI_File_iread_shared_c, "MPI_File_iread_shared_c", READ)              \
    X(MPI_File_iwrite_shared_c, "MPI_File_iwrite_shared_c", WRITE)           \
    X(MPI_File_read_at_all_begin_c, "MPI_File_read_at_all_begin_c", READ)    \
    X(MPI_File_write_at_all_begin_c, "MPI_File_write_at_all_begin_c", WRITE) \
    X(MPI_File_read_all_begin_c, "MPI_File_read_all_begin_c", READ)          \
    X(MPI_File_write_all_begin_c, "MPI_File_write_all_begin_c", WRITE)       \
    X(MPI_File_read_ordered_begin_c, "MPI_File_read_ordered_begin_c", READ)  \
    X(MPI_File_write_ordered_begin_c, "MPI_File_write_ordered_begin_c", WRITE)

/* libioloom-async (native/async/trace.c, docs/async.md "Traced"): the simulation's calls, and the writer side's
 * store of each block, end of each client's iteration and plugin runs; call_id and parent tie each store to the
 * call that gave its block, and each writer-side end of iteration to the client's. OTHER: the bytes they hand over
 * reach a file through the writer's own POSIX calls, which the posix layer records. */
#define IOLOOM_ASYNC_OPS(X)                                    \
    X(ASYNC_WRITE, "async_write", OTHER)                       \
    X(ASYNC_COMMIT, "async_commit", OTHER)                     \
    X(ASYNC_SIGNAL, "async_signal", OTHER)                     \
    X(ASYNC_END_ITERATION, "async_end_iteration", OTHER)       \
    X(ASYNC_STORE, "async_store", OTHER)                       \
    X(ASYNC_WRITER_ITERATION, "async_writer_iteration", OTHER) \
    X(ASYNC_PLUGIN, "async_plugin", OTHER)

#define IOLOOM_ALL_OPS(X) \
    IOLOOM_PROCESS_OPS(X) IOLOOM_POSIX_OPS(X) IOLOOM_STDIO_OPS(X) IOLOOM_MPI_OPS(X) IOLOOM_ASYNC_OPS(X)

enum ioloom_op {
#define IOLOOM_OP_ENUM(suffix, name, class) IOLOOM_OP_##suffix,
    IOLOOM_ALL_OPS(IOLOOM_OP_ENUM)
#undef IOLOOM_OP_ENUM
        IOLOOM_OP_COUNT
};

#endif
