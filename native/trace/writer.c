/* The event writer: per-thread buffers filled without locks, encoded into EVENTS chunks and appended to this
 * process's stream file when a buffer fills, when IOLOOM_FLUSH_INTERVAL has passed, and at exit/exec/signal.
 *
 * Each thread's buffer has two halves. Recording an event is a plain store of its fields into the active
 * half; when that half fills (or is older than the flush interval) the thread seals it, switches to the other
 * half and encodes and writes the sealed half itself. With IOLOOM_BACKGROUND_ENCODE=1 it wakes an encoder
 * thread instead, which does that off the program's threads; if the encoder has not yet written the other
 * half, the program's thread writes both itself, in order: slower, but nothing is lost and memory stays
 * bounded. Inline is the default because the encoder thread only pays where a core is free: on a 2-vCPU
 * machine, or with every core running a rank, it slows the program's thread more than encoding inline does
 * (10 alternating runs of the overhead probe: pwrite +61 ns inline against +88, pread +63 against +104). The
 * final flushes (exit, exec, fatal signal, thread exit) write the sealed half and then the active one, inline.
 *
 * Memory is bounded by IOLOOM_TRACE_BUFFER (default 8 MiB): one encode area (with room to group a buffer's rows
 * by operation), one shared buffer, and a buffer per thread, sized as threads arrive so that the budget always
 * keeps a minimal buffer for each of the next threads up to THREADS_PROVIDED (the first threads get large
 * buffers, later ones smaller). A thread that still finds the
 * budget spent records into the shared buffer, under its lock: it waits for the writer (the wait is counted in
 * the INFO) but loses nothing.
 *
 * A full disk loses events but never the count of them: before each chunk the stream's space is preallocated
 * (a few chunks ahead, reserve_ahead) with RESERVE_BYTES more past its end, so that when the disk fills the final
 * accounting (events lost, the errno, clean exit) still fits; a chunk is written whole or cut off again. When even that
 * cannot be written (the disk was full from the start), the accounting goes to the stream file's extended attribute
 * ACCOUNTING_XATTR. The stream is written with raw system calls so that no interposed library (ours, logfs, another
 * tool) sees the tracer's own I/O. */
#include <assert.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fold.h"
#include "trace_internal.h"

#define DEFAULT_BUDGET (8u << 20)
#define MIN_EVENTS_PER_THREAD 256u
#define MAX_EVENTS_PER_THREAD 16384u
#define THREADS_PROVIDED 256u /* threads the budget keeps a minimal buffer for, whatever came before */
#define STREAM_NAME_MAX 4096
#define RESERVE_BYTES 4096 /* allocated past the stream's end: room for the final accounting */
#define RESERVE_AHEAD_MAX (1u << 20)
#define ACCOUNTING_XATTR "user.ioloom.info"

struct thread_buffer {
    struct ioloom_raw_event *events[2]; /* the second half only with the encoder thread */
    uint32_t capacity;                  /* events per half, a multiple of 64 */
    uint32_t count[2];                  /* per half; the active one written by the owner, read by final flushes */
    uint32_t active;                    /* the half the owner fills; changed only under flush_lock */
    uint32_t sealed;                    /* 1 + the full half waiting for the encoder thread, 0 when none */
    uint32_t tid;
    uint64_t last_flush_ns;
    uint64_t anchor_ticks, anchor_ns; /* the last converted event's end (0, 0: none yet), see tick_clock */
    pthread_mutex_t flush_lock;       /* taken only to flush, never per event */
    struct thread_buffer *next;
};

IOLOOM_EXPORT volatile int ioloom_tracing;
volatile int ioloom_in_signal;
static volatile int encoder_working; /* the encoder thread holds (or is about to take) writer locks */

int ioloom_lock(pthread_mutex_t *lock) {
    if (!ioloom_in_signal) return pthread_mutex_lock(lock);
    /* A lock held by the interrupted code is never released: give up at once. One held by the encoder thread
     * is released within a chunk's encoding: wait for it (bounded), or the fatal-signal flush would skip it. */
    for (int spins = 0; spins < 100000; spins++) {
        if (pthread_mutex_trylock(lock) == 0) return 0;
        if (!encoder_working) break;
        sched_yield();
    }
    return EBUSY;
}
volatile int ioloom_finished;
IOLOOM_EXPORT volatile uint32_t ioloom_look_mask = 63; /* capacity is a multiple of 64 */

static struct {
    int fd;
    pthread_mutex_t lock;             /* serialises chunk writes and the shared encode area */
    uint8_t *encoded;                 /* encode area: ioloom_events_bound(capacity) */
    int64_t *scratch;                 /* one column of a chunk */
    struct ioloom_raw_event *grouped; /* a buffer's rows grouped by operation (write_events) */
    uint32_t capacity;                /* the most events per thread buffer */
    uint32_t halves;                  /* halves per thread buffer: 2 with the encoder thread, else 1 */
    uint32_t buffers;                 /* thread buffers handed out */
    size_t budget_left;               /* bytes of IOLOOM_TRACE_BUFFER not yet given to a thread */
    uint64_t flush_interval_ns;
    struct thread_buffer *threads; /* every buffer handed out, for the final flush */
    uint64_t dropped;
    uint64_t dropped_written;
    uint64_t events_written;
    uint64_t bytes_written;
    int write_error;        /* errno of the first chunk that could not be written, 0 none */
    int cannot_preallocate; /* the file system does not preallocate: no reserve */
    uint64_t write_failed;  /* events lost because their chunk could not be written */
    uint64_t reserved_end;  /* the stream's space is allocated up to this byte */
    uint32_t chain;         /* the checksum of the stream's last chunk (ioloom_chain_chunk) */
    uint8_t closing[64];    /* the clean_exit chunk once written: stated again after any later chunk (once after */
    size_t closing_len;     /* a flush's), so that a stream that exited cleanly ends with it (0: not yet) */
    int closing_due;        /* a chunk followed it that a flush still writes: stated again at the flush's end */
    char path[STREAM_NAME_MAX];
} w = {.fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

static IOLOOM_TLS struct thread_buffer *my_buffer;
static IOLOOM_TLS int my_buffer_refused; /* the budget was spent when this thread first recorded: it records
                                          * into the shared buffer */
static IOLOOM_TLS uint32_t my_tid;
static IOLOOM_TLS int my_flushes; /* this thread's flushes under way (nested): clean_exit is stated again after them */
IOLOOM_EXPORT IOLOOM_TLS struct ioloom_cursor ioloom_cursor;
IOLOOM_TLS int *ioloom_errno_at;
static pthread_key_t thread_exit_key;

/* The recording fast path writes at ioloom_cursor: the owner's active half. Moved when the half changes. */
static void point_cursor(struct thread_buffer *b) {
    ioloom_cursor.rows = b->events[b->active];
    ioloom_cursor.count = &b->count[b->active];
}

static uint64_t dropped_so_far(void) { return __atomic_load_n(&w.dropped, __ATOMIC_RELAXED); }

static void count_dropped(uint64_t n) { __atomic_add_fetch(&w.dropped, n, __ATOMIC_RELAXED); }

static ssize_t raw_write(int fd, const void *buf, size_t len) { return syscall(SYS_write, fd, buf, len); }

/* The stream file's identity: its descriptor is checked against it before every chunk. */
static uint64_t stream_dev, stream_ino;

/* 1 when fd is the stream file (then *size is its length, if size is given). */
static int fd_is_stream(int fd, uint64_t *size) {
    struct stat st;
    if (fd < 0 || syscall(SYS_fstat, fd, &st) || st.st_dev != stream_dev || st.st_ino != stream_ino) return 0;
    if (size) *size = (uint64_t)st.st_size;
    return 1;
}

/* The stream's descriptor, checked: a program that closed it (close_range, closefrom) and got the number back
 * for one of its own files must never receive trace bytes. When it is not ours any more, the stream is opened
 * again by path (that number now belongs to the program and is left alone). */
static int stream_fd(uint64_t *size) {
    if (fd_is_stream(w.fd, size)) return w.fd;
    w.fd = (int)syscall(SYS_openat, AT_FDCWD, w.path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (w.fd < 0) return -1;
    w.fd = ioloom_fd_move_high(w.fd);
    struct stat st;
    if (syscall(SYS_fstat, w.fd, &st)) return -1;
    stream_dev = st.st_dev;
    stream_ino = st.st_ino;
    *size = (uint64_t)st.st_size;
    return w.fd;
}

/* ---- writing chunks, and a full disk ---- */

/* Allocates [end, end + len) of the stream, or fails (errno set). */
static int allocate(int fd, uint64_t end, uint64_t len) {
    if (syscall(SYS_fallocate, fd, FALLOC_FL_KEEP_SIZE, (off_t)end, (off_t)len)) return -1;
    w.reserved_end = end + len;
    return 0;
}

/* What a running stream allocates past the room it needs: an eighth of what it holds, at most RESERVE_AHEAD_MAX, so
 * that a growing stream allocates once every few chunks instead of before each (a fallocate costs about as much as
 * writing the chunk) while a stream left unfinished (exec, a kill) keeps at most that much allocated past its end. */
static uint64_t reserve_ahead(uint64_t end) { return end / 8 < RESERVE_AHEAD_MAX ? end / 8 : RESERVE_AHEAD_MAX; }

/* Once finished, every chunk allocates exactly its room and the reserve: the first gives back what was allocated
 * ahead (truncating the stream at its end frees the blocks allocated past it; a hole cannot be punched past the end
 * on ext4) and allocates the reserve again at once, so that the accounting chunk still fits if the next allocation
 * fails on a full disk (unless another writer took those blocks between the two calls). */
static void give_back_ahead(int fd, uint64_t end) {
    if (w.reserved_end <= end + RESERVE_BYTES || syscall(SYS_ftruncate, fd, (off_t)end)) return;
    w.reserved_end = end;
    allocate(fd, end, RESERVE_BYTES);
}

/* Space for `len` more bytes at `end` and RESERVE_BYTES past them: 0 when the disk has it (or the file system
 * cannot preallocate, and the write itself will tell). */
static int reserve_room(int fd, uint64_t end, size_t len) {
    if (w.cannot_preallocate) return 0;
    uint64_t room = len + RESERVE_BYTES;
    if (ioloom_finished) give_back_ahead(fd, end);
    if (!ioloom_finished && end + room <= w.reserved_end) return 0;
    if ((!ioloom_finished && allocate(fd, end, room + reserve_ahead(end)) == 0) || allocate(fd, end, room) == 0)
        return 0;
    if (errno != EOPNOTSUPP && errno != ENOSYS) return -1;
    w.cannot_preallocate = 1;
    return 0;
}

static int write_fully(int fd, const uint8_t *buf, size_t len) {
    while (len) {
        ssize_t n = raw_write(fd, buf, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        buf += n;
        len -= (size_t)n;
        w.bytes_written += (size_t)n;
    }
    return 0;
}

/* Appends one sealed chunk, its checksum chained to the stream's last one, all of it or nothing (a partial write
 * is cut off, so that what follows is read as it was written). An accounting chunk may use the reserve when the
 * disk is full. The stream's header goes first when the file is still empty (the disk was full when the stream
 * was created). 0 on success; else errno says why. w.lock held. */
static int append_locked(uint8_t *chunk, size_t len, int accounting) {
    uint64_t end = 0;
    int fd = stream_fd(&end);
    if (fd < 0) return -1;
    uint8_t header[IOLOOM_HEADER_BYTES];
    size_t header_len = end ? 0 : sizeof header;
    if (reserve_room(fd, end, header_len + len) && !(accounting && end + header_len + len <= w.reserved_end)) return -1;
    if (header_len) ioloom_file_header(header);
    uint32_t crc = ioloom_chain_stream_chunk(chunk, end ? w.chain : 0);
    if ((header_len && write_fully(fd, header, header_len)) || write_fully(fd, chunk, len)) {
        int err = errno;
        syscall(SYS_ftruncate, fd, (off_t)end);
        errno = err;
        return -1;
    }
    w.chain = crc;
    w.closing_due = w.closing_len && chunk != w.closing;
    if (w.closing_due && !my_flushes) append_locked(w.closing, w.closing_len, 1);
    return 0;
}

/* Ends one of this thread's flushes: the last states clean_exit again when a chunk followed it. */
static void end_flush(void) {
    if (--my_flushes || ioloom_lock(&w.lock)) return;
    if (w.closing_due) append_locked(w.closing, w.closing_len, 1);
    pthread_mutex_unlock(&w.lock);
}

/* The keys of the final accounting: written even when the disk is full (from the reserve, or into the stream
 * file's extended attribute), with their latest values. */
static const char *const accounting_keys[] = {"pid",        "dropped_events", "write_error", "write_failed_events",
                                              "clean_exit", "ended_by_exec"};
#define ACCOUNTING_KEYS (sizeof accounting_keys / sizeof *accounting_keys)
static char accounting_values[ACCOUNTING_KEYS][24];

static int accounting_key(const char *key) {
    for (size_t i = 0; i < ACCOUNTING_KEYS; i++)
        if (!strcmp(key, accounting_keys[i])) return (int)i;
    return -1;
}

/* The accounting as an INFO payload in the stream file's extended attribute: for a stream that could not hold
 * it (no byte of the disk left). */
static void write_accounting_xattr(void) {
    char payload[ACCOUNTING_KEYS * 48], *p = payload;
    for (size_t i = 0; i < ACCOUNTING_KEYS; i++) {
        if (!accounting_values[i][0]) continue;
        p = (char *)ioloom_put_cstr(ioloom_put_cstr((uint8_t *)p, accounting_keys[i]), accounting_values[i]);
    }
    uint64_t size;
    int fd = stream_fd(&size);
    if (fd >= 0) syscall(SYS_fsetxattr, fd, ACCOUNTING_XATTR, payload, (size_t)(p - payload), 0);
}

/* A chunk of `events` events (0: metadata) could not be written: the first error is kept, the events counted. */
static void note_write_failed(uint32_t events) {
    int first = !w.write_error;
    if (first) w.write_error = errno ? errno : EIO;
    w.write_failed += events;
    if (first) snprintf(accounting_values[accounting_key("write_error")], 24, "%d", w.write_error);
    snprintf(accounting_values[accounting_key("write_failed_events")], 24, "%llu", (unsigned long long)w.write_failed);
}

static int write_chunk_locked(uint8_t *chunk, size_t len, int accounting, uint32_t events) {
    if (append_locked(chunk, len, accounting) == 0) return 0;
    note_write_failed(events);
    return -1;
}

int ioloom_write_chunk(uint8_t *chunk, size_t len) {
    int saved = errno;
    if (ioloom_lock(&w.lock)) return -1;
    int rc = write_chunk_locked(chunk, len, 0, 0);
    pthread_mutex_unlock(&w.lock);
    errno = saved;
    return rc;
}

static void write_info_chunk(const char *key, const char *value, int accounting) {
    size_t klen = strlen(key), vlen = strlen(value);
    uint8_t stack[512];
    uint8_t *chunk = IOLOOM_CHUNK_HEADER_BYTES + klen + vlen + 2 <= sizeof stack
                         ? stack
                         : malloc(IOLOOM_CHUNK_HEADER_BYTES + klen + vlen + 2);
    if (!chunk) return;
    uint8_t *p = ioloom_put_cstr(ioloom_put_cstr(chunk + IOLOOM_CHUNK_HEADER_BYTES, key), value);
    ioloom_seal_chunk(chunk, IOLOOM_CHUNK_INFO, (uint32_t)(p - chunk - IOLOOM_CHUNK_HEADER_BYTES));
    int saved = errno, written = -1;
    size_t len = (size_t)(p - chunk);
    if (ioloom_lock(&w.lock) == 0) {
        written = write_chunk_locked(chunk, len, accounting, 0);
        if (!written && !strcmp(key, "clean_exit") && len <= sizeof w.closing)
            memcpy(w.closing, chunk, w.closing_len = len);
        if (written && accounting) write_accounting_xattr();
        pthread_mutex_unlock(&w.lock);
    }
    errno = saved;
    if (chunk != stack) free(chunk);
}

void ioloom_write_info(const char *key, const char *value) {
    int slot = accounting_key(key);
    if (slot >= 0 && value != accounting_values[slot])
        snprintf(accounting_values[slot], sizeof accounting_values[slot], "%s", value);
    write_info_chunk(key, value, slot >= 0);
}

/* Whether the dropped count is worth writing now: always while chunks are written; after a write failed, only
 * at the end (or the first time), so that the reserve keeps room for the final accounting. */
static int dropped_worth_writing(void) {
    return !w.write_error || ioloom_finished || !accounting_values[accounting_key("dropped_events")][0];
}

/* The dropped count (with why, when a write failed), written whenever it changed so that a killed process
 * still reports it. */
static void write_dropped_if_changed(void) {
    uint64_t dropped = dropped_so_far();
    if (dropped == w.dropped_written || !dropped_worth_writing()) return;
    w.dropped_written = dropped;
    char text[32];
    if (w.write_error) {
        ioloom_write_info("write_error", accounting_values[accounting_key("write_error")]);
        ioloom_write_info("write_failed_events", accounting_values[accounting_key("write_failed_events")]);
    }
    snprintf(text, sizeof text, "%llu", (unsigned long long)dropped);
    ioloom_write_info("dropped_events", text);
}

/* ---- TSC ticks to CLOCK_MONOTONIC ns ---- */

IOLOOM_EXPORT int ioloom_tsc;
static uint64_t tsc_origin, ns_origin;

#if defined(__x86_64__)
/* A (ticks, ns) pair read as close together as possible: the tick count is the middle of two readings, from
 * the tightest of a few tries (a thread preempted between the readings would make the pair microseconds off). */
static void clock_pair(uint64_t *ticks, uint64_t *ns) {
    uint64_t best_span = UINT64_MAX;
    for (int try = 0; try < 4; try++) {
        uint64_t before = __rdtsc();
        uint64_t now = ioloom_now_ns();
        uint64_t span = __rdtsc() - before;
        if (span >= best_span) continue;
        best_span = span;
        *ns = now;
        *ticks = before + span / 2;
    }
}

/* The kernel keeps time with the TSC only when it is invariant and synchronised across CPUs. */
static int kernel_uses_tsc(void) {
    char name[16] = "";
    int fd = (int)syscall(SYS_openat, AT_FDCWD, "/sys/devices/system/clocksource/clocksource0/current_clocksource",
                          O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = syscall(SYS_read, fd, name, sizeof name - 1);
    syscall(SYS_close, fd);
    return n >= 3 && !strncmp(name, "tsc\n", 4);
}

static void start_clock(void) {
    ioloom_tsc = ioloom_env_bool("IOLOOM_TSC", 1) && kernel_uses_tsc();
    if (ioloom_tsc) clock_pair(&tsc_origin, &ns_origin);
}

/* The clock converting b's tick times to ns as a chunk is encoded (ioloom_encode_events): the rate measured between
 * the origin and now. Times count from the buffer's anchor, the last event converted before, so that a thread's
 * times never step back between chunks converted at slightly different rates (its events would then swap places
 * when sorted). Returns clock. */
static const struct ioloom_tick_clock *tick_clock(const struct thread_buffer *b, struct ioloom_tick_clock *clock) {
    uint64_t ticks = 0, ns = 0;
    clock_pair(&ticks, &ns);
    clock->ns_per_tick = ticks > tsc_origin ? (double)(ns - ns_origin) / (double)(ticks - tsc_origin) : 0;
    clock->from_ticks = b->anchor_ns ? b->anchor_ticks : tsc_origin;
    clock->from_ns = b->anchor_ns ? b->anchor_ns : ns_origin;
    return clock;
}

/* After rows ev[0, n) were encoded by `clock`: the last of them with a tick time becomes b's anchor. */
static void move_anchor(struct thread_buffer *b, const struct ioloom_raw_event *ev, uint32_t n,
                        const struct ioloom_tick_clock *clock) {
    for (uint32_t i = n; i-- > 0;)
        if (ev[i].ticks) {
            b->anchor_ticks = ev[i].t_end;
            b->anchor_ns = ioloom_row_ns(clock, &ev[i], ev[i].t_end);
            return;
        }
}
#else
static void start_clock(void) { ioloom_tsc = 0; }
static const struct ioloom_tick_clock *tick_clock(const struct thread_buffer *b, struct ioloom_tick_clock *clock) {
    (void)b, (void)clock;
    return NULL;
}
static void move_anchor(struct thread_buffer *b, const struct ioloom_raw_event *ev, uint32_t n,
                        const struct ioloom_tick_clock *clock) {
    (void)b, (void)ev, (void)n, (void)clock;
}
#endif

/* ---- the operation table: each name is written once per stream, just before the first chunk using it, so a
 * short process does not carry the names of the hundreds of calls it never made ---- */

static const struct {
    const char *name;
    uint8_t layer;
} op_table[] = {
#define OP_PROCESS(suffix, name, class) {name, IOLOOM_PROCESS},
#define OP_POSIX(suffix, name, class) {name, IOLOOM_POSIX},
#define OP_STDIO(suffix, name, class) {name, IOLOOM_STDIO},
#define OP_MPI(suffix, name, class) {name, IOLOOM_MPIIO},
#define OP_ASYNC(suffix, name, class) {name, IOLOOM_ASYNC},
    IOLOOM_PROCESS_OPS(OP_PROCESS) IOLOOM_POSIX_OPS(OP_POSIX) IOLOOM_STDIO_OPS(OP_STDIO) IOLOOM_MPI_OPS(OP_MPI)
        IOLOOM_ASYNC_OPS(OP_ASYNC)
#undef OP_PROCESS
#undef OP_POSIX
#undef OP_STDIO
#undef OP_MPI
#undef OP_ASYNC
};
static uint8_t op_written[IOLOOM_OP_COUNT];
static uint8_t op_chunk[IOLOOM_CHUNK_HEADER_BYTES + IOLOOM_OP_COUNT * 80]; /* no allocation: signal-safe */

/* Writes an OPS chunk naming the operations among ops[0, count) not yet named in this stream (an operation is
 * named once its chunk is written). w.lock held. */
static int write_new_ops_locked(const uint16_t *ops, uint32_t count) {
    uint8_t *p = op_chunk + IOLOOM_CHUNK_HEADER_BYTES;
    for (uint32_t i = 0; i < count; i++) {
        uint16_t op = ops[i];
        if (op_written[op]) continue;
        op_written[op] = 2; /* in this chunk */
        p = ioloom_put_varint(p, op);
        *p++ = op_table[op].layer;
        size_t len = strnlen(op_table[op].name, 63);
        memcpy(p, op_table[op].name, len);
        p += len;
        *p++ = 0;
    }
    size_t payload = (size_t)(p - op_chunk) - IOLOOM_CHUNK_HEADER_BYTES;
    if (!payload) return 0;
    ioloom_seal_chunk(op_chunk, IOLOOM_CHUNK_OPS, (uint32_t)payload);
    int rc = append_locked(op_chunk, IOLOOM_CHUNK_HEADER_BYTES + payload, 0);
    for (uint32_t i = 0; i < count; i++)
        if (op_written[ops[i]] == 2) op_written[ops[i]] = rc == 0;
    return rc;
}

/* ---- grouping a buffer's rows by operation ----
 * Loops alternate calls (open and close; an MPI-IO call and the pwrite inside it). In one chunk, every column
 * that differs between them would change from row to row: stored plain, a byte or more per row each, and a pass
 * each to encode. The rows of an operation frequent in the buffer are written as a chunk of their own instead,
 * where those columns are constant; the rows of the other operations stay together, in their order. Readers order
 * events by t_start, whichever chunk holds them. All of it under w.lock. */
#define GROUP_MIN_ROWS 64 /* fewer rows of an operation would not pay for their chunk's header */
/* A buffer whose operation changes at fewer than one row in 8 is written as one chunk: its columns change in a
 * few runs, which the runs mode stores in a few bytes, and the copy grouping takes would cost more than it saves. */
#define GROUP_MIN_CHANGES 8
#define MIXED UINT32_MAX /* the cursor of an operation whose rows go to the mixed chunk */

static struct {
    uint32_t rows[IOLOOM_OP_COUNT];  /* per operation: its rows, then where its next row goes in w.grouped */
    uint16_t seen[IOLOOM_OP_COUNT];  /* the operations of the buffer, in the order they first appear */
    uint8_t listed[IOLOOM_OP_COUNT]; /* the operation is in seen */
    uint32_t start[IOLOOM_OP_COUNT + 1], count[IOLOOM_OP_COUNT + 1]; /* the chunks to write, in w.grouped */
    uint32_t ops, chunks;
    int foreign; /* a row's operation is outside the table (ioloom_record's caller's): its rows go to the mixed chunk */
} groups;

static void note_op(uint16_t op) {
    groups.foreign |= op >= IOLOOM_OP_COUNT;
    if (op >= IOLOOM_OP_COUNT || groups.listed[op]) return;
    groups.listed[op] = 1;
    groups.seen[groups.ops++] = op;
}

/* How many rows at the start of ev[0, n) (n >= 2) hold row 0's operation where even and row 1's where odd: one
 * operation, or two taking turns (open and close, an MPI-IO call and the pwrite inside it), most loops' buffers.
 * Looked at 8 rows at a time, a load and two bit operations a row and a branch every 8. */
static uint32_t rows_alike(const struct ioloom_raw_event *ev, uint32_t n) {
    assert(n >= 2); /* survey_ops returns before for a single row */
    const uint32_t even = ev[0].op, odd = ev[1].op;
    const struct ioloom_raw_event *row = ev, *blocks_end = ev + (n & ~7u);
    for (; row < blocks_end; row += 8)
        if ((row[0].op ^ even) | (row[1].op ^ odd) | (row[2].op ^ even) | (row[3].op ^ odd) | (row[4].op ^ even) |
            (row[5].op ^ odd) | (row[6].op ^ even) | (row[7].op ^ odd))
            break;
    uint32_t i = (uint32_t)(row - ev);
    while (i < n && ev[i].op == (i & 1 ? odd : even)) i++;
    return i;
}

/* Lists the operations of ev[0, n) in the order they first appear, and returns how often the operation changes
 * from one row to the next: the rows that are alike (rows_alike) at once, then a look at each row, and more only
 * where the operation changes to one other than the operation before the last change (noted once each, not at
 * every row). */
static uint32_t survey_ops(const struct ioloom_raw_event *ev, uint32_t n) {
    assert(n > 0); /* a buffer is written when it holds rows */
    groups.ops = 0;
    groups.foreign = 0;
    note_op(ev[0].op);
    if (n == 1) return 0;
    note_op(ev[1].op);
    uint32_t alike = rows_alike(ev, n), turns = ev[0].op != ev[1].op, changes = turns ? alike - 1 : 0;
    assert(alike >= 2); /* rows 0 and 1 set the pattern */
    /* before: the operation before the last change, noted */
    uint16_t previous = ev[alike - 1].op, before = turns ? ev[alike - 2].op : previous;
    for (uint32_t i = alike; i < n; i++) {
        uint16_t op = ev[i].op;
        if (IOLOOM_LIKELY(op == previous)) continue;
        changes++;
        if (op != before) note_op(op);
        before = previous;
        previous = op;
    }
    return changes;
}

/* Counts the rows of each operation of ev[0, n) (for grouping). */
static void count_rows(const struct ioloom_raw_event *ev, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (ev[i].op < IOLOOM_OP_COUNT) groups.rows[ev[i].op]++;
}

/* Lays out the chunks: one per frequent operation (its rows' cursor set to its start), then one of the rest.
 * Returns the rows of the rest. */
static uint32_t plan_chunks(uint32_t n) {
    uint32_t at = 0;
    groups.chunks = 0;
    for (uint32_t k = 0; k < groups.ops; k++) {
        uint32_t *rows = &groups.rows[groups.seen[k]];
        if (*rows < GROUP_MIN_ROWS) {
            *rows = MIXED;
            continue;
        }
        groups.start[groups.chunks] = at;
        groups.count[groups.chunks++] = *rows;
        uint32_t first = at;
        at += *rows;
        *rows = first;
    }
    groups.start[groups.chunks] = at;
    groups.count[groups.chunks] = n - at;
    groups.chunks += n > at;
    return n - at;
}

/* Whether rows [0, n), whose operation changes `changes` times, go to several chunks (then laid out). */
static int worth_grouping(const struct ioloom_raw_event *ev, uint32_t n, uint32_t changes) {
    if (changes < n / GROUP_MIN_CHANGES) return 0;
    count_rows(ev, n);
    return plan_chunks(n) < n && groups.chunks > 1;
}

/* Copies each row of ev[0, n) to its chunk's place in w.grouped, in order within each chunk. */
static void scatter_rows(const struct ioloom_raw_event *ev, uint32_t n, uint32_t mixed_start) {
    for (uint32_t i = 0; i < n; i++) {
        uint16_t op = ev[i].op;
        uint32_t *at = op < IOLOOM_OP_COUNT && groups.rows[op] != MIXED ? &groups.rows[op] : &mixed_start;
        w.grouped[(*at)++] = ev[i];
    }
}

/* Clears what survey_ops and count_rows noted of the buffer's operations, for the next buffer. */
static void forget_counts(void) {
    for (uint32_t k = 0; k < groups.ops; k++) groups.rows[groups.seen[k]] = groups.listed[groups.seen[k]] = 0;
}

/* Whether rows [0, n), whose operation changes `changes` times, are two operations taking turns (open and close;
 * an MPI-IO call and the pwrite inside it): two operations, and a change at every row, make every other row one of
 * them. Grouped, the first operation's rows (at least GROUP_MIN_ROWS) would be a chunk and the other's a chunk
 * after it (theirs or the mixed one): the same two chunks are encoded from every other row in place, without the
 * copy. */
static int taking_turns(uint32_t n, uint32_t changes) {
    return groups.ops == 2 && !groups.foreign && changes == n - 1 && (n + 1) / 2 >= GROUP_MIN_ROWS;
}

/* Writes the encoded chunk of n events, or counts them as dropped. w.lock held. */
static void write_encoded(uint8_t *chunk, size_t len, uint32_t n) {
    if (append_locked(chunk, len, 0) == 0) {
        w.events_written += n;
        return;
    }
    note_write_failed(n);
    count_dropped(n);
}

/* EVENTS chunks encoded one after the other, kept to be written later, and the events and bytes of each (a folded
 * buffer's, at most one per operation and the mixed one: written when they are no larger than its FOLDED chunk). */
struct kept_chunks {
    uint8_t *start, *end;
    uint32_t count, events[IOLOOM_OP_COUNT + 1];
    size_t bytes[IOLOOM_OP_COUNT + 1];
};

/* Encodes the n rows ev[0], ev[stride], ... as one chunk (times by `clock`, NULL: ns already, exact) and writes it,
 * or counts them as dropped; with `keep`, keeps it there instead. w.lock held. */
static void write_chunk_of_rows(uint32_t tid, const struct ioloom_raw_event *ev, uint32_t stride, uint32_t n,
                                const struct ioloom_tick_clock *clock, struct kept_chunks *keep) {
    if (!keep) {
        write_encoded(w.encoded, ioloom_encode_events(w.encoded, w.scratch, tid, ev, stride, n, clock), n);
        return;
    }
    assert(keep->count <= IOLOOM_OP_COUNT); /* a chunk per operation and the mixed one (write_plain) */
    keep->events[keep->count] = n;
    keep->bytes[keep->count] = ioloom_encode_events(keep->end, w.scratch, tid, ev, stride, n, clock);
    keep->end += keep->bytes[keep->count++];
}

/* Encodes rows [0, n) of thread `tid`, whose operation changes `changes` times (times by `clock`, NULL: ns already,
 * exact), as EVENTS chunks, a chunk per frequent operation when there are several, and writes them (or counts them
 * as dropped); with `keep`, keeps them there instead. w.lock held. */
static void write_plain(uint32_t tid, const struct ioloom_raw_event *ev, uint32_t n, uint32_t changes,
                        const struct ioloom_tick_clock *clock, struct kept_chunks *keep) {
    if (taking_turns(n, changes)) {
        write_chunk_of_rows(tid, ev, 2, (n + 1) / 2, clock, keep);
        write_chunk_of_rows(tid, ev + 1, 2, n / 2, clock, keep);
    } else if (worth_grouping(ev, n, changes)) {
        scatter_rows(ev, n, groups.start[groups.chunks - 1]);
        for (uint32_t k = 0; k < groups.chunks; k++)
            write_chunk_of_rows(tid, w.grouped + groups.start[k], 1, groups.count[k], clock, keep);
    } else {
        write_chunk_of_rows(tid, ev, 1, n, clock, keep);
    }
}

/* Writes the kept chunks, each as it would have been written at once. w.lock held. */
static void write_kept(const struct kept_chunks *kept) {
    uint8_t *chunk = kept->start;
    for (uint32_t k = 0; k < kept->count; chunk += kept->bytes[k++])
        write_encoded(chunk, kept->bytes[k], kept->events[k]);
}

/* ---- folding (IOLOOM_FOLD=1: fold.h) ----
 * A buffer is written as one FOLDED chunk, or as the EVENTS chunks an unfolded trace has of the same rows when those
 * are no larger (rows whose shapes barely repeat: small buffers, call ids that change every call): those are encoded
 * first, and the grammar is not built when the FOLDED chunk cannot be smaller (fold.h). It is written as EVENTS chunks
 * instead, counted by reason, also when the grammar's budget runs out and in a signal handler (folding allocates the
 * grammar's nodes). Every chunk's times are rounded to the quantum alike (encode_clock). */
#define FOLD_GRAMMAR_BYTES_PER_EVENT                                          \
    256 /* the grammar's budget (IOLOOM_FOLD_GRAMMAR_BYTES), per event of the \
         * largest buffer */
enum { FOLD_IN_SIGNAL = IOLOOM_FOLD_OUTCOMES, FOLD_REASONS };
static const char *const fold_reasons[FOLD_REASONS] = {"folded", "no_memory", "plain_smaller", "in_signal"};
static struct {
    struct ioloom_fold_area *area; /* NULL: folding off */
    uint8_t *chunk;                /* ioloom_fold_bound(capacity) */
    struct kept_chunks plain;      /* a buffer's EVENTS chunks (plain_bytes) */
    uint64_t quantum;              /* ns: times are written rounded down to multiples of it */
    uint64_t events[FOLD_REASONS]; /* events written folded, and those written plain, by reason */
    uint64_t events_written[FOLD_REASONS];
    uint8_t *check;                 /* IOLOOM_FOLD_CHECK=1: room to unfold a chunk again; NULL: no check */
    uint64_t checked, check_failed; /* events checked, and those of chunks that did not unfold identical */
} fold;

/* The room for a buffer's EVENTS chunks: the chunk of all its rows, and the headers and column headers of one chunk
 * per operation more. */
static size_t plain_bytes(uint32_t capacity) {
    return ioloom_events_bound(capacity) + IOLOOM_OP_COUNT * ioloom_events_bound(0);
}

/* Sets folding up when IOLOOM_FOLD asks for it (off when its memory cannot be had). */
static void start_folding(void) {
    if (!ioloom_env_bool("IOLOOM_FOLD", 0)) return;
    fold.quantum = ioloom_env_uint("IOLOOM_FOLD_QUANTUM_NS", 1);
    if (fold.quantum < 1 || fold.quantum > IOLOOM_FOLD_MAX_QUANTUM) fold.quantum = 1; /* ioloom run checks it */
    size_t grammar = ioloom_env_size("IOLOOM_FOLD_GRAMMAR_BYTES", (size_t)w.capacity * FOLD_GRAMMAR_BYTES_PER_EVENT);
    fold.area = ioloom_fold_area_new(w.capacity, grammar);
    fold.chunk = malloc(ioloom_fold_bound(w.capacity));
    fold.plain.start = malloc(plain_bytes(w.capacity));
    if (ioloom_env_bool("IOLOOM_FOLD_CHECK", 0)) fold.check = malloc(ioloom_events_bound(w.capacity));
    if (fold.area && fold.chunk && fold.plain.start) return;
    free(fold.area);
    free(fold.chunk);
    free(fold.plain.start);
    free(fold.check);
    fold.area = NULL;
    fold.check = NULL;
}

/* Writes the file table's new entries: as FILE_DELTAS chunks in a folded stream, else as FILES. */
static void flush_file_table(void) { ioloom_files_flush(fold.area != NULL); }

/* The clock b's rows are encoded by: tick times converted (TSC), and every time rounded down to the fold quantum, so
 * that every chunk of a folded stream, folded or not, rounds alike; NULL when there is neither. */
static const struct ioloom_tick_clock *encode_clock(const struct thread_buffer *b, struct ioloom_tick_clock *clock) {
    *clock = (struct ioloom_tick_clock){.quantum = fold.area ? fold.quantum : 1};
    if (ioloom_tsc) return tick_clock(b, clock);
    return clock->quantum > 1 ? clock : NULL;
}

/* IOLOOM_FOLD_CHECK=1 (tests): the folded chunk (`size` bytes) of rows [0, n) unfolded again by the reader's code must
 * be their EVENTS chunk, byte for byte (the checksum aside); counted. w.lock held: w.encoded is free. */
static void check_folded(uint32_t tid, const struct ioloom_raw_event *ev, uint32_t n, size_t size,
                         const struct ioloom_tick_clock *clock) {
    size_t plain = ioloom_encode_events(w.encoded, w.scratch, tid, ev, 1, n, clock);
    int64_t again = ioloom_unfold_events(fold.chunk + IOLOOM_CHUNK_HEADER_BYTES, size - IOLOOM_CHUNK_HEADER_BYTES,
                                         fold.check, ioloom_events_bound(w.capacity));
    int same = again == (int64_t)plain && !memcmp(fold.check, w.encoded, 8) &&
               !memcmp(fold.check + IOLOOM_CHUNK_HEADER_BYTES, w.encoded + IOLOOM_CHUNK_HEADER_BYTES,
                       plain - IOLOOM_CHUNK_HEADER_BYTES);
    fold.checked += n;
    fold.check_failed += same ? 0 : n;
}

/* IOLOOM_FOLD_CHECK=1 (tests): rows [0, n) written as their EVENTS chunks (`plain` bytes) because their FOLDED chunk
 * would not be smaller, folded in full, must indeed not be (the grammar is skipped on a lower bound of its size);
 * counted. w.lock held. */
static void check_not_smaller(uint32_t tid, const struct ioloom_raw_event *ev, uint32_t n, size_t plain,
                              const struct ioloom_tick_clock *clock) {
    size_t size = 0;
    int outcome = (int)ioloom_fold_events(fold.area, fold.chunk, &size, tid, ev, n, clock, SIZE_MAX);
    fold.checked += n;
    fold.check_failed += outcome == IOLOOM_FOLDED && size < plain ? n : 0;
}

/* Folds rows [0, n) of thread `tid` (whose operation changes `changes` times; times by `clock`) into one chunk and
 * writes it when it is smaller than the EVENTS chunks of the same rows (encoded first), else writes those, or counts
 * them as dropped; 0 in a signal handler (counted): they are then to be written as EVENTS chunks. w.lock held. */
static int write_folded(uint32_t tid, const struct ioloom_raw_event *ev, uint32_t n, uint32_t changes,
                        const struct ioloom_tick_clock *clock) {
    assert(n <= w.capacity); /* a thread's buffer or the shared one (MIN_EVENTS_PER_THREAD rows): the area's room */
    if (ioloom_in_signal) {
        fold.events[FOLD_IN_SIGNAL] += n;
        return 0;
    }
    fold.plain.end = fold.plain.start;
    fold.plain.count = 0;
    write_plain(tid, ev, n, changes, clock, &fold.plain);
    size_t plain = (size_t)(fold.plain.end - fold.plain.start), size = 0;
    assert(plain <= plain_bytes(w.capacity)); /* a buffer's chunks fit */
    int outcome = (int)ioloom_fold_events(fold.area, fold.chunk, &size, tid, ev, n, clock, plain);
    fold.events[outcome] += n;
    if (outcome != IOLOOM_FOLDED) {
        if (fold.check && outcome == IOLOOM_FOLD_NOT_SMALLER) check_not_smaller(tid, ev, n, plain, clock);
        write_kept(&fold.plain);
        return 1;
    }
    if (fold.check) check_folded(tid, ev, n, size, clock);
    write_encoded(fold.chunk, size, n);
    return 1;
}

/* Appends the INFO pair key = count. */
static uint8_t *put_count(uint8_t *p, const char *key, uint64_t count) {
    char text[24];
    snprintf(text, sizeof text, "%llu", (unsigned long long)count);
    return ioloom_put_cstr(ioloom_put_cstr(p, key), text);
}

/* The folding counts, as one INFO chunk written when they changed (at the end, and after a later flush):
 * folded_events and fold_fallback:<reason> (those that changed), fold_quantum_ns (every chunk's times are rounded to
 * it), and the check's counts. */
static void write_fold_counts(void) {
    if (!fold.area || !memcmp(fold.events, fold.events_written, sizeof fold.events)) return;
    /* at most FOLD_REASONS + 3 pairs of a key below 40 bytes and a count below 24 */
    uint8_t chunk[IOLOOM_CHUNK_HEADER_BYTES + (FOLD_REASONS + 3) * 64], *p = chunk + IOLOOM_CHUNK_HEADER_BYTES;
    for (int k = 0; k < FOLD_REASONS; k++) {
        if (fold.events[k] == fold.events_written[k]) continue;
        char key[40];
        snprintf(key, sizeof key, k == IOLOOM_FOLDED ? "folded_events" : "fold_fallback:%s", fold_reasons[k]);
        p = put_count(p, key, fold.events_written[k] = fold.events[k]);
    }
    p = put_count(p, "fold_quantum_ns", fold.quantum);
    if (fold.check)
        p = put_count(put_count(p, "fold_checked_events", fold.checked), "fold_check_failed_events", fold.check_failed);
    ioloom_seal_chunk(chunk, IOLOOM_CHUNK_INFO, (uint32_t)(p - chunk - IOLOOM_CHUNK_HEADER_BYTES));
    ioloom_write_chunk(chunk, (size_t)(p - chunk));
}

/* Encodes rows [0, n) of thread `tid` (tick times converted by `clock`, NULL: none) and writes them (after the names
 * of new operations), folded or as EVENTS chunks, or counts them as dropped. */
static void write_events(uint32_t tid, const struct ioloom_raw_event *ev, uint32_t n,
                         const struct ioloom_tick_clock *clock) {
    if (ioloom_lock(&w.lock)) {
        count_dropped(n);
        return;
    }
    uint32_t changes = survey_ops(ev, n);
    if (write_new_ops_locked(groups.seen, groups.ops)) {
        note_write_failed(n);
        count_dropped(n);
    } else if (!fold.area || !write_folded(tid, ev, n, changes, clock)) {
        write_plain(tid, ev, n, changes, clock, NULL);
    }
    forget_counts();
    pthread_mutex_unlock(&w.lock);
}

/* Encodes and writes events [0, count) of half h of b, and empties it. b->flush_lock held. */
static void flush_half(struct thread_buffer *b, uint32_t h) {
    uint32_t n = __atomic_load_n(&b->count[h], __ATOMIC_ACQUIRE);
    if (!n) return;
    struct ioloom_raw_event *ev = b->events[h];
    flush_file_table(); /* file entries first: a reader then knows every id an event names */
    struct ioloom_tick_clock ticks;
    const struct ioloom_tick_clock *clock = encode_clock(b, &ticks);
    write_events(b->tid, ev, n, clock);
    if (clock) move_anchor(b, ev, n, clock);
    __atomic_store_n(&b->count[h], 0, __ATOMIC_RELEASE);
}

/* Writes the sealed half (older events) if any. b->flush_lock held. */
static void flush_sealed(struct thread_buffer *b) {
    uint32_t sealed = __atomic_load_n(&b->sealed, __ATOMIC_ACQUIRE);
    if (!sealed) return;
    flush_half(b, sealed - 1);
    __atomic_store_n(&b->sealed, 0, __ATOMIC_RELEASE);
}

/* Writes everything b holds, oldest first. In a signal handler, gives up rather than wait for a lock the
 * interrupted code may hold. */
static void flush_buffer(struct thread_buffer *b) {
    if ((ioloom_cursor.recording && b == my_buffer) || ioloom_lock(&b->flush_lock)) return;
    my_flushes++;
    flush_sealed(b);
    flush_half(b, b->active);
    b->last_flush_ns = ioloom_now_ns();
    pthread_mutex_unlock(&b->flush_lock);
    write_dropped_if_changed();
    if (ioloom_finished) write_fold_counts(); /* after the final flush: events another library's destructor made */
    end_flush();
}

/* ---- the encoder thread ---- */

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    uint64_t requests; /* halves sealed so far; the thread sleeps while it has seen them all */
    int state;         /* 0 not started, 1 running, -1 not used (disabled or could not start) */
} enc = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static void *encoder_main(void *arg) {
    (void)arg;
    ioloom_busy = 1; /* whatever this thread calls is the tracer's own work: never traced */
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&enc.lock);
        while (enc.requests == seen) pthread_cond_wait(&enc.wake, &enc.lock);
        seen = enc.requests;
        pthread_mutex_unlock(&enc.lock);
        for (struct thread_buffer *b = __atomic_load_n(&w.threads, __ATOMIC_ACQUIRE); b; b = b->next) {
            if (!__atomic_load_n(&b->sealed, __ATOMIC_ACQUIRE)) continue;
            encoder_working = 1;
            pthread_mutex_lock(&b->flush_lock);
            flush_sealed(b);
            pthread_mutex_unlock(&b->flush_lock);
            write_dropped_if_changed();
            encoder_working = 0;
        }
    }
    return NULL;
}

/* Starts the encoder thread on first use (not at load: a process that never fills a buffer gets no thread).
 * It blocks every signal, so the program's signals still go to the program's threads. 1 when running. */
static int encoder_running(void) {
    if (IOLOOM_LIKELY(enc.state)) return enc.state > 0;
    pthread_mutex_lock(&enc.lock);
    if (!enc.state) {
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_t thread;
        enc.state = pthread_create(&thread, &attr, encoder_main, NULL) == 0 ? 1 : -1;
        pthread_attr_destroy(&attr);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    pthread_mutex_unlock(&enc.lock);
    return enc.state > 0;
}

/* The owner's half is full or old: hand it to the encoder thread and go on in the other half; if the encoder
 * has not written the other half yet (or does not run), write both here. */
static void hand_off(struct thread_buffer *b) {
    if (ioloom_finished || !encoder_running()) {
        flush_buffer(b);
        return;
    }
    pthread_mutex_lock(&b->flush_lock);
    int lagging = b->sealed != 0;
    if (!lagging) {
        __atomic_store_n(&b->sealed, b->active + 1, __ATOMIC_RELEASE);
        b->active ^= 1;
        point_cursor(b);
        b->last_flush_ns = ioloom_now_ns();
    }
    pthread_mutex_unlock(&b->flush_lock);
    if (lagging) {
        flush_buffer(b);
        return;
    }
    pthread_mutex_lock(&enc.lock);
    enc.requests++;
    pthread_cond_signal(&enc.wake);
    pthread_mutex_unlock(&enc.lock);
}

static void release_thread_buffer(void *arg) {
    /* Thread exit: flush; the buffer stays registered (and its memory counted) so that a final flush
     * racing with thread exit never touches freed memory. A new thread reuses a released buffer. */
    struct thread_buffer *b = arg;
    ioloom_busy++;
    flush_buffer(b);
    ioloom_busy--;
    my_buffer = NULL; /* a later destructor's I/O claims a buffer again */
    ioloom_cursor.rows = NULL;
    __atomic_store_n(&b->tid, 0, __ATOMIC_RELEASE);
}

static struct thread_buffer *claim_free_buffer(void) {
    for (struct thread_buffer *b = __atomic_load_n(&w.threads, __ATOMIC_ACQUIRE); b; b = b->next) {
        uint32_t zero = 0;
        if (__atomic_compare_exchange_n(&b->tid, &zero, my_tid, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) return b;
    }
    return NULL;
}

#define BUFFER_HEADER_BYTES ((sizeof(struct thread_buffer) + 7) & ~(size_t)7)

/* A buffer of `halves` halves of `capacity` events, with room for `extra` bytes after them; NULL without memory. */
static struct thread_buffer *allocate_buffer(uint32_t capacity, uint32_t halves, size_t extra) {
    size_t half = capacity * sizeof(struct ioloom_raw_event);
    struct thread_buffer *b = calloc(1, BUFFER_HEADER_BYTES + halves * half + extra);
    if (!b) return NULL;
    for (uint32_t h = 0; h < halves; h++)
        b->events[h] = (struct ioloom_raw_event *)((char *)b + BUFFER_HEADER_BYTES + h * half);
    b->capacity = capacity;
    pthread_mutex_init(&b->flush_lock, NULL);
    return b;
}

/* Takes from the budget the events per half of the next thread's buffer: as many as it spares once it keeps a
 * minimal buffer for each thread to come up to THREADS_PROVIDED (so a program's first threads get large buffers
 * and its 256th still a minimal one); 0 when not even a minimal one is left (the first thread always gets one). */
static uint32_t take_capacity(void) {
    size_t per_event = w.halves * sizeof(struct ioloom_raw_event);
    size_t minimal = BUFFER_HEADER_BYTES + MIN_EVENTS_PER_THREAD * per_event;
    pthread_mutex_lock(&w.lock);
    size_t kept = w.buffers + 1 < THREADS_PROVIDED ? (THREADS_PROVIDED - w.buffers - 1) * minimal : 0;
    size_t spare = w.budget_left > kept + BUFFER_HEADER_BYTES ? w.budget_left - kept - BUFFER_HEADER_BYTES : 0;
    uint64_t events = spare / per_event;
    uint32_t capacity = events > w.capacity              ? w.capacity
                        : events < MIN_EVENTS_PER_THREAD ? MIN_EVENTS_PER_THREAD
                                                         : (uint32_t)events & ~63u;
    size_t bytes = BUFFER_HEADER_BYTES + capacity * per_event;
    if (w.budget_left < bytes && w.buffers)
        capacity = 0;
    else
        w.budget_left = w.budget_left > bytes ? w.budget_left - bytes : 0;
    w.buffers += capacity != 0;
    pthread_mutex_unlock(&w.lock);
    assert(capacity % 64 == 0); /* the recording path looks at a buffer only every 64 rows: a full one among them */
    return capacity;
}

static struct thread_buffer *new_thread_buffer(void) {
    if (!my_tid) my_tid = (uint32_t)syscall(SYS_gettid);
    struct thread_buffer *b = claim_free_buffer();
    if (!b) {
        uint32_t capacity = take_capacity();
        if (!capacity || !(b = allocate_buffer(capacity, w.halves, 0))) {
            my_buffer_refused = 1;
            return NULL;
        }
        b->tid = my_tid;
        b->next = __atomic_load_n(&w.threads, __ATOMIC_ACQUIRE);
        while (!__atomic_compare_exchange_n(&w.threads, &b->next, b, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        }
    }
    b->last_flush_ns = ioloom_now_ns();
    pthread_setspecific(thread_exit_key, b);
    return b;
}

/* ---- the shared buffer: for the threads that found the budget spent. A thread appends under its lock, so it
 * waits while another writes the buffer out (the wait is counted), but no event is lost. ---- */

static struct {
    pthread_mutex_t lock;
    struct thread_buffer *b; /* events[0]: the rows; events[1]: one thread's rows gathered for a chunk */
    uint32_t *tids;          /* the thread of each row */
    uint64_t events, wait_ns, events_written;
} shared = {.lock = PTHREAD_MUTEX_INITIALIZER};

#define SHARED_BYTES (BUFFER_HEADER_BYTES + MIN_EVENTS_PER_THREAD * (2 * sizeof(struct ioloom_raw_event) + 4))

static int shared_ready(void) {
    if (shared.b) return 1;
    shared.b = allocate_buffer(MIN_EVENTS_PER_THREAD, 2, MIN_EVENTS_PER_THREAD * sizeof *shared.tids);
    if (!shared.b) return 0;
    shared.tids = (uint32_t *)(shared.b->events[1] + MIN_EVENTS_PER_THREAD);
    shared.b->last_flush_ns = ioloom_now_ns();
    return 1;
}

/* Writes the shared rows as one chunk per thread, each thread's rows in the order recorded. shared.lock held. */
static void flush_shared_locked(void) {
    struct thread_buffer *b = shared.b;
    uint32_t n = b ? b->count[0] : 0;
    if (!n) return;
    flush_file_table();
    struct ioloom_tick_clock ticks;
    const struct ioloom_tick_clock *clock = encode_clock(b, &ticks);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t tid = shared.tids[i], k = 0;
        if (!tid) continue; /* gathered already */
        for (uint32_t j = i; j < n; j++) {
            if (shared.tids[j] != tid) continue;
            b->events[1][k++] = b->events[0][j];
            shared.tids[j] = 0;
        }
        write_events(tid, b->events[1], k, clock);
    }
    if (clock) move_anchor(b, b->events[0], n, clock);
    b->count[0] = 0;
    b->last_flush_ns = ioloom_now_ns();
}

static void append_shared(const struct ioloom_raw_event *row) {
    uint64_t asked = ioloom_now_ns();
    if (ioloom_lock(&shared.lock)) {
        count_dropped(1);
        return;
    }
    uint64_t now = ioloom_now_ns();
    shared.wait_ns += now - asked;
    if (!shared_ready()) {
        count_dropped(1);
    } else {
        struct thread_buffer *b = shared.b;
        b->events[0][b->count[0]] = *row;
        shared.tids[b->count[0]++] = my_tid;
        shared.events++;
        if (b->count[0] == b->capacity || ioloom_finished || now - b->last_flush_ns > w.flush_interval_ns)
            flush_shared_locked();
    }
    pthread_mutex_unlock(&shared.lock);
}

/* Writes the shared rows, and how many events went through the shared buffer and how long threads waited for it. */
static void flush_shared(void) {
    if (ioloom_lock(&shared.lock)) return;
    flush_shared_locked();
    char events[24], wait[24];
    if (shared.events != shared.events_written) {
        shared.events_written = shared.events;
        snprintf(events, sizeof events, "%llu", (unsigned long long)shared.events);
        snprintf(wait, sizeof wait, "%llu", (unsigned long long)shared.wait_ns);
        ioloom_write_info("shared_buffer_events", events);
        ioloom_write_info("shared_buffer_wait_ns", wait);
    }
    pthread_mutex_unlock(&shared.lock);
}

/* ---- recording ---- */

IOLOOM_EXPORT __thread struct ioloom_link ioloom_link __attribute__((tls_model("initial-exec"))) = {.current = -1};

#define CALL_ID_BLOCK 4096
static int64_t call_ids_taken = 1; /* ids from 1 */

IOLOOM_EXPORT void ioloom_link_refill(void) {
    ioloom_link.next_id = __atomic_fetch_add(&call_ids_taken, CALL_ID_BLOCK, __ATOMIC_RELAXED);
    ioloom_link.end_id = ioloom_link.next_id + CALL_ID_BLOCK;
}

/* The rare parts of appending, out of line so that the common path saves no registers: the thread's first row
 * (it gets a buffer, or the row goes to the shared buffer), and a look every 64 rows (capacity is a multiple of 64):
 * a full half, or one older than the flush interval, is handed off; after the final flush, everything is written
 * at once. */
IOLOOM_EXPORT void ioloom_append_first(const struct ioloom_raw_event *row) {
    if (my_buffer_refused || !(my_buffer = new_thread_buffer())) {
        append_shared(row);
        return;
    }
    point_cursor(my_buffer);
    ioloom_append(row);
}

IOLOOM_EXPORT void ioloom_after_batch(uint32_t n) {
    struct thread_buffer *b = my_buffer;
    if (n == b->capacity || ioloom_finished || ioloom_now_ns() - b->last_flush_ns > w.flush_interval_ns) {
        ioloom_busy++;
        hand_off(b);
        ioloom_busy--;
    }
}

void ioloom_call_done(const struct ioloom_call *c, struct ioloom_raw_event *row) {
    if (IOLOOM_UNLIKELY(ioloom_predict_on)) ioloom_predict_row(c, row);
    if (IOLOOM_UNLIKELY(row->file_id <= -2)) {
        ioloom_count_excluded(row->file_id, row->ret_bytes);
    } else {
        ioloom_append(row);
    }
    errno = c->err;
    ioloom_leave();
}

IOLOOM_EXPORT void ioloom_append_row(const struct ioloom_raw_event *row) {
    if (IOLOOM_LIKELY(ioloom_tracing)) ioloom_append(row);
}

IOLOOM_EXPORT void ioloom_record(const struct ioloom_event *ev) {
    if (IOLOOM_UNLIKELY(!ioloom_tracing)) return;
    struct ioloom_raw_event row = {
        ev->t_start, ev->t_end,           ev->offset,  ev->req_bytes, ev->ret_bytes, ev->handle, ev->aux, ev->coll_seq,
        -1,          ioloom_link.current, ev->file_id, ev->err,       ev->op,        ev->layer,  0};
    ioloom_append(&row);
}

void ioloom_flush_all(void) {
    for (struct thread_buffer *b = __atomic_load_n(&w.threads, __ATOMIC_ACQUIRE); b; b = b->next) flush_buffer(b);
    flush_shared();
    flush_file_table();
    ioloom_files_write_excluded();
    write_dropped_if_changed();
    write_fold_counts();
    ioloom_predict_flush();
}

/* ---- the stream file ---- */

const char *ioloom_stream_path(void) { return w.path; }

static void make_dir(const char *dir) {
    char path[STREAM_NAME_MAX];
    snprintf(path, sizeof path, "%s", dir);
    for (char *s = path + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        syscall(SYS_mkdirat, AT_FDCWD, path, 0777);
        *s = '/';
    }
    syscall(SYS_mkdirat, AT_FDCWD, path, 0777);
}

/* The program must get the descriptor numbers it would get untraced: the stream's fd moves near the top of
 * the descriptor limit, where programs rarely look. */
int ioloom_fd_move_high(int fd) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) || limit.rlim_cur < 256) return fd;
    rlim_t top = limit.rlim_cur > 65536 ? 65536 : limit.rlim_cur;
    int high = (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, (long)(top - 64));
    if (high < 0) return fd;
    syscall(SYS_close, fd);
    return high;
}

/* Creates <dir>/<host>-<pid>[-<n>].ioloom; a pid seen again (after exec) gets the next free n. */
static int create_stream_file(void) {
    /* absolute, so that the stream can be opened again after the program changed directory */
    char dir[STREAM_NAME_MAX / 2], cwd[STREAM_NAME_MAX / 4] = ".";
    const char *given = ioloom_env_str("IOLOOM_TRACE_DIR", "ioloom-traces");
    if (given[0] != '/') syscall(SYS_getcwd, cwd, sizeof cwd);
    snprintf(dir, sizeof dir, "%s%s%s", given[0] == '/' ? "" : cwd, given[0] == '/' ? "" : "/", given);
    char host[256] = "host";
    gethostname(host, sizeof host - 1);
    make_dir(dir);
    for (int n = 0; n < 1000; n++) {
        char suffix[16] = "";
        if (n) snprintf(suffix, sizeof suffix, "-%d", n);
        snprintf(w.path, sizeof w.path, "%s/%s-%d%s.ioloom", dir, host, (int)getpid(), suffix);
        int fd = (int)syscall(SYS_openat, AT_FDCWD, w.path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) {
            struct stat st;
            if (syscall(SYS_fstat, fd, &st) == 0) {
                stream_dev = st.st_dev;
                stream_ino = st.st_ino;
            }
            return ioloom_fd_move_high(fd);
        }
        if (errno != EEXIST) return -1;
    }
    return -1;
}

static int allocate_writer(void) {
    size_t budget = ioloom_env_size("IOLOOM_TRACE_BUFFER", DEFAULT_BUDGET);
    if (!ioloom_env_bool("IOLOOM_BACKGROUND_ENCODE", 0)) enc.state = -1;
    w.halves = enc.state < 0 ? 1 : 2; /* inline, a thread writes the half it fills before filling it again */
    /* The largest thread buffer (and so the encode area) takes about a sixteenth of the budget. */
    uint64_t per_event = 2 * sizeof(struct ioloom_raw_event) * 8 + 10 * IOLOOM_COLUMNS + sizeof(int64_t);
    uint64_t capacity = budget / per_event;
    /* a multiple of 64: the recording path looks at the buffer's state every 64 events only */
    w.capacity = capacity < MIN_EVENTS_PER_THREAD   ? MIN_EVENTS_PER_THREAD
                 : capacity > MAX_EVENTS_PER_THREAD ? MAX_EVENTS_PER_THREAD
                                                    : (uint32_t)capacity & ~63u;
    size_t encode = ioloom_events_bound(w.capacity);
    w.encoded = malloc(encode);
    w.scratch = malloc(w.capacity * sizeof(int64_t));
    w.grouped = malloc(w.capacity * sizeof(struct ioloom_raw_event));
    if (!w.encoded || !w.scratch || !w.grouped) return -1;
    size_t used = encode + w.capacity * (sizeof(int64_t) + sizeof(struct ioloom_raw_event)) + SHARED_BYTES;
    w.budget_left = budget > used ? budget - used : 0;
    start_folding(); /* its memory, a fixed amount per event of the largest buffer, is outside the budget */
    uint64_t interval_ms = ioloom_env_uint("IOLOOM_FLUSH_INTERVAL_MS", 1000);
    w.flush_interval_ns = (interval_ms > UINT64_MAX / 1000000u ? 1000 : interval_ms) * 1000000u;
    return 0;
}

static int start_stream(void) {
    w.fd = create_stream_file();
    if (w.fd < 0) return -1;
    w.write_error = 0;
    w.write_failed = w.reserved_end = 0;
    w.closing_len = 0;
    memset(accounting_values, 0, sizeof accounting_values);
    memset(op_written, 0, sizeof op_written); /* a new stream names its operations again */
    return 0;
}

int ioloom_writer_open(void) {
    pthread_key_create(&thread_exit_key, release_thread_buffer);
    start_clock();
    if (allocate_writer() || start_stream()) return -1;
    ioloom_predict_start();
    return 0;
}

void ioloom_writer_after_fork(void) {
    /* The copied buffers hold the parent's events, which the parent writes: empty them, keep the memory
     * (the budget is the same), and give the forking thread's buffer back to it. Other threads do not
     * exist in the child, so their buffers become free. */
    pthread_mutex_init(&w.lock, NULL);
    for (struct thread_buffer *b = w.threads; b; b = b->next) {
        pthread_mutex_init(&b->flush_lock, NULL);
        b->count[0] = b->count[1] = 0;
        b->sealed = 0;
        b->tid = 0;
    }
    /* the encoder thread is not copied: a child that fills a buffer starts its own */
    pthread_mutex_init(&enc.lock, NULL);
    pthread_cond_init(&enc.wake, NULL);
    enc.requests = 0;
    if (enc.state > 0) enc.state = 0;
    encoder_working = 0;
    my_tid = (uint32_t)syscall(SYS_gettid);
    if (my_buffer) {
        my_buffer->tid = my_tid;
        my_buffer->last_flush_ns = ioloom_now_ns();
    }
    pthread_mutex_init(&shared.lock, NULL);
    if (shared.b) shared.b->count[0] = 0;
    shared.events = shared.wait_ns = shared.events_written = 0;
    w.dropped = w.dropped_written = w.events_written = w.bytes_written = 0;
    if (fd_is_stream(w.fd, NULL)) syscall(SYS_close, w.fd); /* the parent's stream; a number the program reused stays */
    if (start_stream()) ioloom_tracing = 0;
    ioloom_predict_after_fork();
}
