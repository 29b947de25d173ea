/* Another preloaded tool, for the stacking test: counts the pwrite calls that reach it and forwards them to the
 * next definition, as the tracer must do. Prints the count at exit. Built as a shared library. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

static long seen;

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
    static ssize_t (*next)(int, const void *, size_t, off_t);
    if (!next) next = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    seen++;
    return next(fd, buf, n, off);
}

__attribute__((destructor)) static void report(void) { fprintf(stderr, "shim saw %ld pwrite\n", seen); }
