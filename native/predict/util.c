/* What the kernels share: the computation between I/O phases, POSIX file calls that stop the job on error,
 * a small deterministic random generator (the same run twice does the same I/O). */
#include "kernels.h"

#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void compute(const struct run *r) {
    struct timespec t = {r->compute_ms / 1000, (long)(r->compute_ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

void fail(const char *what, const char *path) {
    fprintf(stderr, "ioloom-predict-kernels: %s %s: %s\n", what, path, strerror(errno));
    MPI_Abort(MPI_COMM_WORLD, 1);
}

int create_file(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) fail("cannot create", path);
    return fd;
}

void write_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) fail("cannot write", "a kernel's file");
        p += n;
        len -= (size_t)n;
    }
}

void close_file(int fd) {
    if (close(fd) != 0) fail("cannot close", "a kernel's file");
}

unsigned next_random(unsigned *state) {
    *state = *state * 1103515245u + 12345u;
    return (*state >> 16) & 0x7fff;
}

/* A deterministic value in [-half_width, half_width], the sum of two uniform draws (a triangle, denser at 0): a
 * count that varies a little around its mean, without period. */
int jitter(unsigned seed, int half_width) {
    int width = half_width + 1;
    return (int)(next_random(&seed) % (unsigned)width) + (int)(next_random(&seed) % (unsigned)width) - half_width;
}
