/* POSIX asynchronous I/O (aio_read, aio_write, lio_listio, aio_error, aio_return, aio_suspend, and their 64
 * forms). Open MPI's OMPIO runs non-blocking and split-collective MPI-IO through them, so without these the
 * bytes of MPI_File_i* calls would have no POSIX event under Open MPI.
 *
 * A request is recorded when it is submitted (offset, bytes asked, ret_bytes -1: not known yet) and again when
 * the program collects its result with aio_return (ret_bytes = bytes moved, aux = LIO_READ or LIO_WRITE). The
 * bytes move in between, on glibc's helper threads, out of sight. Both events have as parent the MPI-IO call
 * that was current at submission: a request an MPI_File_iwrite submitted and MPI_Wait collected belongs to the
 * MPI_File_iwrite. The submit-time parent is kept per aiocb address until aio_return. */
#include <aio.h>

#include "key_table.h"
#include "wrap.h"

#define P IOLOOM_POSIX
#define OP(name) IOLOOM_OP_##name
#define MAX_REQUESTS 4096 /* in flight at once; beyond it a request's aio_return gets the parent current then */

struct request {
    int64_t parent; /* the MPI-IO call current at submission, -1 none */
    int opcode;     /* LIO_READ or LIO_WRITE */
};
static struct request requests[MAX_REQUESTS];
static struct key_table request_slots = KEY_TABLE(MAX_REQUESTS);

static uint64_t request_key(const void *cb) { return (uint64_t)(uintptr_t)cb; }

/* The request submitted with cb, forgotten; 0 if it was not remembered. */
static int take(const void *cb, struct request *found) {
    long slot = key_table_find(&request_slots, request_key(cb));
    if (slot < 0) return 0;
    *found = requests[slot];
    key_table_remove(&request_slots, slot);
    return 1;
}

static void remember(const void *cb, int opcode) {
    struct request stale;
    take(cb, &stale); /* an aiocb submitted again without aio_return: the old request is over */
    long slot = key_table_reserve(&request_slots, request_key(cb));
    if (slot < 0) return;
    requests[slot] = (struct request){ioloom_link.current, opcode};
    key_table_publish(&request_slots, slot);
}

/* The row of a call on request cb: its descriptor, file, offset and bytes asked. The 64 forms have the same
 * layout on 64-bit targets (glibc makes them aliases), so both are read as struct aiocb. */
static struct ioloom_raw_event request_row(const struct ioloom_call *c, enum ioloom_op op, const struct aiocb *cb) {
    struct ioloom_raw_event row = ioloom_call_row(c, op, P);
    row.handle = cb->aio_fildes;
    row.file_id = ioloom_fd_state(cb->aio_fildes);
    row.offset = cb->aio_offset;
    row.req_bytes = (int64_t)cb->aio_nbytes;
    return row;
}

/* ---- submission: ret_bytes -1 (the bytes are known at aio_return), aux = LIO_READ or LIO_WRITE ---- */

static void record_submit(struct ioloom_call *c, enum ioloom_op op, const struct aiocb *cb, int opcode, int queued) {
    if (queued) remember(cb, opcode);
    struct ioloom_raw_event row = request_row(c, op, cb);
    row.aux = opcode;
    ioloom_call_done(c, &row);
}

#define WRAP_SUBMIT(fn, opname, cb_type, opcode)                                                              \
    IOLOOM_EXPORT int fn(cb_type *cb) {                                                                       \
        TRACED(P, fn, (cb), r != 0, record_submit(&c, OP(opname), (const struct aiocb *)cb, opcode, r == 0)); \
    }
WRAP_SUBMIT(aio_read, AIO_READ, struct aiocb, LIO_READ)
WRAP_SUBMIT(aio_read64, AIO_READ64, struct aiocb64, LIO_READ)
WRAP_SUBMIT(aio_write, AIO_WRITE, struct aiocb, LIO_WRITE)
WRAP_SUBMIT(aio_write64, AIO_WRITE64, struct aiocb64, LIO_WRITE)

/* lio_listio: one event per read or write in the list. With EIO some of them were queued: all are remembered
 * (one never collected is dropped when its aiocb is submitted again). */
static void record_list(struct ioloom_call *c, enum ioloom_op op, struct aiocb *const list[], int nent, int r) {
    int queued = r == 0 || c->err == EIO;
    int recorded = 0;
    for (int i = 0; i < nent; i++) {
        if (!list[i] || (list[i]->aio_lio_opcode != LIO_READ && list[i]->aio_lio_opcode != LIO_WRITE)) continue;
        if (recorded++) ioloom_busy++; /* each record leaves the guard once; the last one leaves it for the call */
        struct ioloom_call entry = *c;
        record_submit(&entry, op, list[i], list[i]->aio_lio_opcode, queued);
    }
    if (!recorded) {
        errno = c->err;
        ioloom_leave();
    }
}

#define WRAP_LISTIO(fn, opname, cb_type)                                                    \
    IOLOOM_EXPORT int fn(int mode, cb_type *const list[], int nent, struct sigevent *sig) { \
        TRACED(P, fn, (mode, list, nent, sig), r != 0,                                      \
               record_list(&c, OP(opname), (struct aiocb *const *)list, nent, r));          \
    }
WRAP_LISTIO(lio_listio, LIO_LISTIO, struct aiocb)
WRAP_LISTIO(lio_listio64, LIO_LISTIO64, struct aiocb64)

/* ---- completion ---- */

/* aio_return: ret_bytes = bytes moved (-1 and errno when the request failed), aux = LIO_READ or LIO_WRITE (-1
 * for a request submitted before tracing started), parent = the submit-time one. */
static void record_return(struct ioloom_call *c, enum ioloom_op op, const struct aiocb *cb, ssize_t r) {
    struct request submitted = {.parent = ioloom_link.current, .opcode = -1};
    take(cb, &submitted);
    struct ioloom_raw_event row = request_row(c, op, cb);
    row.ret_bytes = r;
    row.aux = submitted.opcode;
    row.parent = submitted.parent;
    ioloom_call_done(c, &row);
}

#define WRAP_RETURN(fn, opname, cb_type)                                                        \
    IOLOOM_EXPORT ssize_t fn(cb_type *cb) {                                                     \
        TRACED(P, fn, (cb), r < 0, record_return(&c, OP(opname), (const struct aiocb *)cb, r)); \
    }
WRAP_RETURN(aio_return, AIO_RETURN, struct aiocb)
WRAP_RETURN(aio_return64, AIO_RETURN64, struct aiocb64)

/* aio_error: the poll of a request. Programs call it in a loop until the request is done (OMPIO inside every
 * MPI_Test), so only the answer that ends the loop is recorded: ret_bytes = the request's error (0 success). */
static void record_error(struct ioloom_call *c, enum ioloom_op op, const struct aiocb *cb, int r) {
    if (r == EINPROGRESS) {
        errno = c->err;
        ioloom_leave();
        return;
    }
    struct ioloom_raw_event row = request_row(c, op, cb);
    row.ret_bytes = r;
    ioloom_call_done(c, &row);
}

#define WRAP_ERROR(fn, opname, cb_type)                                                        \
    IOLOOM_EXPORT int fn(const cb_type *cb) {                                                  \
        TRACED(P, fn, (cb), r < 0, record_error(&c, OP(opname), (const struct aiocb *)cb, r)); \
    }
WRAP_ERROR(aio_error, AIO_ERROR, struct aiocb)
WRAP_ERROR(aio_error64, AIO_ERROR64, struct aiocb64)

/* aio_suspend: waits for any of nent requests; req_bytes = nent, ret_bytes = the return value. */
#define WRAP_SUSPEND(fn, opname, cb_type)                                                                             \
    IOLOOM_EXPORT int fn(const cb_type *const list[], int nent, const struct timespec *timeout) {                     \
        TRACED(P, fn, (list, nent, timeout), r != 0, ioloom_record_file(&c, OP(opname), P, -1, -1, -1, nent, r, -1)); \
    }
WRAP_SUSPEND(aio_suspend, AIO_SUSPEND, struct aiocb)
WRAP_SUSPEND(aio_suspend64, AIO_SUSPEND64, struct aiocb64)
