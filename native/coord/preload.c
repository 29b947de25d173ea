/* libioloom-coord-preload.so: coordination for unmodified programs (`ioloom run --coord ADDR`). Preloaded before
 * the tracer, it wraps the POSIX writes to regular files (write, pwrite, pwrite64, writev, pwritev): the first
 * write of a phase announces it, each write informs the coordinator first and waits if told to (an interrupted
 * process yields there, between two writes), and releases the bytes after it. A phase ends when the process has
 * not written for $IOLOOM_COORD_IDLE seconds (default 0.5; a watcher thread notices) or exits. The phase's size
 * is $IOLOOM_COORD_BYTES when given, else the previous phase's, else the first write's. The application's name
 * ($IOLOOM_COORD_NAME) groups its processes into one phase; its cores are $IOLOOM_COORD_CORES (default 1).
 * Fail-open as the client is (ioloom_coord.h); counters go to $IOLOOM_COORD_LOG (a JSON line per process). */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "ioloom_coord.h"
#include "ioloom_core.h"

static pthread_mutex_t phase_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    ioloom_coord *client; /* opened at the first write of this process (pid) */
    pid_t pid;
    int in_phase;
    uint64_t bytes, last_bytes; /* this phase's bytes so far; the previous phase's */
    double last_write;
} phase;

static double now_seconds(void) { return (double)ioloom_now_ns() * 1e-9; }

/* A regular file, asked of the kernel directly: an fstat through the tracer would be traced as the program's. */
static int regular_file(int fd) {
    struct stat st;
#ifdef SYS_fstat
    long rc = syscall(SYS_fstat, fd, &st);
#else
    long rc = syscall(SYS_newfstatat, fd, "", &st, AT_EMPTY_PATH);
#endif
    return rc == 0 && S_ISREG(st.st_mode);
}

/* Ends the phase when the process has been idle long enough (the caller holds phase_lock). */
static void end_phase(void) {
    ioloom_coord_complete(phase.client);
    phase.last_bytes = phase.bytes;
    phase.in_phase = 0;
}

static void *watch_idle(void *arg) {
    double idle = *(double *)arg;
    for (;;) {
        usleep((useconds_t)(idle * 250000));
        pthread_mutex_lock(&phase_lock);
        if (phase.in_phase && now_seconds() - phase.last_write > idle) end_phase();
        pthread_mutex_unlock(&phase_lock);
    }
    return NULL;
}

/* In a forked child: drop the copy of the parent's connection at once (the parent's phase ends with the
 * parent, not with its longest-lived child); the child opens its own at its first write. */
static void forget_parent(void) {
    pthread_mutex_init(&phase_lock, NULL); /* another thread of the parent may have held it at the fork */
    ioloom_coord_abandon(phase.client);
    phase.client = NULL;
    phase.in_phase = 0;
}

static void register_fork_handler(void) { pthread_atfork(NULL, NULL, forget_parent); }

/* The client of this process, opened on first use (and in a forked child, again). The caller holds
 * phase_lock. */
static ioloom_coord *client(void) {
    static double idle;
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (phase.client) return phase.client;
    pthread_once(&once, register_fork_handler);
    phase.pid = getpid();
    phase.in_phase = 0;
    phase.client = ioloom_coord_open(NULL, ioloom_env_str("IOLOOM_COORD_NAME", "app"),
                                     (int)ioloom_env_uint("IOLOOM_COORD_CORES", 1));
    const char *text = ioloom_env_str("IOLOOM_COORD_IDLE", "0.5");
    idle = atof(text) > 0 ? atof(text) : 0.5;
    pthread_t t;
    if (pthread_create(&t, NULL, watch_idle, &idle) == 0) pthread_detach(t);
    return phase.client;
}

/* Before a write of n bytes to fd: 1 if it is coordinated (then after_write must follow). */
static int before_write(int fd, size_t n) {
    if (n == 0 || !ioloom_enter()) return 0;
    if (!regular_file(fd)) {
        ioloom_leave();
        return 0;
    }
    pthread_mutex_lock(&phase_lock);
    ioloom_coord *c = client();
    if (!phase.in_phase) {
        uint64_t told = ioloom_env_uint("IOLOOM_COORD_BYTES", 0);
        ioloom_coord_prepare(c, told ? told : phase.last_bytes ? phase.last_bytes : n, 0);
        phase.in_phase = 1;
        phase.bytes = 0;
    }
    phase.last_write = now_seconds();
    pthread_mutex_unlock(&phase_lock);
    if (!ioloom_coord_inform(c)) ioloom_coord_wait(c);
    return 1;
}

static void after_write(ssize_t written) {
    pthread_mutex_lock(&phase_lock);
    uint64_t n = written > 0 ? (uint64_t)written : 0;
    phase.bytes += n;
    phase.last_write = now_seconds();
    ioloom_coord_release(phase.client, n);
    pthread_mutex_unlock(&phase_lock);
    ioloom_leave();
}

static size_t iov_bytes(const struct iovec *iov, int count) {
    size_t n = 0;
    for (int i = 0; i < count; i++) n += iov[i].iov_len;
    return n;
}

#define COORDINATED(fn, size, call)      \
    int hooked = before_write(fd, size); \
    ssize_t r = IOLOOM_NEXT(fn) call;    \
    if (hooked) after_write(r);          \
    return r

IOLOOM_EXPORT ssize_t write(int fd, const void *buf, size_t n) { COORDINATED(write, n, (fd, buf, n)); }
IOLOOM_EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
    COORDINATED(pwrite, n, (fd, buf, n, off));
}
IOLOOM_EXPORT ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) {
    COORDINATED(pwrite64, n, (fd, buf, n, off));
}
IOLOOM_EXPORT ssize_t writev(int fd, const struct iovec *iov, int count) {
    COORDINATED(writev, iov_bytes(iov, count), (fd, iov, count));
}
IOLOOM_EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int count, off_t off) {
    COORDINATED(pwritev, iov_bytes(iov, count), (fd, iov, count, off));
}

/* At exit: end the phase, say goodbye, and append the counters to $IOLOOM_COORD_LOG. */
__attribute__((destructor)) static void finish(void) {
    pthread_mutex_lock(&phase_lock);
    if (!phase.client || phase.pid != getpid()) {
        pthread_mutex_unlock(&phase_lock);
        return;
    }
    struct ioloom_coord_counters k;
    ioloom_coord_counters(phase.client, &k);
    ioloom_coord_close(phase.client); /* ends the phase (BYE) */
    phase.client = NULL;
    pthread_mutex_unlock(&phase_lock);
    const char *log = ioloom_env_str("IOLOOM_COORD_LOG", NULL);
    int fd = log ? open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644) : -1;
    if (fd >= 0) {
        dprintf(fd,
                "{\"pid\": %d, \"phases\": %llu, \"waits\": %llu, \"waited_seconds\": %.6f, \"timeouts\": %llu, "
                "\"lost\": %llu}\n",
                (int)getpid(), (unsigned long long)k.phases, (unsigned long long)k.waits, k.waited_seconds,
                (unsigned long long)k.timeouts, (unsigned long long)k.lost);
        close(fd);
    }
}
