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
    X(PROCESS_EXIT, "process_exit") \
    X(FORK, "fork") \
    X(EXEC, "exec") \
    X(SIGNAL, "signal")

/* POSIX (posix.c). */
#define IOLOOM_POSIX_OPS(X) \
    X(OPEN, "open") \
    X(OPEN64, "open64") \
    X(OPENAT, "openat") \
    X(OPENAT64, "openat64") \
    X(CREAT, "creat") \
    X(CREAT64, "creat64") \
    X(U_OPEN_2, "__open_2") \
    X(U_OPEN64_2, "__open64_2") \
    X(U_OPENAT_2, "__openat_2") \
    X(U_OPENAT64_2, "__openat64_2") \
    X(CLOSE, "close") \
    X(DUP, "dup") \
    X(DUP2, "dup2") \
    X(DUP3, "dup3") \
    X(FCNTL, "fcntl") \
    X(FCNTL64, "fcntl64") \
    X(READ, "read") \
    X(U_READ_CHK, "__read_chk") \
    X(WRITE, "write") \
    X(PREAD, "pread") \
    X(U_PREAD_CHK, "__pread_chk") \
    X(PREAD64, "pread64") \
    X(U_PREAD64_CHK, "__pread64_chk") \
    X(PWRITE, "pwrite") \
    X(PWRITE64, "pwrite64") \
    X(READV, "readv") \
    X(WRITEV, "writev") \
    X(PREADV, "preadv") \
    X(PREADV64, "preadv64") \
    X(PWRITEV, "pwritev") \
    X(PWRITEV64, "pwritev64") \
    X(PREADV2, "preadv2") \
    X(PREADV64V2, "preadv64v2") \
    X(PWRITEV2, "pwritev2") \
    X(PWRITEV64V2, "pwritev64v2") \
    X(LSEEK, "lseek") \
    X(LSEEK64, "lseek64") \
    X(FSYNC, "fsync") \
    X(FDATASYNC, "fdatasync") \
    X(FTRUNCATE, "ftruncate") \
    X(FTRUNCATE64, "ftruncate64") \
    X(TRUNCATE, "truncate") \
    X(TRUNCATE64, "truncate64") \
    X(COPY_FILE_RANGE, "copy_file_range") \
    X(SENDFILE, "sendfile") \
    X(SENDFILE64, "sendfile64") \
    X(MMAP, "mmap") \
    X(MMAP64, "mmap64") \
    X(MUNMAP, "munmap") \
    X(MSYNC, "msync") \
    X(STAT, "stat") \
    X(STAT64, "stat64") \
    X(LSTAT, "lstat") \
    X(LSTAT64, "lstat64") \
    X(FSTAT, "fstat") \
    X(FSTAT64, "fstat64") \
    X(FSTATAT, "fstatat") \
    X(FSTATAT64, "fstatat64") \
    X(STATX, "statx") \
    X(U_XSTAT, "__xstat") \
    X(U_XSTAT64, "__xstat64") \
    X(U_LXSTAT, "__lxstat") \
    X(U_LXSTAT64, "__lxstat64") \
    X(U_FXSTAT, "__fxstat") \
    X(U_FXSTAT64, "__fxstat64") \
    X(U_FXSTATAT, "__fxstatat") \
    X(U_FXSTATAT64, "__fxstatat64") \
    X(ACCESS, "access") \
    X(FACCESSAT, "faccessat") \
    X(UNLINK, "unlink") \
    X(UNLINKAT, "unlinkat") \
    X(RENAME, "rename") \
    X(RENAMEAT, "renameat") \
    X(MKDIR, "mkdir") \
    X(MKDIRAT, "mkdirat") \
    X(RMDIR, "rmdir") \
    X(AIO_READ, "aio_read") \
    X(AIO_READ64, "aio_read64") \
    X(AIO_WRITE, "aio_write") \
    X(AIO_WRITE64, "aio_write64") \
    X(LIO_LISTIO, "lio_listio") \
    X(LIO_LISTIO64, "lio_listio64") \
    X(AIO_ERROR, "aio_error") \
    X(AIO_ERROR64, "aio_error64") \
    X(AIO_RETURN, "aio_return") \
    X(AIO_RETURN64, "aio_return64") \
    X(AIO_SUSPEND, "aio_suspend") \
    X(AIO_SUSPEND64, "aio_suspend64")

/* stdio (stdio.c). */
#define IOLOOM_STDIO_OPS(X) \
    X(FOPEN, "fopen") \
    X(FOPEN64, "fopen64") \
    X(FDOPEN, "fdopen") \
    X(FREOPEN, "freopen") \
    X(FREOPEN64, "freopen64") \
    X(FCLOSE, "fclose") \
    X(FREAD, "fread") \
    X(FREAD_UNLOCKED, "fread_unlocked") \
    X(U_FREAD_CHK, "__fread_chk") \
    X(U_FREAD_UNLOCKED_CHK, "__fread_unlocked_chk") \
    X(FWRITE, "fwrite") \
    X(FWRITE_UNLOCKED, "fwrite_unlocked") \
    X(PRINTF, "printf") \
    X(FPRINTF, "fprintf") \
    X(VPRINTF, "vprintf") \
    X(VFPRINTF, "vfprintf") \
    X(U_PRINTF_CHK, "__printf_chk") \
    X(U_FPRINTF_CHK, "__fprintf_chk") \
    X(U_VPRINTF_CHK, "__vprintf_chk") \
    X(U_VFPRINTF_CHK, "__vfprintf_chk") \
    X(PUTS, "puts") \
    X(FPUTS, "fputs") \
    X(FPUTS_UNLOCKED, "fputs_unlocked") \
    X(PUTC, "putc") \
    X(FPUTC, "fputc") \
    X(PUTC_UNLOCKED, "putc_unlocked") \
    X(FPUTC_UNLOCKED, "fputc_unlocked") \
    X(PUTCHAR, "putchar") \
    X(PUTCHAR_UNLOCKED, "putchar_unlocked") \
    X(GETC, "getc") \
    X(FGETC, "fgetc") \
    X(GETC_UNLOCKED, "getc_unlocked") \
    X(FGETC_UNLOCKED, "fgetc_unlocked") \
    X(GETCHAR, "getchar") \
    X(GETCHAR_UNLOCKED, "getchar_unlocked") \
    X(FGETS, "fgets") \
    X(FGETS_UNLOCKED, "fgets_unlocked") \
    X(U_FGETS_CHK, "__fgets_chk") \
    X(U_FGETS_UNLOCKED_CHK, "__fgets_unlocked_chk") \
    X(GETLINE, "getline") \
    X(GETDELIM, "getdelim") \
    X(FSEEK, "fseek") \
    X(FSEEKO, "fseeko") \
    X(FSEEKO64, "fseeko64") \
    X(FTELL, "ftell") \
    X(FTELLO, "ftello") \
    X(FTELLO64, "ftello64") \
    X(REWIND, "rewind") \
    X(FFLUSH, "fflush") \
    X(FFLUSH_UNLOCKED, "fflush_unlocked") \
    X(FILENO, "fileno") \
    X(FILENO_UNLOCKED, "fileno_unlocked") \
    X(U_GETDELIM, "__getdelim")

/* MPI (mpiio_*.c): MPI_Init/Finalize, every MPI_File_* call and the request completions (MPI_Wait/MPI_Test
 * families). The enum suffix is the MPI function name itself, so the wrappers paste IOLOOM_OP_##name and a
 * wrapper without an op (or a misspelt one) does not compile. The MPI-4 large-count `_c` names are listed even
 * when the MPI in use lacks them: this list must not depend on which MPI the tracer was built against. */
#define IOLOOM_MPI_OPS(X) \
    X(MPI_File_read_at, "MPI_File_read_at") \
    X(MPI_File_write_at, "MPI_File_write_at") \
    X(MPI_File_read_at_all, "MPI_File_read_at_all") \
    X(MPI_File_write_at_all, "MPI_File_write_at_all") \
    X(MPI_File_read, "MPI_File_read") \
    X(MPI_File_write, "MPI_File_write") \
    X(MPI_File_read_all, "MPI_File_read_all") \
    X(MPI_File_write_all, "MPI_File_write_all") \
    X(MPI_File_read_shared, "MPI_File_read_shared") \
    X(MPI_File_write_shared, "MPI_File_write_shared") \
    X(MPI_File_read_ordered, "MPI_File_read_ordered") \
    X(MPI_File_write_ordered, "MPI_File_write_ordered") \
    X(MPI_File_iread_at, "MPI_File_iread_at") \
    X(MPI_File_iwrite_at, "MPI_File_iwrite_at") \
    X(MPI_File_iread_at_all, "MPI_File_iread_at_all") \
    X(MPI_File_iwrite_at_all, "MPI_File_iwrite_at_all") \
    X(MPI_File_iread, "MPI_File_iread") \
    X(MPI_File_iwrite, "MPI_File_iwrite") \
    X(MPI_File_iread_all, "MPI_File_iread_all") \
    X(MPI_File_iwrite_all, "MPI_File_iwrite_all") \
    X(MPI_File_iread_shared, "MPI_File_iread_shared") \
    X(MPI_File_iwrite_shared, "MPI_File_iwrite_shared") \
    X(MPI_File_read_at_all_begin, "MPI_File_read_at_all_begin") \
    X(MPI_File_write_at_all_begin, "MPI_File_write_at_all_begin") \
    X(MPI_File_read_all_begin, "MPI_File_read_all_begin") \
    X(MPI_File_write_all_begin, "MPI_File_write_all_begin") \
    X(MPI_File_read_ordered_begin, "MPI_File_read_ordered_begin") \
    X(MPI_File_write_ordered_begin, "MPI_File_write_ordered_begin") \
    X(MPI_File_read_at_all_end, "MPI_File_read_at_all_end") \
    X(MPI_File_write_at_all_end, "MPI_File_write_at_all_end") \
    X(MPI_File_read_all_end, "MPI_File_read_all_end") \
    X(MPI_File_write_all_end, "MPI_File_write_all_end") \
    X(MPI_File_read_ordered_end, "MPI_File_read_ordered_end") \
    X(MPI_File_write_ordered_end, "MPI_File_write_ordered_end") \
    X(MPI_File_open, "MPI_File_open") \
    X(MPI_File_close, "MPI_File_close") \
    X(MPI_File_delete, "MPI_File_delete") \
    X(MPI_File_sync, "MPI_File_sync") \
    X(MPI_File_set_size, "MPI_File_set_size") \
    X(MPI_File_preallocate, "MPI_File_preallocate") \
    X(MPI_File_get_size, "MPI_File_get_size") \
    X(MPI_File_seek, "MPI_File_seek") \
    X(MPI_File_seek_shared, "MPI_File_seek_shared") \
    X(MPI_File_set_view, "MPI_File_set_view") \
    X(MPI_File_set_info, "MPI_File_set_info") \
    X(MPI_File_set_atomicity, "MPI_File_set_atomicity") \
    X(MPI_Wait, "MPI_Wait") \
    X(MPI_Waitall, "MPI_Waitall") \
    X(MPI_Waitany, "MPI_Waitany") \
    X(MPI_Waitsome, "MPI_Waitsome") \
    X(MPI_Test, "MPI_Test") \
    X(MPI_Testall, "MPI_Testall") \
    X(MPI_Testany, "MPI_Testany") \
    X(MPI_Testsome, "MPI_Testsome") \
    X(MPI_Init, "MPI_Init") \
    X(MPI_Init_thread, "MPI_Init_thread") \
    X(MPI_Finalize, "MPI_Finalize") \
    X(MPI_File_read_at_c, "MPI_File_read_at_c") \
    X(MPI_File_write_at_c, "MPI_File_write_at_c") \
    X(MPI_File_read_at_all_c, "MPI_File_read_at_all_c") \
    X(MPI_File_write_at_all_c, "MPI_File_write_at_all_c") \
    X(MPI_File_read_c, "MPI_File_read_c") \
    X(MPI_File_write_c, "MPI_File_write_c") \
    X(MPI_File_read_all_c, "MPI_File_read_all_c") \
    X(MPI_File_write_all_c, "MPI_File_write_all_c") \
    X(MPI_File_read_shared_c, "MPI_File_read_shared_c") \
    X(MPI_File_write_shared_c, "MPI_File_write_shared_c") \
    X(MPI_File_read_ordered_c, "MPI_File_read_ordered_c") \
    X(MPI_File_write_ordered_c, "MPI_File_write_ordered_c") \
    X(MPI_File_iread_at_c, "MPI_File_iread_at_c") \
    X(MPI_File_iwrite_at_c, "MPI_File_iwrite_at_c") \
    X(MPI_File_iread_at_all_c, "MPI_File_iread_at_all_c") \
    X(MPI_File_iwrite_at_all_c, "MPI_File_iwrite_at_all_c") \
    X(MPI_File_iread_c, "MPI_File_iread_c") \
    X(MPI_File_iwrite_c, "MPI_File_iwrite_c") \
    X(MPI_File_iread_all_c, "MPI_File_iread_all_c") \
    X(MPI_File_iwrite_all_c, "MPI_File_iwrite_all_c") \
    X(MPI_File_iread_shared_c, "MPI_File_iread_shared_c") \
    X(MPI_File_iwrite_shared_c, "MPI_File_iwrite_shared_c") \
    X(MPI_File_read_at_all_begin_c, "MPI_File_read_at_all_begin_c") \
    X(MPI_File_write_at_all_begin_c, "MPI_File_write_at_all_begin_c") \
    X(MPI_File_read_all_begin_c, "MPI_File_read_all_begin_c") \
    X(MPI_File_write_all_begin_c, "MPI_File_write_all_begin_c") \
    X(MPI_File_read_ordered_begin_c, "MPI_File_read_ordered_begin_c") \
    X(MPI_File_write_ordered_begin_c, "MPI_File_write_ordered_begin_c")

#define IOLOOM_ALL_OPS(X) IOLOOM_PROCESS_OPS(X) IOLOOM_POSIX_OPS(X) IOLOOM_STDIO_OPS(X) IOLOOM_MPI_OPS(X)

enum ioloom_op {
#define IOLOOM_OP_ENUM(suffix, name) IOLOOM_OP_##suffix,
    IOLOOM_ALL_OPS(IOLOOM_OP_ENUM)
#undef IOLOOM_OP_ENUM
    IOLOOM_OP_COUNT
};

#endif
