/* POSIX wrappers: descriptors, data movement, metadata. One event per call; see docs/trace-format.md for what
 * offset, req_bytes, ret_bytes and aux mean for each operation. */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <linux/close_range.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "files.h"
#include "wrap.h"

#define P IOLOOM_POSIX
#define OP(name) IOLOOM_OP_##name

IOLOOM_INLINE void record_fd(struct ioloom_call *c, enum ioloom_op op, int fd, int64_t offset, int64_t req, int64_t ret,
                             int64_t aux) {
    ioloom_record_fd(c, op, P, fd, offset, req, ret, aux);
}

/* A call on fd at its current position: the position is followed around the call (positions.h). `m` is the move
 * in progress that RECORD finishes with ioloom_move_by/ioloom_move_to. A call passed through untraced may still
 * have moved the position: the next traced call asks. */
#define TRACED_AT(fn, args, fd, failed_if, record)                                  \
    struct ioloom_call c;                                                           \
    struct ioloom_move m;                                                           \
    if (!ioloom_call_start(&c, P)) return passed_through(fd, IOLOOM_NEXT(fn) args); \
    ioloom_move_start(&m, fd);                                                      \
    __typeof__(IOLOOM_NEXT(fn) args) r = IOLOOM_NEXT(fn) args;                      \
    ioloom_call_returned(&c, failed_if);                                            \
    record;                                                                         \
    return r

static ssize_t passed_through(int fd, ssize_t r) {
    ioloom_fd_moved_unseen(fd);
    return r;
}

/* As record_fd, for a call on m->fd at its current position: its file from the entry read with its description. */
IOLOOM_INLINE void record_moved(struct ioloom_call *c, const struct ioloom_move *m, enum ioloom_op op, int64_t offset,
                                int64_t req, int64_t ret, int64_t aux) {
    ioloom_record_file(c, op, P, ioloom_slot_state(m->fd, m->slot), m->fd, offset, req, ret, aux);
}

/* A read or write at the current position: offset = where it took place. */
IOLOOM_INLINE void record_sequential(struct ioloom_call *c, struct ioloom_move *m, enum ioloom_op op, int64_t req,
                                     ssize_t ret, int how) {
    record_moved(c, m, op, ioloom_move_by(m, ret, how), req, ret, -1);
}

static int64_t iov_bytes(const struct iovec *iov, int count) {
    int64_t total = 0;
    for (int i = 0; i < count; i++) total += (int64_t)iov[i].iov_len;
    return total;
}

/* ---- open and close ---- */

/* Open-family calls: aux = flags, req_bytes = mode (-1 when no mode was given), ret = the new fd. Inline in each
 * wrapper: the common open (the path named last, a descriptor's own description) makes no call but the file's. */
IOLOOM_INLINE void record_open(struct ioloom_call *c, enum ioloom_op op, int dirfd, const char *path, int flags,
                               int64_t mode, int fd) {
    int32_t file = ioloom_open_state(dirfd, path, fd, flags);
    int64_t offset = fd >= 0 && (flags & O_APPEND) ? ioloom_position_asked(fd, 0) : fd >= 0 ? 0 : -1;
    ioloom_record_file(c, op, P, file, fd, offset, mode, fd, flags);
}

static int takes_mode(int flags) { return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE; }

/* The mode argument, read only when the flags say it was given: `mode`, and `given_mode` (-1 when none) to record. */
#define MODE_ARG(flags)                         \
    mode_t mode = 0;                            \
    int64_t given_mode = -1;                    \
    if (takes_mode(flags)) {                    \
        va_list ap;                             \
        va_start(ap, flags);                    \
        given_mode = mode = va_arg(ap, mode_t); \
        va_end(ap);                             \
    }

#define WRAP_OPEN(fn, opname)                                                                                         \
    IOLOOM_EXPORT int fn(const char *path, int flags, ...) {                                                          \
        MODE_ARG(flags);                                                                                              \
        TRACED(P, fn, (path, flags, mode), r < 0, record_open(&c, OP(opname), AT_FDCWD, path, flags, given_mode, r)); \
    }
WRAP_OPEN(open, OPEN)
WRAP_OPEN(open64, OPEN64)

#define WRAP_OPENAT(fn, opname)                                                 \
    IOLOOM_EXPORT int fn(int dirfd, const char *path, int flags, ...) {         \
        MODE_ARG(flags);                                                        \
        TRACED(P, fn, (dirfd, path, flags, mode), r < 0,                        \
               record_open(&c, OP(opname), dirfd, path, flags, given_mode, r)); \
    }
WRAP_OPENAT(openat, OPENAT)
WRAP_OPENAT(openat64, OPENAT64)

#define CREAT_FLAGS (O_CREAT | O_WRONLY | O_TRUNC)
IOLOOM_EXPORT int creat(const char *path, mode_t mode) {
    TRACED(P, creat, (path, mode), r < 0, record_open(&c, OP(CREAT), AT_FDCWD, path, CREAT_FLAGS, mode, r));
}
IOLOOM_EXPORT int creat64(const char *path, mode_t mode) {
    TRACED(P, creat64, (path, mode), r < 0, record_open(&c, OP(CREAT64), AT_FDCWD, path, CREAT_FLAGS, mode, r));
}

/* The fortified forms glibc's headers call at -O2 -D_FORTIFY_SOURCE when no mode is passed. */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);
IOLOOM_EXPORT int __open_2(const char *path, int flags) {
    TRACED(P, __open_2, (path, flags), r < 0, record_open(&c, OP(U_OPEN_2), AT_FDCWD, path, flags, -1, r));
}
IOLOOM_EXPORT int __open64_2(const char *path, int flags) {
    TRACED(P, __open64_2, (path, flags), r < 0, record_open(&c, OP(U_OPEN64_2), AT_FDCWD, path, flags, -1, r));
}
IOLOOM_EXPORT int __openat_2(int dirfd, const char *path, int flags) {
    TRACED(P, __openat_2, (dirfd, path, flags), r < 0, record_open(&c, OP(U_OPENAT_2), dirfd, path, flags, -1, r));
}
IOLOOM_EXPORT int __openat64_2(int dirfd, const char *path, int flags) {
    TRACED(P, __openat64_2, (dirfd, path, flags), r < 0, record_open(&c, OP(U_OPENAT64_2), dirfd, path, flags, -1, r));
}

IOLOOM_EXPORT int close(int fd) {
    struct ioloom_call c;
    if (!ioloom_call_start(&c, P)) {
        ioloom_fd_forget(fd);
        return IOLOOM_NEXT(close)(fd);
    }
    int32_t file = ioloom_fd_state(fd); /* before the number can be reused */
    ioloom_fd_forget(fd);
    int r = IOLOOM_NEXT(close)(fd);
    ioloom_call_returned(&c, r < 0);
    ioloom_record_file(&c, OP(CLOSE), P, file, fd, -1, -1, r, -1);
    return r;
}

/* Descriptors closed in bulk are forgotten (not recorded: no single file is closed). */
IOLOOM_EXPORT int close_range(unsigned first, unsigned last, int flags) {
    if (!(flags & CLOSE_RANGE_CLOEXEC))
        for (unsigned fd = first; fd <= last && fd < (1u << 20); fd++) ioloom_fd_forget((int)fd);
    return IOLOOM_NEXT(close_range)(first, last, flags);
}

IOLOOM_EXPORT void closefrom(int first) {
    for (int fd = first < 0 ? 0 : first; fd < (1 << 20); fd++) ioloom_fd_forget(fd);
    IOLOOM_NEXT(closefrom)(first);
}

/* ---- descriptor duplication: the new fd refers to the same file (ret = new fd, aux = old fd) ---- */

static void record_dup(struct ioloom_call *c, enum ioloom_op op, int from, int to, int64_t aux) {
    if (to >= 0) ioloom_fd_copy(from, to);
    record_fd(c, op, from, -1, -1, to, aux);
}

IOLOOM_EXPORT int dup(int fd) { TRACED(P, dup, (fd), r < 0, record_dup(&c, OP(DUP), fd, r, -1)); }
IOLOOM_EXPORT int dup2(int fd, int to) { TRACED(P, dup2, (fd, to), r < 0, record_dup(&c, OP(DUP2), fd, r, -1)); }
IOLOOM_EXPORT int dup3(int fd, int to, int flags) {
    TRACED(P, dup3, (fd, to, flags), r < 0, record_dup(&c, OP(DUP3), fd, r, flags));
}

/* fcntl: aux = the command. Duplicating commands are recorded as dup (ret = new fd). Record locks record the
 * range asked for (offset = l_start, req_bytes = l_len, 0 = to the end) and aux = cmd | l_type << 16 |
 * l_whence << 24. */
static int is_lock_cmd(int cmd) {
    return cmd == F_SETLK || cmd == F_SETLKW || cmd == F_GETLK || cmd == F_OFD_SETLK || cmd == F_OFD_SETLKW ||
           cmd == F_OFD_GETLK;
}

static int fcntl_traced(enum ioloom_op op, int (*next)(int, int, ...), int fd, int cmd, unsigned long arg) {
    struct ioloom_call c;
    if (!ioloom_call_start(&c, P)) return next(fd, cmd, arg);
    struct flock asked = {0};
    if (is_lock_cmd(cmd) && arg) asked = *(struct flock *)arg;
    int r = next(fd, cmd, arg);
    ioloom_call_returned(&c, r < 0);
    if (cmd == F_SETFL && r >= 0) ioloom_fd_set_append(fd, (arg & O_APPEND) != 0);
    if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) {
        if (r >= 0) ioloom_fd_copy(fd, r);
        record_fd(&c, op, fd, -1, -1, r, cmd);
    } else if (is_lock_cmd(cmd)) {
        record_fd(&c, op, fd, asked.l_start, asked.l_len, r,
                  cmd | (int64_t)asked.l_type << 16 | (int64_t)asked.l_whence << 24);
    } else {
        record_fd(&c, op, fd, -1, (int64_t)arg, r, cmd);
    }
    return r;
}

/* The third argument is an int or a pointer; both travel in one register, read as unsigned long. */
#define WRAP_FCNTL(fn, opname)                                          \
    IOLOOM_EXPORT int fn(int fd, int cmd, ...) {                        \
        va_list ap;                                                     \
        va_start(ap, cmd);                                              \
        unsigned long arg = va_arg(ap, unsigned long);                  \
        va_end(ap);                                                     \
        return fcntl_traced(OP(opname), IOLOOM_NEXT(fn), fd, cmd, arg); \
    }
int fcntl64(int fd, int cmd, ...);
WRAP_FCNTL(fcntl, FCNTL)
WRAP_FCNTL(fcntl64, FCNTL64)

/* ---- data: offset = where the access took place, req = bytes asked, ret = bytes moved ---- */

IOLOOM_EXPORT ssize_t read(int fd, void *buf, size_t n) {
    TRACED_AT(read, (fd, buf, n), fd, r < 0, record_sequential(&c, &m, OP(READ), (int64_t)n, r, IOLOOM_READS));
}
IOLOOM_EXPORT ssize_t write(int fd, const void *buf, size_t n) {
    TRACED_AT(write, (fd, buf, n), fd, r < 0, record_sequential(&c, &m, OP(WRITE), (int64_t)n, r, IOLOOM_WRITES));
}
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
IOLOOM_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen) {
    TRACED_AT(__read_chk, (fd, buf, n, buflen), fd, r < 0,
              record_sequential(&c, &m, OP(U_READ_CHK), (int64_t)n, r, IOLOOM_READS));
}

#define WRAP_POSITIONED(fn, opname, buf_type)                                                           \
    IOLOOM_EXPORT ssize_t fn(int fd, buf_type buf, size_t n, off_t off) {                               \
        TRACED(P, fn, (fd, buf, n, off), r < 0, record_fd(&c, OP(opname), fd, off, (int64_t)n, r, -1)); \
    }
WRAP_POSITIONED(pread, PREAD, void *)
WRAP_POSITIONED(pread64, PREAD64, void *)
WRAP_POSITIONED(pwrite, PWRITE, const void *)
WRAP_POSITIONED(pwrite64, PWRITE64, const void *)

ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
#define WRAP_PREAD_CHK(fn, opname)                                                                              \
    IOLOOM_EXPORT ssize_t fn(int fd, void *buf, size_t n, off_t off, size_t buflen) {                           \
        TRACED(P, fn, (fd, buf, n, off, buflen), r < 0, record_fd(&c, OP(opname), fd, off, (int64_t)n, r, -1)); \
    }
WRAP_PREAD_CHK(__pread_chk, U_PREAD_CHK)
WRAP_PREAD_CHK(__pread64_chk, U_PREAD64_CHK)

IOLOOM_EXPORT ssize_t readv(int fd, const struct iovec *iov, int count) {
    TRACED_AT(readv, (fd, iov, count), fd, r < 0,
              record_sequential(&c, &m, OP(READV), iov_bytes(iov, count), r, IOLOOM_READS));
}
IOLOOM_EXPORT ssize_t writev(int fd, const struct iovec *iov, int count) {
    TRACED_AT(writev, (fd, iov, count), fd, r < 0,
              record_sequential(&c, &m, OP(WRITEV), iov_bytes(iov, count), r, IOLOOM_WRITES));
}

/* preadv/pwritev: aux = the number of iovecs. The ...2 forms take flags (aux = count | flags << 32) and an
 * offset of -1 meaning the current position (which RWF_APPEND puts at the end of file for a write). */
static void record_vector(struct ioloom_call *c, struct ioloom_move *m, enum ioloom_op op, int fd,
                          const struct iovec *iov, int count, off_t off, int64_t flags, ssize_t r) {
    int writes = op == OP(PWRITEV2) || op == OP(PWRITEV64V2);
    int how = !writes ? IOLOOM_READS : flags & RWF_APPEND ? IOLOOM_APPENDS : IOLOOM_WRITES;
    int64_t where = off == -1 ? ioloom_move_by(m, r, how) : off;
    record_fd(c, op, fd, where, iov_bytes(iov, count), r, count | flags << 32);
}

#define WRAP_VECTOR(fn, opname)                                                       \
    IOLOOM_EXPORT ssize_t fn(int fd, const struct iovec *iov, int count, off_t off) { \
        TRACED(P, fn, (fd, iov, count, off), r < 0,                                   \
               record_fd(&c, OP(opname), fd, off, iov_bytes(iov, count), r, count));  \
    }
WRAP_VECTOR(preadv, PREADV)
WRAP_VECTOR(preadv64, PREADV64)
WRAP_VECTOR(pwritev, PWRITEV)
WRAP_VECTOR(pwritev64, PWRITEV64)

#define WRAP_VECTOR2(fn, opname)                                                                 \
    IOLOOM_EXPORT ssize_t fn(int fd, const struct iovec *iov, int count, off_t off, int flags) { \
        TRACED_AT(fn, (fd, iov, count, off, flags), off == -1 ? fd : -1, r < 0,                  \
                  record_vector(&c, &m, OP(opname), fd, iov, count, off, flags, r));             \
    }
WRAP_VECTOR2(preadv2, PREADV2)
WRAP_VECTOR2(preadv64v2, PREADV64V2)
WRAP_VECTOR2(pwritev2, PWRITEV2)
WRAP_VECTOR2(pwritev64v2, PWRITEV64V2)

/* lseek: offset = the resulting position, req_bytes = the offset asked, aux = whence. Inline in each wrapper (a
 * call and its spills were a sixth of what tracing added to lseek). */
IOLOOM_INLINE void record_lseek(struct ioloom_call *c, struct ioloom_move *m, enum ioloom_op op, off_t off, int whence,
                                off_t r) {
    ioloom_move_to(m, r);
    record_moved(c, m, op, r, off, r, whence);
}

#define WRAP_LSEEK(fn, opname)                                                                         \
    IOLOOM_EXPORT off_t fn(int fd, off_t off, int whence) {                                            \
        TRACED_AT(fn, (fd, off, whence), fd, r < 0, record_lseek(&c, &m, OP(opname), off, whence, r)); \
    }
WRAP_LSEEK(lseek, LSEEK)
WRAP_LSEEK(lseek64, LSEEK64)

IOLOOM_EXPORT int fsync(int fd) { TRACED(P, fsync, (fd), r < 0, record_fd(&c, OP(FSYNC), fd, -1, -1, r, -1)); }
IOLOOM_EXPORT int fdatasync(int fd) {
    TRACED(P, fdatasync, (fd), r < 0, record_fd(&c, OP(FDATASYNC), fd, -1, -1, r, -1));
}

/* ftruncate/truncate: offset = req_bytes = the new length. */
#define WRAP_FTRUNCATE(fn, opname)                                                       \
    IOLOOM_EXPORT int fn(int fd, off_t len) {                                            \
        TRACED(P, fn, (fd, len), r < 0, record_fd(&c, OP(opname), fd, len, len, r, -1)); \
    }
WRAP_FTRUNCATE(ftruncate, FTRUNCATE)
WRAP_FTRUNCATE(ftruncate64, FTRUNCATE64)

/* ---- copies inside the kernel: two events, the source side (aux 0) and the destination side (aux 1), each
 * with the bytes copied, so that per-file read and written bytes add up ---- */

static void record_copy(struct ioloom_call *c, enum ioloom_op op, struct ioloom_move *in, int64_t in_off,
                        struct ioloom_move *out, int64_t out_off, int64_t req, ssize_t r) {
    struct ioloom_call source = *c;
    if (in->d && in->d == out->d) ioloom_fd_moved_unseen(in->fd); /* one position, moved twice: both ask */
    int64_t in_at = in_off >= 0 ? in_off : ioloom_move_by(in, r, IOLOOM_READS);
    int64_t out_at = out_off >= 0 ? out_off : ioloom_move_by(out, r, IOLOOM_WRITES);
    ioloom_busy++; /* the first record leaves the guard once; the second leaves it for the call */
    record_fd(&source, op, in->fd, in_at, req, r, 0);
    record_fd(c, op, out->fd, out_at, req, r, 1);
}

/* A copy between two descriptors, each at its current position unless its offset pointer is given. */
#define TRACED_COPY(fn, op, args, in, in_at, out, out_at, n)         \
    struct ioloom_call c;                                            \
    struct ioloom_move from, to;                                     \
    if (!ioloom_call_start(&c, P)) {                                 \
        ssize_t r = IOLOOM_NEXT(fn) args;                            \
        ioloom_fd_moved_unseen(in);                                  \
        return passed_through(out, r);                               \
    }                                                                \
    ioloom_move_start(&from, in_at < 0 ? in : -1);                   \
    ioloom_move_start(&to, out_at < 0 ? out : -1);                   \
    from.fd = in;                                                    \
    to.fd = out;                                                     \
    ssize_t r = IOLOOM_NEXT(fn) args;                                \
    ioloom_call_returned(&c, r < 0);                                 \
    record_copy(&c, op, &from, in_at, &to, out_at, (int64_t)(n), r); \
    return r

IOLOOM_EXPORT ssize_t copy_file_range(int in, off64_t *in_off, int out, off64_t *out_off, size_t n, unsigned flags) {
    int64_t in_at = in_off ? *in_off : -1, out_at = out_off ? *out_off : -1;
    TRACED_COPY(copy_file_range, OP(COPY_FILE_RANGE), (in, in_off, out, out_off, n, flags), in, in_at, out, out_at, n);
}

#define WRAP_SENDFILE(fn, opname, off_type)                                    \
    IOLOOM_EXPORT ssize_t fn(int out, int in, off_type *off, size_t n) {       \
        int64_t in_at = off ? *off : -1;                                       \
        TRACED_COPY(fn, OP(opname), (out, in, off, n), in, in_at, out, -1, n); \
    }
WRAP_SENDFILE(sendfile, SENDFILE, off_t)
WRAP_SENDFILE(sendfile64, SENDFILE64, off64_t)

/* ---- libc calls that move a descriptor's position inside libc, unseen: the next traced call asks ---- */

IOLOOM_EXPORT int vdprintf(int fd, const char *fmt, va_list ap) {
    return (int)passed_through(fd, IOLOOM_NEXT(vdprintf)(fd, fmt, ap));
}
int __vdprintf_chk(int fd, int flag, const char *fmt, va_list ap);
IOLOOM_EXPORT int __vdprintf_chk(int fd, int flag, const char *fmt, va_list ap) {
    return (int)passed_through(fd, IOLOOM_NEXT(__vdprintf_chk)(fd, flag, fmt, ap));
}
IOLOOM_EXPORT int dprintf(int fd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = vdprintf(fd, fmt, ap);
    va_end(ap);
    return r;
}
int __dprintf_chk(int fd, int flag, const char *fmt, ...);
IOLOOM_EXPORT int __dprintf_chk(int fd, int flag, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = __vdprintf_chk(fd, flag, fmt, ap);
    va_end(ap);
    return r;
}

IOLOOM_EXPORT ssize_t splice(int in, loff_t *in_off, int out, loff_t *out_off, size_t n, unsigned flags) {
    ssize_t r = IOLOOM_NEXT(splice)(in, in_off, out, out_off, n, flags);
    ioloom_fd_moved_unseen(in);
    return passed_through(out, r);
}

/* A directory stream reads its descriptor from now on. */
IOLOOM_EXPORT DIR *fdopendir(int fd) {
    ioloom_fd_release(fd);
    return IOLOOM_NEXT(fdopendir)(fd);
}

/* ---- memory maps of files (anonymous maps are memory, not I/O, and pass through) ----
 * mmap: offset = file offset, req_bytes = length, ret_bytes = length or -1, aux = prot | flags << 8.
 * munmap/msync of a traced map: offset = file offset of the range, req_bytes = length, aux = msync flags. */

#define MAX_MAPS 1024
static struct map {
    uintptr_t start;
    size_t len;
    int64_t file_offset;
    int fd;
    int32_t file;
} maps[MAX_MAPS];
static pthread_mutex_t maps_lock = PTHREAD_MUTEX_INITIALIZER;

static void remember_map(void *addr, size_t len, int64_t off, int fd) {
    pthread_mutex_lock(&maps_lock);
    for (int i = 0; i < MAX_MAPS; i++)
        if (!maps[i].len) {
            maps[i] = (struct map){(uintptr_t)addr, len, off, fd, ioloom_fd_state(fd)};
            break;
        }
    pthread_mutex_unlock(&maps_lock);
}

/* The traced map holding addr, or 0; `forget` removes it (munmap of its start). */
static int find_map(void *addr, struct map *found, int forget) {
    int hit = 0;
    pthread_mutex_lock(&maps_lock);
    for (int i = 0; i < MAX_MAPS && !hit; i++)
        if (maps[i].len && (uintptr_t)addr >= maps[i].start && (uintptr_t)addr < maps[i].start + maps[i].len) {
            *found = maps[i];
            hit = 1;
            if (forget && (uintptr_t)addr == maps[i].start) maps[i].len = 0;
        }
    pthread_mutex_unlock(&maps_lock);
    return hit;
}

static void record_mmap(struct ioloom_call *c, enum ioloom_op op, void *r, size_t len, int prot, int flags, int fd,
                        off_t off) {
    if (r != MAP_FAILED) remember_map(r, len, off, fd);
    record_fd(c, op, fd, off, (int64_t)len, r == MAP_FAILED ? -1 : (int64_t)len, prot | (int64_t)flags << 8);
}

#define WRAP_MMAP(fn, opname)                                                                           \
    IOLOOM_EXPORT void *fn(void *addr, size_t len, int prot, int flags, int fd, off_t off) {            \
        if (fd < 0 || (flags & MAP_ANONYMOUS)) return IOLOOM_NEXT(fn)(addr, len, prot, flags, fd, off); \
        TRACED(P, fn, (addr, len, prot, flags, fd, off), r == MAP_FAILED,                               \
               record_mmap(&c, OP(opname), r, len, prot, flags, fd, off));                              \
    }
WRAP_MMAP(mmap, MMAP)
WRAP_MMAP(mmap64, MMAP64)

static int unmap_or_sync(enum ioloom_op op, void *addr, size_t len, int flags) {
    struct map map;
    struct ioloom_call c;
    int is_sync = op == OP(MSYNC);
    if (!ioloom_call_start(&c, P))
        return is_sync ? IOLOOM_NEXT(msync)(addr, len, flags) : IOLOOM_NEXT(munmap)(addr, len);
    int traced = find_map(addr, &map, !is_sync);
    int r = is_sync ? IOLOOM_NEXT(msync)(addr, len, flags) : IOLOOM_NEXT(munmap)(addr, len);
    ioloom_call_returned(&c, r < 0);
    if (!traced) {
        errno = c.err;
        ioloom_leave();
        return r;
    }
    int64_t offset = map.file_offset + (int64_t)((uintptr_t)addr - map.start);
    ioloom_record_file(&c, op, P, map.file, map.fd, offset, (int64_t)len, r < 0 ? -1 : (int64_t)len,
                       is_sync ? flags : -1);
    return r;
}

IOLOOM_EXPORT int munmap(void *addr, size_t len) { return unmap_or_sync(OP(MUNMAP), addr, len, 0); }
IOLOOM_EXPORT int msync(void *addr, size_t len, int flags) { return unmap_or_sync(OP(MSYNC), addr, len, flags); }
