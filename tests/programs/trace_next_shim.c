/* Another preloaded tool, for the stacking tests: counts the pwrite, lseek and ftello calls that reach it (lseek and
 * ftello are how the tracer asks a descriptor's or a stream's position) and forwards them to the next definition, as
 * the tracer must do. Prints the counts at exit. Built as a shared library.
 * Calls come from every thread of the program: the counts are atomic. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static long pwrites, lseeks, ftellos;

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
    static ssize_t (*next)(int, const void *, size_t, off_t);
    if (!next) next = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    __atomic_add_fetch(&pwrites, 1, __ATOMIC_RELAXED);
    return next(fd, buf, n, off);
}

off_t lseek(int fd, off_t off, int whence) {
    static off_t (*next)(int, off_t, int);
    if (!next) next = (off_t (*)(int, off_t, int))dlsym(RTLD_NEXT, "lseek");
    __atomic_add_fetch(&lseeks, 1, __ATOMIC_RELAXED);
    return next(fd, off, whence);
}

off_t ftello64(FILE *fp) {
    static off_t (*next)(FILE *);
    if (!next) next = (off_t (*)(FILE *))dlsym(RTLD_NEXT, "ftello64");
    __atomic_add_fetch(&ftellos, 1, __ATOMIC_RELAXED);
    return next(fp);
}

/* Written with system calls: the tracer, preloaded before us, would otherwise record our report. */
__attribute__((destructor)) static void report(void) {
    char text[160];
    int len = snprintf(text, sizeof text, "shim saw %ld pwrite\nshim saw %ld lseek\nshim saw %ld ftello\n",
                       __atomic_load_n(&pwrites, __ATOMIC_SEQ_CST), __atomic_load_n(&lseeks, __ATOMIC_SEQ_CST),
                       __atomic_load_n(&ftellos, __ATOMIC_SEQ_CST));
    const char *to = getenv("SHIM_COUNTS");
    int fd = to ? (int)syscall(SYS_openat, AT_FDCWD, to, O_WRONLY | O_CREAT | O_APPEND, 0644) : 2;
    if (fd >= 0) syscall(SYS_write, fd, text, (size_t)len);
}
