/* What the tracer's own modules share (not exported): the writer, the file table and the wrapper helpers. */
#ifndef IOLOOM_TRACE_INTERNAL_H
#define IOLOOM_TRACE_INTERNAL_H

#include <errno.h>
#include <stdint.h>
#include <sys/types.h>

#include "ioloom_ops.h"
#include "ioloom_trace.h"
#include "trace_format.h"

#define IOLOOM_TLS __thread __attribute__((tls_model("initial-exec")))

/* Wrapper timestamps. Reading the TSC costs a third of clock_gettime; the writer converts ticks to
 * CLOCK_MONOTONIC ns when it encodes a chunk, against a (ticks, ns) pair taken at start and one taken at the
 * flush (so the error stays within one clock reading). Used only when the kernel itself keeps time with the
 * TSC (clocksource "tsc": invariant and synchronised across CPUs); otherwise timestamps are clock_gettime. */
#if defined(__x86_64__)
#include <x86intrin.h>
#endif
extern int ioloom_tsc;
static inline uint64_t ioloom_ticks(void) {
#if defined(__x86_64__)
    if (IOLOOM_LIKELY(ioloom_tsc)) return __rdtsc();
#endif
    return ioloom_now_ns();
}

/* ---- writer.c ---- */
/* Set once the stream is open; wrappers pass calls through until then (and after the final flush). */
extern volatile int ioloom_tracing;
/* Bit per enum ioloom_layer (IOLOOM_LAYERS). Read directly on the hot path: the exported
 * ioloom_layer_enabled(), for the MPI module, would be a call through the PLT. */
extern unsigned ioloom_enabled_layers;
/* Opens this process's stream in the trace directory and writes the header, op table and process info. */
int ioloom_writer_open(void);
/* Flushes every thread's buffer (at exit, exec, fatal signal). */
void ioloom_flush_all(void);
/* In the child after fork: forget the parent's buffers and stream, open the child's own. */
void ioloom_writer_after_fork(void);
/* Appends a key/value pair to the stream's metadata (an INFO chunk, written at once). */
void ioloom_write_info(const char *key, const char *value);
/* Writes a ready chunk (header + payload) to the stream; 0 on success. Caller must not hold the stream lock. */
int ioloom_write_chunk(const uint8_t *chunk, size_t len);
/* Takes a lock of the writer's flush path; in a signal handler (ioloom_in_signal) only if it is free, since
 * the interrupted code may hold it. 0 when taken. */
#include <pthread.h>
extern volatile int ioloom_in_signal;
int ioloom_lock(pthread_mutex_t *lock);
/* ioloom_record for an event whose times come from ioloom_ticks(). */
void ioloom_record_ticks(const struct ioloom_event *ev);
/* Events counted as dropped so far (never silently lost). */
uint64_t ioloom_dropped(void);

/* ---- files.c ---- */
void ioloom_files_init(void);
/* Re-emits the whole file table into a new stream (after fork), and the exclusion counters. */
void ioloom_files_reset_stream(void);
/* Writes file-table entries registered since the last call as one FILES chunk. */
void ioloom_files_flush(void);
/* Writes the per-prefix counts of calls and bytes that the path filters excluded. */
void ioloom_files_write_excluded(void);
/* fd bookkeeping for the wrappers. ioloom_fd_state(): >= 0 a file id, -1 unknown (record with file -1),
 * <= -2 excluded (count, do not record). */
int32_t ioloom_fd_state(int fd);
void ioloom_fd_set(int fd, int32_t state);
void ioloom_fd_copy(int from, int to);
void ioloom_fd_forget(int fd);
/* Registers `path` (relative to dirfd, AT_FDCWD for the cwd) opened as fd (or -1); returns the state. */
int32_t ioloom_path_state(int dirfd, const char *path, int fd);
struct stat;
/* As ioloom_path_state, for a path whose stat (st) is known; st may be NULL. */
int32_t ioloom_stat_state(int dirfd, const char *path, const struct stat *st);
/* Counts one excluded call moving `bytes` against the state's exclusion rule. */
void ioloom_count_excluded(int32_t state, int64_t bytes);

/* ---- wrapper helpers (posix.c, stdio.c) ---- */
/* A call in progress: its times and the errno it left, which the wrapper hands back to the program. */
struct ioloom_call {
    uint64_t t_start, t_end;
    int err;    /* errno after the call */
    int failed; /* the call reported failure */
};

/* 1 if this call is traced (then the wrapper must finish with ioloom_call_done), 0 to pass it through. */
static inline int ioloom_call_start(struct ioloom_call *c, enum ioloom_layer layer) {
    if (IOLOOM_UNLIKELY(!ioloom_tracing) || !(ioloom_enabled_layers >> layer & 1)) return 0;
    if (!ioloom_enter()) {
        ioloom_leave();
        return 0;
    }
    c->t_start = ioloom_ticks();
    return 1;
}

/* Right after the real call returned: its end time and errno. */
static inline void ioloom_call_returned(struct ioloom_call *c, int failed) {
    c->err = errno;
    c->t_end = ioloom_ticks();
    c->failed = failed;
}

/* Records `ev` (times and errno taken from c) unless its file is excluded (then counts it), leaves the guard
 * and sets errno back to what the real call left. */
void ioloom_call_done(const struct ioloom_call *c, struct ioloom_event *ev);

/* Set at the final flush (library destructor): from then on every event is written at once. */
extern volatile int ioloom_finished;
/* Records a process-layer event (start, exit, fork, exec, signal) at the current time. */
void ioloom_record_process(enum ioloom_op op, int64_t ret, int64_t aux);

/* An event with every field unknown. */
static inline struct ioloom_event ioloom_blank_event(enum ioloom_op op, enum ioloom_layer layer) {
    return (struct ioloom_event){.offset = -1, .req_bytes = -1, .ret_bytes = -1, .handle = -1, .aux = -1,
                                 .coll_seq = -1, .file_id = -1, .op = (uint16_t)op, .layer = (uint8_t)layer};
}

#endif
