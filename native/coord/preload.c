/* libioloom-coord-preload.so: coordination for unmodified programs (`ioloom run --coord ADDR`). Preloaded before
 * the tracer, it wraps the POSIX writes to regular files (write, pwrite, pwrite64, writev, pwritev): the first
 * write of a phase announces it, each write informs the coordinator first and waits if told to (an interrupted
 * process yields there, between two writes), and releases the bytes after it. A phase ends when the process has
 * not written for $IOLOOM_COORD_IDLE seconds (default 0.5; a watcher thread notices; a write waiting for its turn
 * keeps the phase) or exits, or, when its size was given ($IOLOOM_COORD_BYTES), with its last byte. The phase's
 * size is $IOLOOM_COORD_BYTES when given, else the bytes the tracer's predictor says the phase writes (with
 * IOLOOM_PREDICT=1: its phase interface, ioloom_predict_phase, phases split at the idle time), else the previous
 * phase's, else the first write's. Its time alone is the predictor's time to the phase's end when it has one;
 * else the rate of the last phase begun at the same call site (the predictor's symbol of one frame: the phase
 * that repeats) times its size; else, for a phase not met before, it is announced unknown (the coordinator's
 * bytes / bandwidth, a provisional place). After its first FIRST_CALLS writes it is revised: to the predictor's
 * time to the end then, or, not announced from either, to the rate of the writes after the first (the first may
 * wait for another phase's write still under way on the storage). The rates leave out the time waited for the
 * coordinator. Each phase's announcement and what it was are logged (the first RECORDS). The application's name
 * ($IOLOOM_COORD_NAME) groups its processes into one phase; its cores are $IOLOOM_COORD_CORES (default 1).
 * The MPI launchers and daemons named in $IOLOOM_SKIP_PROGRAMS (`ioloom run` names them; they carry the preload
 * to the ranks) are not coordinated. Fail-open as the client is (ioloom_coord.h); counters go to $IOLOOM_COORD_LOG (a
 * JSON line per process), with the start of the process's first coordinated write and the end of its last
 * (CLOCK_MONOTONIC seconds). With $IOLOOM_COORD_STORAGE (a file) and $IOLOOM_COORD_BANDWIDTH (bytes/s) each coordinated
 * write also takes its time on that emulated storage (storage.h), shared with every process naming the same file; with
 * $IOLOOM_COORD_WRITE_THROUGH=1 each is followed by fdatasync, so that its time is the device's, not the page
 * cache's; with $IOLOOM_COORD_START_AT (CLOCK_MONOTONIC seconds) the first coordinated write waits until then
 * (all three for benchmarks: `ioloom bench coord --program bench`). */
#include <dlfcn.h>
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
#include "phase.h"
#include "storage.h"

enum {
    FIRST_CALLS = 2, /* writes after which a phase not met before is revised (the rate of all but the first) */
    SITES = 8,       /* call sites whose phases are remembered */
    RECORDS = 64,    /* phases whose announcement is logged */
};
/* Where an announcement's figures came from. */
enum source { NONE, TOLD, PREDICTED, PREVIOUS, FIRST_WRITE, HISTORY, FIRST_CALLS_RATE };
static const char *const source_names[] = {"none",        "told",    "predictor",  "previous",
                                           "first_write", "history", "first_calls"};
/* One phase: announced (bytes and where from, seconds and where from), revised seconds (and where from), and
 * what it was: its bytes and active seconds. */
struct record {
    uint64_t bytes, actual_bytes;
    double seconds, revised, actual_seconds;
    enum source bytes_from, seconds_from, revised_from;
};

static pthread_mutex_t phase_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    uintptr_t site;
    double seconds_per_byte;
} history[SITES]; /* the last phase begun at each site; under phase_lock */
static int history_next;
static struct record records[RECORDS]; /* the first RECORDS phases; under phase_lock */
static uint64_t nrecords;
static __typeof__(&ioloom_predict_phase) predicted_phase; /* the tracer's, when it is loaded (NULL: not) */
static struct {
    ioloom_coord *client; /* opened at the first write of this process (pid) */
    pid_t pid;
    int in_phase;
    int busy;                   /* its writes under way (waiting included) */
    uint64_t bytes, last_bytes; /* this phase's bytes so far; the previous phase's */
    uint64_t expected, writes;  /* this phase's announced size; its writes so far */
    int sized;                  /* its size was given: it ends with its last byte */
    uintptr_t site;             /* of its first write */
    double started, waited;     /* its first write's time; seconds waited for the coordinator since */
    int estimated;              /* its time alone was announced from history or revised: not revised again */
    double probe_active;        /* its active seconds at the end of its first write: its rate is measured from there */
    uint64_t probe_bytes;       /* `bytes` then */
    double last_write;
    double first_start, last_end; /* of this process's coordinated writes (0: none yet) */
    uint64_t written;             /* bytes of all of them */
    int write_through;
    int storage; /* the emulated storage's clock, or -1 */
    double bandwidth;
    double idle; /* seconds without a write that end a phase */
} phase = {.storage = -1};
static int skipped; /* this program is an MPI launcher or daemon (IOLOOM_SKIP_PROGRAMS): its writes are not
                     * the application's, so they pass uncoordinated */
static __thread double transfer_end; /* when the write under way ends on the emulated storage (0: none) */
static __thread double write_waited; /* seconds the write under way waited for the coordinator */

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

/* The seconds per byte of the last phase begun at `site` (0: none met). The caller holds phase_lock. */
static double remembered(uintptr_t site) {
    for (int i = 0; i < SITES; i++)
        if (history[i].site == site) return history[i].seconds_per_byte;
    return 0;
}

static void remember(uintptr_t site, double seconds_per_byte) {
    int i = 0;
    while (i < SITES && history[i].site != site) i++;
    if (i == SITES) i = history_next++ % SITES;
    history[i].site = site;
    history[i].seconds_per_byte = seconds_per_byte;
}

/* The phase's seconds so far, its waits for the coordinator left out. */
static double active_seconds(double now) { return now - phase.started - phase.waited; }

/* The predictor's phase at `now` (phases split at the idle time): 0 when there is no predictor, or it does not
 * know the phase's end. */
static int predictor_phase(double now, struct pg_phase *out) {
    int64_t now_ns = (int64_t)(now * 1e9);
    return predicted_phase && predicted_phase(now_ns, (int64_t)(phase.idle * 1e9), 0, out) && out->end_ns > now_ns;
}

/* This phase's record (NULL past RECORDS). */
static struct record *record(void) { return nrecords <= RECORDS ? &records[nrecords - 1] : NULL; }

/* The phase's size: told, predicted, the previous phase's or its first write's n bytes. */
static enum source size_phase(const struct pg_phase *ahead, int known, size_t n) {
    uint64_t told = ioloom_env_uint("IOLOOM_COORD_BYTES", 0);
    uint64_t predicted = known && ahead->to_write > ahead->written ? (uint64_t)(ahead->to_write - ahead->written) : 0;
    enum source from = told ? TOLD : predicted ? PREDICTED : phase.last_bytes ? PREVIOUS : FIRST_WRITE;
    const uint64_t size[] = {[TOLD] = told, [PREDICTED] = predicted, [PREVIOUS] = phase.last_bytes, [FIRST_WRITE] = n};
    phase.sized = from == TOLD;
    phase.expected = size[from];
    return from;
}

/* A phase begins with a write of n bytes at `site` (the caller holds phase_lock). */
static void begin_phase(ioloom_coord *c, size_t n, uintptr_t site, double now) {
    struct pg_phase ahead;
    int known = predictor_phase(now, &ahead);
    enum source bytes_from = size_phase(&ahead, known, n);
    double per_byte = remembered(site);
    enum source seconds_from = known ? PREDICTED : per_byte > 0 ? HISTORY : NONE;
    double seconds = seconds_from == PREDICTED ? (double)ahead.end_ns * 1e-9 - now : per_byte * (double)phase.expected;
    ioloom_coord_prepare(c, phase.expected, seconds);
    phase.estimated = seconds_from == HISTORY; /* a rate from history is kept; a predicted phase is revised */
    nrecords++;
    if (record()) *record() = (struct record){phase.expected, 0, seconds, 0, 0, bytes_from, seconds_from, NONE};
    phase.in_phase = 1;
    phase.bytes = phase.writes = 0;
    phase.site = site;
    phase.started = now;
    phase.waited = 0;
}

/* After the phase's first calls: its time alone, for the next inform (phase_lock held): its active time so far
 * and the predictor's time to its end, or at the rate of the calls after the first. */
static void revise(ioloom_coord *c, double now) {
    struct pg_phase current;
    double active = active_seconds(now) - phase.probe_active, seconds = 0;
    uint64_t bytes = phase.bytes - phase.probe_bytes;
    enum source from = NONE;
    if (predictor_phase(now, &current) && current.done > 0)
        seconds = active_seconds(now) + (double)current.end_ns * 1e-9 - now, from = PREDICTED;
    else if (bytes > 0 && active > 0)
        seconds = active * (double)phase.expected / (double)bytes, from = FIRST_CALLS_RATE;
    if (seconds > 0) ioloom_coord_revise(c, phase.expected, seconds);
    if (seconds > 0 && record()) record()->revised = seconds, record()->revised_from = from;
    phase.estimated = 1;
}

/* Ends the phase when the process has been idle long enough (the caller holds phase_lock). */
static void end_phase(void) {
    double active = active_seconds(phase.last_write);
    if (phase.bytes > 0 && active > 0) remember(phase.site, active / (double)phase.bytes);
    if (record()) record()->actual_bytes = phase.bytes, record()->actual_seconds = active;
    ioloom_coord_complete(phase.client);
    phase.last_bytes = phase.bytes;
    phase.in_phase = 0;
}

static void *watch_idle(void *arg) {
    double idle = *(double *)arg;
    for (;;) {
        usleep((useconds_t)(idle * 250000));
        pthread_mutex_lock(&phase_lock);
        if (phase.in_phase && !phase.busy && now_seconds() - phase.last_write > idle) end_phase();
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
    phase.in_phase = phase.busy = 0;
    nrecords = 0;                                 /* the child logs its own phases */
    if (phase.storage >= 0) close(phase.storage); /* its flock would be the parent's: reopened with the client */
    phase.storage = -1;
}

static void register_fork_handler(void) { pthread_atfork(NULL, NULL, forget_parent); }

/* The emulated storage, when both its file and its bandwidth are given (the caller holds phase_lock). */
static void open_storage(void) {
    const char *file = ioloom_env_str("IOLOOM_COORD_STORAGE", NULL);
    phase.bandwidth = atof(ioloom_env_str("IOLOOM_COORD_BANDWIDTH", "0"));
    phase.storage = file && phase.bandwidth > 0 ? storage_open(file) : -1;
    phase.write_through = ioloom_env_bool("IOLOOM_COORD_WRITE_THROUGH", 0);
}

/* Sleep until $IOLOOM_COORD_START_AT if it is later than `now` (the first write); the time of the start. */
static double start_at(double now) {
    double at = atof(ioloom_env_str("IOLOOM_COORD_START_AT", "0"));
    if (at <= now) return now;
    storage_sleep_until(at);
    return now_seconds();
}

/* The client of this process, opened on first use (and in a forked child, again). The caller holds
 * phase_lock. */
static ioloom_coord *client(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (phase.client) return phase.client;
    pthread_once(&once, register_fork_handler);
    phase.pid = getpid();
    phase.in_phase = 0;
    phase.client = ioloom_coord_open(NULL, ioloom_env_str("IOLOOM_COORD_NAME", "app"),
                                     (int)ioloom_env_uint("IOLOOM_COORD_CORES", 1));
    open_storage();
    const char *text = ioloom_env_str("IOLOOM_COORD_IDLE", "0.5");
    phase.idle = atof(text) > 0 ? atof(text) : 0.5;
    pthread_t t;
    if (pthread_create(&t, NULL, watch_idle, &phase.idle) == 0) pthread_detach(t);
    return phase.client;
}

/* Before a write of n bytes to fd, called from `site`: 1 if it is coordinated (then after_write must follow). */
static int before_write(int fd, size_t n, uintptr_t site) {
    if (n == 0 || skipped) return 0;
    if (!ioloom_enter() || !regular_file(fd)) { /* not entered: a write of ioloom's own, passed through */
        ioloom_leave();
        return 0;
    }
    pthread_mutex_lock(&phase_lock);
    ioloom_coord *c = client();
    double now = now_seconds();
    if (phase.first_start == 0) now = phase.first_start = start_at(now);
    if (!phase.in_phase)
        begin_phase(c, n, site, now);
    else if (phase.writes >= FIRST_CALLS && !phase.estimated)
        revise(c, now);
    phase.last_write = now;
    phase.busy++;
    pthread_mutex_unlock(&phase_lock);
    write_waited = 0;
    if (!ioloom_coord_inform(c)) {
        ioloom_coord_wait(c);
        write_waited = now_seconds() - now;
        if (predicted_phase) predicted_phase(0, (int64_t)(phase.idle * 1e9), (int64_t)(write_waited * 1e9), NULL);
    }
    transfer_end = phase.storage >= 0 ? storage_reserve(phase.storage, n, phase.bandwidth) : 0;
    return 1;
}

static void after_write(int fd, ssize_t written) {
    uint64_t n = written > 0 ? (uint64_t)written : 0;
    if (phase.write_through) syscall(SYS_fdatasync, fd);     /* direct: the tracer would record it as the program's */
    if (transfer_end > 0) storage_sleep_until(transfer_end); /* the write's time on the emulated storage */
    pthread_mutex_lock(&phase_lock);
    phase.bytes += n;
    phase.written += n;
    phase.writes++;
    phase.busy--;
    phase.waited += write_waited;
    phase.last_write = phase.last_end = now_seconds();
    if (phase.writes == 1) {
        phase.probe_active = active_seconds(phase.last_write);
        phase.probe_bytes = phase.bytes;
    }
    ioloom_coord_release(phase.client, n);
    if (phase.in_phase && phase.sized && !phase.busy && phase.bytes >= phase.expected) end_phase();
    pthread_mutex_unlock(&phase_lock);
    ioloom_leave();
}

static size_t iov_bytes(const struct iovec *iov, int count) {
    size_t n = 0;
    for (int i = 0; i < count; i++) n += iov[i].iov_len;
    return n;
}

#define COORDINATED(fn, size, call)                                              \
    int hooked = before_write(fd, size, (uintptr_t)__builtin_return_address(0)); \
    ssize_t r = IOLOOM_NEXT(fn) call;                                            \
    if (hooked) after_write(fd, r);                                              \
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

__attribute__((constructor)) static void coord_start(void) {
    skipped = ioloom_program_skipped();
    predicted_phase = (__typeof__(predicted_phase))dlsym(RTLD_DEFAULT, "ioloom_predict_phase"); /* the tracer's */
}

enum { LOG_VERSION = 2 }; /* 1 (no "version"): each announcement a list of the same fields in the same order */

/* One phase's object in the log line, at `at` (room: the bytes left); its length as snprintf's. */
static size_t log_record(char *at, size_t room, const struct record *r, int first) {
    return (size_t)snprintf(at, room,
                            "%s{\"bytes\": %llu, \"bytes_from\": \"%s\", \"seconds\": %.6f, \"seconds_from\": \"%s\", "
                            "\"revised_seconds\": %.6f, \"revised_from\": \"%s\", \"bytes_written\": %llu, "
                            "\"active_seconds\": %.6f}",
                            first ? "" : ", ", (unsigned long long)r->bytes, source_names[r->bytes_from], r->seconds,
                            source_names[r->seconds_from], r->revised, source_names[r->revised_from],
                            (unsigned long long)r->actual_bytes, r->actual_seconds);
}

/* The process's line of $IOLOOM_COORD_LOG (version LOG_VERSION; read by python/ioloom/coord/log.py): its counters,
 * and per phase (the first RECORDS) an object of its announcement: bytes announced and where from, seconds
 * announced and where from, seconds revised and where from, bytes written, active seconds; written in one system
 * call, so that processes appending at once do not mix their lines. */
static void log_line(int fd, const struct ioloom_coord_counters *k) {
    static char line[RECORDS * 320 + 512];
    size_t n = (size_t)snprintf(
        line, sizeof line,
        "{\"version\": %d, \"pid\": %d, \"phases\": %llu, \"waits\": %llu, \"waited_seconds\": %.6f, "
        "\"timeouts\": %llu, \"lost\": %llu, \"bytes\": %llu, \"first_start\": %.6f, \"last_end\": %.6f, "
        "\"announced\": [",
        LOG_VERSION, (int)getpid(), (unsigned long long)k->phases, (unsigned long long)k->waits, k->waited_seconds,
        (unsigned long long)k->timeouts, (unsigned long long)k->lost, (unsigned long long)phase.written,
        phase.first_start, phase.last_end);
    for (uint64_t i = 0; i < nrecords && i < RECORDS && n < sizeof line; i++)
        n += log_record(line + n, sizeof line - n, &records[i], i == 0);
    if (n < sizeof line) n += (size_t)snprintf(line + n, sizeof line - n, "]}\n");
    if (n < sizeof line) syscall(SYS_write, fd, line, n); /* direct: not through this library's write */
}

/* At exit: end the phase, say goodbye, and append the counters to $IOLOOM_COORD_LOG. */
__attribute__((destructor)) static void finish(void) {
    pthread_mutex_lock(&phase_lock);
    if (!phase.client || phase.pid != getpid()) {
        pthread_mutex_unlock(&phase_lock);
        return;
    }
    if (phase.in_phase) end_phase(); /* its record is completed */
    struct ioloom_coord_counters k;
    ioloom_coord_counters(phase.client, &k);
    ioloom_coord_close(phase.client); /* ends the phase (BYE) */
    phase.client = NULL;
    if (phase.storage >= 0) close(phase.storage);
    pthread_mutex_unlock(&phase_lock);
    const char *log = ioloom_env_str("IOLOOM_COORD_LOG", NULL);
    int fd = log ? open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644) : -1;
    if (fd >= 0) {
        log_line(fd, &k);
        close(fd);
    }
}
