/* Clock, idle wait, data-call accounting, notes and error messages shared by the phases and kernels. */
#include "bench.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

double bench_now(void) { return MPI_Wtime(); }

static time_t wall_base; /* rank 0's wall-clock second at the start: small doubles keep nanoseconds */

void bench_wallclock_start(MPI_Comm comm) {
    long long base = (long long)time(NULL);
    MPI_Bcast(&base, 1, MPI_LONG_LONG, 0, comm);
    wall_base = (time_t)base;
}

double bench_wallclock(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)(ts.tv_sec - wall_base) + ts.tv_nsec * 1e-9;
}

double bench_phase_begin(const struct bench_options *o, MPI_Comm comm) {
    if (o->delay_s > 0) bench_sleep_ms(o->delay_s * 1e3);
    MPI_Barrier(comm);
    return bench_now();
}

void bench_count_call(struct bench_times *t, double begin, double end, uint64_t bytes) {
    if (t->calls == 0) t->data_begin = begin;
    t->data_end = end;
    t->data += end - begin;
    t->bytes += bytes;
    t->calls++;
}

#define MAX_NOTES 16
static char notes[MAX_NOTES][512];
static int nnotes;

void bench_note(const char *fmt, ...) {
    if (nnotes == MAX_NOTES) return; /* the first ones say what matters; a run does not make this many */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(notes[nnotes++], sizeof notes[0], fmt, ap);
    va_end(ap);
}

const char *bench_note_text(int i) { return notes[i]; }

int bench_note_count(void) { return nnotes; }

int bench_files_stay(const struct bench_options *o, struct bench_report *r, const char *what) {
    uint64_t errors = bench_report_errors(r);
    if (errors && !o->keep)
        bench_note("--verify found %llu bytes that differ: %s kept for inspection (remove it when done)",
                   (unsigned long long)errors, what);
    return o->keep || errors;
}

void bench_sleep_ms(double ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)((ms - (double)(time_t)(ms / 1000) * 1000) * 1e6)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR);
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
