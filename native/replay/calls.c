/* The calls ioloom-replay makes again, by the name the trace recorded: each name is called through its own libc
 * symbol (taken by address, so the tracer's wrapper of that very name records it), with the recorded sizes,
 * offsets, flags and modes, on the descriptors and streams the replay opened in place of the recorded ones.
 * Data written is 'x' bytes. The table below and mpiio.c's (the MPI replayers') are the one list of replayed calls
 * (`--list-ops` prints them). */
#include "replay.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* glibc's fortified opens, which its headers declare only under _FORTIFY_SOURCE. */
extern int __open_2(const char *path, int flags);
extern int __open64_2(const char *path, int flags);

/* ---- descriptors and streams: recorded number -> the replay's ---- */

static int grow(struct replayer *r, long long handle) {
    if (handle < r->nhandles) return 0;
    long long n = handle + 64;
    int *fds = realloc(r->fds, (size_t)n * sizeof *fds);
    if (!fds) return -1;
    r->fds = fds;
    FILE **streams = realloc(r->streams, (size_t)n * sizeof *streams);
    if (!streams) return -1;
    r->streams = streams;
    for (long long i = r->nhandles; i < n; i++) r->fds[i] = -1, r->streams[i] = NULL;
    r->nhandles = n;
    return 0;
}

static void learn_fd(struct replayer *r, long long recorded, int fd) {
    if (recorded >= 0 && fd >= 0 && grow(r, recorded) == 0) r->fds[recorded] = fd;
}

/* glibc's FILE holds its descriptor in _fileno: read there, as calling fileno() would be a traced call. */
static void learn_stream(struct replayer *r, long long recorded, FILE *f) {
    if (recorded >= 0 && f && grow(r, recorded) == 0) r->fds[recorded] = f->_fileno, r->streams[recorded] = f;
}

static int fd_of(const struct replayer *r, long long h) { return h >= 0 && h < r->nhandles ? r->fds[h] : -1; }

static FILE *stream_of(const struct replayer *r, long long h) {
    return h >= 0 && h < r->nhandles ? r->streams[h] : NULL;
}

static void forget(struct replayer *r, long long h) {
    if (h >= 0 && h < r->nhandles) r->fds[h] = -1, r->streams[h] = NULL;
}

/* ---- buffers: `out` holds 'x' bytes, `in` takes what is read; both hold at least n + 1 bytes ---- */

static int room(struct replayer *r, long long n) {
    if (n < r->room) return 0;
    long long size = n + 1 > 2 * r->room ? n + 1 : 2 * r->room;
    char *out = realloc(r->out, (size_t)size), *in = out ? realloc(r->in, (size_t)size) : NULL;
    if (out) r->out = out;
    if (!in) return -1;
    r->in = in;
    memset(r->out, 'x', (size_t)size);
    r->room = size;
    return 0;
}

size_t replay_bytes(struct replayer *r, const struct call *c) {
    long long n = c->req > 0 ? c->req : 0;
    return room(r, n) == 0 ? (size_t)n : 0;
}

/* ---- POSIX ---- */

static long long h_open(struct replayer *r, const struct call *c, void *fn) {
    int fd = ((int (*)(const char *, int, ...))fn)(replay_path(r, c), (int)c->aux, (mode_t)(c->req < 0 ? 0 : c->req));
    learn_fd(r, c->ret, fd);
    return fd;
}

static long long h_openat(struct replayer *r, const struct call *c, void *fn) {
    int fd = ((int (*)(int, const char *, int, ...))fn)(AT_FDCWD, replay_path(r, c), (int)c->aux,
                                                        (mode_t)(c->req < 0 ? 0 : c->req));
    learn_fd(r, c->ret, fd);
    return fd;
}

static long long h_open2(struct replayer *r, const struct call *c, void *fn) {
    int fd = ((int (*)(const char *, int))fn)(replay_path(r, c), (int)c->aux);
    learn_fd(r, c->ret, fd);
    return fd;
}

static long long h_creat(struct replayer *r, const struct call *c, void *fn) {
    int fd = ((int (*)(const char *, mode_t))fn)(replay_path(r, c), (mode_t)c->req);
    learn_fd(r, c->ret, fd);
    return fd;
}

static long long h_close(struct replayer *r, const struct call *c, void *fn) {
    int rc = ((int (*)(int))fn)(fd_of(r, c->handle));
    forget(r, c->handle);
    return rc;
}

static long long h_rw(struct replayer *r, const struct call *c, void *fn) {
    size_t n = replay_bytes(r, c);
    return ((ssize_t (*)(int, void *, size_t))fn)(fd_of(r, c->handle), fn == (void *)write ? r->out : r->in, n);
}

static long long h_prw(struct replayer *r, const struct call *c, void *fn) {
    size_t n = replay_bytes(r, c);
    void *buf = fn == (void *)pwrite || fn == (void *)pwrite64 ? r->out : r->in;
    return ((ssize_t (*)(int, void *, size_t, off_t))fn)(fd_of(r, c->handle), buf, n, (off_t)c->offset);
}

/* The recorded request cut into `parts` iovecs (the last takes the remainder), at most 64. */
static int vectors(struct replayer *r, const struct call *c, int parts, int reading, struct iovec *iov) {
    size_t n = replay_bytes(r, c), each = n / (size_t)parts;
    for (int i = 0; i < parts; i++) {
        iov[i].iov_base = (reading ? r->in : r->out) + (size_t)i * each;
        iov[i].iov_len = i == parts - 1 ? n - (size_t)i * each : each;
    }
    return parts;
}

static long long h_rwv(struct replayer *r, const struct call *c, void *fn) {
    struct iovec iov[1];
    int n = vectors(r, c, 1, fn == (void *)readv, iov);
    return ((ssize_t (*)(int, const struct iovec *, int))fn)(fd_of(r, c->handle), iov, n);
}

static long long h_prwv(struct replayer *r, const struct call *c, void *fn) {
    struct iovec iov[64];
    int parts = c->aux >= 1 && c->aux <= 64 ? (int)c->aux : 1;
    int n = vectors(r, c, parts, fn == (void *)preadv || fn == (void *)preadv64, iov);
    return ((ssize_t (*)(int, const struct iovec *, int, off_t))fn)(fd_of(r, c->handle), iov, n, (off_t)c->offset);
}

static long long h_lseek(struct replayer *r, const struct call *c, void *fn) {
    return ((off_t (*)(int, off_t, int))fn)(fd_of(r, c->handle), (off_t)c->req, (int)c->aux);
}

static long long h_fd(struct replayer *r, const struct call *c, void *fn) {
    return ((int (*)(int))fn)(fd_of(r, c->handle));
}

static long long h_ftruncate(struct replayer *r, const struct call *c, void *fn) {
    return ((int (*)(int, off_t))fn)(fd_of(r, c->handle), (off_t)c->offset);
}

static int is_lock(int cmd) {
    return cmd == F_SETLK || cmd == F_SETLKW || cmd == F_GETLK || cmd == F_OFD_SETLK || cmd == F_OFD_SETLKW ||
           cmd == F_OFD_GETLK;
}

/* fcntl: record locks with the recorded range and type; F_DUPFD* learn the new descriptor; other commands
 * take the recorded argument. */
static long long h_fcntl(struct replayer *r, const struct call *c, void *fn) {
    int (*f)(int, int, ...) = (int (*)(int, int, ...))fn;
    int fd = fd_of(r, c->handle), cmd = (int)(c->aux & 0xffff);
    if (is_lock(cmd)) {
        struct flock lock = {.l_type = (short)((c->aux >> 16) & 0xff),
                             .l_whence = (short)((c->aux >> 24) & 0xff),
                             .l_start = (off_t)c->offset,
                             .l_len = (off_t)c->req};
        return f(fd, cmd, &lock);
    }
    long long rc = f(fd, cmd, (long)c->req);
    if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) learn_fd(r, c->ret, (int)rc);
    return rc;
}

static long long h_stat(struct replayer *r, const struct call *c, void *fn) {
    struct stat st;
    return ((int (*)(const char *, struct stat *))fn)(replay_path(r, c), &st);
}

static long long h_fstat(struct replayer *r, const struct call *c, void *fn) {
    struct stat st;
    return ((int (*)(int, struct stat *))fn)(fd_of(r, c->handle), &st);
}

static long long h_access(struct replayer *r, const struct call *c, void *fn) {
    return ((int (*)(const char *, int))fn)(replay_path(r, c), (int)(c->aux & 0xffff));
}

/* ---- stdio ---- */

/* fopen's mode for the open(2) flags the tracer recorded. */
static const char *mode_of(long long flags) {
    int rw = (flags & O_ACCMODE) == O_RDWR;
    if (flags & O_APPEND) return rw ? "a+" : "a";
    if (flags & O_TRUNC) return rw ? "w+" : "w";
    return rw ? "r+" : (flags & O_ACCMODE) == O_WRONLY ? "w" : "r";
}

static long long h_fopen(struct replayer *r, const struct call *c, void *fn) {
    FILE *f = ((FILE * (*)(const char *, const char *)) fn)(replay_path(r, c), mode_of(c->aux));
    learn_stream(r, c->ret, f);
    return f ? f->_fileno : -1;
}

static long long h_fdopen(struct replayer *r, const struct call *c, void *fn) {
    FILE *f = ((FILE * (*)(int, const char *)) fn)(fd_of(r, c->handle), mode_of(c->aux));
    learn_stream(r, c->ret, f);
    return f ? f->_fileno : -1;
}

static long long h_fclose(struct replayer *r, const struct call *c, void *fn) {
    FILE *f = stream_of(r, c->handle);
    forget(r, c->handle);
    return f ? ((int (*)(FILE *))fn)(f) : -1;
}

static long long h_fwrite(struct replayer *r, const struct call *c, void *fn) {
    size_t n = replay_bytes(r, c);
    FILE *f = stream_of(r, c->handle);
    return f ? (long long)((size_t (*)(const void *, size_t, size_t, FILE *))fn)(r->out, 1, n, f) : -1;
}

static long long h_fread(struct replayer *r, const struct call *c, void *fn) {
    size_t n = replay_bytes(r, c);
    FILE *f = stream_of(r, c->handle);
    return f ? (long long)((size_t (*)(void *, size_t, size_t, FILE *))fn)(r->in, 1, n, f) : -1;
}

static long long h_fprintf(struct replayer *r, const struct call *c, void *fn) {
    size_t n = replay_bytes(r, c);
    FILE *f = stream_of(r, c->handle);
    return f ? ((int (*)(FILE *, const char *, ...))fn)(f, "%.*s", (int)n, r->out) : -1;
}

static long long h_fputs(struct replayer *r, const struct call *c, void *fn) {
    size_t n = replay_bytes(r, c);
    FILE *f = stream_of(r, c->handle);
    if (!f) return -1;
    r->out[n] = '\0';
    int rc = ((int (*)(const char *, FILE *))fn)(r->out, f);
    r->out[n] = 'x';
    return rc < 0 ? -1 : (long long)n;
}

static long long h_fputc(struct replayer *r, const struct call *c, void *fn) {
    FILE *f = stream_of(r, c->handle);
    return f && ((int (*)(int, FILE *))fn)('x', f) != EOF ? 1 : -1;
}

static long long h_fgets(struct replayer *r, const struct call *c, void *fn) {
    size_t n = replay_bytes(r, c);
    FILE *f = stream_of(r, c->handle);
    if (!f) return -1;
    char *got = ((char *(*)(char *, int, FILE *))fn)(r->in, (int)n + 1, f);
    return got ? (long long)strlen(got) : 0;
}

static long long h_fgetc(struct replayer *r, const struct call *c, void *fn) {
    FILE *f = stream_of(r, c->handle);
    return f ? (((int (*)(FILE *))fn)(f) == EOF ? 0 : 1) : -1;
}

static long long h_fseek(struct replayer *r, const struct call *c, void *fn) {
    FILE *f = stream_of(r, c->handle);
    return f ? ((int (*)(FILE *, off_t, int))fn)(f, (off_t)c->offset, (int)c->aux) : -1;
}

static long long h_ftell(struct replayer *r, const struct call *c, void *fn) {
    FILE *f = stream_of(r, c->handle);
    return f ? ((off_t (*)(FILE *))fn)(f) : -1;
}

static long long h_rewind(struct replayer *r, const struct call *c, void *fn) {
    FILE *f = stream_of(r, c->handle);
    if (f) ((void (*)(FILE *))fn)(f);
    return f ? 0 : -1;
}

static long long h_fflush(struct replayer *r, const struct call *c, void *fn) {
    return ((int (*)(FILE *))fn)(c->handle < 0 ? NULL : stream_of(r, c->handle));
}

#define CALL(name, run) {#name, run, (void *)name, 0}
#define DATA(name, run) {#name, run, (void *)name, 1}

static const struct entry table[] = {
    CALL(open, h_open),
    CALL(open64, h_open),
    CALL(openat, h_openat),
    CALL(openat64, h_openat),
    CALL(__open_2, h_open2),
    CALL(__open64_2, h_open2),
    CALL(creat, h_creat),
    CALL(creat64, h_creat),
    CALL(close, h_close),
    DATA(read, h_rw),
    DATA(write, h_rw),
    DATA(pread, h_prw),
    DATA(pread64, h_prw),
    DATA(pwrite, h_prw),
    DATA(pwrite64, h_prw),
    DATA(readv, h_rwv),
    DATA(writev, h_rwv),
    DATA(preadv, h_prwv),
    DATA(preadv64, h_prwv),
    DATA(pwritev, h_prwv),
    DATA(pwritev64, h_prwv),
    CALL(lseek, h_lseek),
    CALL(lseek64, h_lseek),
    CALL(fsync, h_fd),
    CALL(fdatasync, h_fd),
    CALL(ftruncate, h_ftruncate),
    CALL(ftruncate64, h_ftruncate),
    CALL(fcntl, h_fcntl),
    CALL(fcntl64, h_fcntl),
    CALL(stat, h_stat),
    CALL(stat64, h_stat),
    CALL(lstat, h_stat),
    CALL(lstat64, h_stat),
    CALL(fstat, h_fstat),
    CALL(fstat64, h_fstat),
    CALL(access, h_access),
    CALL(fopen, h_fopen),
    CALL(fopen64, h_fopen),
    CALL(fdopen, h_fdopen),
    CALL(fclose, h_fclose),
    DATA(fwrite, h_fwrite),
    DATA(fwrite_unlocked, h_fwrite),
    DATA(fread, h_fread),
    DATA(fread_unlocked, h_fread),
    DATA(fprintf, h_fprintf),
    DATA(fputs, h_fputs),
    DATA(fputs_unlocked, h_fputs),
    DATA(fputc, h_fputc),
    DATA(putc, h_fputc),
    DATA(fputc_unlocked, h_fputc),
    DATA(putc_unlocked, h_fputc),
    DATA(fgets, h_fgets),
    DATA(fgets_unlocked, h_fgets),
    DATA(fgetc, h_fgetc),
    DATA(getc, h_fgetc),
    DATA(fgetc_unlocked, h_fgetc),
    DATA(getc_unlocked, h_fgetc),
    CALL(fseek, h_fseek),
    CALL(fseeko, h_fseek),
    CALL(fseeko64, h_fseek),
    CALL(ftell, h_ftell),
    CALL(ftello, h_ftell),
    CALL(ftello64, h_ftell),
    CALL(rewind, h_rewind),
    CALL(fflush, h_fflush),
    CALL(fflush_unlocked, h_fflush),
};

#ifndef IOLOOM_MPI_IMPL
const struct entry replay_mpiio_table[] = {{0}}; /* the serial replayer makes no MPI-IO call */
const int replay_mpiio_entries = 0;
#endif

void replay_list(void) {
    for (size_t i = 0; i < sizeof table / sizeof *table; i++) puts(table[i].name);
    for (int i = 0; i < replay_mpiio_entries; i++) puts(replay_mpiio_table[i].name);
}

const struct entry *replay_find(const char *name) {
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (strcmp(table[i].name, name) == 0) return &table[i];
    for (int i = 0; i < replay_mpiio_entries; i++)
        if (strcmp(replay_mpiio_table[i].name, name) == 0) return &replay_mpiio_table[i];
    return NULL;
}

const char *replay_path(const struct replayer *r, const struct call *c) {
    return c->file >= 0 && c->file < r->script->npaths ? r->script->paths[c->file] : "";
}

/* Replays one call and counts it as diverged when its outcome is not the recorded one: it failed where the
 * original succeeded (or the reverse), or, for a data call, moved another number of bytes. */
void replay_call(struct replayer *r, const struct call *c) {
    long long got = c->entry->run(r, c, c->entry->fn);
    if ((got < 0) != (c->ret < 0) || (c->entry->moves && got != c->ret)) r->diverged++;
}
