/* The predictor of one process in C (process.c): model.py's ProcessModel, the grammar of its symbols with a size
 * model per symbol, an offset model and an inter-arrival time model per transition (docs/predict.md, "What each
 * candidate says"). Both must give the same candidates on the shared vectors (tests/vectors/predict/process.txt).
 * Meant for the tracer: no system call; models are allocated when their key is first met, at most max_models of
 * them (past it a key is left unlearnt, as one never seen, and counted), all within one memory budget (memory.h:
 * a model it refuses is left unlearnt too, a local grammar it stops predicts nothing; both counted). The tables
 * and the main grammar, bounded by max_symbols, max_places, max_models and grammar_cap, are counted apart. */
#ifndef IOLOOM_PREDICT_PROCESS_H
#define IOLOOM_PREDICT_PROCESS_H

#include <stdint.h>

#include "grammar.h"

enum pg_kind { PG_OPEN, PG_CLOSE, PG_READ, PG_WRITE };

/* model.Options, and the tracer's bound on local models. */
struct pg_options {
    int32_t grammar_cap, distinct_values, local_cap, run_positions, return_depth;
    int64_t distant_ns;
    int32_t max_symbols; /* symbols 0..max_symbols-1 */
    int32_t max_places;  /* file keys 0..max_places-1 */
    int32_t max_models;  /* size, offset, return and time models together */
    size_t memory_cap;   /* bytes of all the local models together (memory.h); 0: no cap */
};

/* One operation (model.Operation): `place` numbers its file key; offset -1: unknown; size: bytes asked; moved: the
 * bytes a read or write moved (its return), -1: unknown (taken as size). */
struct pg_operation {
    int32_t symbol, place;
    enum pg_kind kind;
    int64_t offset, size, t_start, t_end, moved;
};

/* One predicted next operation (model.Candidate): size 0 and offset -1 for an open or a close; gap_ns after the
 * current operation's end. */
struct pg_candidate {
    int32_t symbol;
    int64_t size, offset;
    double gap_ns;
};

struct pg_process;
struct pg_process *pg_process_new(const struct pg_options *options);
void pg_process_free(struct pg_process *p);
/* The candidates for the next operation, by ascending symbol, at most max written; returns how many there are. */
int32_t pg_process_predict(struct pg_process *p, struct pg_candidate *out, int32_t max);
/* Learns the operation that came. A symbol's kind and place are those of its first operation. */
void pg_process_observe(struct pg_process *p, const struct pg_operation *op);
const struct pg_sequence *pg_process_sequence(const struct pg_process *p);
/* Keys left unlearnt because max_models were taken. */
int64_t pg_process_models_past_cap(const struct pg_process *p);
/* The local models' memory budget: cap, bytes used and at most, allocations refused, grammars stopped. */
const struct pg_memory *pg_process_memory(const struct pg_process *p);
/* The same counts for the tables and the main grammar (no cap: only malloc refuses). */
const struct pg_memory *pg_process_fixed_memory(const struct pg_process *p);

#endif
