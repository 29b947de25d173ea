/* Preloaded into ioloom-bench's ranks (tests/test_bench_io.py): counts how many different buffers a process wrote
 * with its pwrite calls of $PWRITE_CONTENTS_SIZE bytes (compared whole, by their 64-bit FNV-1a hash), and at exit
 * appends "<different> <calls>" as a line to $PWRITE_CONTENTS_OUT. Every call goes on to libc's pwrite.
 * Calls may come from several threads of a process: the table and its counts change under one lock. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

enum { MAX_CONTENTS = 4096 };
static uint64_t seen[MAX_CONTENTS];
static long different, calls;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t fnv1a(const unsigned char *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void note(const void *buf, size_t n) {
    const char *size = getenv("PWRITE_CONTENTS_SIZE");
    if (!size || n != (size_t)atol(size)) return;
    uint64_t h = fnv1a(buf, n);
    pthread_mutex_lock(&lock);
    calls++;
    long i = 0;
    while (i < different && seen[i] != h) i++;
    if (i == different && different < MAX_CONTENTS) seen[different++] = h;
    pthread_mutex_unlock(&lock);
}

static ssize_t next(int fd, const void *buf, size_t n, off_t offset) {
    static ssize_t (*libc)(int, const void *, size_t, off_t);
    if (!libc) libc = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    return libc(fd, buf, n, offset);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t offset) {
    note(buf, n);
    return next(fd, buf, n, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t offset) {
    note(buf, n);
    return next(fd, buf, n, offset);
}

__attribute__((destructor)) static void report(void) {
    const char *out = getenv("PWRITE_CONTENTS_OUT");
    FILE *f = out && calls ? fopen(out, "a") : NULL;
    if (f) fprintf(f, "%ld %ld\n", different, calls), fclose(f);
}
