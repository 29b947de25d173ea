/* The emulated storage's reservation clock (storage.h). */
#include "storage.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

int storage_open(const char *path) { return open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644); }

double storage_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void storage_sleep_until(double when) {
    struct timespec ts = {.tv_sec = (time_t)when, .tv_nsec = (long)((when - (time_t)when) * 1e9)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) continue;
}

double storage_reserve(int fd, uint64_t n, double bandwidth) {
    double free_at = 0, end = -1;
    if (flock(fd, LOCK_EX) != 0) return -1;
    ssize_t got = pread(fd, &free_at, sizeof free_at, 0); /* an empty file: free now */
    double now = storage_now();
    double start = got == (ssize_t)sizeof free_at && free_at > now ? free_at : now;
    if (got >= 0 && pwrite(fd, &(double){start + (double)n / bandwidth}, sizeof(double), 0) == sizeof(double))
        end = start + (double)n / bandwidth;
    flock(fd, LOCK_UN);
    return end;
}
