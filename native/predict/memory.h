/* One memory budget for a process model's grammars and local models (docs/predict.md, "Memory"): every block
 * they allocate is counted against one cap, so the model as a whole stays under it however many local models
 * it makes. A block refused (past the cap, or malloc failed) is counted; its caller then learns less, never
 * aborts: a model not made is left unlearnt, a grammar that cannot grow stops learning. */
#ifndef IOLOOM_PREDICT_MEMORY_H
#define IOLOOM_PREDICT_MEMORY_H

#include <stddef.h>
#include <stdint.h>

struct pg_memory {
    size_t cap;      /* bytes the blocks may take together; 0: no cap */
    size_t used;     /* bytes the live blocks take (their headers included) */
    size_t peak;     /* the most `used` has been */
    int64_t refused; /* allocations refused: past the cap or out of memory */
    int64_t stopped; /* grammars that stopped learning because a rewrite could not get a node */
};

/* A zeroed block of `bytes` counted against memory (NULL: counted nowhere); NULL if refused. */
void *pg_alloc(struct pg_memory *memory, size_t bytes);
/* block (NULL: a new one) resized to `bytes`, its contents kept as realloc does; NULL if refused (block kept). */
void *pg_resize(struct pg_memory *memory, void *block, size_t bytes);
void pg_free(struct pg_memory *memory, void *block);

#endif
