/* The shape every traced wrapper shares, so each wrapper states only what differs: its arguments, what
 * counts as failure, and what it records.
 *
 *   TRACED(layer, fn, (args), failure condition on r, statement recording r);
 *
 * The call passes straight to the next definition when tracing is off for the layer or the tracer is already
 * active on this thread (its own I/O, or libc calling back in). */
#ifndef IOLOOM_WRAP_H
#define IOLOOM_WRAP_H

#include "trace_internal.h"

#define TRACED(layer, fn, args, failed_if, record)                  \
    struct ioloom_call c;                                           \
    if (!ioloom_call_start(&c, layer)) return IOLOOM_NEXT(fn) args; \
    __typeof__(IOLOOM_NEXT(fn) args) r = IOLOOM_NEXT(fn) args;      \
    ioloom_call_returned(&c, failed_if);                            \
    record;                                                         \
    return r

/* The row of a call on a file (a state from ioloom_fd_state/ioloom_path_state) through `handle`. */
IOLOOM_INLINE void ioloom_fill_row(struct ioloom_raw_event *row, const struct ioloom_call *c, enum ioloom_op op,
                                   enum ioloom_layer layer, int32_t file, int64_t handle, int64_t offset, int64_t req,
                                   int64_t ret, int64_t aux) {
    *row = ioloom_call_row(c, op, layer);
    row->handle = handle;
    row->file_id = file;
    row->offset = offset;
    row->req_bytes = req;
    row->ret_bytes = ret;
    row->aux = aux;
}

/* Records a call on a file and finishes it. The common case fills the row straight in the thread's buffer. */
IOLOOM_INLINE void ioloom_record_file(struct ioloom_call *c, enum ioloom_op op, enum ioloom_layer layer, int32_t file,
                                      int64_t handle, int64_t offset, int64_t req, int64_t ret, int64_t aux) {
    uint32_t n;
    struct ioloom_raw_event *slot, row;
    if (IOLOOM_LIKELY(file > ioloom_fast_floor) && IOLOOM_LIKELY((slot = ioloom_row_slot(&n)) != NULL)) {
        ioloom_fill_row(slot, c, op, layer, file, handle, offset, req, ret, aux);
        ioloom_row_publish(n);
        *c->errno_at = c->err;
        ioloom_leave();
        return;
    }
    ioloom_fill_row(&row, c, op, layer, file, handle, offset, req, ret, aux); /* excluded (counted), the first... */
    ioloom_call_done(c, &row);
}

/* Records a call on descriptor fd (its file from the fd table) and finishes it. */
IOLOOM_INLINE void ioloom_record_fd(struct ioloom_call *c, enum ioloom_op op, enum ioloom_layer layer, int fd,
                                    int64_t offset, int64_t req, int64_t ret, int64_t aux) {
    ioloom_record_file(c, op, layer, ioloom_fd_state(fd), fd, offset, req, ret, aux);
}

#endif
