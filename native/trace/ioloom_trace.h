/* The tracer's recording interface: what an interception module (posix.c, stdio.c, mpiio_*.c, logfs) calls.
 *
 * libioloom-trace.so holds the event writer, the file table and the POSIX and stdio wrappers. The MPI-IO
 * wrappers live in libioloom-trace-mpi-<impl>.so (one per MPI ABI), preloaded beside it; they record
 * through the functions and thread-local state below, which libioloom-trace.so exports.
 *
 * Cross-layer link: an MPI-IO wrapper opens a window (ioloom_link_open) before it calls PMPI_File_*. That sets
 * the thread-local "current MPI-IO call" number, and every event recorded on the thread until the window
 * closes carries it as its parent. The link is explicit, never inferred from times. The MPI-IO event itself
 * has call_id = its own number and parent = the call that was current when it opened (docs/trace-format.md,
 * "Cross-layer link").
 */
#ifndef IOLOOM_TRACE_H
#define IOLOOM_TRACE_H

#include <stdint.h>
#include <sys/types.h>

#include "ioloom_core.h"
#include "trace_format.h"

/* Layers. */
enum ioloom_layer { IOLOOM_POSIX = 0, IOLOOM_STDIO = 1, IOLOOM_MPIIO = 2, IOLOOM_PROCESS = 3, IOLOOM_ASYNC = 4 };

/* One event as the wrappers fill it. Unknown numeric fields are -1. The writer encodes it compactly. */
struct ioloom_event {
    uint64_t t_start, t_end; /* ioloom_now_ns() at entry and at return */
    int64_t offset;          /* file offset of the access (for record locks: l_start), -1 unknown */
    int64_t req_bytes;       /* bytes asked for (for record locks: l_len; for mmap: length) */
    int64_t ret_bytes;       /* bytes moved, or the return value; -1 on error */
    int64_t handle;          /* fd, FILE* number or MPI_File number */
    int64_t aux;             /* op-specific: lock type, whence, flags, etype extent... (see docs/trace-format.md) */
    int64_t coll_seq;        /* per-communicator collective sequence number, -1 if not collective */
    int32_t file_id;         /* ioloom_file_id() of the file, -1 none */
    int32_t err;             /* errno after the call when it failed, else 0 */
    uint16_t op;             /* an IOLOOM_OP_* code (ioloom_ops.h) */
    uint8_t layer;           /* enum ioloom_layer */
};

/* Is tracing on for this layer in this process (IOLOOM_LAYERS)? For modules found at run time (logfs); a
 * module linked against libioloom-trace.so reads ioloom_enabled_layers (a bit per layer) directly. */
IOLOOM_EXPORT int ioloom_layer_enabled(enum ioloom_layer layer);
IOLOOM_EXPORT extern unsigned ioloom_enabled_layers;

/* Append an event to this thread's buffer, with parent = the current MPI-IO call. Never blocks on I/O for
 * long, never fails the caller: when the bounded buffer cannot be flushed, the event is counted as dropped. */
IOLOOM_EXPORT void ioloom_record(const struct ioloom_event *ev);
/* Append a complete row (the MPI module fills its rows itself, link fields included): one copy, no
 * conversion. Its times are ioloom_ticks() readings when row->ticks is set, else ns. */
IOLOOM_EXPORT void ioloom_append_row(const struct ioloom_raw_event *row);

/* The recording path's pieces: inlined into each wrapper whatever the compiler's size estimates (a call, with the
 * spills around it, costs more than most pieces). */
#define IOLOOM_INLINE static inline __attribute__((always_inline))

/* The layers traced (ioloom_enabled_layers, a bit per layer) once the stream is open, 0 until then: a wrapper passes
 * its call through while its layer's bit is clear (one load and one test). */
IOLOOM_EXPORT extern volatile int ioloom_tracing;

/* ---- appending rows (writer.c), inline in the wrappers of every module linked against libioloom-trace.so ----
 * Where this thread's next row goes: the rows of its buffer's active half and that half's published count. The
 * writer keeps it in step with the buffer; rows is NULL until the thread's first row. A wrapper fills the slot in
 * place (ioloom_row_slot ... ioloom_row_publish), with no copy and no call in between. */
struct ioloom_cursor {
    struct ioloom_raw_event *rows;
    uint32_t *count;
    int recording; /* set between taking a slot and publishing it: a signal then must not flush the half */
};
IOLOOM_EXPORT extern __thread struct ioloom_cursor ioloom_cursor __attribute__((tls_model("initial-exec")));
/* The rows between two looks at the buffer, less one: 63, and 0 from the final flush on (a look at every row), so
 * that one test on the recording path serves both. */
IOLOOM_EXPORT extern volatile uint32_t ioloom_look_mask;
/* The thread's first row (it gets a buffer, or the row is counted as dropped). */
IOLOOM_EXPORT void ioloom_append_first(const struct ioloom_raw_event *row);
/* Every 64 rows: hands a full or old half to the encoder thread. */
IOLOOM_EXPORT void ioloom_after_batch(uint32_t n);

/* The slot for the thread's next row (its number in *n), NULL before the thread's first row. */
IOLOOM_INLINE struct ioloom_raw_event *ioloom_row_slot(uint32_t *n) {
    if (IOLOOM_UNLIKELY(!ioloom_cursor.rows)) return NULL;
    *n = *ioloom_cursor.count;
    ioloom_cursor.recording = 1;
    return &ioloom_cursor.rows[*n];
}

/* Makes row n (filled) visible to the flushes, and looks at the buffer every 64 rows. */
IOLOOM_INLINE void ioloom_row_publish(uint32_t n) {
    __atomic_store_n(ioloom_cursor.count, n + 1, __ATOMIC_RELEASE);
    ioloom_cursor.recording = 0;
    if (IOLOOM_UNLIKELY(((n + 1) & ioloom_look_mask) == 0)) ioloom_after_batch(n + 1);
}

/* Appends a complete row (as ioloom_append_row, without the call). */
IOLOOM_INLINE void ioloom_append(const struct ioloom_raw_event *row) {
    uint32_t n;
    struct ioloom_raw_event *slot = ioloom_row_slot(&n);
    if (IOLOOM_UNLIKELY(!slot)) {
        ioloom_append_first(row);
        return;
    }
    *slot = *row;
    ioloom_row_publish(n);
}

/* Wrapper timestamps. Reading the TSC costs a third of clock_gettime; the writer converts ticks to
 * CLOCK_MONOTONIC ns when it encodes a chunk, against a (ticks, ns) pair taken at start and one taken at the
 * flush (so the error stays within one clock reading). Used only when the kernel itself keeps time with the
 * TSC (clocksource "tsc": invariant and synchronised across CPUs); otherwise timestamps are clock_gettime. */
#if defined(__x86_64__)
#include <x86intrin.h>
#endif
IOLOOM_EXPORT extern int ioloom_tsc;
/* A timestamp: TSC ticks when `tsc` (ioloom_tsc, which a wrapper may read once for both of its readings), else ns. */
static inline uint64_t ioloom_ticks_if(int tsc) {
#if defined(__x86_64__)
    if (IOLOOM_LIKELY(tsc)) return __rdtsc();
#endif
    return ioloom_now_ns();
}
static inline uint64_t ioloom_ticks(void) { return ioloom_ticks_if(ioloom_tsc); }

/* The id of a file in this process's file table, by path (made absolute) and (device, inode) from fstat of fd
 * when fd >= 0. ROMIO's file-system prefix ("ufs:", "lustre:") is not part of the path (ioloom_romio_path).
 * Returns -1 if the path is excluded by the path filters (then do not record the event). */
IOLOOM_EXPORT int32_t ioloom_file_id(const char *path, int fd);

/* ---- cross-layer link (see above) ---- */

/* This thread's link. Call ids are unique within the process: each thread takes them from a block of its own
 * (ioloom_link_refill), so opening a window touches no shared memory. */
struct ioloom_link {
    int64_t current;         /* the innermost MPI-IO call in progress on this thread, -1 none */
    int64_t next_id, end_id; /* the thread's block of call ids: [next_id, end_id) */
};
IOLOOM_EXPORT extern __thread struct ioloom_link ioloom_link __attribute__((tls_model("initial-exec")));
IOLOOM_EXPORT void ioloom_link_refill(void);

/* Opens a window: returns the new call's id, which becomes current. The caller keeps the previous current
 * (the new call's parent) and gives it back to ioloom_link_close, so nested calls (a split collective inside a
 * wait, for instance) restore the enclosing one. */
static inline int64_t ioloom_link_open(void) {
    if (IOLOOM_UNLIKELY(ioloom_link.next_id == ioloom_link.end_id)) ioloom_link_refill();
    return ioloom_link.current = ioloom_link.next_id++;
}
static inline void ioloom_link_close(int64_t parent) { ioloom_link.current = parent; }

/* Process facts known only to the MPI module: rank and size after MPI_Init, and the clock offset to rank 0
 * (ns to add to local times) with its estimated error, measured at init and finalize. */
IOLOOM_EXPORT void ioloom_set_rank(int rank, int nranks);
IOLOOM_EXPORT void ioloom_set_clock(int phase /* 0 init, 1 finalize */, uint64_t local_ns, int64_t offset_ns,
                                    int64_t error_ns);
/* Key/value facts written into the trace's metadata (MPI library, hints in effect after open, ...). */
IOLOOM_EXPORT void ioloom_note(const char *key, const char *value);

#endif
