/* Sequitur with predictors, and the run-folding sequence on top of it: the C twin of python/ioloom/predict/
 * grammar.py and model.py's Sequence and LocalModel (docs/predict.md, "The grammar", "Predictors", "Runs",
 * "What each candidate says"). Both must predict the same sets on the shared vectors (tests/vectors/predict).
 *
 * A grammar holds at most `cap` symbols in its rule bodies (nodes come from one array that grows); past it, it
 * stops learning and counts the inputs it did not learn (past_cap). Every block comes from a memory budget
 * (memory.h; NULL: none) shared by all the grammars of a model: an array that cannot grow leaves the input
 * unlearnt (past_cap), a rewrite that cannot finish stops the grammar for good (pg_grammar_stopped). No system
 * call: meant to run inside the tracer. */
#ifndef IOLOOM_PREDICT_GRAMMAR_H
#define IOLOOM_PREDICT_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "memory.h"

struct pg_grammar;

/* A grammar over terminals 0..max_symbol-1 holding at most cap symbols; NULL if out of memory. */
struct pg_grammar *pg_grammar_new(int32_t cap, int32_t max_symbol, struct pg_memory *memory);
void pg_grammar_free(struct pg_grammar *g);
void pg_grammar_input(struct pg_grammar *g, int32_t symbol);
/* The predicted symbols, ascending, at most max of them written to out; returns how many there are. */
int32_t pg_grammar_predicted(struct pg_grammar *g, int32_t *out, int32_t max);
int32_t pg_grammar_size(const struct pg_grammar *g);
int64_t pg_grammar_past_cap(const struct pg_grammar *g);
/* The rules as a folded trace's grammar section stores them (docs/trace-format.md, "Folded traces"): their count,
 * then per rule its length and items (2 x terminal, or 2 x rule number + 1), rule 0 being S and the others
 * numbered in order of making, as python/ioloom/trace/folded.py's fold(). The first max values are written to
 * out; returns how many there are (-1: the grammar stopped, its rules are gone). */
int64_t pg_grammar_rules(struct pg_grammar *g, int64_t *out, int64_t max);
/* Whether it stopped learning for want of memory (it then predicts nothing). */
int pg_grammar_stopped(const struct pg_grammar *g);

enum pg_fallback { PG_MEAN, PG_ZERO, PG_MAX };
enum { PG_LIMIT_MAX = 64 }; /* the largest number of distinct values a local model may keep */

/* A local model (LocalModel): one value, a local grammar over the distinct values, then its fallback. */
struct pg_local;
struct pg_local *pg_local_new(int32_t limit, enum pg_fallback fallback, int runs, int32_t cap,
                              struct pg_memory *memory);
void pg_local_free(struct pg_local *m);
void pg_local_observe(struct pg_local *m, int64_t value);
int64_t pg_local_predict(struct pg_local *m);

/* A sequence (Sequence): the grammar over runs, with a run-length model per value; its own blocks come from
 * memory, its run-length models' from lengths_memory. */
struct pg_sequence;
struct pg_sequence *pg_sequence_new(int32_t cap, int32_t max_symbol, int32_t limit, int runs, int32_t local_cap,
                                    struct pg_memory *memory, struct pg_memory *lengths_memory);
void pg_sequence_free(struct pg_sequence *s);
void pg_sequence_input(struct pg_sequence *s, int32_t symbol);
int32_t pg_sequence_predicted(struct pg_sequence *s, int32_t *out, int32_t max);
const struct pg_grammar *pg_sequence_grammar(const struct pg_sequence *s);
/* The value of the current run (-1: none yet) and how long it is so far. */
int32_t pg_sequence_value(const struct pg_sequence *s);
int32_t pg_sequence_count(const struct pg_sequence *s);

#endif
