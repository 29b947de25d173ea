/* Clock, idle wait and error messages shared by the phases and kernels. */
#include "bench.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

double bench_now(void) { return MPI_Wtime(); }

void bench_sleep_ms(double ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)((ms - (double)(time_t)(ms / 1000) * 1000) * 1e6)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

void bench_abort_io(void) {
    bench_error("an I/O call failed; aborting the run (no figures)");
    MPI_Abort(MPI_COMM_WORLD, BENCH_EXIT_IO);
    __builtin_unreachable();
}

void *bench_alloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        bench_error("cannot allocate %zu bytes", bytes);
        bench_abort_io();
    }
    return p;
}

void bench_unlink(const char *name) {
    if (unlink(name) != 0 && errno != ENOENT)
        bench_error("cannot remove %s: %s (it stays behind)", name, strerror(errno));
}

void bench_error(const char *fmt, ...) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ioloom-bench: rank %d: ", rank);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
