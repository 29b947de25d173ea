/* POSIX backend: open/pwrite/pread/fsync/close, looping over short transfers as a careful program does. */
#include "backend.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct bench_file *posix_open(const struct bench_options *o, const char *name, MPI_Comm comm, int writing,
                                     uint64_t extent) {
    (void)o, (void)comm, (void)extent;
    int fd = open(name, writing ? O_WRONLY | O_CREAT : O_RDONLY, 0644);
    if (fd < 0) {
        bench_error("open %s: %s", name, strerror(errno));
        return NULL;
    }
    struct bench_file *f = calloc(1, sizeof *f);
    f->fd = fd;
    return f;
}

static int posix_transfer(struct bench_file *f, void *buf, size_t len, uint64_t offset, int writing) {
    size_t done = 0;
    while (done < len) {
        ssize_t n = writing ? pwrite(f->fd, (char *)buf + done, len - done, (off_t)(offset + done))
                            : pread(f->fd, (char *)buf + done, len - done, (off_t)(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            bench_error("%s of %zu bytes at offset %llu: %s", writing ? "pwrite" : "pread", len - done,
                        (unsigned long long)(offset + done), n < 0 ? strerror(errno) : "end of file");
            return BENCH_EXIT_IO;
        }
        done += (size_t)n;
    }
    return 0;
}

static int posix_sync(struct bench_file *f) {
    if (fsync(f->fd) == 0) return 0;
    bench_error("fsync: %s", strerror(errno));
    return BENCH_EXIT_IO;
}

static int posix_close(struct bench_file *f) {
    int rc = close(f->fd);
    int err = errno;
    free(f);
    if (rc == 0) return 0;
    bench_error("close: %s", strerror(err));
    return BENCH_EXIT_IO;
}

static MPI_Info posix_info(struct bench_file *f) {
    (void)f;
    return MPI_INFO_NULL;
}

const struct bench_backend bench_posix_backend = {"posix",    posix_open,  posix_transfer,
                                                  posix_sync, posix_close, posix_info};
