/* What the tracer's own modules share (not exported): the writer, the file table and the wrapper helpers. */
#ifndef IOLOOM_TRACE_INTERNAL_H
#define IOLOOM_TRACE_INTERNAL_H

#include <errno.h>
#include <stdint.h>
#include <sys/types.h>

#include "ioloom_ops.h"
#include "ioloom_trace.h"
#include "predict.h"
#include "trace_format.h"

#define IOLOOM_TLS __thread __attribute__((tls_model("initial-exec")))

/* ---- writer.c ---- */
/* Opens this process's stream in the trace directory and writes the header, op table and process info. */
int ioloom_writer_open(void);
/* Flushes every thread's buffer (at exit, exec, fatal signal). */
void ioloom_flush_all(void);
/* In the child after fork: forget the parent's buffers and stream, open the child's own. */
void ioloom_writer_after_fork(void);
/* Appends a key/value pair to the stream's metadata (an INFO chunk, written at once). */
void ioloom_write_info(const char *key, const char *value);
/* Writes a sealed chunk (header + payload) to the stream, its checksum chained; 0 on success. Caller must not hold
 * the stream lock. */
int ioloom_write_chunk(uint8_t *chunk, size_t len);
/* Takes a lock of the writer's flush path; in a signal handler (ioloom_in_signal) only if it is free, since
 * the interrupted code may hold it. 0 when taken. */
#include <pthread.h>
extern volatile int ioloom_in_signal;
int ioloom_lock(pthread_mutex_t *lock);
/* The stream file's path, and a descriptor of the tracer's moved near the descriptor limit (the program gets the
 * numbers it would get untraced). */
const char *ioloom_stream_path(void);
int ioloom_fd_move_high(int fd);

/* ---- files.c ---- */
void ioloom_files_init(void);
/* Re-emits the whole file table into a new stream (after fork), and the exclusion counters. */
void ioloom_files_reset_stream(void);
/* Writes file-table entries registered since the last call as one FILES chunk (deltas: one FILE_DELTAS chunk, the
 * folded trace's). */
void ioloom_files_flush(int deltas);
/* Writes the per-prefix counts of calls and bytes that the path filters excluded. */
void ioloom_files_write_excluded(void);
/* fd bookkeeping for the wrappers. ioloom_fd_state(): >= 0 a file id, -1 unknown (record with file -1),
 * <= -2 excluded (count, do not record). */
#define IOLOOM_FD_SLOTS (1 << 20)
/* One entry per descriptor, read without a lock on every data call (the common case, a known descriptor, is
 * inline): its file, as a slot (0 not yet named; 1 unknown file; id + 2 a file; <= -2 excluded by rule -(state +
 * 2)), and the open file description it refers to (positions.h), side by side: an open or a close sets both, a
 * call at the current position reads both. */
struct ioloom_fd_entry {
    int32_t slot;
    int32_t description;
} __attribute__((aligned(8))); /* both read in one load (ioloom_fd_entry) */
extern struct ioloom_fd_entry ioloom_fds[IOLOOM_FD_SLOTS];
static inline int32_t ioloom_state_slot(int32_t state) { return state >= -1 ? state + 2 : state; }
int32_t ioloom_fd_state_slow(int fd);
/* The state of descriptor fd whose entry holds `slot`. */
IOLOOM_INLINE int32_t ioloom_slot_state(int fd, int32_t slot) {
    if (IOLOOM_UNLIKELY(slot == 0)) return ioloom_fd_state_slow(fd);
    return slot > 0 ? slot - 2 : slot;
}
IOLOOM_INLINE int32_t ioloom_fd_state(int fd) {
    int32_t slot = fd >= 0 && fd < IOLOOM_FD_SLOTS ? __atomic_load_n(&ioloom_fds[fd].slot, __ATOMIC_RELAXED) : 0;
    return ioloom_slot_state(fd, slot);
}
/* fd's whole entry in one load; {0, 0} (not named, untracked) for a number outside the table. */
IOLOOM_INLINE struct ioloom_fd_entry ioloom_fd_entry(int fd) {
    struct ioloom_fd_entry e = {0, 0};
    if ((unsigned)fd < IOLOOM_FD_SLOTS) __atomic_load(&ioloom_fds[fd], &e, __ATOMIC_RELAXED);
    return e;
}
void ioloom_fd_set(int fd, int32_t state);
void ioloom_fd_copy(int from, int to); /* a dup: same file, same open file description (closed: positions.h) */
/* Registers `path` (relative to dirfd, AT_FDCWD for the cwd) opened as fd (or -1); returns the state. */
int32_t ioloom_path_state(int dirfd, const char *path, int fd);
/* chdir or fchdir succeeded: relative paths name other files now. */
void ioloom_cwd_changed(void);
/* This process removed or renamed a name: a path opened again may be another file now. */
void ioloom_names_changed(void);
/* Counts one excluded call moving `bytes` against the state's exclusion rule. */
void ioloom_count_excluded(int32_t state, int64_t bytes);
/* The path of file id, NULL if there is none; valid for the life of the process. */
const char *ioloom_file_path(int32_t id);

/* ---- wrapper helpers (posix.c, stdio.c) ---- */
/* A call in progress: its times and the errno it left, which the wrapper hands back to the program. */
struct ioloom_call {
    uint64_t t_start, t_end;
    int *errno_at; /* this thread's errno (ioloom_errno), for handing err back */
    int err;       /* errno after the call */
    int failed;    /* the call reported failure */
    int tsc;       /* the times are TSC ticks (ioloom_tsc, read once a call) */
    /* The wrapper's frame record (its frame pointer: __builtin_frame_address makes it keep one): the caller's
     * frame pointer, then the wrapper's return address, where the program called it. predict.c's stacks start
     * there (unwind.h). */
    void *const *frame;
};

/* 1 if this call is traced (then the wrapper must finish with ioloom_call_done), 0 to pass it through. Inlined
 * into the wrapper, so that the return address is the wrapper's. */
IOLOOM_INLINE int ioloom_call_start(struct ioloom_call *c, enum ioloom_layer layer) {
    if (IOLOOM_UNLIKELY(!(ioloom_tracing >> layer & 1))) return 0;
    if (!ioloom_enter()) {
        ioloom_leave();
        return 0;
    }
    c->frame = __builtin_frame_address(0);
    c->tsc = ioloom_tsc;
    c->t_start = ioloom_ticks_if(c->tsc);
    return 1;
}

/* This thread's errno, by address: glibc's __errno_location is a call through the PLT whose answer never changes
 * for a thread, so each thread keeps it (NULL until its first traced call). */
extern IOLOOM_TLS int *ioloom_errno_at;
IOLOOM_INLINE int *ioloom_errno(void) {
    int *at = ioloom_errno_at;
    if (IOLOOM_UNLIKELY(!at)) at = ioloom_errno_at = &errno;
    return at;
}

/* Right after the real call returned: its end time and errno. */
IOLOOM_INLINE void ioloom_call_returned(struct ioloom_call *c, int failed) {
    c->errno_at = ioloom_errno();
    c->err = *c->errno_at;
    c->t_end = ioloom_ticks_if(c->tsc);
    c->failed = failed;
}

/* The row of a traced call: its times (ioloom_ticks readings), its errno when it failed, the MPI-IO call it runs
 * inside as parent; every other field unknown (-1) but the operation and the layer. */
IOLOOM_INLINE struct ioloom_raw_event ioloom_call_row(const struct ioloom_call *c, enum ioloom_op op,
                                                      enum ioloom_layer layer) {
    return (struct ioloom_raw_event){.t_start = c->t_start,
                                     .t_end = c->t_end,
                                     .offset = -1,
                                     .req_bytes = -1,
                                     .ret_bytes = -1,
                                     .handle = -1,
                                     .aux = -1,
                                     .coll_seq = -1,
                                     .call_id = -1,
                                     .parent = ioloom_link.current,
                                     .file_id = -1,
                                     .err = c->failed ? c->err : 0,
                                     .op = (uint16_t)op,
                                     .layer = (uint8_t)layer,
                                     .ticks = (uint8_t)c->tsc};
}

/* Set at the final flush (library destructor): from then on every event is written at once. */
extern volatile int ioloom_finished;

/* ---- appending rows: ioloom_trace.h ---- */

/* Records `row` (a state from ioloom_fd_state/ioloom_path_state in file_id) unless its file is excluded (then counts
 * it), leaves the guard and sets errno back to what the real call left. */
void ioloom_call_done(const struct ioloom_call *c, struct ioloom_raw_event *row);

#endif
