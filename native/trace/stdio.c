/* stdio wrappers. Each event is on the stream's descriptor (handle = fileno) and so on its file: bytes are
 * attributed to the file the stream is open on. stdio's own buffered read()/write() happen inside libc and
 * are not seen as POSIX events: the stdio layer is what the program asked for. offset is -1 (asking a stream
 * its position can cost a system call); req_bytes are the bytes asked, ret_bytes the bytes moved. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "wrap.h"

#define S IOLOOM_STDIO
#define OP(name) IOLOOM_OP_##name

static int stream_fd(FILE *fp) { return fp ? fp->_fileno : -1; }

static void record_stream(struct ioloom_call *c, enum ioloom_op op, FILE *fp, int64_t offset, int64_t req,
                          int64_t ret, int64_t aux) {
    ioloom_record_fd(c, op, S, stream_fd(fp), offset, req, ret, aux);
}

/* Bytes moved by a call that returns a count of items (fread, fwrite): the error state tells failure. */
static int64_t moved(size_t items, size_t size) { return (int64_t)(items * size); }

/* A character or line read returned EOF: 0 bytes at end of file, -1 on error. */
static int64_t read_result(FILE *fp, int64_t bytes, int at_eof) { return !at_eof ? bytes : ferror(fp) ? -1 : 0; }

/* ---- open and close: aux = the mode as open(2) flags, ret = the descriptor ---- */

static int mode_flags(const char *mode) {
    int plus = mode && strchr(mode, '+') != NULL;
    switch (mode ? mode[0] : 'r') {
    case 'w': return (plus ? O_RDWR : O_WRONLY) | O_CREAT | O_TRUNC;
    case 'a': return (plus ? O_RDWR : O_WRONLY) | O_CREAT | O_APPEND;
    default: return plus ? O_RDWR : O_RDONLY;
    }
}

static void record_fopen(struct ioloom_call *c, enum ioloom_op op, const char *path, const char *mode, FILE *r) {
    int fd = stream_fd(r);
    int32_t file = path ? ioloom_path_state(AT_FDCWD, path, fd) : ioloom_fd_state(fd);
    if (fd >= 0) ioloom_fd_set(fd, file);
    ioloom_record_file(c, op, S, file, fd, -1, -1, fd, mode_flags(mode));
}

IOLOOM_EXPORT FILE *fopen(const char *path, const char *mode) {
    TRACED(S, fopen, (path, mode), !r, record_fopen(&c, OP(FOPEN), path, mode, r));
}
IOLOOM_EXPORT FILE *fopen64(const char *path, const char *mode) {
    TRACED(S, fopen64, (path, mode), !r, record_fopen(&c, OP(FOPEN64), path, mode, r));
}
IOLOOM_EXPORT FILE *fdopen(int fd, const char *mode) {
    TRACED(S, fdopen, (fd, mode), !r, record_fopen(&c, OP(FDOPEN), NULL, mode, r));
}
/* freopen with a NULL path changes the mode of the same file. */
IOLOOM_EXPORT FILE *freopen(const char *path, const char *mode, FILE *fp) {
    TRACED(S, freopen, (path, mode, fp), !r, record_fopen(&c, OP(FREOPEN), path, mode, r));
}
IOLOOM_EXPORT FILE *freopen64(const char *path, const char *mode, FILE *fp) {
    TRACED(S, freopen64, (path, mode, fp), !r, record_fopen(&c, OP(FREOPEN64), path, mode, r));
}

IOLOOM_EXPORT int fclose(FILE *fp) {
    struct ioloom_call c;
    int fd = stream_fd(fp);
    if (!ioloom_call_start(&c, S)) {
        ioloom_fd_forget(fd);
        return IOLOOM_NEXT(fclose)(fp);
    }
    int32_t file = ioloom_fd_state(fd); /* before the descriptor number can be reused */
    ioloom_fd_forget(fd);
    int r = IOLOOM_NEXT(fclose)(fp);
    ioloom_call_returned(&c, r == EOF);
    ioloom_record_file(&c, OP(FCLOSE), S, file, fd, -1, -1, r, -1);
    return r;
}

/* ---- block reads and writes ---- */

#define WRAP_ITEMS(fn, opname, buf_type)                                                                   \
    IOLOOM_EXPORT size_t fn(buf_type buf, size_t size, size_t n, FILE *fp) {                               \
        TRACED(S, fn, (buf, size, n, fp), r < n && ferror(fp),                                             \
               record_stream(&c, OP(opname), fp, -1, moved(n, size), moved(r, size), -1));                 \
    }
WRAP_ITEMS(fread, FREAD, void *)
WRAP_ITEMS(fread_unlocked, FREAD_UNLOCKED, void *)
WRAP_ITEMS(fwrite, FWRITE, const void *)
WRAP_ITEMS(fwrite_unlocked, FWRITE_UNLOCKED, const void *)

#define WRAP_ITEMS_CHK(fn, opname)                                                                         \
    size_t fn(void *buf, size_t buflen, size_t size, size_t n, FILE *fp);                                  \
    IOLOOM_EXPORT size_t fn(void *buf, size_t buflen, size_t size, size_t n, FILE *fp) {                   \
        TRACED(S, fn, (buf, buflen, size, n, fp), r < n && ferror(fp),                                     \
               record_stream(&c, OP(opname), fp, -1, moved(n, size), moved(r, size), -1));                 \
    }
WRAP_ITEMS_CHK(__fread_chk, U_FREAD_CHK)
WRAP_ITEMS_CHK(__fread_unlocked_chk, U_FREAD_UNLOCKED_CHK)

/* ---- formatted output: every form ends in the v-form with a va_list; ret = bytes written ---- */

static void record_printed(struct ioloom_call *c, enum ioloom_op op, FILE *fp, int r) {
    record_stream(c, op, fp, -1, r >= 0 ? r : -1, r >= 0 ? r : -1, -1);
}

IOLOOM_EXPORT int vfprintf(FILE *fp, const char *fmt, va_list ap) {
    TRACED(S, vfprintf, (fp, fmt, ap), r < 0, record_printed(&c, OP(VFPRINTF), fp, r));
}
IOLOOM_EXPORT int vprintf(const char *fmt, va_list ap) {
    TRACED(S, vfprintf, (stdout, fmt, ap), r < 0, record_printed(&c, OP(VPRINTF), stdout, r));
}

static int printf_as(enum ioloom_op op, FILE *fp, const char *fmt, va_list ap) {
    TRACED(S, vfprintf, (fp, fmt, ap), r < 0, record_printed(&c, op, fp, r));
}

IOLOOM_EXPORT int fprintf(FILE *fp, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = printf_as(OP(FPRINTF), fp, fmt, ap);
    va_end(ap);
    return r;
}
IOLOOM_EXPORT int printf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = printf_as(OP(PRINTF), stdout, fmt, ap);
    va_end(ap);
    return r;
}

/* Fortified forms: `flag` asks for the %n and positional checks, which the __vfprintf_chk below keeps. */
int __vfprintf_chk(FILE *fp, int flag, const char *fmt, va_list ap);
int __vprintf_chk(int flag, const char *fmt, va_list ap);
int __fprintf_chk(FILE *fp, int flag, const char *fmt, ...);
int __printf_chk(int flag, const char *fmt, ...);

static int printf_chk_as(enum ioloom_op op, FILE *fp, int flag, const char *fmt, va_list ap) {
    TRACED(S, __vfprintf_chk, (fp, flag, fmt, ap), r < 0, record_printed(&c, op, fp, r));
}
IOLOOM_EXPORT int __vfprintf_chk(FILE *fp, int flag, const char *fmt, va_list ap) {
    return printf_chk_as(OP(U_VFPRINTF_CHK), fp, flag, fmt, ap);
}
IOLOOM_EXPORT int __vprintf_chk(int flag, const char *fmt, va_list ap) {
    return printf_chk_as(OP(U_VPRINTF_CHK), stdout, flag, fmt, ap);
}
IOLOOM_EXPORT int __fprintf_chk(FILE *fp, int flag, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = printf_chk_as(OP(U_FPRINTF_CHK), fp, flag, fmt, ap);
    va_end(ap);
    return r;
}
IOLOOM_EXPORT int __printf_chk(int flag, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = printf_chk_as(OP(U_PRINTF_CHK), stdout, flag, fmt, ap);
    va_end(ap);
    return r;
}

/* ---- strings and characters out ---- */

static void record_put(struct ioloom_call *c, enum ioloom_op op, FILE *fp, int64_t bytes, int failed) {
    record_stream(c, op, fp, -1, bytes, failed ? -1 : bytes, -1);
}

IOLOOM_EXPORT int puts(const char *s) {
    TRACED(S, puts, (s), r == EOF, record_put(&c, OP(PUTS), stdout, (int64_t)strlen(s) + 1, r == EOF));
}
#define WRAP_FPUTS(fn, opname)                                                                             \
    IOLOOM_EXPORT int fn(const char *s, FILE *fp) {                                                        \
        TRACED(S, fn, (s, fp), r == EOF, record_put(&c, OP(opname), fp, (int64_t)strlen(s), r == EOF));    \
    }
WRAP_FPUTS(fputs, FPUTS)
WRAP_FPUTS(fputs_unlocked, FPUTS_UNLOCKED)

#define WRAP_PUTC(fn, opname)                                                                              \
    IOLOOM_EXPORT int fn(int ch, FILE *fp) {                                                               \
        TRACED(S, fn, (ch, fp), r == EOF, record_put(&c, OP(opname), fp, 1, r == EOF));                    \
    }
WRAP_PUTC(putc, PUTC)
WRAP_PUTC(fputc, FPUTC)
WRAP_PUTC(putc_unlocked, PUTC_UNLOCKED)
WRAP_PUTC(fputc_unlocked, FPUTC_UNLOCKED)

#define WRAP_PUTCHAR(fn, opname)                                                                           \
    IOLOOM_EXPORT int fn(int ch) {                                                                         \
        TRACED(S, fn, (ch), r == EOF, record_put(&c, OP(opname), stdout, 1, r == EOF));                    \
    }
WRAP_PUTCHAR(putchar, PUTCHAR)
WRAP_PUTCHAR(putchar_unlocked, PUTCHAR_UNLOCKED)

/* ---- characters and lines in ---- */

#define WRAP_GETC(fn, opname)                                                                              \
    IOLOOM_EXPORT int fn(FILE *fp) {                                                                       \
        TRACED(S, fn, (fp), r == EOF && ferror(fp),                                                        \
               record_stream(&c, OP(opname), fp, -1, 1, read_result(fp, 1, r == EOF), -1));                \
    }
WRAP_GETC(getc, GETC)
WRAP_GETC(fgetc, FGETC)
WRAP_GETC(getc_unlocked, GETC_UNLOCKED)
WRAP_GETC(fgetc_unlocked, FGETC_UNLOCKED)

#define WRAP_GETCHAR(fn, opname)                                                                           \
    IOLOOM_EXPORT int fn(void) {                                                                           \
        TRACED(S, fn, (), r == EOF && ferror(stdin),                                                       \
               record_stream(&c, OP(opname), stdin, -1, 1, read_result(stdin, 1, r == EOF), -1));          \
    }
WRAP_GETCHAR(getchar, GETCHAR)
WRAP_GETCHAR(getchar_unlocked, GETCHAR_UNLOCKED)

/* fgets: req_bytes = the room given (n - 1 characters), ret_bytes = the length of the line read. */
static void record_line(struct ioloom_call *c, enum ioloom_op op, FILE *fp, int n, const char *r) {
    record_stream(c, op, fp, -1, n > 0 ? n - 1 : 0, read_result(fp, r ? (int64_t)strlen(r) : 0, !r), -1);
}
#define WRAP_FGETS(fn, opname)                                                                             \
    IOLOOM_EXPORT char *fn(char *s, int n, FILE *fp) {                                                     \
        TRACED(S, fn, (s, n, fp), !r && ferror(fp), record_line(&c, OP(opname), fp, n, r));                 \
    }
WRAP_FGETS(fgets, FGETS)
WRAP_FGETS(fgets_unlocked, FGETS_UNLOCKED)

#define WRAP_FGETS_CHK(fn, opname)                                                                         \
    char *fn(char *s, size_t size, int n, FILE *fp);                                                       \
    IOLOOM_EXPORT char *fn(char *s, size_t size, int n, FILE *fp) {                                        \
        TRACED(S, fn, (s, size, n, fp), !r && ferror(fp), record_line(&c, OP(opname), fp, n, r));          \
    }
WRAP_FGETS_CHK(__fgets_chk, U_FGETS_CHK)
WRAP_FGETS_CHK(__fgets_unlocked_chk, U_FGETS_UNLOCKED_CHK)

/* getline/getdelim: ret_bytes = the length read (0 at end of file), aux = the delimiter. */
static void record_delim(struct ioloom_call *c, enum ioloom_op op, FILE *fp, int delim, ssize_t r) {
    record_stream(c, op, fp, -1, -1, read_result(fp, r, r < 0), delim);
}
IOLOOM_EXPORT ssize_t getline(char **line, size_t *n, FILE *fp) {
    TRACED(S, getline, (line, n, fp), r < 0 && ferror(fp), record_delim(&c, OP(GETLINE), fp, '\n', r));
}
IOLOOM_EXPORT ssize_t getdelim(char **line, size_t *n, int delim, FILE *fp) {
    TRACED(S, getdelim, (line, n, delim, fp), r < 0 && ferror(fp), record_delim(&c, OP(GETDELIM), fp, delim, r));
}
/* What glibc's inline getline() calls at -O2. */
ssize_t __getdelim(char **line, size_t *n, int delim, FILE *fp);
IOLOOM_EXPORT ssize_t __getdelim(char **line, size_t *n, int delim, FILE *fp) {
    TRACED(S, __getdelim, (line, n, delim, fp), r < 0 && ferror(fp), record_delim(&c, OP(U_GETDELIM), fp, delim, r));
}

/* ---- positioning: fseek offset = the offset asked, aux = whence; ftell offset = ret = the position ---- */

IOLOOM_EXPORT int fseek(FILE *fp, long off, int whence) {
    TRACED(S, fseek, (fp, off, whence), r < 0, record_stream(&c, OP(FSEEK), fp, off, -1, r, whence));
}
#define WRAP_FSEEKO(fn, opname, off_type)                                                                  \
    IOLOOM_EXPORT int fn(FILE *fp, off_type off, int whence) {                                             \
        TRACED(S, fn, (fp, off, whence), r < 0, record_stream(&c, OP(opname), fp, off, -1, r, whence));     \
    }
WRAP_FSEEKO(fseeko, FSEEKO, off_t)
WRAP_FSEEKO(fseeko64, FSEEKO64, off64_t)

#define WRAP_FTELL(fn, opname)                                                                             \
    IOLOOM_EXPORT __typeof__(fn(NULL)) fn(FILE *fp) {                                                      \
        TRACED(S, fn, (fp), r < 0, record_stream(&c, OP(opname), fp, r, -1, r, -1));                       \
    }
WRAP_FTELL(ftell, FTELL)
WRAP_FTELL(ftello, FTELLO)
WRAP_FTELL(ftello64, FTELLO64)

IOLOOM_EXPORT void rewind(FILE *fp) {
    struct ioloom_call c;
    if (!ioloom_call_start(&c, S)) return IOLOOM_NEXT(rewind)(fp);
    IOLOOM_NEXT(rewind)(fp);
    ioloom_call_returned(&c, 0);
    record_stream(&c, OP(REWIND), fp, 0, -1, 0, SEEK_SET);
}

/* fflush(NULL) flushes every stream: handle -1. */
#define WRAP_FFLUSH(fn, opname)                                                                            \
    IOLOOM_EXPORT int fn(FILE *fp) {                                                                       \
        TRACED(S, fn, (fp), r == EOF, record_stream(&c, OP(opname), fp, -1, -1, r, -1));                   \
    }
WRAP_FFLUSH(fflush, FFLUSH)
WRAP_FFLUSH(fflush_unlocked, FFLUSH_UNLOCKED)

#define WRAP_FILENO(fn, opname)                                                                            \
    IOLOOM_EXPORT int fn(FILE *fp) {                                                                       \
        TRACED(S, fn, (fp), r < 0, record_stream(&c, OP(opname), fp, -1, -1, r, -1));                      \
    }
WRAP_FILENO(fileno, FILENO)
WRAP_FILENO(fileno_unlocked, FILENO_UNLOCKED)
