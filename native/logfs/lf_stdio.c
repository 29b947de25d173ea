/* stdio on containers. glibc's FILE functions reach the kernel through internal calls that no preloaded
 * library sees, so a container stream is a fopencookie() stream whose read/write/seek/close are the layer's
 * descriptor calls; fileno() of it returns that descriptor (md5sum and others use it for fadvise/fstat). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lf_fdtable.h"
#include "lf_paths.h"

#define MAX_STREAMS 1024

static struct {
    FILE *fp;
    int fd;
} streams[MAX_STREAMS];
static pthread_mutex_t streams_lock = PTHREAD_MUTEX_INITIALIZER;
static int nstreams; /* container streams open: 0 keeps fileno/fclose of every other stream at one load */

static void remember(FILE *fp, int fd) {
    pthread_mutex_lock(&streams_lock);
    for (int i = 0; i < MAX_STREAMS; i++)
        if (!streams[i].fp) {
            streams[i].fp = fp;
            streams[i].fd = fd;
            __atomic_add_fetch(&nstreams, 1, __ATOMIC_RELEASE);
            break;
        }
    pthread_mutex_unlock(&streams_lock);
}

static int stream_fd(FILE *fp, int forget) {
    int fd = -1;
    if (!__atomic_load_n(&nstreams, __ATOMIC_ACQUIRE)) return -1;
    pthread_mutex_lock(&streams_lock);
    for (int i = 0; i < MAX_STREAMS && fd < 0; i++)
        if (streams[i].fp == fp) {
            fd = streams[i].fd;
            if (forget) streams[i].fp = NULL, __atomic_sub_fetch(&nstreams, 1, __ATOMIC_RELEASE);
        }
    pthread_mutex_unlock(&streams_lock);
    return fd;
}

static ssize_t cookie_read(void *c, char *buf, size_t n) { return lf_self_read((int)(intptr_t)c, buf, n); }
static ssize_t cookie_write(void *c, const char *buf, size_t n) {
    ssize_t w = lf_self_write((int)(intptr_t)c, buf, n);
    return w < 0 ? 0 : w; /* fopencookie: 0 reports the error */
}
static int cookie_seek(void *c, off64_t *pos, int whence) {
    off_t to = lf_self_lseek((int)(intptr_t)c, *pos, whence);
    if (to < 0) return -1;
    *pos = to;
    return 0;
}
static int cookie_close(void *c) { return lf_self_close((int)(intptr_t)c); }

static const cookie_io_functions_t cookie_io = {cookie_read, cookie_write, cookie_seek, cookie_close};

/* fopen's mode string as open flags; -1 (EINVAL) when it is not one. */
static int mode_flags(const char *mode) {
    int flags;
    switch (mode[0]) {
        case 'r':
            flags = 0;
            break;
        case 'w':
            flags = O_CREAT | O_TRUNC;
            break;
        case 'a':
            flags = O_CREAT | O_APPEND;
            break;
        default:
            return errno = EINVAL, -1;
    }
    int plus = strchr(mode, '+') != NULL;
    flags |= plus ? O_RDWR : mode[0] == 'r' ? O_RDONLY : O_WRONLY;
    if (strchr(mode, 'x')) flags |= O_EXCL;
    if (strchr(mode, 'e')) flags |= O_CLOEXEC;
    return flags;
}

static FILE *wrap_fd(int fd, const char *mode) {
    FILE *fp = fopencookie((void *)(intptr_t)fd, mode, cookie_io);
    if (fp) remember(fp, fd);
    return fp;
}

void lf_stdio_follow(int fd) {
    static FILE *own[3], *served[3]; /* glibc's stream of each standard descriptor, and ours */
    FILE **std = fd == 0 ? &stdin : fd == 1 ? &stdout : fd == 2 ? &stderr : NULL;
    struct lf_ofd *o = std ? lf_fd(fd) : NULL;
    if (o && *std != served[fd]) {
        int flags = lf_flags(o->file) | o->status;
        if (!served[fd]) served[fd] = wrap_fd(fd, (flags & O_ACCMODE) == O_RDONLY ? "r" : flags & O_APPEND ? "a" : "w");
        if (!served[fd]) return;
        fflush(*std); /* what the program wrote before the switch goes where it was meant to */
        own[fd] = *std;
        *std = served[fd];
    } else if (std && !o && served[fd] && *std == served[fd]) {
        fflush(served[fd]);
        *std = own[fd];
    }
}

EXPORT FILE *fopen(const char *path, const char *mode) {
    struct lf_place place;
    const char *real = path;
    int flags = mode ? mode_flags(mode) : (errno = EINVAL, -1), fd;
    if (flags < 0 || !lf_open_container(AT_FDCWD, path, flags, 0666, &fd, &real, &place))
        return IOLOOM_NEXT(fopen)(real, mode);
    if (fd < 0) return NULL;
    FILE *fp = wrap_fd(fd, mode);
    if (!fp) close(fd);
    return fp;
}
FILE *fopen64(const char *path, const char *mode) ALIAS(fopen);

EXPORT FILE *fdopen(int fd, const char *mode) {
    struct lf_ofd *o = lf_fd(fd);
    return o ? wrap_fd(fd, mode) : IOLOOM_NEXT(fdopen)(fd, mode);
}

EXPORT int fileno(FILE *fp) {
    int fd = stream_fd(fp, 0);
    return fd >= 0 ? fd : IOLOOM_NEXT(fileno)(fp);
}
int fileno_unlocked(FILE *fp) ALIAS(fileno);

EXPORT int fclose(FILE *fp) {
    stream_fd(fp, 1);
    return IOLOOM_NEXT(fclose)(fp);
}
