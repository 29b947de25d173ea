/* The tracer's recording interface: what an interception module (posix.c, stdio.c, mpiio.c) calls.
 *
 * libioloom-trace.so holds the event writer, the file table and the POSIX and stdio wrappers. The MPI-IO
 * wrappers live in libioloom-trace-mpi-<impl>.so (one per MPI ABI), preloaded beside it; they record
 * through the functions below, which libioloom-trace.so exports.
 *
 * Cross-layer link: an MPI-IO wrapper calls ioloom_mpi_call_begin() before it calls PMPI_File_*. That sets a
 * thread-local "current MPI-IO call" number, and every event recorded on the thread until the matching
 * ioloom_mpi_call_end() carries it as its parent. The link is explicit, never inferred from times.
 * The MPI-IO event itself is recorded between begin and end: an event of layer IOLOOM_MPIIO gets call_id = the
 * innermost call in progress and parent = the one enclosing it (docs/trace-format.md, "Cross-layer link").
 */
#ifndef IOLOOM_TRACE_H
#define IOLOOM_TRACE_H

#include <stdint.h>
#include <sys/types.h>

#include "ioloom_core.h"

/* Layers. */
enum ioloom_layer { IOLOOM_POSIX = 0, IOLOOM_STDIO = 1, IOLOOM_MPIIO = 2, IOLOOM_PROCESS = 3 };

/* One event as the wrappers fill it. Unknown numeric fields are -1. The writer encodes it compactly. */
struct ioloom_event {
    uint64_t t_start, t_end;   /* ioloom_now_ns() at entry and at return */
    int64_t offset;            /* file offset of the access (for record locks: l_start), -1 unknown */
    int64_t req_bytes;         /* bytes asked for (for record locks: l_len; for mmap: length) */
    int64_t ret_bytes;         /* bytes moved, or the return value; -1 on error */
    int64_t handle;            /* fd, FILE* number or MPI_File number */
    int64_t aux;               /* op-specific: lock type, whence, flags, etype extent... (see docs/trace-format.md) */
    int64_t coll_seq;          /* per-communicator collective sequence number, -1 if not collective */
    int32_t file_id;           /* ioloom_file_id() of the file, -1 none */
    int32_t err;               /* errno after the call when it failed, else 0 */
    uint16_t op;               /* an IOLOOM_OP_* code (ioloom_ops.h) */
    uint8_t layer;             /* enum ioloom_layer */
};

/* Is tracing on for this layer in this process (IOLOOM_LAYERS)? Cheap: a load and a test. */
IOLOOM_EXPORT int ioloom_layer_enabled(enum ioloom_layer layer);

/* Append an event to this thread's buffer. Never blocks on I/O for long, never fails the caller: when the
 * bounded buffer cannot be flushed, the event is counted as dropped. */
IOLOOM_EXPORT void ioloom_record(const struct ioloom_event *ev);

/* The id of a file in this process's file table, by path (made absolute) and (device, inode) from fstat of fd
 * when fd >= 0. Returns -1 if the path is excluded by the path filters (then do not record the event). */
IOLOOM_EXPORT int32_t ioloom_file_id(const char *path, int fd);
/* The file id a descriptor currently refers to, or -1 (untracked or excluded). */
IOLOOM_EXPORT int32_t ioloom_fd_file(int fd);

/* Cross-layer link (see above). begin returns the call's number; end restores the previous one, so nested
 * calls (a split collective inside a wait, for instance) keep the innermost. */
IOLOOM_EXPORT uint64_t ioloom_mpi_call_begin(void);
IOLOOM_EXPORT void ioloom_mpi_call_end(uint64_t call);

/* Process facts known only to the MPI module: rank and size after MPI_Init, and the clock offset to rank 0
 * (ns to add to local times) with its estimated error, measured at init and finalize. */
IOLOOM_EXPORT void ioloom_set_rank(int rank, int nranks);
IOLOOM_EXPORT void ioloom_set_clock(int phase /* 0 init, 1 finalize */, uint64_t local_ns, int64_t offset_ns,
                                    int64_t error_ns);
/* Key/value facts written into the trace's metadata (MPI library, hints in effect after open, ...). */
IOLOOM_EXPORT void ioloom_note(const char *key, const char *value);

#endif
