/* Another preloaded tool, loaded in front of logfs, for the test that logfs's own storage code calls the next
 * definitions (libc's), never another tool's through the PLT: counts the calls that reach it from code inside
 * libioloom-logfs.so and forwards every call to the next definition. At exit, appends its counts as a line to the
 * file $LOGFS_SHIM_OUT (standard error may be closed by then: coreutils close it at exit). Loaded after logfs, it
 * sees the layer's own calls instead (the tests that count what the layer does), and the bytes its
 * sync_file_range calls covered; with $LOGFS_SHIM_SYNC_FAIL set to an errno number, sync_file_range fails with it
 * (-1) instead of reaching the kernel, as under seccomp or on a file system without it. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { OPENDIR, READDIR, CLOSEDIR, FSTATAT, UNLINKAT, READ, WRITE, LSEEK, CLOSE, SYNC_FILE_RANGE, NCALLS };
static const char *const names[NCALLS] = {"opendir", "readdir", "closedir", "fstatat", "unlinkat",
                                          "read",    "write",   "lseek",    "close",   "sync_file_range"};
static long from_logfs[NCALLS], synced_bytes;

/* Counts the call when the code that made it lies in the logfs library. */
static void seen(int call, void *caller) {
    Dl_info info;
    if (dladdr(caller, &info) && info.dli_fname && strstr(info.dli_fname, "libioloom-logfs"))
        __atomic_add_fetch(&from_logfs[call], 1, __ATOMIC_RELAXED);
}

#define NEXT(fn) ((__typeof__(&fn))dlsym(RTLD_NEXT, #fn))

DIR *opendir(const char *p) {
    seen(OPENDIR, __builtin_return_address(0));
    return NEXT(opendir)(p);
}
struct dirent *readdir(DIR *d) {
    seen(READDIR, __builtin_return_address(0));
    return NEXT(readdir)(d);
}
int closedir(DIR *d) {
    seen(CLOSEDIR, __builtin_return_address(0));
    return NEXT(closedir)(d);
}
int fstatat(int dirfd, const char *p, struct stat *st, int flags) {
    seen(FSTATAT, __builtin_return_address(0));
    return NEXT(fstatat)(dirfd, p, st, flags);
}
int unlinkat(int dirfd, const char *p, int flags) {
    seen(UNLINKAT, __builtin_return_address(0));
    return NEXT(unlinkat)(dirfd, p, flags);
}
ssize_t read(int fd, void *buf, size_t n) {
    seen(READ, __builtin_return_address(0));
    return NEXT(read)(fd, buf, n);
}
ssize_t write(int fd, const void *buf, size_t n) {
    seen(WRITE, __builtin_return_address(0));
    return NEXT(write)(fd, buf, n);
}
off_t lseek(int fd, off_t off, int whence) {
    seen(LSEEK, __builtin_return_address(0));
    return NEXT(lseek)(fd, off, whence);
}
int close(int fd) {
    seen(CLOSE, __builtin_return_address(0));
    return NEXT(close)(fd);
}
int sync_file_range(int fd, off_t off, off_t n, unsigned flags) {
    seen(SYNC_FILE_RANGE, __builtin_return_address(0));
    if (flags == SYNC_FILE_RANGE_WRITE) __atomic_add_fetch(&synced_bytes, (long)n, __ATOMIC_RELAXED);
    const char *fail = getenv("LOGFS_SHIM_SYNC_FAIL");
    if (fail) return errno = atoi(fail), -1;
    return NEXT(sync_file_range)(fd, off, n, flags);
}

__attribute__((destructor)) static void report(void) {
    char line[256];
    int n = snprintf(line, sizeof line, "shim: calls from logfs:");
    for (int i = 0; i < NCALLS; i++) {
        long count = __atomic_load_n(&from_logfs[i], __ATOMIC_RELAXED); /* threads may still be calling */
        n += snprintf(line + n, sizeof line - (size_t)n, " %s=%ld", names[i], count);
    }
    snprintf(line + n, sizeof line - (size_t)n, " sync_file_range_bytes=%ld\n",
             __atomic_load_n(&synced_bytes, __ATOMIC_RELAXED));
    const char *out = getenv("LOGFS_SHIM_OUT");
    int fd = out ? NEXT(open)(out, O_WRONLY | O_CREAT | O_APPEND, 0644) : -1;
    if (fd >= 0) NEXT(write)(fd, line, strlen(line)), NEXT(close)(fd);
}
