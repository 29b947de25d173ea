/* POSIX descriptor calls on containers: open (every spelling), close, read/write and their positional and
 * vector forms, lseek, truncate, fsync, dup, fcntl, copy_file_range, sendfile (mmap is in lf_mmap.c). A
 * descriptor that is not a container's costs one table load and passes through to the next definition. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "lf_fdtable.h"
#include "lf_paths.h"

/* ---- open ---- */

int lf_open_container(int dirfd, const char *path, int flags, mode_t mode, int *fd, const char **real,
                      struct lf_place *place) {
    if (!lf_resolve_call(dirfd, path, real, place)) return 0;
    int saved = errno;
    struct stat st;
    /* The name first, then (a directory) its metadata: a container is renamed into place whole (lf_meta_create), so
     * a directory found by the stat that holds no metadata after it is not a container being made. */
    int exists = IOLOOM_NEXT(stat)(place->dir, &st) == 0;
    int is_container = exists && S_ISDIR(st.st_mode) && lf_is_container(place->dir) &&
                       !((flags & O_NOFOLLOW) && lf_is_link(place->dir));
    errno = saved;
    if (!is_container && !exists && place->pack && lf_is_container(place->pack_dir)) {
        /* a packed file (1-N), existing or new */
        lf_file *f = LF_INSIDE(lf_open_packed(place->pack_dir, place->name, flags, mode, &place->pack_backends));
        *fd = f ? LF_INSIDE(lf_fd_open(f, flags)) : -1;
        if (f || errno != ENOENT) return 1;
        errno = saved;
    }
    if (!is_container && (exists || !(flags & O_CREAT))) return 0; /* a plain file or directory, or ENOENT */
    if (is_container && (flags & O_DIRECTORY))
        *fd = (errno = ENOTDIR, -1);
    else if (is_container && (flags & O_CREAT) && (flags & O_EXCL))
        *fd = (errno = EEXIST, -1);
    else if (place->pack && !is_container)
        *fd = LF_INSIDE(
            lf_fd_open(lf_open_packed(place->pack_dir, place->name, flags, mode, &place->pack_backends), flags));
    else
        *fd = LF_INSIDE(lf_fd_open(lf_open_file(place->dir, 0, flags, mode, &place->backends, !exists), flags));
    return 1;
}

static mode_t mode_arg(int flags, va_list ap) {
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

/* Every open but one certainly outside the mounts (do_openat), with its struct lf_place. */
__attribute__((noinline)) static int openat_resolved(int dirfd, const char *path, int flags, mode_t mode) {
    struct lf_place place;
    const char *real;
    int fd;
    if (lf_open_container(dirfd, path, flags, mode, &fd, &real, &place)) return fd;
    return IOLOOM_NEXT(openat)(dirfd, real, flags, mode);
}

static int do_openat(int dirfd, const char *path, int flags, mode_t mode) {
    if (lf_passes(dirfd, path)) return IOLOOM_NEXT(openat)(dirfd, path, flags, mode);
    return openat_resolved(dirfd, path, flags, mode);
}

EXPORT int open(const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return do_openat(AT_FDCWD, path, flags, mode);
}
int open64(const char *path, int flags, ...) ALIAS(open);

EXPORT int openat(int dirfd, const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return do_openat(dirfd, path, flags, mode);
}
int openat64(int dirfd, const char *path, int flags, ...) ALIAS(openat);

/* _FORTIFY_SOURCE spellings (tar, coreutils): no mode argument. */
EXPORT int __open_2(const char *path, int flags) { return do_openat(AT_FDCWD, path, flags, 0); }
int __open64_2(const char *path, int flags) ALIAS(__open_2);
EXPORT int __openat_2(int dirfd, const char *path, int flags) { return do_openat(dirfd, path, flags, 0); }
int __openat64_2(int dirfd, const char *path, int flags) ALIAS(__openat_2);

EXPORT int creat(const char *path, mode_t mode) {
    return do_openat(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}
int creat64(const char *path, mode_t mode) ALIAS(creat);

EXPORT int close(int fd) {
    if (!lf_fd(fd)) return IOLOOM_NEXT(close)(fd);
    int rc = lf_fd_release(fd), saved = errno;
    IOLOOM_NEXT(close)(fd);
    errno = saved;
    return rc;
}
int lf_self_close(int fd) SELF(close);

/* ---- data ---- */

/* at < 0: at the file position. As Linux does, O_APPEND makes even positional writes append. */
static ssize_t ofd_write(struct lf_ofd *o, const void *buf, size_t n, int64_t at) {
    uint64_t where;
    if (at >= 0)
        return o->status & O_APPEND ? lf_append(o->file, buf, n, &where) : lf_pwrite(o->file, buf, n, (uint64_t)at);
    pthread_mutex_lock(&o->lock);
    where = o->pos;
    ssize_t done = o->status & O_APPEND ? lf_append(o->file, buf, n, &where) : lf_pwrite(o->file, buf, n, where);
    if (done > 0) o->pos = where + (uint64_t)done;
    int saved = errno;
    pthread_mutex_unlock(&o->lock);
    errno = saved;
    return done;
}

static ssize_t ofd_read(struct lf_ofd *o, void *buf, size_t n, int64_t at) {
    if (at >= 0) return lf_pread(o->file, buf, n, (uint64_t)at);
    pthread_mutex_lock(&o->lock);
    ssize_t done = lf_pread(o->file, buf, n, o->pos);
    if (done > 0) o->pos += (uint64_t)done;
    int saved = errno;
    pthread_mutex_unlock(&o->lock);
    errno = saved;
    return done;
}

static size_t iov_total(const struct iovec *iov, int cnt) {
    size_t n = 0;
    for (int i = 0; i < cnt; i++) n += iov[i].iov_len;
    return n;
}

/* Vector I/O through one buffer: a vector write becomes one record (so regular vector writes still form
 * patterns), a vector read one resolved read. */
static ssize_t ofd_vector(struct lf_ofd *o, const struct iovec *iov, int cnt, int64_t at, int writing) {
    if (cnt == 1)
        return writing ? ofd_write(o, iov[0].iov_base, iov[0].iov_len, at)
                       : ofd_read(o, iov[0].iov_base, iov[0].iov_len, at);
    size_t n = iov_total(iov, cnt), k = 0;
    char *buf = malloc(n ? n : 1);
    if (!buf) return errno = ENOMEM, -1;
    for (int i = 0; writing && i < cnt; k += iov[i].iov_len, i++) memcpy(buf + k, iov[i].iov_base, iov[i].iov_len);
    ssize_t done = writing ? ofd_write(o, buf, n, at) : ofd_read(o, buf, n, at);
    k = 0;
    for (int i = 0; !writing && done > 0 && i < cnt && (size_t)done > k; k += iov[i].iov_len, i++)
        memcpy(iov[i].iov_base, buf + k, (size_t)done - k < iov[i].iov_len ? (size_t)done - k : iov[i].iov_len);
    int saved = errno;
    free(buf);
    errno = saved;
    return done;
}

#define OFD_OR_NEXT(fd, fn, ...)  \
    struct lf_ofd *o = lf_fd(fd); \
    if (!o) return IOLOOM_NEXT(fn)(fd, __VA_ARGS__)

EXPORT ssize_t write(int fd, const void *buf, size_t n) {
    OFD_OR_NEXT(fd, write, buf, n);
    ssize_t done = ofd_write(o, buf, n, -1);
    if (IOLOOM_UNLIKELY(lf_exiting) && done > 0) lf_publish(o->file);
    return done;
}
EXPORT ssize_t read(int fd, void *buf, size_t n) {
    OFD_OR_NEXT(fd, read, buf, n);
    return ofd_read(o, buf, n, -1);
}
ssize_t lf_self_write(int fd, const void *buf, size_t n) SELF(write);
ssize_t lf_self_read(int fd, void *buf, size_t n) SELF(read);

static int bad_offset(off_t off) { return off < 0 ? (errno = EINVAL, 1) : 0; }

EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
    OFD_OR_NEXT(fd, pwrite, buf, n, off);
    return bad_offset(off) ? -1 : ofd_write(o, buf, n, off);
}
ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) ALIAS(pwrite);
ssize_t lf_self_pwrite(int fd, const void *buf, size_t n, off_t off) SELF(pwrite);
EXPORT ssize_t pread(int fd, void *buf, size_t n, off_t off) {
    OFD_OR_NEXT(fd, pread, buf, n, off);
    return bad_offset(off) ? -1 : ofd_read(o, buf, n, off);
}
ssize_t pread64(int fd, void *buf, size_t n, off_t off) ALIAS(pread);
ssize_t lf_self_pread(int fd, void *buf, size_t n, off_t off) SELF(pread);

EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt) {
    OFD_OR_NEXT(fd, writev, iov, cnt);
    return ofd_vector(o, iov, cnt, -1, 1);
}
EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt) {
    OFD_OR_NEXT(fd, readv, iov, cnt);
    return ofd_vector(o, iov, cnt, -1, 0);
}
EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off) {
    OFD_OR_NEXT(fd, pwritev, iov, cnt, off);
    return bad_offset(off) ? -1 : ofd_vector(o, iov, cnt, off, 1);
}
ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off_t off) ALIAS(pwritev);
EXPORT ssize_t preadv(int fd, const struct iovec *iov, int cnt, off_t off) {
    OFD_OR_NEXT(fd, preadv, iov, cnt, off);
    return bad_offset(off) ? -1 : ofd_vector(o, iov, cnt, off, 0);
}
ssize_t preadv64(int fd, const struct iovec *iov, int cnt, off_t off) ALIAS(preadv);
/* The v2 forms: offset -1 means the file position; the RWF_* flags are hints we may ignore. */
EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int flags) {
    OFD_OR_NEXT(fd, pwritev2, iov, cnt, off, flags);
    return off < -1 ? (errno = EINVAL, -1) : ofd_vector(o, iov, cnt, off, 1);
}
ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt, off_t off, int flags) ALIAS(pwritev2);
EXPORT ssize_t preadv2(int fd, const struct iovec *iov, int cnt, off_t off, int flags) {
    OFD_OR_NEXT(fd, preadv2, iov, cnt, off, flags);
    return off < -1 ? (errno = EINVAL, -1) : ofd_vector(o, iov, cnt, off, 0);
}
ssize_t preadv64v2(int fd, const struct iovec *iov, int cnt, off_t off, int flags) ALIAS(preadv2);

EXPORT off_t lseek(int fd, off_t off, int whence) {
    OFD_OR_NEXT(fd, lseek, off, whence);
    pthread_mutex_lock(&o->lock);
    int64_t size = whence == SEEK_SET || whence == SEEK_CUR ? 0 : lf_size(o->file);
    int64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? (int64_t)o->pos : size;
    int64_t to = -1;
    if (size < 0) {
    } else if (whence == SEEK_DATA || whence == SEEK_HOLE) {
        /* The whole logical file counts as data, as on file systems without hole reporting. */
        if (off < 0 || off >= size)
            errno = ENXIO;
        else
            to = whence == SEEK_DATA ? off : size;
    } else if (whence != SEEK_SET && whence != SEEK_CUR && whence != SEEK_END)
        errno = EINVAL;
    else if (base + off < 0)
        errno = EINVAL;
    else
        to = base + off;
    if (to >= 0) o->pos = (uint64_t)to;
    int saved = errno;
    pthread_mutex_unlock(&o->lock);
    errno = saved;
    return to;
}
off_t lseek64(int fd, off_t off, int whence) ALIAS(lseek);
off_t lf_self_lseek(int fd, off_t off, int whence) SELF(lseek);

EXPORT int ftruncate(int fd, off_t len) {
    OFD_OR_NEXT(fd, ftruncate, len);
    if (len < 0) return errno = EINVAL, -1;
    return lf_truncate(o->file, (uint64_t)len);
}
int ftruncate64(int fd, off_t len) ALIAS(ftruncate);

EXPORT int fsync(int fd) {
    struct lf_ofd *o = lf_fd(fd);
    return o ? lf_sync(o->file) : IOLOOM_NEXT(fsync)(fd);
}
EXPORT int fdatasync(int fd) {
    struct lf_ofd *o = lf_fd(fd);
    return o ? lf_sync(o->file) : IOLOOM_NEXT(fdatasync)(fd);
}

/* Allocating space is extending the logical size (a truncate upwards); other modes cannot be served. */
static int allocate(struct lf_ofd *o, off_t off, off_t len) {
    if (off < 0 || len <= 0) return errno = EINVAL, -1;
    int64_t size = lf_size(o->file);
    if (size < 0) return -1;
    return off + len > size ? lf_truncate(o->file, (uint64_t)(off + len)) : lf_touch(o->file);
}

EXPORT int posix_fallocate(int fd, off_t off, off_t len) {
    struct lf_ofd *o = lf_fd(fd);
    if (!o) return IOLOOM_NEXT(posix_fallocate)(fd, off, len);
    return allocate(o, off, len) ? errno : 0;
}
int posix_fallocate64(int fd, off_t off, off_t len) ALIAS(posix_fallocate);

EXPORT int fallocate(int fd, int mode, off_t off, off_t len) {
    OFD_OR_NEXT(fd, fallocate, mode, off, len);
    return mode ? lf_unsupported(LF_UNS_FALLOCATE, EOPNOTSUPP) : allocate(o, off, len);
}
int fallocate64(int fd, int mode, off_t off, off_t len) ALIAS(fallocate);

EXPORT int posix_fadvise(int fd, off_t off, off_t len, int advice) {
    if (lf_fd(fd)) return 0; /* advice only */
    return IOLOOM_NEXT(posix_fadvise)(fd, off, len, advice);
}
int posix_fadvise64(int fd, off_t off, off_t len, int advice) ALIAS(posix_fadvise);

/* ---- copies between descriptors (cp, cat use copy_file_range; some tools sendfile) ---- */

/* Copy through a buffer; the positions move as the calls' contracts say (explicit offsets, else the file's). */
static ssize_t copy_through(int in, off_t *in_off, int out, off_t *out_off, size_t len) {
    size_t cap = len < (1u << 20) ? len : (1u << 20);
    char *buf = malloc(cap ? cap : 1);
    if (!buf) return errno = ENOMEM, -1;
    size_t done = 0;
    while (done < len) {
        size_t want = len - done < cap ? len - done : cap;
        ssize_t got = in_off ? lf_self_pread(in, buf, want, *in_off) : lf_self_read(in, buf, want);
        if (got <= 0) {
            if (got < 0 && !done) done = (size_t)-1;
            break;
        }
        ssize_t put = out_off ? lf_self_pwrite(out, buf, (size_t)got, *out_off) : lf_self_write(out, buf, (size_t)got);
        if (put < 0) {
            if (!done) done = (size_t)-1;
            break;
        }
        if (in_off) *in_off += put;
        if (out_off) *out_off += put;
        done += (size_t)put;
        if (put < got) break;
    }
    int saved = errno;
    free(buf);
    errno = saved;
    return (ssize_t)done;
}

EXPORT ssize_t copy_file_range(int in, off64_t *in_off, int out, off64_t *out_off, size_t len, unsigned flags) {
    if (!lf_fd(in) && !lf_fd(out)) return IOLOOM_NEXT(copy_file_range)(in, in_off, out, out_off, len, flags);
    if (flags) return errno = EINVAL, -1;
    return copy_through(in, in_off, out, out_off, len);
}

EXPORT ssize_t sendfile(int out, int in, off_t *in_off, size_t count) {
    if (!lf_fd(in) && !lf_fd(out)) return IOLOOM_NEXT(sendfile)(out, in, in_off, count);
    return copy_through(in, in_off, out, NULL, count);
}
ssize_t sendfile64(int out, int in, off_t *in_off, size_t count) ALIAS(sendfile);

/* ---- descriptors ---- */

EXPORT int dup(int fd) {
    int newfd = IOLOOM_NEXT(dup)(fd);
    struct lf_ofd *o = lf_fd(fd);
    if (o && newfd >= 0) lf_fd_share(newfd, o);
    return newfd;
}

static int dup_onto(int fd, int newfd, int rc) {
    struct lf_ofd *o = lf_fd(fd);
    if (rc >= 0 && fd != newfd && o) lf_fd_share(newfd, o);
    if (rc >= 0 && fd != newfd) lf_stdio_follow(newfd);
    return rc;
}

/* dup2/dup3 close newfd first when it is open: release its container before the real call reuses it. */
EXPORT int dup2(int fd, int newfd) {
    if (fd != newfd && lf_fd(newfd) && IOLOOM_NEXT(fcntl)(fd, F_GETFD) >= 0) lf_fd_release(newfd);
    return dup_onto(fd, newfd, IOLOOM_NEXT(dup2)(fd, newfd));
}

EXPORT int dup3(int fd, int newfd, int flags) {
    if (fd != newfd && lf_fd(newfd) && IOLOOM_NEXT(fcntl)(fd, F_GETFD) >= 0) lf_fd_release(newfd);
    return dup_onto(fd, newfd, IOLOOM_NEXT(dup3)(fd, newfd, flags));
}

/* Record locks on a container lock a lock file in it with the same ranges: a lock is a sync point, so data
 * sieving (lock, read, modify, write, unlock) sees the other writers' data and publishes its own. */
static int record_lock(struct lf_ofd *o, int cmd, struct flock *fl) {
    if (o->lock_fd < 0) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/lock", lf_dir(o->file));
        struct timespec times[2];
        int kept = lf_times_get(lf_dir(o->file), times) == 0; /* taking a lock modifies no data */
        int fd = IOLOOM_NEXT(open)(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (kept) lf_times_put(lf_dir(o->file), times);
        if (fd < 0) return -1;
        int none = -1;
        if (!__atomic_compare_exchange_n(&o->lock_fd, &none, fd, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            IOLOOM_NEXT(close)(fd);
    }
    if (cmd != F_GETLK && cmd != F_OFD_GETLK && fl->l_type == F_UNLCK && lf_publish(o->file)) return -1;
    int rc = IOLOOM_NEXT(fcntl)(o->lock_fd, cmd, fl);
    if (rc == 0 && cmd != F_GETLK && cmd != F_OFD_GETLK && fl->l_type != F_UNLCK) rc = lf_refresh(o->file);
    return rc;
}

static int ofd_fcntl(int fd, struct lf_ofd *o, int cmd, void *arg) {
    switch (cmd) {
        case F_DUPFD:
        case F_DUPFD_CLOEXEC: {
            int newfd = IOLOOM_NEXT(fcntl)(fd, cmd, (int)(intptr_t)arg);
            if (newfd >= 0) lf_fd_share(newfd, o);
            return newfd;
        }
        case F_GETFL:
            return o->status | (lf_flags(o->file) & O_ACCMODE);
        case F_SETFL:
            o->status = ((int)(intptr_t)arg & (O_APPEND | O_NONBLOCK | O_ASYNC | O_DIRECT | O_NOATIME)) |
                        (o->status & ~(O_APPEND | O_NONBLOCK | O_ASYNC | O_DIRECT | O_NOATIME));
            return 0;
        case F_GETLK:
        case F_SETLK:
        case F_SETLKW:
        case F_OFD_GETLK:
        case F_OFD_SETLK:
        case F_OFD_SETLKW:
            return record_lock(o, cmd, arg);
        default: /* F_GETFD/F_SETFD and the rest act on the reserved descriptor itself */
            return IOLOOM_NEXT(fcntl)(fd, cmd, arg);
    }
}

EXPORT int fcntl(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    struct lf_ofd *o = lf_fd(fd);
    return o ? ofd_fcntl(fd, o, cmd, arg) : IOLOOM_NEXT(fcntl)(fd, cmd, arg);
}
int fcntl64(int fd, int cmd, ...) ALIAS(fcntl);
