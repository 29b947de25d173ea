/* What the MPI modules of the tracer share (mpiio_*.c, built once per MPI into libioloom-trace-mpi-<impl>.so).
 *
 * Every wrapper exists under two names, MPI_x and PMPI_x: a C program calls MPI_x, Open MPI's Fortran
 * bindings (libmpi_mpifh) call PMPI_x, MPICH's (libmpichfort) call MPI_x. Each name forwards to the next
 * definition of that same name (IOLOOM_NEXT: another PMPI tool, else the MPI library), never to ours. A
 * thread-local depth makes a wrapper reached from inside another (a tool's MPI_x calling PMPI_x, ROMIO calling
 * PMPI_File_* internally) pass straight through, so one user call gives one event.
 *
 * Event fields of MPI-IO events (docs/trace-format.md, section "mpiio", has the full table):
 *   data calls   offset = byte offset in the file of the first etype accessed (through the view), -1 for
 *                shared and ordered pointers (the MPI library places those at run time); aux = the offset in
 *                etype units (explicit, or the individual pointer before the call), -1 for shared pointers;
 *                req_bytes = count x type size; ret_bytes = bytes the status reports (MPI_Get_elements_x on
 *                MPI_BYTE; a write ignoring its status: req_bytes, mpiio_write_finish). Non-blocking and
 *                split-begin events have ret_bytes -1 (not known yet); the completion (MPI_Wait..., or the _end
 *                call) is its own event with req_bytes -1, the bytes in ret_bytes, the initiating call's call_id
 *                in aux, and the same offset and coll_seq.
 *   errors       err = the MPI error class, ret_bytes = -1.
 *   coll_seq     (open number of the communicator << 32) | (collective number on the file handle).
 */
#ifndef IOLOOM_MPIIO_H
#define IOLOOM_MPIIO_H

#include <mpi.h>
#include <stdint.h>

#include "ioloom_ops.h"
#include "ioloom_trace.h"
#include "key_table.h"

/* ---- wrapper plumbing ------------------------------------------------------------------------------ */

extern __thread int mpiio_depth;

/* 1 if this call is to be traced (then mpiio_leave() must follow), 0 if it must pass through. */
IOLOOM_INLINE int mpiio_enter(void) {
    if (mpiio_depth || !(ioloom_enabled_layers >> IOLOOM_MPIIO & 1)) return 0;
    mpiio_depth++;
    return 1;
}
IOLOOM_INLINE void mpiio_leave(void) { mpiio_depth--; }

#define MPIIO_ARGS(...) __VA_ARGS__
/* Export MPI_name and PMPI_name (PARAMS, ARGS parenthesised), both running traced_<name>(next, ARGS...). */
#define MPIIO_BOTH_NAMES(NAME, PARAMS, ARGS)                                                    \
    IOLOOM_EXPORT int NAME PARAMS { return traced_##NAME(IOLOOM_NEXT(NAME), MPIIO_ARGS ARGS); } \
    IOLOOM_EXPORT int P##NAME PARAMS { return traced_##NAME(IOLOOM_NEXT(P##NAME), MPIIO_ARGS ARGS); }

/* A data-call wrapper: traced_NAME and its two exported names. The parameters are named fh, offset, buf,
 * count, datatype and status or request; OFFSET is `offset` or -1; RUN(ARGS) is the traced call's body: it
 * calls next(ARGS), sets rc and finishes `call` (its file is `file`). */
#define MPIIO_DATA_WRAPPER(NAME, POS, COLL, PARAMS, ARGS, OFFSET, RUN)                                            \
    IOLOOM_INLINE int traced_##NAME(__typeof__(&P##NAME) next, MPIIO_ARGS PARAMS) {                               \
        if (!mpiio_enter()) {                                                                                     \
            if (MPIIO_##POS == MPIIO_INDIVIDUAL) mpiio_pointer_unseen(fh, IOLOOM_OP_##NAME);                      \
            return next(MPIIO_ARGS ARGS);                                                                         \
        }                                                                                                         \
        struct mpiio_call call;                                                                                   \
        struct mpiio_file *file;                                                                                  \
        int rc;                                                                                                   \
        if ((file = mpiio_data_start(&call, IOLOOM_OP_##NAME, fh, MPIIO_##POS, OFFSET, count, datatype, COLL))) { \
            RUN(ARGS)                                                                                             \
            if (MPIIO_##POS == MPIIO_INDIVIDUAL) mpiio_pointer_moved(file, &call.row);                            \
        } else {                                                                                                  \
            rc = next(MPIIO_ARGS ARGS);                                                                           \
        }                                                                                                         \
        mpiio_leave();                                                                                            \
        return rc;                                                                                                \
    }                                                                                                             \
    MPIIO_BOTH_NAMES(NAME, PARAMS, ARGS)

/* The two shapes of data calls: (fh, offset, buf, count, datatype, LAST) and (fh, buf, count, datatype, LAST),
 * LAST being `MPI_Status *status` (blocking) or `MPI_Request *request` (non-blocking), named LAST_NAME. */
#define MPIIO_EXPLICIT_CALL(NAME, BUF, COUNT_T, COLL, LAST, LAST_NAME, RUN)                                     \
    MPIIO_DATA_WRAPPER(NAME, EXPLICIT, COLL,                                                                    \
                       (MPI_File fh, MPI_Offset offset, BUF * buf, COUNT_T count, MPI_Datatype datatype, LAST), \
                       (fh, offset, buf, count, datatype, LAST_NAME), offset, RUN)
#define MPIIO_POINTER_CALL(NAME, BUF, COUNT_T, POS, COLL, LAST, LAST_NAME, RUN)                               \
    MPIIO_DATA_WRAPPER(NAME, POS, COLL, (MPI_File fh, BUF * buf, COUNT_T count, MPI_Datatype datatype, LAST), \
                       (fh, buf, count, datatype, LAST_NAME), -1, RUN)

/* ---- open files ------------------------------------------------------------------------------------ */

/* An operation started but not finished: a non-blocking request or a split collective. Its completion
 * event copies these. */
struct mpiio_pending {
    uint64_t call_id; /* the initiating call's call_id; 0 = none */
    int32_t file_id;
    int64_t handle, offset, coll_seq;
};

/* The view: disp, etype_size and contiguous_view are plain fields, written together only by an MPI_File_set_view
 * on this handle (traced: mpiio_file_set_view; untraced: mpiio_pointer_unseen) and read by the data calls on it.
 * A reader in another thread could see them half written (contiguous_view 1 with etype_size 0) only if a data
 * call ran at the same time as the set_view on the same handle: MPI_File_set_view is collective, and the
 * standard leaves it to the program to order collective calls on one file handle across threads (a data call
 * racing with it has no defined view either). Even then no field divides: the row gets a wrong offset, no more. */
struct mpiio_file {
    MPI_File fh;
    int32_t file_id;            /* -1: the path is excluded, calls on it pass through */
    int64_t handle;             /* MPI_File_c2f(fh): a small number, stable while the file is open */
    int64_t coll_base;          /* open number on the communicator, << 32 */
    int64_t coll_count;         /* collectives done on this handle (atomic) */
    char *path;                 /* absolute, malloc'd: names the file in notes (file ids are per process) */
    int64_t disp, etype_size;   /* the view; etype_size 0: not known (set untraced, mpiio_pointer_unseen) */
    int contiguous_view;        /* filetype has no holes: byte offset = disp + offset * etype_size; 0 while the
                                 * view is not known (the library places each offset) */
    int sequential;             /* opened with MPI_MODE_SEQUENTIAL: it has no individual pointer to ask for */
    int64_t pointer;            /* the individual pointer (etype units) as followed here; -1: not known (ask) */
    struct mpiio_pending split; /* the split collective in progress (MPI allows one per handle) */
};

#define MPIIO_MAX_FILES 1024 /* open at once per process; beyond it, files are passed through untraced */
extern struct mpiio_file mpiio_files[MPIIO_MAX_FILES];
extern struct key_table mpiio_file_slots;
static inline uint64_t mpiio_file_key(MPI_File fh) { return (uint64_t)(uintptr_t)fh; }
/* The slot this thread found last: programs call on one file many times in a row. */
extern __thread long mpiio_last_found;
struct mpiio_file *mpiio_file_find_slowly(MPI_File fh);

/* The traced file behind fh, or NULL (not opened through us, excluded, or closed). Lock-free; the file this thread
 * found last is checked inline. */
IOLOOM_INLINE struct mpiio_file *mpiio_file_find(MPI_File fh) {
    long last = mpiio_last_found;
    if (IOLOOM_LIKELY(key_table_holds(&mpiio_file_slots, last, mpiio_file_key(fh)))) return &mpiio_files[last];
    return mpiio_file_find_slowly(fh);
}
/* Start tracking fh; returns NULL if the table is full (then the file is simply not traced). */
struct mpiio_file *mpiio_file_add(MPI_File fh);
void mpiio_file_remove(struct mpiio_file *file);
/* Record the view set on a file (disp, etype, filetype), for byte offsets. */
void mpiio_file_set_view(struct mpiio_file *file, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype);
/* The next collective sequence number on this file (all its ranks call its collectives in one order). */
IOLOOM_INLINE int64_t mpiio_file_next_coll(struct mpiio_file *file) {
    return file->coll_base | __atomic_fetch_add(&file->coll_count, 1, __ATOMIC_RELAXED);
}
/* How many files the communicator has opened so far (collective, so equal on its ranks), then one more. */
int64_t mpiio_comm_next_open(MPI_Comm comm);

/* ---- events ---------------------------------------------------------------------------------------- */

/* One traced MPI call in progress: its row, filled in place (call_id = its own number, parent = the call that
 * was current when it started) and appended as it is when the call finishes. */
struct mpiio_call {
    struct ioloom_raw_event row;
    /* A data call whose datatype's size this thread did not know (row.req_bytes == MPIIO_UNSIZED): its count and
     * datatype, sized once the call has accepted them (mpiio_data_sized). */
    MPI_Count count;
    MPI_Datatype datatype;
};

/* The wrappers' hot path (a data call on a traced file) is inline below: one row filled in place, one copy into
 * the writer's buffer (ioloom_append). */

/* Set the fields every MPI-IO event takes from its call, open the cross-layer window and stamp t_start. */
IOLOOM_INLINE void mpiio_call_open(struct mpiio_call *call, enum ioloom_op op, const struct mpiio_file *file) {
    call->row.file_id = file ? file->file_id : -1;
    call->row.handle = file ? file->handle : -1;
    call->row.err = 0;
    call->row.op = (uint16_t)op;
    call->row.layer = IOLOOM_MPIIO;
    int tsc = ioloom_tsc;
    call->row.ticks = (uint8_t)tsc;
    /* The window opens before the clock is read, so every POSIX event of this call lies inside it. */
    call->row.parent = ioloom_link.current;
    call->row.call_id = ioloom_link_open();
    call->row.t_start = ioloom_ticks_if(tsc);
}

/* mpiio_call_open, with the fields not set later -1. */
IOLOOM_INLINE void mpiio_call_start(struct mpiio_call *call, enum ioloom_op op, const struct mpiio_file *file) {
    call->row.offset = call->row.req_bytes = call->row.ret_bytes = call->row.aux = call->row.coll_seq = -1;
    mpiio_call_open(call, op, file);
}

/* The MPI error class of a return code. */
int32_t mpiio_error_class(int rc);

/* Stamp t_end, set err from the MPI return code, record the event and close the window. */
IOLOOM_INLINE void mpiio_call_finish(struct mpiio_call *call, int rc) {
    call->row.t_end = ioloom_ticks_if(call->row.ticks); /* ioloom_tsc, read at the start */
    if (IOLOOM_UNLIKELY(rc != MPI_SUCCESS)) {
        call->row.err = mpiio_error_class(rc);
        call->row.ret_bytes = -1;
    }
    if (IOLOOM_LIKELY(ioloom_tracing)) ioloom_append(&call->row);
    ioloom_link_close(call->row.parent);
}
/* Close the window without recording anything (the call turned out not to be traced). */
static inline void mpiio_call_drop(const struct mpiio_call *call) { ioloom_link_close(call->row.parent); }

/* Bytes a status reports: what MPI_Get_elements_x(status, MPI_BYTE) returns. That call reads the status's
 * byte count, a field of the public MPI_Status of both MPIs built here: read inline, it costs 3 instructions
 * instead of a call through libmpi (85). Any other MPI asks the library. */
IOLOOM_INLINE int64_t mpiio_status_bytes(const MPI_Status *status) {
#if defined(OPEN_MPI)
    return (int64_t)status->_ucount;
#elif defined(MPICH)
    /* MPICH's MPIR_STATUS_GET_COUNT: the high half shares its word with the cancelled bit (bit 0). */
    return (int64_t)((uint64_t)((unsigned)status->count_hi_and_cancelled >> 1) << 32 | (unsigned)status->count_lo);
#else
    MPI_Count bytes = MPI_UNDEFINED;
    if (PMPI_Get_elements_x(status, MPI_BYTE, &bytes) != MPI_SUCCESS || bytes == MPI_UNDEFINED) return -1;
    return (int64_t)bytes;
#endif
}

/* Where a data call's position comes from. */
enum mpiio_position { MPIIO_EXPLICIT, MPIIO_INDIVIDUAL, MPIIO_SHARED };

/* The etype offset an individual-pointer call starts at (the file's pointer now), asked of the library; -1 if it
 * cannot be asked. */
MPI_Offset mpiio_individual_position(const struct mpiio_file *file);

/* The individual pointer is followed rather than asked for each call (asking is a library call, dearer than the
 * rest of the wrapper), unless the program may call on one file from several threads at once (mpiio_pointer_followed
 * is 0 after MPI_THREAD_MULTIPLE was provided: two calls could each follow from the same place): known after an
 * individual-pointer call that accessed all it asked for (mpiio_pointer_moved), a seek from the start or from a known
 * place, a new view (0); not known (-1, the next call asks) after a failed call, a read that stopped short, a
 * non-blocking or split call (its amount is not known yet), a seek from the end, and a call that moves it without being
 * traced (reached inside another MPI call). The library moves it as the standard says: by the etypes accessed, to the
 * etype after the last one. */
IOLOOM_INLINE MPI_Offset mpiio_pointer(const struct mpiio_file *file) {
    int64_t followed = __atomic_load_n(&file->pointer, __ATOMIC_RELAXED);
    return IOLOOM_LIKELY(followed >= 0) ? followed : mpiio_individual_position(file);
}
extern int mpiio_pointer_followed; /* 1 until MPI_Init_thread provides MPI_THREAD_MULTIPLE */
IOLOOM_INLINE void mpiio_pointer_set(struct mpiio_file *file, int64_t pointer) {
    __atomic_store_n(&file->pointer, mpiio_pointer_followed ? pointer : -1, __ATOMIC_RELAXED);
}
/* After an individual-pointer data call (its row): where the pointer is now, if that is known (it is not while the
 * view, and so the etype size, is not known). */
IOLOOM_INLINE void mpiio_pointer_moved(struct mpiio_file *file, const struct ioloom_raw_event *row) {
    int64_t bytes = row->ret_bytes == row->req_bytes ? row->req_bytes : -1; /* -1: failed, short or pending */
    int64_t size = file->etype_size;
    int64_t etypes = size == 1 ? bytes : size > 1 && bytes % size == 0 ? bytes / size : -1;
    mpiio_pointer_set(file, row->aux >= 0 && etypes >= 0 ? row->aux + etypes : -1);
}
/* A call (op) that may move fh's individual pointer passes through untraced: inside another MPI call, the pointer is
 * not known any more (with the layer off, no file is in the table). After an MPI_File_set_view so, the view is not
 * known either until a traced one: offsets are asked of the library, and the pointer after every call. */
void mpiio_pointer_unseen(MPI_File fh, enum ioloom_op op);
/* The byte offset of etype number `offset` through a view with holes (the MPI library knows its layout). */
int64_t mpiio_view_byte_offset(const struct mpiio_file *file, MPI_Offset offset);

/* Datatype sizes. Every data call needs its datatype's size (requested bytes), and PMPI_Type_size_x is a library
 * call, dearer than the rest of the wrapper. Each thread remembers the last datatype it asked about: a handle names the
 * same type until MPI_Type_free, which moves mpiio_types_freed (before and after the free, so that no thread keeps the
 * old size of a handle the library hands out again). The library is asked only about a datatype that a data call has
 * just accepted (returned MPI_SUCCESS with it): asked about an invalid one (MPI_DATATYPE_NULL, a freed handle), it
 * raises the error on MPI_COMM_WORLD, whose handler aborts by default, where the call itself returns the error to
 * the program through the file's handler. */
extern volatile uint64_t mpiio_types_freed; /* from 1 */
extern __thread struct mpiio_last_type {
    MPI_Datatype type;
    uint64_t freed; /* mpiio_types_freed when the size was asked; 0 (never current): nothing known */
    MPI_Count size;
} mpiio_last_type;
/* Asks the library about a datatype a call has accepted, and remembers the answer (0 if it cannot tell). */
MPI_Count mpiio_type_size_asked(MPI_Datatype datatype);

/* The size of datatype if this thread knows it without asking the library, else -1. */
IOLOOM_INLINE MPI_Count mpiio_type_size_known(MPI_Datatype datatype) {
    uint64_t freed = __atomic_load_n(&mpiio_types_freed, __ATOMIC_ACQUIRE);
    const struct mpiio_last_type *last = &mpiio_last_type;
    if (IOLOOM_LIKELY(last->freed == freed && last->type == datatype)) return last->size;
    return -1;
}

/* req_bytes of a data call whose datatype's size is asked after the call (mpiio_data_sized). */
#define MPIIO_UNSIZED INT64_MIN

/* req_bytes = count x the datatype's size if this thread knows it, else MPIIO_UNSIZED (count and datatype kept). */
IOLOOM_INLINE void mpiio_data_request(struct mpiio_call *call, MPI_Count count, MPI_Datatype datatype) {
    MPI_Count type_size = mpiio_type_size_known(datatype);
    call->row.req_bytes = (int64_t)count * (int64_t)type_size;
    if (IOLOOM_UNLIKELY(type_size < 0)) {
        call->row.req_bytes = MPIIO_UNSIZED;
        call->count = count;
        call->datatype = datatype;
    }
}

/* The byte offset of etype number etype_offset through the file's view; -1 for -1 (a shared pointer). */
IOLOOM_INLINE int64_t mpiio_byte_offset(const struct mpiio_file *file, MPI_Offset etype_offset) {
    return etype_offset < 0        ? -1
           : file->contiguous_view ? file->disp + etype_offset * file->etype_size
                                   : mpiio_view_byte_offset(file, etype_offset);
}

/* Start a traced data call (inside mpiio_enter/leave): every field set once (offsets through the view, requested
 * bytes, coll_seq when collective; ret_bytes -1 until it is known), then the window and t_start. Returns the file
 * if it is traced, else NULL (the caller just calls through). */
IOLOOM_INLINE struct mpiio_file *mpiio_data_start(struct mpiio_call *call, enum ioloom_op op, MPI_File fh,
                                                  enum mpiio_position position, MPI_Offset offset, MPI_Count count,
                                                  MPI_Datatype datatype, int collective) {
    struct mpiio_file *file = mpiio_file_find(fh);
    if (!file || file->file_id < 0) return NULL;
    call->row.aux = position == MPIIO_EXPLICIT ? offset : position == MPIIO_INDIVIDUAL ? mpiio_pointer(file) : -1;
    call->row.offset = mpiio_byte_offset(file, call->row.aux);
    mpiio_data_request(call, count, datatype);
    call->row.ret_bytes = -1;
    call->row.coll_seq = collective ? mpiio_file_next_coll(file) : -1;
    mpiio_call_open(call, op, file);
    return file;
}

/* A data call returned rc: the requested bytes of one whose datatype's size was not known at its start, now asked
 * if the call accepted the datatype; -1 (not known) if it failed. */
IOLOOM_INLINE void mpiio_data_sized(struct mpiio_call *call, int rc) {
    if (IOLOOM_LIKELY(call->row.req_bytes != MPIIO_UNSIZED)) return;
    call->row.req_bytes =
        rc == MPI_SUCCESS ? (int64_t)call->count * (int64_t)mpiio_type_size_asked(call->datatype) : -1;
}

/* Finish a blocking read: bytes from the status. */
IOLOOM_INLINE void mpiio_data_finish(struct mpiio_call *call, int rc, const MPI_Status *status) {
    mpiio_data_sized(call, rc);
    call->row.ret_bytes = rc == MPI_SUCCESS ? mpiio_status_bytes(status) : -1;
    mpiio_call_finish(call, rc);
}
/* Finish a blocking write. A write that succeeds accessed the amount requested (the MPI standard, "Data Access
 * Conventions": "The amount of data accessed will be the amount requested, unless an error is raised (or a read
 * reaches the end of file)"), so a caller's MPI_STATUS_IGNORE is passed on as it is and the bytes are req_bytes:
 * the library does not fill a status nobody reads (MPICH sets its count through MPI_Status_set_elements_x). A
 * status the caller gave is read as a read's is. */
IOLOOM_INLINE void mpiio_write_finish(struct mpiio_call *call, int rc, const MPI_Status *status) {
    mpiio_data_sized(call, rc);
    call->row.ret_bytes = rc != MPI_SUCCESS             ? -1
                          : status == MPI_STATUS_IGNORE ? call->row.req_bytes
                                                        : mpiio_status_bytes(status);
    mpiio_call_finish(call, rc);
}
/* Finish the initiation of a pending operation (non-blocking or split begin): ret_bytes stays -1. */
void mpiio_data_initiated(struct mpiio_call *call, int rc, struct mpiio_pending *pending);
/* Finish `call` (started with the completing function's op, no file) as the completion of `pending`: its
 * file, offset and coll_seq, the initiating call_id in aux, the status's bytes in ret_bytes. */
void mpiio_complete(struct mpiio_call *call, const struct mpiio_pending *pending, const MPI_Status *status);
/* The user's status, or `local` when the user passed MPI_STATUS_IGNORE (we need the byte count). */
IOLOOM_INLINE MPI_Status *mpiio_status(MPI_Status *user, MPI_Status *local) {
    return user == MPI_STATUS_IGNORE ? local : user;
}

/* ---- non-blocking requests ------------------------------------------------------------------------- */

/* Remember that request belongs to a pending MPI-IO operation. When the table is full the completion is
 * counted as lost (mpiio_requests_lost) rather than blocking. */
void mpiio_request_add(MPI_Request request, const struct mpiio_pending *pending);
/* The pending operation of request, left in the table; 0 if the request is not a traced file request. */
int mpiio_request_peek(MPI_Request request, struct mpiio_pending *pending);
/* Take the pending operation of request out of the table; 0 if the request is not a traced file request. */
int mpiio_request_take(MPI_Request request, struct mpiio_pending *pending);
/* Is any request pending? A relaxed load: the fast path of every MPI_Wait/MPI_Test. */
int mpiio_requests_pending(void);

#endif
