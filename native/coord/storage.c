/* The emulated storage's reservation clock (storage.h). Its file is opened, read and written by direct system
 * calls: in the preload, through libc they would reach the tracer (recorded as the program's I/O) and the
 * preload's own write wrappers. */
#include "storage.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int storage_open(const char *path) {
    return (int)syscall(SYS_openat, AT_FDCWD, path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
}

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
    long got = syscall(SYS_pread64, fd, &free_at, sizeof free_at, 0); /* an empty file: free now */
    double now = storage_now();
    double start = got == (long)sizeof free_at && free_at > now ? free_at : now;
    if (got >= 0 && syscall(SYS_pwrite64, fd, &(double){start + (double)n / bandwidth}, sizeof(double), 0) == 8)
        end = start + (double)n / bandwidth;
    flock(fd, LOCK_UN);
    return end;
}
