/* The predictor of one process (process.h): model.py's ProcessModel, PairedModels, Returns and TimeModel in C,
 * the same decisions in the same order (docs/predict.md, "What each candidate says", "Places in a run",
 * "Returns", "Absolute offsets", "Inter-arrival time"). Models are found by key in one open-addressing table: a
 * symbol's sizes, a transition's offset changes and times, a transition and place's returns and absolute offset. */

#include "process.h"

#include <assert.h>
#include <stdlib.h>

enum tag { SIZE_WHOLE = 1, SIZE_PLACED, OFFSET_WHOLE, OFFSET_PLACED, RETURN, TIME }; /* 0: an empty slot */
enum { PLACE_BITS = 19, SYMBOL_BITS = 21, TAG_SHIFT = 61 }; /* a key's fields, from its lowest bit */

/* Two kinds of local model per key (PairedModels): one over all its values, one per place in the run (stored
 * apart, under the key and the place), and how often each predicted exactly. */
struct paired {
    struct pg_local *whole;
    int64_t by_whole, by_placed;
};
/* Returns and absolute offsets at a transition and place: how many accesses back, the offset seen there last (-1:
 * none yet), and how often changes, returns and that offset were right. */
struct returns {
    struct pg_local *back;
    int64_t absolute;
    int64_t by_change, by_return, by_absolute;
};
/* Inter-arrival times of a transition: halving averages of immediate and distant gaps, and which comes next. */
struct times {
    double ewma[2];
    int64_t seen[2];
    struct pg_local *kinds;
};
/* The ends of the last reads and writes on a file key since its last open or close, a ring (newest at head-1). */
struct ends {
    int32_t count, head;
    int64_t end[];
};

struct pg_process {
    struct pg_options o;
    struct pg_memory memory; /* the budget of what is made on demand: local models (the run lengths of the main
                                grammar's symbols too), returns' ends */
    struct pg_memory fixed;  /* the blocks bounded otherwise: the tables and the main grammar (its cap), no cap */
    struct pg_sequence *sequence;
    uint64_t *keys; /* the table: keys and their models */
    void **values;
    uint32_t mask;
    int32_t models;
    int64_t past_cap;
    enum pg_kind *kinds; /* per symbol; places[s] < 0: not met */
    int32_t *places;
    int64_t *positions; /* per file key: where the next access is counted from */
    struct ends **ends;
    int32_t current; /* -1: none yet */
    int64_t last_end;
};

/* ---- the table ---- */

/* A key: tag, from + 1 (0: no symbol before), to + 1, place. */
static uint64_t key_of(enum tag tag, int32_t from, int32_t to, int32_t place) {
    return (uint64_t)tag << TAG_SHIFT | (uint64_t)(from + 1) << (PLACE_BITS + SYMBOL_BITS) |
           (uint64_t)(to + 1) << PLACE_BITS | (uint64_t)place;
}

static uint32_t slot_of(const struct pg_process *p, uint64_t key) {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    uint32_t i = (uint32_t)(h >> 32) & p->mask;
    while (p->keys[i] && p->keys[i] != key) i = (i + 1) & p->mask;
    return i;
}

static void *find(const struct pg_process *p, uint64_t key) { return p->values[slot_of(p, key)]; }

/* Whether one more model may be made; counts the refusals. */
static int room(struct pg_process *p) {
    if (p->models < p->o.max_models) return 1;
    p->past_cap++;
    return 0;
}

/* Stores a model made for key (NULL, out of memory: nothing stored); returns it. */
static void *keep(struct pg_process *p, uint64_t key, void *model) {
    if (!model) return NULL;
    uint32_t i = slot_of(p, key);
    p->keys[i] = key, p->values[i] = model;
    p->models++;
    return model;
}

static enum pg_fallback fallback_of(enum tag whole_tag) { return whole_tag == SIZE_WHOLE ? PG_MEAN : PG_ZERO; }

static struct pg_local *new_local(struct pg_process *p, int32_t limit, enum pg_fallback fallback) {
    return pg_local_new(limit, fallback, 1, p->o.local_cap, &p->memory);
}

/* The model of key at place, or, not learnt yet, at the nearest place before it (model.py's _nearest). */
static void *nearest(const struct pg_process *p, enum tag tag, int32_t from, int32_t to, int32_t place) {
    for (int32_t at = place; at > 0; at--) {
        void *model = find(p, key_of(tag, from, to, at));
        if (model) return model;
    }
    return NULL;
}

/* ---- paired models (sizes: whole SIZE_WHOLE, placed SIZE_PLACED; offset changes: the OFFSET pair) ---- */

static int64_t paired_predict(const struct pg_process *p, enum tag whole_tag, int32_t from, int32_t to, int32_t place) {
    const struct paired *pair = find(p, key_of(whole_tag, from, to, 0));
    if (!pair) return 0; /* a key never seen */
    struct pg_local *placed = nearest(p, whole_tag + 1, from, to, place);
    return pg_local_predict(pair->by_whole > pair->by_placed || !placed ? pair->whole : placed);
}

static struct paired *new_paired(struct pg_process *p, enum tag whole_tag, int32_t from, int32_t to) {
    if (!room(p)) return NULL;
    struct paired *pair = pg_alloc(&p->memory, sizeof *pair);
    if (pair && !(pair->whole = new_local(p, p->o.distinct_values, fallback_of(whole_tag)))) {
        pg_free(&p->memory, pair);
        pair = NULL;
    }
    return keep(p, key_of(whole_tag, from, to, 0), pair);
}

static void paired_observe(struct pg_process *p, enum tag whole_tag, int32_t from, int32_t to, int32_t place,
                           int64_t value) {
    struct paired *pair = find(p, key_of(whole_tag, from, to, 0));
    if (!pair) {
        if (!(pair = new_paired(p, whole_tag, from, to))) return;
    } else {
        struct pg_local *placed = nearest(p, whole_tag + 1, from, to, place);
        pair->by_whole += pg_local_predict(pair->whole) == value;
        pair->by_placed += pg_local_predict(placed ? placed : pair->whole) == value;
    }
    pg_local_observe(pair->whole, value);
    uint64_t key = key_of(whole_tag + 1, from, to, place);
    struct pg_local *placed = find(p, key);
    if (!placed && room(p)) placed = keep(p, key, new_local(p, p->o.distinct_values, fallback_of(whole_tag)));
    if (placed) pg_local_observe(placed, value);
}

/* ---- returns ---- */

/* The end `back` accesses back on the file key, or -1 (none: model.py's None; offsets here are >= 0). */
static int64_t end_back(const struct pg_process *p, int32_t place_key, int64_t back) {
    const struct ends *e = p->ends[place_key];
    if (!e || back < 1 || back > e->count) return -1;
    return e->end[(e->head - back + p->o.return_depth) % p->o.return_depth];
}

static int64_t return_predict(const struct pg_process *p, int32_t key, int32_t from, int32_t to, int32_t place) {
    struct returns *r = nearest(p, RETURN, from, to, place);
    return end_back(p, key, r ? pg_local_predict(r->back) : 0);
}

static int64_t steps_back(const struct pg_process *p, int32_t key, int64_t offset) {
    const struct ends *e = p->ends[key];
    for (int64_t j = 1; e && j <= e->count; j++)
        if (end_back(p, key, j) == offset) return j;
    return 0;
}

static void remember_end(struct pg_process *p, int32_t key, int64_t end) {
    struct ends *e = p->ends[key];
    if (!e && !(e = p->ends[key] = pg_alloc(&p->memory, sizeof *e + sizeof *e->end * (size_t)p->o.return_depth)))
        return;
    e->end[e->head] = end;
    e->head = (e->head + 1) % p->o.return_depth;
    e->count += e->count < p->o.return_depth;
}

static struct returns *returns_at(struct pg_process *p, int32_t from, int32_t to, int32_t place) {
    uint64_t key = key_of(RETURN, from, to, place);
    struct returns *r = find(p, key);
    if (r || !room(p)) return r;
    if ((r = pg_alloc(&p->memory, sizeof *r)) && !(r->back = new_local(p, p->o.distinct_values, PG_ZERO))) {
        pg_free(&p->memory, r);
        r = NULL;
    }
    if (r) r->absolute = -1;
    return keep(p, key, r);
}

/* Where a read or write of known offset ended: its offset plus the bytes it moved (model.Operation.end). */
static int64_t end_of(const struct pg_operation *op) { return op->offset + (op->moved >= 0 ? op->moved : op->size); }

/* A read or write of known offset; by_change: the offset the offset changes predicted for it. */
static void return_observe(struct pg_process *p, const struct pg_operation *op, int32_t from, int32_t place,
                           int64_t by_change) {
    int64_t by_return = return_predict(p, op->place, from, op->symbol, place); /* before this place has a model */
    struct returns *r = returns_at(p, from, op->symbol, place);
    if (r) {
        r->by_change += by_change == op->offset;
        r->by_return += by_return == op->offset;
        r->by_absolute += r->absolute == op->offset; /* never before the first: offsets here are >= 0 */
        r->absolute = op->offset;
        pg_local_observe(r->back, steps_back(p, op->place, op->offset));
    }
    remember_end(p, op->place, end_of(op));
}

/* ---- inter-arrival times ---- */

static double time_predict(const struct times *t) {
    int64_t kind = pg_local_predict(t->kinds);
    return t->seen[kind] ? t->ewma[kind] : t->ewma[1 - kind];
}

static void time_observe(struct pg_process *p, int32_t from, int32_t to, int64_t gap) {
    uint64_t key = key_of(TIME, from, to, 0);
    struct times *t = find(p, key);
    if (!t && room(p)) {
        if ((t = pg_alloc(&p->memory, sizeof *t)) && !(t->kinds = new_local(p, 2, PG_ZERO)))
            pg_free(&p->memory, t), t = NULL;
        keep(p, key, t);
    }
    if (!t) return;
    int kind = gap >= p->o.distant_ns;
    t->ewma[kind] = t->seen[kind] ? (t->ewma[kind] + (double)gap) / 2 : (double)gap;
    t->seen[kind]++;
    pg_local_observe(t->kinds, kind);
}

/* ---- the process ---- */

static int data(enum pg_kind kind) { return kind == PG_READ || kind == PG_WRITE; }

/* Where an operation of symbol coming next stands in its run (1: it starts one), capped. */
static int32_t place_in_run(const struct pg_process *p, int32_t symbol) {
    int32_t place = symbol == pg_sequence_value(p->sequence) ? pg_sequence_count(p->sequence) + 1 : 1;
    return place < p->o.run_positions ? place : p->o.run_positions;
}

/* The offset by the model that has been exact most often at this transition and place (ties: the offset change,
 * then the return, then the absolute offset). */
static int64_t offset_predict(const struct pg_process *p, int32_t key, int32_t symbol, int32_t place) {
    int64_t by_change = p->positions[key] + paired_predict(p, OFFSET_WHOLE, p->current, symbol, place);
    const struct returns *r = find(p, key_of(RETURN, p->current, symbol, place));
    if (!r) return by_change;
    if (r->by_absolute > r->by_change && r->by_absolute > r->by_return) {
        assert(r->absolute >= 0); /* exact at least once: an offset was seen here */
        return r->absolute;
    }
    int64_t back = r->by_return > r->by_change ? return_predict(p, key, p->current, symbol, place) : -1;
    return back < 0 ? by_change : back;
}

static struct pg_candidate candidate(const struct pg_process *p, int32_t symbol) {
    const struct times *t = p->current >= 0 ? find(p, key_of(TIME, p->current, symbol, 0)) : NULL;
    struct pg_candidate c = {symbol, 0, -1, t ? time_predict(t) : 0.0};
    if (!data(p->kinds[symbol])) return c;
    int32_t place = place_in_run(p, symbol);
    c.size = paired_predict(p, SIZE_WHOLE, -1, symbol, place);
    c.offset = offset_predict(p, p->places[symbol], symbol, place);
    return c;
}

int32_t pg_process_predict(struct pg_process *p, struct pg_candidate *out, int32_t max) {
    int32_t symbols[PG_LIMIT_MAX];
    int32_t n = pg_sequence_predicted(p->sequence, symbols, max < PG_LIMIT_MAX ? max : PG_LIMIT_MAX);
    for (int32_t k = 0; k < n && k < max && k < PG_LIMIT_MAX; k++) out[k] = candidate(p, symbols[k]);
    return n;
}

static void observe_data(struct pg_process *p, const struct pg_operation *op) {
    int32_t place = place_in_run(p, op->symbol);
    paired_observe(p, SIZE_WHOLE, -1, op->symbol, place, op->size);
    if (op->offset < 0) return;
    int64_t base = p->positions[op->place];
    int64_t by_change = base + paired_predict(p, OFFSET_WHOLE, p->current, op->symbol, place);
    return_observe(p, op, p->current, place, by_change);
    paired_observe(p, OFFSET_WHOLE, p->current, op->symbol, place, op->offset - base);
    p->positions[op->place] = end_of(op);
}

void pg_process_observe(struct pg_process *p, const struct pg_operation *op) {
    assert(op->symbol >= 0 && op->symbol < p->o.max_symbols && op->place >= 0 && op->place < p->o.max_places);
    if (p->places[op->symbol] < 0) p->kinds[op->symbol] = op->kind, p->places[op->symbol] = op->place;
    int64_t gap = op->t_start > p->last_end ? op->t_start - p->last_end : 0;
    if (p->current >= 0) time_observe(p, p->current, op->symbol, gap);
    if (data(op->kind)) {
        observe_data(p, op);
    } else { /* open and close: the next access is counted from the file's start, its earlier ends forgotten */
        p->positions[op->place] = 0;
        if (p->ends[op->place]) p->ends[op->place]->count = p->ends[op->place]->head = 0;
    }
    pg_sequence_input(p->sequence, op->symbol);
    p->current = op->symbol, p->last_end = op->t_end;
}

/* ---- making and freeing ---- */

static uint32_t table_slots(int32_t max_models) {
    uint32_t slots = 16;
    while (slots < 2u * (uint32_t)max_models + 16) slots <<= 1; /* at most half full: probes stay short */
    return slots;
}

struct pg_process *pg_process_new(const struct pg_options *options) {
    /* every key fits its field: symbols, places in a run */
    assert(options->max_symbols < (1 << SYMBOL_BITS) - 1 && options->run_positions < (1 << PLACE_BITS));
    struct pg_process *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->o = *options, p->current = -1, p->mask = table_slots(options->max_models) - 1;
    p->memory.cap = options->memory_cap;
    struct pg_memory *m = &p->fixed;
    p->keys = pg_alloc(m, sizeof *p->keys * (p->mask + 1));
    p->values = pg_alloc(m, sizeof *p->values * (p->mask + 1));
    p->kinds = pg_alloc(m, sizeof *p->kinds * (size_t)options->max_symbols);
    p->places = pg_alloc(m, sizeof *p->places * (size_t)options->max_symbols);
    p->positions = pg_alloc(m, sizeof *p->positions * (size_t)options->max_places);
    p->ends = pg_alloc(m, sizeof *p->ends * (size_t)options->max_places);
    p->sequence = pg_sequence_new(options->grammar_cap, options->max_symbols, options->distinct_values, 1,
                                  options->local_cap, m, &p->memory);
    if (!p->sequence || !p->keys || !p->values || !p->kinds || !p->places || !p->positions || !p->ends) {
        pg_process_free(p);
        return NULL;
    }
    for (int32_t s = 0; s < options->max_symbols; s++) p->places[s] = -1;
    return p;
}

static void free_model(struct pg_process *p, enum tag tag, void *model) {
    if (tag == SIZE_WHOLE || tag == OFFSET_WHOLE) pg_local_free(((struct paired *)model)->whole);
    if (tag == SIZE_PLACED || tag == OFFSET_PLACED) pg_local_free(model);
    if (tag == RETURN) pg_local_free(((struct returns *)model)->back);
    if (tag == TIME) pg_local_free(((struct times *)model)->kinds);
    if (tag != SIZE_PLACED && tag != OFFSET_PLACED) pg_free(&p->memory, model);
}

void pg_process_free(struct pg_process *p) {
    if (!p) return;
    for (uint32_t i = 0; p->keys && p->values && i <= p->mask; i++)
        if (p->values[i]) free_model(p, (enum tag)(p->keys[i] >> 61), p->values[i]);
    for (int32_t k = 0; p->ends && k < p->o.max_places; k++) pg_free(&p->memory, p->ends[k]);
    pg_sequence_free(p->sequence);
    void *blocks[] = {p->keys, p->values, p->kinds, p->places, p->positions, p->ends};
    for (size_t b = 0; b < sizeof blocks / sizeof *blocks; b++) pg_free(&p->fixed, blocks[b]);
    assert(p->memory.used == 0 && p->fixed.used == 0); /* every block was given back */
    free(p);
}

const struct pg_sequence *pg_process_sequence(const struct pg_process *p) { return p->sequence; }
int64_t pg_process_models_past_cap(const struct pg_process *p) { return p->past_cap; }
const struct pg_memory *pg_process_memory(const struct pg_process *p) { return &p->memory; }
const struct pg_memory *pg_process_fixed_memory(const struct pg_process *p) { return &p->fixed; }
