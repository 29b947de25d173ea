/* FOLDED chunks (docs/trace-format.md, "FOLDED chunks"): a thread's buffer of events written as a table of
 * shapes (every field but the times), the runs of shapes folded by the predictor's Sequitur grammar
 * (native/predict/grammar.h) and the times as residuals from the previous event of the same shape, optionally at a
 * declared resolution (the quantum). The tracer writes them under IOLOOM_FOLD=1 (writer.c); the reader unfolds each
 * into the EVENTS chunk of the same events (ioloom_unfold_events, built into libioloom-trace-decode, and
 * python/ioloom/trace/folded_chunk.py when it is not built). Pure: memory in, memory out, no system call. */
#ifndef IOLOOM_FOLD_H
#define IOLOOM_FOLD_H

#include <stddef.h>
#include <stdint.h>

#include "trace_format.h"

#define IOLOOM_FOLD_VERSION 1
#define IOLOOM_FOLD_SHAPE_FIELDS 13
/* A time column's mode beside the EVENTS chunk's (trace_format.h): values of -1, 0 and 1 in 2 bits each. */
#define IOLOOM_FOLD_COL_SMALL 3
#define IOLOOM_FOLD_MAX_QUANTUM 1000000000u /* a second: a coarser resolution would say nothing of a call */

/* Why a buffer was not folded (it is then written as EVENTS chunks; the tracer counts each reason). */
enum ioloom_fold_outcome {
    IOLOOM_FOLDED,
    IOLOOM_FOLD_NO_MEMORY,   /* the grammar's budget refused a block, or it stopped */
    IOLOOM_FOLD_NOT_SMALLER, /* the chunk would not be smaller than the caller's limit (its EVENTS chunks) */
    IOLOOM_FOLD_OUTCOMES
};

/* The work area of one folding: tables for up to `capacity` rows, and the grammar's memory budget. */
struct ioloom_fold_area;
struct ioloom_fold_area *ioloom_fold_area_new(uint32_t capacity, size_t grammar_budget);
/* The bytes an area of `capacity` rows takes, the grammar's budget aside. */
size_t ioloom_fold_area_bytes(uint32_t capacity);
/* The largest a FOLDED chunk of n rows can be (header included). */
size_t ioloom_fold_bound(size_t n);

/* Folds rows ev[0, n) of thread `tid` into a sealed FOLDED chunk at out (ioloom_fold_bound(n) bytes), times (tick
 * times converted by `clock`) in units of the clock's quantum, rounded down (NULL: every time is ns already, exact),
 * when it is smaller than `smaller_than` bytes (header included). Sets *size to its bytes and returns IOLOOM_FOLDED,
 * or returns why it could not (no chunk sealed). The grammar is not built when the chunk's other parts and the
 * fewest bytes its rules can take already reach `smaller_than`. */
enum ioloom_fold_outcome ioloom_fold_events(struct ioloom_fold_area *a, uint8_t *out, size_t *size, uint32_t tid,
                                            const struct ioloom_raw_event *ev, uint32_t n,
                                            const struct ioloom_tick_clock *clock, size_t smaller_than);

/* What is wrong with a FOLDED payload (ioloom_unfold_events' negative results). */
enum ioloom_unfold_problem {
    IOLOOM_UNFOLD_HEADER = 1, /* version, thread id, event count, quantum or t_base malformed or out of range */
    IOLOOM_UNFOLD_SHAPES,     /* the shape table is malformed or a field is out of its range */
    IOLOOM_UNFOLD_TOKENS,     /* the token table is malformed or names a shape that is not there */
    IOLOOM_UNFOLD_GRAMMAR,    /* the rules are malformed, refer to what is not there, or do not give n events */
    IOLOOM_UNFOLD_TIMES,      /* a time column is malformed or does not hold n values */
    IOLOOM_UNFOLD_LENGTH,     /* bytes after the last column */
    IOLOOM_UNFOLD_MEMORY,     /* the reader could not allocate its work area */
};

/* The number of events a FOLDED payload says it holds (0 when its header is malformed): the reader sizes out with
 * ioloom_events_bound() of it. */
uint32_t ioloom_folded_events(const uint8_t *payload, size_t len);
/* Unfolds the FOLDED payload [payload, payload + len) into a sealed EVENTS chunk (header and payload; its checksum
 * not set) of the same events at out, which holds `room` bytes (ioloom_events_bound of its events). Returns the
 * chunk's size, or minus an ioloom_unfold_problem. */
int64_t ioloom_unfold_events(const uint8_t *payload, size_t len, uint8_t *out, size_t room);

#endif
