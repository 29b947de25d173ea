/* The predictor inside the tracer (predict.c): the recording path's hook. Off unless IOLOOM_STACKS or
 * IOLOOM_PREDICT asks for it; off, it costs the recording path nothing (ioloom_fast_floor). */
#ifndef IOLOOM_TRACE_PREDICT_H
#define IOLOOM_TRACE_PREDICT_H

#include "trace_format.h"

struct ioloom_call;

/* Set once at start when call-stack symbols are asked for. */
extern int ioloom_predict_on;
/* The file states (ioloom_fd_state) above which a call is recorded straight into its thread's buffer: -2 (all but
 * excluded files); INT32_MAX when symbols are on, so that every call goes through ioloom_call_done (the test the
 * fast path makes anyway: symbols cost it nothing when off). */
extern int32_t ioloom_fast_floor;
/* A POSIX or stdio call about to be recorded (ioloom_call_done, which every such call goes through when symbols
 * are on): if the predictor learns it (an open, close, read or write on a file), its symbol, and with
 * IOLOOM_PREDICT what the model predicted for it, go to the side stream, and the model learns it. */
void ioloom_predict_row(const struct ioloom_call *c, const struct ioloom_raw_event *row);
/* Reads IOLOOM_STACKS, IOLOOM_PREDICT and IOLOOM_PREDICT_CAP (when the stream opens). */
void ioloom_predict_start(void);
/* Writes the pending symbols and calls, then the counts (every ioloom_flush_all). */
void ioloom_predict_flush(void);
/* In the child after fork: a side stream and a model of its own. */
void ioloom_predict_after_fork(void);

#endif
