/* stdio wrappers. Each event is on the stream's descriptor (handle = fileno) and so on its file: bytes are
 * attributed to the file the stream is open on. stdio's own buffered read()/write() happen inside libc and
 * are not seen as POSIX events: the stdio layer is what the program asked for. req_bytes are the bytes asked,
 * ret_bytes the bytes moved; offset is the stream's position before the call (see "stream positions"). */
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <string.h>
#include <sys/single_threaded.h>
#include <wchar.h>

#include "key_table.h"
#include "positions.h"
#include "wrap.h"

#define S IOLOOM_STDIO
#define OP(name) IOLOOM_OP_##name

static int stream_fd(FILE *fp) { return fp ? fp->_fileno : -1; }

static void record_stream(struct ioloom_call *c, enum ioloom_op op, FILE *fp, int64_t offset, int64_t req, int64_t ret,
                          int64_t aux) {
    ioloom_record_fd(c, op, S, stream_fd(fp), offset, req, ret, aux);
}

/* ---- stream positions ----
 * Asking the stream (ftell) before every call would cost a lock and, while glibc does not know the file offset
 * (until the first seek), a system call. So the tracer follows each stream's position itself: it learns it
 * where it is certain (0 after fopen/freopen, the descriptor's position after fdopen, the result of ftell and of
 * every seek), adds the bytes each traced call moved, and keeps the buffer pointers the last call left. Between
 * traced calls the program may move the stream unseen:
 *  - glibc's inline getc_unlocked/putc_unlocked move the buffer's read or write pointer forward inside the same
 *    buffer: the position moved by as much (and when the buffer runs out they call __uflow/__overflow, which
 *    are followed here);
 *  - fflush empties the buffer without moving the position: followed; after fflush(NULL) the streams whose
 *    buffer changed ask once;
 *  - ungetc, scanf, the wide-character calls, __fpurge, fsetpos move it by what the tracer does not count: they
 *    mark the position lost.
 * Whatever else changed the pointers (setvbuf, a call not listed) makes the next traced call ask the stream
 * (ftello) once and follow on from its answer. After a fork or spawn, both processes may move a stream's file:
 * the streams that existed then are asked on every call. Append-mode streams, and streams with no position
 * (pipes, terminals), record -1. Bookkeeping and the call run under the stream's own lock once the process has
 * threads, so threads sharing a stream get exact offsets. */

#define MAX_STREAMS 1024 /* open at once; beyond it a stream's calls have offset -1 */
#define UNKNOWN (-1)     /* ask at the next call */
#define NO_POSITION (-2) /* append mode (every write goes to the end of file), or the stream cannot tell */

struct stream_position {
    int64_t at;                      /* the stream's position, UNKNOWN or NO_POSITION */
    const char *read_ptr, *read_end; /* the buffer pointers the last followed call left */
    const char *write_ptr, *write_base;
    uint32_t epoch;   /* ioloom_spawn_epoch when followed: an older stream is shared */
    uint32_t flushes; /* flushes_of_all when the pointers were taken */
};
static struct stream_position positions[MAX_STREAMS];
static struct key_table position_slots = KEY_TABLE(MAX_STREAMS);

static uint64_t stream_key(const FILE *fp) { return (uint64_t)(uintptr_t)fp; }

/* The slot this thread found last: programs call on one stream many times in a row. */
static __thread long last_found = -1;

static struct stream_position *position_of(const FILE *fp) {
    uint64_t key = stream_key(fp);
    if (key_table_holds(&position_slots, last_found, key)) return &positions[last_found];
    long slot = key_table_find(&position_slots, key);
    if (slot >= 0) last_found = slot;
    return slot < 0 ? NULL : &positions[slot];
}

/* fflush(NULL) calls so far. */
static volatile uint32_t flushes_of_all;

static void left_at(FILE *fp, struct stream_position *p, int64_t at) {
    p->at = p->at == NO_POSITION ? NO_POSITION : at;
    p->flushes = flushes_of_all;
    p->read_ptr = fp->_IO_read_ptr;
    p->read_end = fp->_IO_read_end;
    p->write_ptr = fp->_IO_write_ptr;
    p->write_base = fp->_IO_write_base;
}

/* The stream's own answer (ftello), NO_POSITION when it has none. errno is kept. */
static int64_t stream_says(FILE *fp) {
    int saved = errno;
    int64_t at = IOLOOM_NEXT(ftello64)(fp);
    errno = saved;
    return at < 0 ? NO_POSITION : at;
}

/* As stream_says, and NO_POSITION in append mode: for a stream met for the first time. */
static int64_t asked_position(FILE *fp) {
    int saved = errno;
    int flags = IOLOOM_NEXT(fcntl)(fp->_fileno, F_GETFL);
    errno = saved;
    return flags >= 0 && (flags & O_APPEND) ? NO_POSITION : stream_says(fp);
}

/* Starts following fp (a stale entry for a reused FILE address is dropped) at position `at`; NULL when the
 * table is full. */
static struct stream_position *follow(FILE *fp, int64_t at) {
    struct stream_position *stale = position_of(fp);
    if (stale) key_table_remove(&position_slots, stale - positions);
    long slot = key_table_reserve(&position_slots, stream_key(fp));
    if (slot < 0) return NULL;
    positions[slot].at = UNKNOWN;
    positions[slot].epoch = ioloom_spawn_epoch;
    left_at(fp, &positions[slot], at);
    key_table_publish(&position_slots, slot);
    return &positions[slot];
}

static void forget(FILE *fp) {
    struct stream_position *p = position_of(fp);
    if (p) key_table_remove(&position_slots, p - positions);
}

/* fp's entry; a stream first seen here (stdin, stdout, one opened before tracing started) is asked once. */
static struct stream_position *followed(FILE *fp) {
    struct stream_position *p = position_of(fp);
    return IOLOOM_LIKELY(p != NULL) ? p : follow(fp, asked_position(fp));
}

/* How far inline getc_unlocked/putc_unlocked moved the stream since the last followed call: the same buffer,
 * its read or write pointer further on; -1 when something else changed the buffer. */
static int64_t moved_in_buffer(const struct stream_position *p, const FILE *fp) {
    if (fp->_IO_read_end != p->read_end || fp->_IO_write_base != p->write_base || fp->_IO_read_ptr < p->read_ptr ||
        fp->_IO_write_ptr < p->write_ptr)
        return -1;
    return (fp->_IO_read_ptr - p->read_ptr) + (fp->_IO_write_ptr - p->write_ptr);
}

/* The position before a data call, UNKNOWN if the stream cannot tell. Called with the stream locked. */
static inline int64_t position_before(struct stream_position *p, FILE *fp) {
    if (IOLOOM_UNLIKELY(!p) || p->at == NO_POSITION) return UNKNOWN;
    int unmoved = p->read_ptr == fp->_IO_read_ptr && p->write_ptr == fp->_IO_write_ptr &&
                  p->read_end == fp->_IO_read_end && p->write_base == fp->_IO_write_base;
    /* a flush of all may have written and emptied the buffer, leaving the pointers where they were */
    int same_stream = p->at >= 0 && p->epoch == ioloom_spawn_epoch && p->flushes == flushes_of_all;
    if (IOLOOM_LIKELY(unmoved && same_stream)) return p->at;
    int64_t inline_moves = moved_in_buffer(p, fp);
    int64_t at = same_stream && inline_moves >= 0 ? p->at + inline_moves : stream_says(fp);
    left_at(fp, p, at);
    return at >= 0 ? at : UNKNOWN;
}

/* After a data call that started at `at` and moved `bytes` (-1: unknown). Called with the stream locked. */
static inline void position_after(struct stream_position *p, FILE *fp, int64_t at, int64_t bytes) {
    if (IOLOOM_LIKELY(p != NULL)) left_at(fp, p, at >= 0 && bytes >= 0 ? at + bytes : UNKNOWN);
}

/* After a seek, rewind or ftell: the stream's own answer. */
static void position_known(FILE *fp, int64_t at) {
    struct stream_position *p = position_of(fp);
    if (p)
        left_at(fp, p, at >= 0 ? at : UNKNOWN);
    else
        follow(fp, at >= 0 ? at : UNKNOWN);
}

/* The stream's lock, taken only when another thread could use the stream meanwhile: a process with one thread
 * cannot race itself (glibc's stdio skips its own locks then too), and the lock is a third of a traced fwrite.
 * Returns whether it was taken. */
static inline int lock_stream(FILE *fp) {
    if (__libc_single_threaded) return 0;
    flockfile(fp);
    return 1;
}

static inline void unlock_stream(FILE *fp, int locked) {
    if (locked) funlockfile(fp);
}

/* A call on stream FP, run under the stream's lock with BEFORE and AFTER (which may use r) around it. */
#define STREAM_CALL(fn, args, FP, failed_if, BEFORE, AFTER, record) \
    struct ioloom_call c;                                           \
    if (!ioloom_call_start(&c, S)) return IOLOOM_NEXT(fn) args;     \
    int locked = lock_stream(FP);                                   \
    BEFORE;                                                         \
    __typeof__(IOLOOM_NEXT(fn) args) r = IOLOOM_NEXT(fn) args;      \
    ioloom_call_returned(&c, failed_if);                            \
    AFTER;                                                          \
    unlock_stream(FP, locked);                                      \
    record;                                                         \
    return r

/* A data call: RECORD may use `at`, the position before it; MOVED (an expression of r) is the bytes it moved,
 * -1 if unknown. */
#define STREAM_DATA(fn, args, FP, failed_if, MOVED, record)                        \
    STREAM_CALL(fn, args, FP, failed_if, struct stream_position *p = followed(FP); \
                int64_t at = position_before(p, FP), position_after(p, FP, at, MOVED), record)

/* After a seek or rewind: where the stream now stands, as it says itself. */
static void seeked(FILE *fp, int failed) { position_known(fp, failed ? UNKNOWN : IOLOOM_NEXT(ftello64)(fp)); }

/* Bytes moved by a call that returns a count of items (fread, fwrite): the error state tells failure. */
static int64_t moved(size_t items, size_t size) { return (int64_t)(items * size); }

/* A character or line read returned EOF: 0 bytes at end of file, -1 on error. */
static int64_t read_result(FILE *fp, int64_t bytes, int at_eof) { return !at_eof ? bytes : ferror(fp) ? -1 : 0; }

/* ---- calls that move a stream without an event of their own ---- */

/* __uflow and __overflow are what glibc's inline getc_unlocked/putc_unlocked call (through the PLT) when the
 * buffer runs out: one character read or written, none at end of file or when __overflow is only asked to
 * flush (EOF). Followed like a data call, not recorded: the inline calls around them are not seen either. */
int __uflow(FILE *fp);
int __overflow(FILE *fp, int ch);
IOLOOM_EXPORT int __uflow(FILE *fp) {
    STREAM_DATA(__uflow, (fp), fp, r == EOF && ferror(fp), read_result(fp, 1, r == EOF), ioloom_leave());
}
IOLOOM_EXPORT int __overflow(FILE *fp, int ch) {
    STREAM_DATA(__overflow, (fp, ch), fp, r == EOF, r == EOF ? -1 : ch == EOF ? 0 : 1, ioloom_leave());
}

/* ungetc, scanf, the wide-character calls, fsetpos and __fpurge move a stream by what the tracer does not count:
 * the next traced call asks the stream where it stands. errno is left as the call left it. The scanf family is
 * followed in its C99 forms (__isoc99_*), which glibc's headers make every C99 or later program call. */
static void position_lost(FILE *fp) {
    int locked = lock_stream(fp);
    struct stream_position *p = position_of(fp);
    if (p && p->at >= 0) p->at = UNKNOWN;
    unlock_stream(fp, locked);
}

#define WRAP_LOSES(ret, fn, params, args, fp) \
    IOLOOM_EXPORT ret fn params {             \
        ret r = IOLOOM_NEXT(fn) args;         \
        position_lost(fp);                    \
        return r;                             \
    }
WRAP_LOSES(int, ungetc, (int ch, FILE *fp), (ch, fp), fp)
WRAP_LOSES(wint_t, ungetwc, (wint_t ch, FILE *fp), (ch, fp), fp)
WRAP_LOSES(wint_t, fgetwc, (FILE * fp), (fp), fp)
WRAP_LOSES(wint_t, getwc, (FILE * fp), (fp), fp)
WRAP_LOSES(wint_t, fgetwc_unlocked, (FILE * fp), (fp), fp)
WRAP_LOSES(wint_t, getwc_unlocked, (FILE * fp), (fp), fp)
WRAP_LOSES(wint_t, fputwc, (wchar_t ch, FILE *fp), (ch, fp), fp)
WRAP_LOSES(wint_t, putwc, (wchar_t ch, FILE *fp), (ch, fp), fp)
WRAP_LOSES(wint_t, fputwc_unlocked, (wchar_t ch, FILE *fp), (ch, fp), fp)
WRAP_LOSES(wint_t, putwc_unlocked, (wchar_t ch, FILE *fp), (ch, fp), fp)
WRAP_LOSES(wchar_t *, fgetws, (wchar_t * s, int n, FILE *fp), (s, n, fp), fp)
WRAP_LOSES(wchar_t *, fgetws_unlocked, (wchar_t * s, int n, FILE *fp), (s, n, fp), fp)
WRAP_LOSES(int, fputws, (const wchar_t *s, FILE *fp), (s, fp), fp)
WRAP_LOSES(int, fputws_unlocked, (const wchar_t *s, FILE *fp), (s, fp), fp)
WRAP_LOSES(int, vfwprintf, (FILE * fp, const wchar_t *fmt, va_list ap), (fp, fmt, ap), fp)
WRAP_LOSES(int, fsetpos, (FILE * fp, const fpos_t *pos), (fp, pos), fp)
WRAP_LOSES(int, fsetpos64, (FILE * fp, const fpos64_t *pos), (fp, pos), fp)
int __isoc99_vfscanf(FILE *fp, const char *fmt, va_list ap);
WRAP_LOSES(int, __isoc99_vfscanf, (FILE * fp, const char *fmt, va_list ap), (fp, fmt, ap), fp)
int __isoc99_vscanf(const char *fmt, va_list ap);
WRAP_LOSES(int, __isoc99_vscanf, (const char *fmt, va_list ap), (fmt, ap), stdin)

/* The variadic forms, through the next v-form (args: its arguments before the va_list). */
#define WITH_AP(...) (__VA_ARGS__, ap)
#define WRAP_LOSES_VARIADIC(fn, v_fn, params, args, fp) \
    IOLOOM_EXPORT int fn params {                       \
        va_list ap;                                     \
        va_start(ap, fmt);                              \
        int r = IOLOOM_NEXT(v_fn) WITH_AP args;         \
        va_end(ap);                                     \
        position_lost(fp);                              \
        return r;                                       \
    }
int __isoc99_fscanf(FILE *fp, const char *fmt, ...);
int __isoc99_scanf(const char *fmt, ...);
WRAP_LOSES_VARIADIC(__isoc99_fscanf, __isoc99_vfscanf, (FILE * fp, const char *fmt, ...), (fp, fmt), fp)
WRAP_LOSES_VARIADIC(__isoc99_scanf, __isoc99_vscanf, (const char *fmt, ...), (fmt), stdin)
WRAP_LOSES_VARIADIC(fwprintf, vfwprintf, (FILE * fp, const wchar_t *fmt, ...), (fp, fmt), fp)

IOLOOM_EXPORT void __fpurge(FILE *fp) {
    IOLOOM_NEXT(__fpurge)(fp);
    position_lost(fp);
}

/* ---- open and close: aux = the mode as open(2) flags, ret = the descriptor ---- */

static int mode_flags(const char *mode) {
    int plus = mode && strchr(mode, '+') != NULL;
    switch (mode ? mode[0] : 'r') {
        case 'w':
            return (plus ? O_RDWR : O_WRONLY) | O_CREAT | O_TRUNC;
        case 'a':
            return (plus ? O_RDWR : O_WRONLY) | O_CREAT | O_APPEND;
        default:
            return plus ? O_RDWR : O_RDONLY;
    }
}

/* A stream opened by path for reading or writing starts at 0; one in append mode, on a descriptor (fdopen) or
 * reopened on its own file (freopen with no path) starts where the stream says. */
static void record_fopen(struct ioloom_call *c, enum ioloom_op op, const char *path, const char *mode, FILE *r) {
    int fd = stream_fd(r);
    int32_t file = path ? ioloom_path_state(AT_FDCWD, path, fd) : ioloom_fd_state(fd);
    if (fd >= 0) ioloom_fd_set(fd, file);
    ioloom_fd_release(fd); /* stdio moves its position now, unseen: raw calls on it ask (positions.h) */
    if (r) follow(r, path && mode && mode[0] != 'a' ? 0 : asked_position(r));
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
    forget(fp);
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

#define WRAP_ITEMS(fn, opname, buf_type)                                                        \
    IOLOOM_EXPORT size_t fn(buf_type buf, size_t size, size_t n, FILE *fp) {                    \
        STREAM_DATA(fn, (buf, size, n, fp), fp, r < n && ferror(fp), moved(r, size),            \
                    record_stream(&c, OP(opname), fp, at, moved(n, size), moved(r, size), -1)); \
    }
WRAP_ITEMS(fread, FREAD, void *)
WRAP_ITEMS(fread_unlocked, FREAD_UNLOCKED, void *)
WRAP_ITEMS(fwrite, FWRITE, const void *)
WRAP_ITEMS(fwrite_unlocked, FWRITE_UNLOCKED, const void *)

#define WRAP_ITEMS_CHK(fn, opname)                                                              \
    size_t fn(void *buf, size_t buflen, size_t size, size_t n, FILE *fp);                       \
    IOLOOM_EXPORT size_t fn(void *buf, size_t buflen, size_t size, size_t n, FILE *fp) {        \
        STREAM_DATA(fn, (buf, buflen, size, n, fp), fp, r < n && ferror(fp), moved(r, size),    \
                    record_stream(&c, OP(opname), fp, at, moved(n, size), moved(r, size), -1)); \
    }
WRAP_ITEMS_CHK(__fread_chk, U_FREAD_CHK)
WRAP_ITEMS_CHK(__fread_unlocked_chk, U_FREAD_UNLOCKED_CHK)

/* ---- formatted output: every form ends in the v-form with a va_list; ret = bytes written ---- */

static void record_printed(struct ioloom_call *c, enum ioloom_op op, FILE *fp, int64_t at, int r) {
    record_stream(c, op, fp, at, r >= 0 ? r : -1, r >= 0 ? r : -1, -1);
}

IOLOOM_EXPORT int vfprintf(FILE *fp, const char *fmt, va_list ap) {
    STREAM_DATA(vfprintf, (fp, fmt, ap), fp, r < 0, r, record_printed(&c, OP(VFPRINTF), fp, at, r));
}
IOLOOM_EXPORT int vprintf(const char *fmt, va_list ap) {
    STREAM_DATA(vfprintf, (stdout, fmt, ap), stdout, r < 0, r, record_printed(&c, OP(VPRINTF), stdout, at, r));
}

/* Inlined, as every wrapper's ioloom_call_start must be: the call site is the wrapper's return address. */
static inline __attribute__((always_inline)) int printf_as(enum ioloom_op op, FILE *fp, const char *fmt, va_list ap) {
    STREAM_DATA(vfprintf, (fp, fmt, ap), fp, r < 0, r, record_printed(&c, op, fp, at, r));
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

static inline __attribute__((always_inline)) int printf_chk_as(enum ioloom_op op, FILE *fp, int flag, const char *fmt,
                                                               va_list ap) {
    STREAM_DATA(__vfprintf_chk, (fp, flag, fmt, ap), fp, r < 0, r, record_printed(&c, op, fp, at, r));
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

static void record_put(struct ioloom_call *c, enum ioloom_op op, FILE *fp, int64_t at, int64_t bytes, int failed) {
    record_stream(c, op, fp, at, bytes, failed ? -1 : bytes, -1);
}

IOLOOM_EXPORT int puts(const char *s) {
    int64_t len = (int64_t)strlen(s) + 1;
    STREAM_DATA(puts, (s), stdout, r == EOF, r == EOF ? -1 : len, record_put(&c, OP(PUTS), stdout, at, len, r == EOF));
}
#define WRAP_FPUTS(fn, opname)                                          \
    IOLOOM_EXPORT int fn(const char *s, FILE *fp) {                     \
        int64_t len = (int64_t)strlen(s);                               \
        STREAM_DATA(fn, (s, fp), fp, r == EOF, r == EOF ? -1 : len,     \
                    record_put(&c, OP(opname), fp, at, len, r == EOF)); \
    }
WRAP_FPUTS(fputs, FPUTS)
WRAP_FPUTS(fputs_unlocked, FPUTS_UNLOCKED)

#define WRAP_PUTC(fn, opname)                                                                                        \
    IOLOOM_EXPORT int fn(int ch, FILE *fp) {                                                                         \
        STREAM_DATA(fn, (ch, fp), fp, r == EOF, r == EOF ? -1 : 1, record_put(&c, OP(opname), fp, at, 1, r == EOF)); \
    }
WRAP_PUTC(putc, PUTC)
WRAP_PUTC(fputc, FPUTC)
WRAP_PUTC(putc_unlocked, PUTC_UNLOCKED)
WRAP_PUTC(fputc_unlocked, FPUTC_UNLOCKED)

#define WRAP_PUTCHAR(fn, opname)                                          \
    IOLOOM_EXPORT int fn(int ch) {                                        \
        STREAM_DATA(fn, (ch), stdout, r == EOF, r == EOF ? -1 : 1,        \
                    record_put(&c, OP(opname), stdout, at, 1, r == EOF)); \
    }
WRAP_PUTCHAR(putchar, PUTCHAR)
WRAP_PUTCHAR(putchar_unlocked, PUTCHAR_UNLOCKED)

/* ---- characters and lines in ---- */

#define WRAP_GETC(fn, opname)                                                                    \
    IOLOOM_EXPORT int fn(FILE *fp) {                                                             \
        STREAM_DATA(fn, (fp), fp, r == EOF && ferror(fp), read_result(fp, 1, r == EOF),          \
                    record_stream(&c, OP(opname), fp, at, 1, read_result(fp, 1, r == EOF), -1)); \
    }
WRAP_GETC(getc, GETC)
WRAP_GETC(fgetc, FGETC)
WRAP_GETC(getc_unlocked, GETC_UNLOCKED)
WRAP_GETC(fgetc_unlocked, FGETC_UNLOCKED)

#define WRAP_GETCHAR(fn, opname)                                                                       \
    IOLOOM_EXPORT int fn(void) {                                                                       \
        STREAM_DATA(fn, (), stdin, r == EOF && ferror(stdin), read_result(stdin, 1, r == EOF),         \
                    record_stream(&c, OP(opname), stdin, at, 1, read_result(stdin, 1, r == EOF), -1)); \
    }
WRAP_GETCHAR(getchar, GETCHAR)
WRAP_GETCHAR(getchar_unlocked, GETCHAR_UNLOCKED)

/* fgets: req_bytes = the room given (n - 1 characters), ret_bytes = the length of the line read. */
static int64_t line_length(FILE *fp, const char *r) { return read_result(fp, r ? (int64_t)strlen(r) : 0, !r); }
/* What fgets moved: the line's length when it ends in a newline or fills the room; otherwise (end of file, or a
 * NUL byte read, which strlen cannot see past) unknown, and the next call asks. */
static int64_t line_moved(FILE *fp, const char *r, int n) {
    int64_t len = line_length(fp, r);
    return r && len > 0 && (r[len - 1] == '\n' || len == n - 1) ? len : -1;
}
static void record_line(struct ioloom_call *c, enum ioloom_op op, FILE *fp, int64_t at, int n, const char *r) {
    record_stream(c, op, fp, at, n > 0 ? n - 1 : 0, line_length(fp, r), -1);
}
#define WRAP_FGETS(fn, opname)                                                  \
    IOLOOM_EXPORT char *fn(char *s, int n, FILE *fp) {                          \
        STREAM_DATA(fn, (s, n, fp), fp, !r && ferror(fp), line_moved(fp, r, n), \
                    record_line(&c, OP(opname), fp, at, n, r));                 \
    }
WRAP_FGETS(fgets, FGETS)
WRAP_FGETS(fgets_unlocked, FGETS_UNLOCKED)

#define WRAP_FGETS_CHK(fn, opname)                                                    \
    char *fn(char *s, size_t size, int n, FILE *fp);                                  \
    IOLOOM_EXPORT char *fn(char *s, size_t size, int n, FILE *fp) {                   \
        STREAM_DATA(fn, (s, size, n, fp), fp, !r && ferror(fp), line_moved(fp, r, n), \
                    record_line(&c, OP(opname), fp, at, n, r));                       \
    }
WRAP_FGETS_CHK(__fgets_chk, U_FGETS_CHK)
WRAP_FGETS_CHK(__fgets_unlocked_chk, U_FGETS_UNLOCKED_CHK)

/* getline/getdelim: ret_bytes = the length read (0 at end of file), aux = the delimiter. */
static void record_delim(struct ioloom_call *c, enum ioloom_op op, FILE *fp, int64_t at, int delim, ssize_t r) {
    record_stream(c, op, fp, at, -1, read_result(fp, r, r < 0), delim);
}
#define WRAP_GETDELIM(fn, opname, args, delim)                                \
    STREAM_DATA(fn, args, fp, r < 0 && ferror(fp), read_result(fp, r, r < 0), \
                record_delim(&c, OP(opname), fp, at, delim, r))
IOLOOM_EXPORT ssize_t getline(char **line, size_t *n, FILE *fp) {
    WRAP_GETDELIM(getline, GETLINE, (line, n, fp), '\n');
}
IOLOOM_EXPORT ssize_t getdelim(char **line, size_t *n, int delim, FILE *fp) {
    WRAP_GETDELIM(getdelim, GETDELIM, (line, n, delim, fp), delim);
}
/* What glibc's inline getline() calls at -O2. */
ssize_t __getdelim(char **line, size_t *n, int delim, FILE *fp);
IOLOOM_EXPORT ssize_t __getdelim(char **line, size_t *n, int delim, FILE *fp) {
    WRAP_GETDELIM(__getdelim, U_GETDELIM, (line, n, delim, fp), delim);
}

/* ---- positioning: fseek offset = the offset asked, aux = whence; ftell offset = ret = the position ---- */

#define WRAP_FSEEK(fn, opname, off_type)                                          \
    IOLOOM_EXPORT int fn(FILE *fp, off_type off, int whence) {                    \
        STREAM_CALL(fn, (fp, off, whence), fp, r < 0, (void)0, seeked(fp, r < 0), \
                    record_stream(&c, OP(opname), fp, off, -1, r, whence));       \
    }
WRAP_FSEEK(fseek, FSEEK, long)
WRAP_FSEEK(fseeko, FSEEKO, off_t)
WRAP_FSEEK(fseeko64, FSEEKO64, off64_t)

#define WRAP_FTELL(fn, opname)                                           \
    IOLOOM_EXPORT __typeof__(fn(NULL)) fn(FILE *fp) {                    \
        STREAM_CALL(fn, (fp), fp, r < 0, (void)0, position_known(fp, r), \
                    record_stream(&c, OP(opname), fp, r, -1, r, -1));    \
    }
WRAP_FTELL(ftell, FTELL)
WRAP_FTELL(ftello, FTELLO)
WRAP_FTELL(ftello64, FTELLO64)

IOLOOM_EXPORT void rewind(FILE *fp) {
    struct ioloom_call c;
    if (!ioloom_call_start(&c, S)) return IOLOOM_NEXT(rewind)(fp);
    int locked = lock_stream(fp);
    IOLOOM_NEXT(rewind)(fp);
    ioloom_call_returned(&c, 0);
    seeked(fp, 0);
    unlock_stream(fp, locked);
    record_stream(&c, OP(REWIND), fp, 0, -1, 0, SEEK_SET);
}

/* fflush empties the buffer and leaves the position where it was: what the pointers said before is kept with the
 * pointers after. fflush(NULL) flushes every stream; the streams are not visited (one may have been closed
 * inside libc, unseen): the flush is counted, and a stream whose pointers changed since a flush of all asks
 * where it stands at its next call. Its event has handle -1. */
static void around_flush(FILE *fp, int64_t *at, int after) {
    int locked = lock_stream(fp);
    struct stream_position *p = after ? position_of(fp) : followed(fp);
    if (!after)
        *at = position_before(p, fp);
    else
        position_after(p, fp, *at, 0);
    unlock_stream(fp, locked);
}

static int flush_followed(int (*next)(FILE *), FILE *fp) {
    if (!fp) {
        __atomic_add_fetch(&flushes_of_all, 1, __ATOMIC_RELAXED);
        return next(fp);
    }
    int64_t at = UNKNOWN;
    around_flush(fp, &at, 0);
    int r = next(fp);
    around_flush(fp, &at, 1);
    return r;
}

#define WRAP_FFLUSH(fn, opname)                                    \
    IOLOOM_EXPORT int fn(FILE *fp) {                               \
        struct ioloom_call c;                                      \
        if (!ioloom_call_start(&c, S)) return IOLOOM_NEXT(fn)(fp); \
        int r = flush_followed(IOLOOM_NEXT(fn), fp);               \
        ioloom_call_returned(&c, r == EOF);                        \
        record_stream(&c, OP(opname), fp, -1, -1, r, -1);          \
        return r;                                                  \
    }
WRAP_FFLUSH(fflush, FFLUSH)
WRAP_FFLUSH(fflush_unlocked, FFLUSH_UNLOCKED)

#define WRAP_FILENO(fn, opname) \
    IOLOOM_EXPORT int fn(FILE *fp) { TRACED(S, fn, (fp), r < 0, record_stream(&c, OP(opname), fp, -1, -1, r, -1)); }
WRAP_FILENO(fileno, FILENO)
WRAP_FILENO(fileno_unlocked, FILENO_UNLOCKED)
