/* A seeded random sequence of calls at the current position (read, write, readv, writev, preadv2/pwritev2 at -1,
 * sendfile, copy_file_range, lseek), mixed with pread/pwrite, dup, dup2, fcntl(F_DUPFD), close, fresh opens of
 * the same file (some O_APPEND), F_SETFL toggling O_APPEND, a fork part-way (parent and child go on with the
 * descriptions they share) and threads. Before and after each call it asks the true position (the lseek
 * system call, or with LSEEK_FROM naming a preloaded library, that library's lseek: logfs answers for its
 * containers), and logs where the call took place, so that a test can compare with the offsets in the trace.
 *
 * Every step runs under one lock shared by the threads and both processes, so the asked positions are exact.
 *
 * usage: trace_positions FILE SEED STEPS LOG_PREFIX    (each process writes LOG_PREFIX.<pid>: "tid op fd offset") */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define SLOTS 6
#define THREADS 3

static const char *path;
static int fds[SLOTS]; /* -1: free; slot 0 is never closed */
static pthread_mutex_t *step_lock;
static off_t (*asked_lseek)(int, off_t, int);
static char *log_text;
static size_t log_len, log_cap;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static off_t truth(int fd) {
    return asked_lseek ? asked_lseek(fd, 0, SEEK_CUR) : (off_t)syscall(SYS_lseek, fd, 0, SEEK_CUR);
}

static void note(const char *op, int fd, long long offset) {
    pthread_mutex_lock(&log_lock);
    if (log_len + 128 > log_cap) log_text = realloc(log_text, log_cap = log_cap * 2 + 4096);
    log_len += (size_t)snprintf(log_text + log_len, 128, "%ld %s %d %lld\n", (long)syscall(SYS_gettid), op, fd, offset);
    pthread_mutex_unlock(&log_lock);
}

/* Where a call at the current position took place: the position after it, less what it moved (an O_APPEND
 * write lands at the end of file, not where the position was). */
static long long landed(int fd, off_t before, ssize_t moved) {
    return moved > 0 ? (long long)(truth(fd) - moved) : (long long)before;
}

static int any_fd(unsigned *seed) {
    for (;;) {
        int fd = fds[rand_r(seed) % SLOTS];
        if (fd >= 0) return fd;
    }
}

static int free_slot(unsigned *seed) {
    int start = rand_r(seed) % SLOTS;
    for (int i = 0; i < SLOTS; i++)
        if (fds[(start + i) % SLOTS] < 0) return (start + i) % SLOTS;
    return -1;
}

static void keep(int slot, int fd) {
    if (slot >= 0 && fd >= 0)
        fds[slot] = fd;
    else if (fd >= 0)
        close(fd);
}

static void step(unsigned *seed) {
    static __thread char buf[4096]; /* each thread's own: threads read into it at once */
    int fd = any_fd(seed), other = any_fd(seed);
    size_t n = 1 + rand_r(seed) % 300;
    off_t before = truth(fd), other_before = truth(other);
    ssize_t r;
    struct iovec iov[2] = {{buf, n / 2}, {buf + 1000, n - n / 2}};
    switch (rand_r(seed) % 17) {
        case 0:
        case 1:
            r = write(fd, buf, n);
            note("write", fd, landed(fd, before, r));
            break;
        case 2:
        case 3:
            r = read(fd, buf, n);
            note("read", fd, landed(fd, before, r));
            break;
        case 4:
            r = writev(fd, iov, 2);
            note("writev", fd, landed(fd, before, r));
            break;
        case 5:
            r = readv(fd, iov, 2);
            note("readv", fd, landed(fd, before, r));
            break;
        case 6:
            r = pwritev2(fd, iov, 2, -1, 0);
            note("pwritev2", fd, landed(fd, before, r));
            break;
        case 7:
            r = preadv2(fd, iov, 2, -1, 0);
            note("preadv2", fd, landed(fd, before, r));
            break;
        case 8:
            r = pwrite(fd, buf, n, rand_r(seed) % 5000);
            (void)r;
            break;
        case 9:
            r = pread(fd, buf, n, rand_r(seed) % 5000);
            (void)r;
            break;
        case 10: {
            static const int whence[] = {SEEK_SET, SEEK_CUR, SEEK_END};
            off_t at = lseek(fd, rand_r(seed) % 3000, whence[rand_r(seed) % 3]);
            note("lseek", fd, at);
            break;
        }
        case 11: {
            int slot = free_slot(seed), how = rand_r(seed) % 3;
            keep(slot, how == 0    ? dup(fd)
                       : how == 1  ? fcntl(fd, F_DUPFD, 10)
                       : slot >= 0 ? dup3(fd, 40 + slot, 0)
                                   : -1);
            break;
        }
        case 12: { /* dup2 over another open descriptor (not slot 0's) */
            int slot = 1 + rand_r(seed) % (SLOTS - 1);
            if (fds[slot] >= 0 && fds[slot] != fd) dup2(fd, fds[slot]);
            break;
        }
        case 13: {
            int slot = 1 + rand_r(seed) % (SLOTS - 1);
            if (fds[slot] >= 0) {
                close(fds[slot]);
                fds[slot] = -1;
            }
            break;
        }
        case 14:
            keep(free_slot(seed), open(path, O_RDWR | (rand_r(seed) % 3 == 0 ? O_APPEND : 0)));
            break;
        case 15:
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) ^ O_APPEND);
            break;
        default:
            if (other == fd) break;
            r = rand_r(seed) % 2 ? sendfile(other, fd, NULL, n) : copy_file_range(fd, NULL, other, NULL, n, 0);
            /* source side, then destination side: the order the trace records them in */
            note("copy", fd, landed(fd, before, r));
            note("copy", other, landed(other, other_before, r));
    }
}

static void steps(unsigned seed, int count) {
    for (int i = 0; i < count; i++) {
        pthread_mutex_lock(step_lock);
        step(&seed);
        pthread_mutex_unlock(step_lock);
    }
}

struct worker {
    unsigned seed;
    int count;
};
static void *work(void *arg) {
    struct worker *w = arg;
    steps(w->seed, w->count);
    return NULL;
}

/* The log, written with system calls: the program's own I/O is what the test looks at. */
static void write_log(const char *prefix) {
    char name[4096];
    snprintf(name, sizeof name, "%s.%d", prefix, (int)getpid());
    int fd = (int)syscall(SYS_openat, AT_FDCWD, name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || syscall(SYS_write, fd, log_text, log_len) != (long)log_len) exit(3);
    syscall(SYS_close, fd);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s FILE SEED STEPS LOG_PREFIX\n", argv[0]);
        return 2;
    }
    path = argv[1];
    unsigned seed = (unsigned)atoi(argv[2]);
    int count = atoi(argv[3]);
    const char *library = getenv("LSEEK_FROM");
    if (library) {
        void *handle = dlopen(library, RTLD_NOW | RTLD_NOLOAD);
        asked_lseek = handle ? (off_t (*)(int, off_t, int))dlsym(handle, "lseek") : NULL;
        if (!asked_lseek) return 4;
    }
    step_lock = mmap(NULL, sizeof *step_lock, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pthread_mutexattr_t shared;
    pthread_mutexattr_init(&shared);
    pthread_mutexattr_setpshared(&shared, PTHREAD_PROCESS_SHARED);
    pthread_mutex_init(step_lock, &shared);
    for (int i = 0; i < SLOTS; i++) fds[i] = -1;
    fds[0] = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fds[0] < 0) return 1;
    steps(seed, count / 3); /* one thread, one process */
    pid_t child = fork();   /* both go on with the descriptions they share */
    seed = seed * 31 + (child == 0);
    if (child == 0) log_len = 0; /* the child's log starts where its stream does */
    steps(seed, count / 3);
    pthread_t threads[THREADS];
    struct worker work_of[THREADS];
    for (int t = 0; t < THREADS; t++) {
        work_of[t] = (struct worker){seed * 7 + (unsigned)t, count / 3 / THREADS};
        pthread_create(&threads[t], NULL, work, &work_of[t]);
    }
    for (int t = 0; t < THREADS; t++) pthread_join(threads[t], NULL);
    write_log(argv[4]);
    if (child == 0) _exit(0);
    int status;
    waitpid(child, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 5;
}
