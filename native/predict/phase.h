/* The phase part of the prediction interface in C (phase.c): python/ioloom/predict/interface.py's Phases, the same
 * answers on the shared vectors (tests/vectors/predict/phases.txt; docs/predict.md, "Prediction interface"). Told
 * each operation's kind, size and times, asked the current I/O phase with the process model's candidates for the
 * next operation (process.h: pg_process_predict is the interface's "next"). No system call: meant for the tracer,
 * whose coordination client asks it (ioloom_predict_phase, native/trace/predict.c). */
#ifndef IOLOOM_PREDICT_PHASE_H
#define IOLOOM_PREDICT_PHASE_H

#include <stdint.h>

#include "process.h"

/* interface.Phase; -1 stands for None (unknown). Times are ns on the clock of the operations given. */
struct pg_phase {
    int64_t done;      /* operations of the phase so far */
    int64_t remaining; /* operations predicted to remain */
    int64_t end_ns;    /* its predicted end */
    int64_t length;    /* its length in operations, predicted when it began */
    int64_t written;   /* bytes it wrote so far */
    int64_t to_write;  /* bytes it writes in all, predicted when it began */
};

struct pg_phases;
/* Phases split at gaps of at least gap_ns; their lengths and bytes learnt by local models of `limit` distinct
 * values and local grammars of local_cap symbols, allocated from memory (NULL: counted nowhere). NULL if refused. */
struct pg_phases *pg_phases_new(int32_t limit, int32_t local_cap, int64_t gap_ns, struct pg_memory *memory);
void pg_phases_free(struct pg_phases *ph);
/* One operation: its kind, the bytes asked, its start and end. */
void pg_phases_observe(struct pg_phases *ph, enum pg_kind kind, int64_t size, int64_t t_start, int64_t t_end);
/* The current phase given the model's n candidates c for the next operation (all of them). Asked at now_ns
 * (-1: not asked) at least gap_ns after the last operation's end: the phase an operation starting then begins
 * (done 0), the current one ended there and learnt. */
void pg_phases_now(struct pg_phases *ph, const struct pg_candidate *c, int32_t n, int64_t now_ns, struct pg_phase *out);
/* The process was held ns (waiting for a coordinator) before its next operation: that time is no gap and no
 * step of the phase. */
void pg_phases_hold(struct pg_phases *ph, int64_t ns);
/* From now on a gap of at least gap_ns starts a new phase. */
void pg_phases_set_gap(struct pg_phases *ph, int64_t gap_ns);
/* x rounded to the nearest integer, halves to even (Python's round(); no libm in the tracer). */
int64_t pg_round_half_even(double x);

/* The tracer's phase interface (native/trace/predict.c, exported by libioloom-trace.so; the coordination client,
 * preloaded before it, finds it with dlsym): with IOLOOM_PREDICT=1, phases are split at gap_ns from now on, the
 * process was held held_ns before its next call (pg_phases_hold), and, out not NULL, this process's phase at
 * now_ns (CLOCK_MONOTONIC; pg_phases_now); 1 when done, 0 when the predictor is off. */
int ioloom_predict_phase(int64_t now_ns, int64_t gap_ns, int64_t held_ns, struct pg_phase *out);

#endif
