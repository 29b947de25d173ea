/* FOLDED chunks (fold.h, docs/trace-format.md "FOLDED chunks"): the tracer's folding of a buffer of events and the
 * reader's unfolding of it. A loop's events take a few shapes; the runs of shapes (tokens) repeat as the loop
 * does, and Sequitur folds the repeats into rules: what is left per event is its two times, stored as their change
 * from the previous event of the same shape, which a regular loop at a coarse enough quantum makes runs of 0. */
#include "fold.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "varint.h"

/* The fields of a shape, in the order they are stored. */
enum {
    F_OP,
    F_LAYER,
    F_FILE, /* the file's place among the last FOLD_RECENT files (0: the previous event's), or past them a new file */
    F_HANDLE,
    F_ABSENT, /* a bit per field that is -1: A_OFFSET, A_CALL, A_PARENT, A_COLL */
    F_OFFSET, /* the change from the previous offset that is not -1 of the same file and operation (last_of) */
    F_REQ,
    F_RET_MINUS_REQ,
    F_ERRNO,
    F_AUX,
    F_CALL,   /* the change from the previous call id that is not -1 (from 0) */
    F_PARENT, /* the latest call id that is not -1, up to this event (0 before any), minus the parent */
    F_COLL,   /* the change from the previous coll_seq that is not -1 of the same file and operation */
};
_Static_assert(F_COLL + 1 == IOLOOM_FOLD_SHAPE_FIELDS, "every field");

enum { A_OFFSET = 1, A_CALL = 2, A_PARENT = 4, A_COLL = 8, A_FILE = 16, A_ALL = 31 };
/* Files are named by their place among the last FOLD_RECENT files events named, most recent first: a loop that
 * opens a new file each step and goes back to an old one between (a log) names them by the same places every
 * step. A file not among them is named FOLD_RECENT + ioloom_zigzag(its id minus the id after the highest so far). */
#define FOLD_RECENT 8

/* The previous offset and coll_seq (not -1) of each (file, operation) of a chunk, that its next event's go on from
 * (a loop appending to a log, opening it each step, then writes at offsets that count up and opens at 0: each
 * operation's offset changes by the same amount every step). At most FOLD_KEYS pairs; past them a pair goes on
 * from 0 (the same in the writer and the reader). */
#define FOLD_KEYS 384
#define FOLD_KEY_SLOTS 512
struct last_values {
    uint64_t key[FOLD_KEY_SLOTS]; /* 0: free, else KEY(file, op) */
    uint64_t offset[FOLD_KEY_SLOTS], coll[FOLD_KEY_SLOTS];
    int used;
};
#define KEY(file, op) ((uint64_t)1 << 63 | (uint64_t)(uint32_t)(file) << 16 | (op))

/* The values the fields that are differences go on from, in row order. */
struct fold_state {
    uint64_t call;
    int32_t recent[FOLD_RECENT]; /* -1: none yet */
    int32_t next_file;           /* the highest file id so far + 1 (0 before any) */
    struct last_values last;
    uint64_t none[2]; /* offset and coll_seq of a pair past FOLD_KEYS: always 0 */
};

/* Where the previous offset and coll_seq of (file, op) are (*st->none, zeroed, past FOLD_KEYS). */
static uint64_t *last_of(struct fold_state *st, int32_t file, uint16_t op, uint64_t **coll) {
    struct last_values *l = &st->last;
    uint64_t key = KEY(file, op);
    uint32_t at = (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 55); /* 9 bits: FOLD_KEY_SLOTS */
    while (l->key[at] && l->key[at] != key) at = (at + 1) % FOLD_KEY_SLOTS;
    if (!l->key[at] && l->used < FOLD_KEYS) {
        l->key[at] = key;
        l->used++;
    }
    if (l->key[at] != key) {
        st->none[0] = st->none[1] = 0;
        *coll = &st->none[1];
        return &st->none[0];
    }
    *coll = &l->coll[at];
    return &l->offset[at];
}

static void state_start(struct fold_state *st) {
    memset(st, 0, sizeof *st);
    for (int k = 0; k < FOLD_RECENT; k++) st->recent[k] = -1;
}

/* file_id moved to the front of the recent files (the last one leaving when it was not among them); its place
 * before (FOLD_RECENT: not there). */
static int recent_place(struct fold_state *st, int32_t file_id) {
    int place = 0;
    while (place < FOLD_RECENT && st->recent[place] != file_id) place++;
    for (int k = place < FOLD_RECENT ? place : FOLD_RECENT - 1; k > 0; k--) st->recent[k] = st->recent[k - 1];
    st->recent[0] = file_id;
    if (file_id >= st->next_file) st->next_file = file_id + 1;
    return place;
}

/* The file field of file_id (not -1), going on from *st. */
static int64_t file_field(struct fold_state *st, int32_t file_id) {
    int64_t next = st->next_file;
    int place = recent_place(st, file_id);
    return place < FOLD_RECENT ? place : FOLD_RECENT + (int64_t)ioloom_zigzag((int64_t)file_id - next);
}

/* The file id of file field f (fold.c's file_field undone), going on from *st; -1 when it names no file. */
static int64_t file_of(struct fold_state *st, int64_t f) {
    int64_t file_id = f < FOLD_RECENT ? st->recent[f] : st->next_file + unzigzag((uint64_t)(f - FOLD_RECENT));
    if (file_id < 0 || file_id >= 1 << 24) return -1;
    recent_place(st, (int32_t)file_id);
    return file_id;
}

struct ioloom_fold_area {
    uint32_t capacity;
    uint32_t mask;       /* of slots: a power of two, at least twice the capacity */
    uint32_t *slots;     /* open addressing: 0 free, else a shape's (token's) number + 1 */
    uint32_t *row_shape; /* each row's shape */
    int64_t *shapes;     /* the distinct shapes, IOLOOM_FOLD_SHAPE_FIELDS values each */
    uint32_t *tokens;    /* the distinct tokens: shape, run length */
    int32_t *sequence;   /* the token of each run, in order */
    int64_t *last;       /* per shape: the gap and duration of its previous row */
    int64_t *gaps, *durations;
    int64_t *rules;
    struct pg_memory memory;
};

static size_t slot_count(uint32_t capacity) {
    size_t slots = 16;
    while (slots < 2 * (size_t)capacity) slots *= 2;
    return slots;
}

static size_t rules_room(uint32_t capacity) { return 3 * (size_t)capacity + 8; }

size_t ioloom_fold_area_bytes(uint32_t capacity) {
    size_t c = capacity;
    return sizeof(struct ioloom_fold_area) + slot_count(capacity) * 4 + c * (4 + IOLOOM_FOLD_SHAPE_FIELDS * 8) +
           c * (8 + 4 + 16 + 16) + rules_room(capacity) * 8;
}

struct ioloom_fold_area *ioloom_fold_area_new(uint32_t capacity, size_t grammar_budget) {
    struct ioloom_fold_area *a = calloc(1, ioloom_fold_area_bytes(capacity));
    if (!a) return NULL;
    size_t c = capacity, slots = slot_count(capacity);
    a->capacity = capacity;
    a->mask = (uint32_t)(slots - 1);
    a->shapes = (int64_t *)(a + 1);
    a->last = a->shapes + c * IOLOOM_FOLD_SHAPE_FIELDS;
    a->gaps = a->last + 2 * c;
    a->durations = a->gaps + c;
    a->rules = a->durations + c;
    a->slots = (uint32_t *)(a->rules + rules_room(capacity));
    a->row_shape = a->slots + slots;
    a->tokens = a->row_shape + c;
    a->sequence = (int32_t *)(a->tokens + 2 * c);
    a->memory.cap = grammar_budget;
    return a;
}

size_t ioloom_fold_bound(size_t n) {
    /* header; shapes (13 varints each); tokens (2 each); rules (at most 3 per token); two time columns */
    return IOLOOM_CHUNK_HEADER_BYTES + 6 * 10 + n * (IOLOOM_FOLD_SHAPE_FIELDS + 2 + 3) * 10 + 2 * (1 + 10 + 10 * n);
}

/* ---- folding ---- */

/* The shape of row e into s, going on from *st. */
static void shape_of(const struct ioloom_raw_event *e, struct fold_state *st, int64_t *s) {
    int64_t absent = (e->offset == -1) * A_OFFSET | (e->call_id == -1) * A_CALL | (e->parent == -1) * A_PARENT |
                     (e->coll_seq == -1) * A_COLL | (e->file_id == -1) * A_FILE;
    s[F_OP] = e->op;
    s[F_LAYER] = e->layer;
    s[F_FILE] = absent & A_FILE ? 0 : file_field(st, e->file_id);
    uint64_t *coll, *offset = last_of(st, e->file_id, e->op, &coll);
    s[F_HANDLE] = e->handle;
    s[F_ABSENT] = absent;
    s[F_OFFSET] = absent & A_OFFSET ? 0 : (int64_t)((uint64_t)e->offset - *offset);
    s[F_REQ] = e->req_bytes;
    s[F_RET_MINUS_REQ] = (int64_t)((uint64_t)e->ret_bytes - (uint64_t)e->req_bytes);
    s[F_ERRNO] = e->err;
    s[F_AUX] = e->aux;
    s[F_CALL] = absent & A_CALL ? 0 : (int64_t)((uint64_t)e->call_id - st->call);
    if (!(absent & A_OFFSET)) *offset = (uint64_t)e->offset;
    if (!(absent & A_CALL)) st->call = (uint64_t)e->call_id;
    s[F_PARENT] = absent & A_PARENT ? 0 : (int64_t)(st->call - (uint64_t)e->parent);
    s[F_COLL] = absent & A_COLL ? 0 : (int64_t)((uint64_t)e->coll_seq - *coll);
    if (!(absent & A_COLL)) *coll = (uint64_t)e->coll_seq;
}

static uint32_t hash_values(const int64_t *v, int count) {
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (int k = 0; k < count; k++) h = (h ^ (uint64_t)v[k]) * 0xFF51AFD7ED558CCDull;
    return (uint32_t)(h >> 32);
}

/* The number of the shape s (added to the table if new; *count shapes so far). */
static uint32_t shape_number(struct ioloom_fold_area *a, const int64_t *s, uint32_t *count) {
    const size_t bytes = IOLOOM_FOLD_SHAPE_FIELDS * sizeof(int64_t);
    for (uint32_t at = hash_values(s, IOLOOM_FOLD_SHAPE_FIELDS) & a->mask;; at = (at + 1) & a->mask) {
        uint32_t id = a->slots[at];
        if (!id) {
            memcpy(a->shapes + (size_t)*count * IOLOOM_FOLD_SHAPE_FIELDS, s, bytes);
            a->slots[at] = ++*count;
            return *count - 1;
        }
        if (!memcmp(a->shapes + (size_t)(id - 1) * IOLOOM_FOLD_SHAPE_FIELDS, s, bytes)) return id - 1;
    }
}

/* The number of the token (shape, run) (added if new; *count tokens so far). */
static uint32_t token_number(struct ioloom_fold_area *a, uint32_t shape, uint32_t run, uint32_t *count) {
    int64_t key[2] = {shape, run};
    for (uint32_t at = hash_values(key, 2) & a->mask;; at = (at + 1) & a->mask) {
        uint32_t id = a->slots[at];
        if (!id) {
            a->tokens[2 * *count] = shape;
            a->tokens[2 * *count + 1] = run;
            a->slots[at] = ++*count;
            return *count - 1;
        }
        if (a->tokens[2 * (id - 1)] == shape && a->tokens[2 * (id - 1) + 1] == run) return id - 1;
    }
}

/* Every row's shape (a->row_shape); returns the number of shapes. */
static uint32_t number_shapes(struct ioloom_fold_area *a, const struct ioloom_raw_event *ev, uint32_t n) {
    struct fold_state st;
    state_start(&st);
    uint32_t shapes = 0;
    int64_t s[IOLOOM_FOLD_SHAPE_FIELDS];
    memset(a->slots, 0, ((size_t)a->mask + 1) * sizeof *a->slots);
    for (uint32_t i = 0; i < n; i++) {
        shape_of(&ev[i], &st, s);
        a->row_shape[i] = shape_number(a, s, &shapes);
    }
    return shapes;
}

/* The runs of shapes as tokens (a->sequence); returns the number of runs, the distinct tokens in *distinct. */
static uint32_t number_tokens(struct ioloom_fold_area *a, uint32_t n, uint32_t *distinct) {
    uint32_t runs = 0, start = 0;
    *distinct = 0;
    memset(a->slots, 0, ((size_t)a->mask + 1) * sizeof *a->slots);
    for (uint32_t i = 1; i <= n; i++) {
        if (i < n && a->row_shape[i] == a->row_shape[start]) continue;
        a->sequence[runs++] = (int32_t)token_number(a, a->row_shape[start], i - start, distinct);
        start = i;
    }
    return runs;
}

/* The rules when no token repeats (every run a new token, numbered in order): Sequitur makes none (no digram can
 * repeat), so S is the sequence: written without the grammar, which would grow a node per token for nothing. */
static int64_t rules_without_repeats(struct ioloom_fold_area *a, uint32_t runs) {
    a->rules[0] = 1;
    a->rules[1] = runs;
    for (uint32_t k = 0; k < runs; k++) a->rules[2 + k] = 2 * (int64_t)a->sequence[k];
    return 2 + (int64_t)runs;
}

/* The rules of Sequitur over the token sequence into a->rules; returns their values' count, or -1 when the
 * grammar's budget ran out. */
static int64_t fold_rules(struct ioloom_fold_area *a, uint32_t runs, uint32_t distinct) {
    if (distinct == runs) return rules_without_repeats(a, runs);
    /* the grammar holds at most as many symbols as it was given: the cap is never reached */
    struct pg_grammar *g = pg_grammar_new((int32_t)runs + 64, (int32_t)distinct, &a->memory);
    if (!g) return -1;
    for (uint32_t k = 0; k < runs; k++) pg_grammar_input(g, a->sequence[k]);
    int64_t max = (int64_t)rules_room(a->capacity);
    int64_t count = pg_grammar_stopped(g) || pg_grammar_past_cap(g) ? -1 : pg_grammar_rules(g, a->rules, max);
    pg_grammar_free(g);
    return count > max ? -1 : count;
}

/* Each row's gap and duration in quanta, as its change from those of the previous row of its shape. */
static void time_residuals(struct ioloom_fold_area *a, const struct ioloom_raw_event *ev, uint32_t n, uint32_t shapes,
                           const struct ioloom_tick_clock *clock) {
    memset(a->last, 0, 2 * (size_t)shapes * sizeof *a->last);
    const uint64_t quantum = ioloom_quantum(clock);
    uint64_t previous_end = ioloom_row_ns(clock, &ev[0], ev[0].t_start) / quantum;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t start = ioloom_row_ns(clock, &ev[i], ev[i].t_start) / quantum,
                 end = ioloom_row_ns(clock, &ev[i], ev[i].t_end) / quantum;
        int64_t gap = (int64_t)(start - previous_end), duration = (int64_t)(end - start);
        int64_t *last = a->last + 2 * (size_t)a->row_shape[i];
        a->gaps[i] = (int64_t)((uint64_t)gap - (uint64_t)last[0]);
        a->durations[i] = (int64_t)((uint64_t)duration - (uint64_t)last[1]);
        last[0] = gap;
        last[1] = duration;
        previous_end = end;
    }
}

/* The bytes v[0, n) takes in the runs mode (the count, the values, the lengths); its runs in *runs. */
static size_t runs_bytes(const int64_t *v, size_t n, size_t *runs) {
    size_t bytes = 0, start = 0;
    *runs = 0;
    for (size_t i = 1; i <= n; i++) {
        if (i < n && v[i] == v[start]) continue;
        bytes += ioloom_varint_size(ioloom_zigzag(v[start])) + ioloom_varint_size(i - start);
        ++*runs;
        start = i;
    }
    return bytes + ioloom_varint_size(*runs);
}

static size_t plain_bytes(const int64_t *v, size_t n) {
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) bytes += ioloom_varint_size(ioloom_zigzag(v[i]));
    return bytes;
}

/* The 2-bit code of a value in the SMALL mode: 0, 1, -1, or ESCAPE (its zigzag varint follows the codes). */
enum { ESCAPE = 3 };
static unsigned small_code(int64_t v) { return v == 0 ? 0 : v == 1 ? 1 : v == -1 ? 2 : ESCAPE; }

/* The bytes v[0, n) takes in the SMALL mode: the codes, four to a byte, then the escaped values. */
static size_t small_bytes(const int64_t *v, size_t n) {
    size_t bytes = (n + 3) / 4;
    for (size_t i = 0; i < n; i++)
        if (small_code(v[i]) == ESCAPE) bytes += ioloom_varint_size(ioloom_zigzag(v[i]));
    return bytes;
}

static uint8_t *put_small(uint8_t *p, const int64_t *v, size_t n, size_t bytes) {
    *p++ = IOLOOM_FOLD_COL_SMALL;
    p = ioloom_put_varint(p, bytes);
    memset(p, 0, (n + 3) / 4);
    for (size_t i = 0; i < n; i++) p[i / 4] |= (uint8_t)(small_code(v[i]) << (2 * (i % 4)));
    p += (n + 3) / 4;
    for (size_t i = 0; i < n; i++)
        if (small_code(v[i]) == ESCAPE) p = ioloom_put_varint(p, ioloom_zigzag(v[i]));
    return p;
}

/* How a time column is written: its mode (the smallest of constant, runs, plain and small) and body's bytes. */
struct column_plan {
    uint8_t mode;
    size_t body, runs;
};

static struct column_plan plan_column(const int64_t *v, size_t n) {
    size_t runs, run_bytes = runs_bytes(v, n, &runs), plain = plain_bytes(v, n), small = small_bytes(v, n);
    if (runs > 1 && small < plain && small < run_bytes) return (struct column_plan){IOLOOM_FOLD_COL_SMALL, small, runs};
    if (runs == 1) return (struct column_plan){IOLOOM_COL_CONST, ioloom_varint_size(ioloom_zigzag(v[0])), runs};
    if (run_bytes < plain) return (struct column_plan){IOLOOM_COL_RUNS, run_bytes, runs};
    return (struct column_plan){IOLOOM_COL_VARINT, plain, runs};
}

/* The bytes of a column written by its plan: mode, body length, body. */
static size_t column_bytes(struct column_plan c) { return 1 + ioloom_varint_size(c.body) + c.body; }

/* Appends v[0, n) as a time column by its plan. */
static uint8_t *put_values(uint8_t *p, const int64_t *v, size_t n, struct column_plan c) {
    if (c.mode == IOLOOM_FOLD_COL_SMALL) return put_small(p, v, n, c.body);
    if (c.mode == IOLOOM_COL_CONST) return ioloom_put_const_column(p, v[0]);
    if (c.mode == IOLOOM_COL_RUNS) return ioloom_put_runs(p, v, n, c.runs, c.body);
    *p++ = IOLOOM_COL_VARINT;
    p = ioloom_put_varint(p, c.body);
    for (size_t i = 0; i < n; i++) p = ioloom_put_varint(p, ioloom_zigzag(v[i]));
    return p;
}

/* Appends the payload's header, shapes and tokens (what comes before the rules). */
static uint8_t *put_tables(const struct ioloom_fold_area *a, uint8_t *p, uint32_t tid, uint32_t n, uint64_t quantum,
                           uint64_t t_base, uint32_t shapes, uint32_t distinct) {
    p = ioloom_put_varint(p, IOLOOM_FOLD_VERSION);
    p = ioloom_put_varint(ioloom_put_varint(p, tid), n);
    p = ioloom_put_varint(ioloom_put_varint(p, quantum), t_base / quantum);
    p = ioloom_put_varint(p, shapes);
    for (size_t k = 0; k < (size_t)shapes * IOLOOM_FOLD_SHAPE_FIELDS; k++)
        p = ioloom_put_varint(p, ioloom_zigzag(a->shapes[k]));
    p = ioloom_put_varint(p, distinct);
    for (size_t k = 0; k < 2 * (size_t)distinct; k++) p = ioloom_put_varint(p, a->tokens[k]);
    return p;
}

/* The fewest bytes rules over `distinct` tokens take: the count of their values (at least distinct + 2), the count
 * of rules, S's length, and every token once (each is in the sequence the rules give). */
static size_t rules_least_bytes(uint32_t distinct) {
    size_t bytes = ioloom_varint_size((uint64_t)distinct + 2) + 2;
    for (uint32_t t = 0; t < distinct; t++) bytes += ioloom_varint_size(2 * (uint64_t)t);
    return bytes;
}

static uint8_t *put_rules(const struct ioloom_fold_area *a, uint8_t *p, int64_t rules) {
    p = ioloom_put_varint(p, (uint64_t)rules);
    for (int64_t k = 0; k < rules; k++) p = ioloom_put_varint(p, (uint64_t)a->rules[k]);
    return p;
}

/* Appends the rules of the token sequence and the time columns after the tables (ending at p) at out; NULL when
 * the grammar's budget ran out. */
static uint8_t *put_grammar_and_times(struct ioloom_fold_area *a, uint8_t *p, uint32_t n, uint32_t runs,
                                      uint32_t distinct, struct column_plan gaps, struct column_plan durations) {
    int64_t rules = fold_rules(a, runs, distinct);
    if (rules < 0) return NULL;
    p = put_rules(a, p, rules);
    return put_values(put_values(p, a->gaps, n, gaps), a->durations, n, durations);
}

enum ioloom_fold_outcome ioloom_fold_events(struct ioloom_fold_area *a, uint8_t *out, size_t *size, uint32_t tid,
                                            const struct ioloom_raw_event *ev, uint32_t n,
                                            const struct ioloom_tick_clock *clock, size_t smaller_than) {
    const uint64_t quantum = ioloom_quantum(clock);
    assert(n > 0 && quantum <= IOLOOM_FOLD_MAX_QUANTUM); /* the writer's buffers and setting */
    assert(n <= a->capacity);                            /* the area is made for the writer's largest buffer */
    uint32_t shapes = number_shapes(a, ev, n), distinct, runs = number_tokens(a, n, &distinct);
    time_residuals(a, ev, n, shapes, clock);
    struct column_plan gaps = plan_column(a->gaps, n), durations = plan_column(a->durations, n);
    uint8_t *p = put_tables(a, out + IOLOOM_CHUNK_HEADER_BYTES, tid, n, quantum,
                            ioloom_row_ns(clock, &ev[0], ev[0].t_start), shapes, distinct);
    /* the grammar (most of the work on shapes that barely repeat) only when the chunk can still be smaller */
    if ((size_t)(p - out) + rules_least_bytes(distinct) + column_bytes(gaps) + column_bytes(durations) >= smaller_than)
        return IOLOOM_FOLD_NOT_SMALLER;
    uint8_t *end = put_grammar_and_times(a, p, n, runs, distinct, gaps, durations);
    if (!end) return IOLOOM_FOLD_NO_MEMORY;
    *size = (size_t)(end - out);
    if (*size >= smaller_than) return IOLOOM_FOLD_NOT_SMALLER;
    ioloom_seal_chunk(out, IOLOOM_CHUNK_FOLDED, (uint32_t)(*size - IOLOOM_CHUNK_HEADER_BYTES));
    return IOLOOM_FOLDED;
}

/* ---- unfolding ---- */

/* A FOLDED payload being read: where, and whether a varint has failed (then every later one reads 0). */
struct cursor {
    const uint8_t *p, *end;
    int bad;
};

static uint64_t take(struct cursor *c) {
    uint64_t v = 0;
    if (!c->bad && next_varint(&c->p, c->end, &v)) c->bad = 1;
    return c->bad ? 0 : v;
}

/* What a FOLDED payload holds, read section by section; its arrays are the reader's work area. */
struct folded {
    uint32_t tid, n, shapes, distinct;
    uint64_t quantum, t_base;
    int64_t *shape;                      /* shapes x IOLOOM_FOLD_SHAPE_FIELDS */
    uint32_t *token;                     /* distinct x (shape, run) */
    uint64_t *rules;                     /* the rules' values: count, then per rule its length and items */
    uint64_t rule_values;                /* how many */
    uint64_t *rule_at;                   /* where each rule's length is in rules */
    uint32_t *row_shape;                 /* n */
    int64_t *gaps, *durations, *scratch; /* n each */
    struct ioloom_raw_event *rows;       /* n */
};

static int read_header(struct cursor *c, struct folded *f) {
    uint64_t version = take(c), tid = take(c), n = take(c), quantum = take(c), t_base = take(c);
    if (c->bad || version != IOLOOM_FOLD_VERSION || tid > INT32_MAX || n < 1 || n > 1u << 20 || quantum < 1 ||
        quantum > IOLOOM_FOLD_MAX_QUANTUM || t_base > INT64_MAX / quantum)
        return IOLOOM_UNFOLD_HEADER;
    *f = (struct folded){.tid = (uint32_t)tid, .n = (uint32_t)n, .quantum = quantum, .t_base = t_base};
    return 0;
}

uint32_t ioloom_folded_events(const uint8_t *payload, size_t len) {
    struct cursor c = {payload, payload + len, 0};
    struct folded f;
    return read_header(&c, &f) ? 0 : f.n;
}

/* Whether shape s is one the writer makes: fields in their ranges, 0 where the field is absent. */
static int shape_valid(const int64_t *s) {
    int64_t absent = s[F_ABSENT];
    return s[F_OP] >= 0 && s[F_OP] <= 32767 && s[F_LAYER] >= 0 && s[F_LAYER] <= 4 && s[F_FILE] >= 0 &&
           !(absent & A_FILE && s[F_FILE]) && s[F_ERRNO] >= INT32_MIN && s[F_ERRNO] <= INT32_MAX && absent >= 0 &&
           absent <= A_ALL && !(absent & A_OFFSET && s[F_OFFSET]) && !(absent & A_CALL && s[F_CALL]) &&
           !(absent & A_PARENT && s[F_PARENT]) && !(absent & A_COLL && s[F_COLL]);
}

static int read_shapes(struct cursor *c, struct folded *f) {
    uint64_t shapes = take(c);
    if (c->bad || shapes < 1 || shapes > f->n) return IOLOOM_UNFOLD_SHAPES;
    f->shapes = (uint32_t)shapes;
    f->shape = malloc(shapes * IOLOOM_FOLD_SHAPE_FIELDS * sizeof *f->shape);
    if (!f->shape) return IOLOOM_UNFOLD_MEMORY;
    for (uint64_t k = 0; k < shapes * IOLOOM_FOLD_SHAPE_FIELDS; k++) f->shape[k] = unzigzag(take(c));
    for (uint64_t k = 0; k < shapes && !c->bad; k++)
        if (!shape_valid(f->shape + k * IOLOOM_FOLD_SHAPE_FIELDS)) return IOLOOM_UNFOLD_SHAPES;
    return c->bad ? IOLOOM_UNFOLD_SHAPES : 0;
}

static int read_tokens(struct cursor *c, struct folded *f) {
    uint64_t distinct = take(c);
    if (c->bad || distinct < 1 || distinct > f->n) return IOLOOM_UNFOLD_TOKENS;
    f->distinct = (uint32_t)distinct;
    f->token = malloc(distinct * 2 * sizeof *f->token);
    if (!f->token) return IOLOOM_UNFOLD_MEMORY;
    for (uint64_t k = 0; k < distinct; k++) {
        uint64_t shape = take(c), run = take(c);
        if (c->bad || shape >= f->shapes || run < 1 || run > f->n) return IOLOOM_UNFOLD_TOKENS;
        f->token[2 * k] = (uint32_t)shape;
        f->token[2 * k + 1] = (uint32_t)run;
    }
    return 0;
}

/* Whether item x of a rule names a token or a rule other than S that is there. */
static int item_valid(const struct folded *f, uint64_t x, uint64_t rules) {
    return x % 2 ? x / 2 >= 1 && x / 2 < rules : x / 2 < f->distinct;
}

/* The rules' values, and where each rule starts: rule 0 (S) at least one item, the others two (Sequitur's). */
static int read_rules(struct cursor *c, struct folded *f) {
    uint64_t values = take(c);
    /* a value takes a byte at least */
    if (c->bad || values < 2 || values > (uint64_t)(c->end - c->p)) return IOLOOM_UNFOLD_GRAMMAR;
    f->rules = malloc(values * sizeof *f->rules);
    if (!f->rules) return IOLOOM_UNFOLD_MEMORY;
    for (uint64_t k = 0; k < values; k++) f->rules[k] = take(c);
    f->rule_values = values;
    uint64_t rules = f->rules[0], at = 1;
    if (c->bad || rules < 1 || rules > values / 2) return IOLOOM_UNFOLD_GRAMMAR;
    f->rule_at = malloc(rules * sizeof *f->rule_at);
    if (!f->rule_at) return IOLOOM_UNFOLD_MEMORY;
    for (uint64_t r = 0; r < rules; r++) {
        uint64_t length = at < values ? f->rules[at] : 0;
        if (length < (r ? 2u : 1u) || length > values - at - 1) return IOLOOM_UNFOLD_GRAMMAR;
        f->rule_at[r] = at;
        for (uint64_t k = 1; k <= length; k++)
            if (!item_valid(f, f->rules[at + k], rules)) return IOLOOM_UNFOLD_GRAMMAR;
        at += 1 + length;
    }
    return at == values ? 0 : IOLOOM_UNFOLD_GRAMMAR;
}

/* Gives `run` rows the shape `shape` from *row on; 0, or -1 past n rows. */
static int put_run(struct folded *f, uint32_t shape, uint32_t run, uint64_t *row) {
    if (run > f->n - *row) return -1;
    for (uint32_t k = 0; k < run; k++) f->row_shape[(*row)++] = shape;
    return 0;
}

/* Expands S into each row's shape: a walk with a stack of (rule, next item), as deep as there are rules (deeper is a
 * rule inside itself). Every rule but S has two items or more, so the walk takes at most 2n steps. */
static int expand(struct folded *f) {
    uint64_t rules = f->rules[0], depth = 0, row = 0;
    uint64_t *stack = malloc(2 * rules * sizeof *stack);
    if (!stack) return IOLOOM_UNFOLD_MEMORY;
    int status = 0;
    stack[0] = 0;
    stack[1] = 1;
    while (!status) {
        uint64_t rule = stack[2 * depth], item = stack[2 * depth + 1], at = f->rule_at[rule];
        if (item > f->rules[at]) {
            if (!depth--) break;
            continue;
        }
        stack[2 * depth + 1]++;
        uint64_t x = f->rules[at + item];
        if (x % 2 == 0)
            status = put_run(f, f->token[x], f->token[x + 1], &row) ? IOLOOM_UNFOLD_GRAMMAR : 0;
        else if (++depth == rules)
            status = IOLOOM_UNFOLD_GRAMMAR;
        else
            stack[2 * depth] = x / 2, stack[2 * depth + 1] = 1;
    }
    free(stack);
    return status ? status : row == f->n ? 0 : IOLOOM_UNFOLD_GRAMMAR;
}

/* A SMALL body of n values into v. */
static void read_small(struct cursor *body, uint32_t n, int64_t *v) {
    const uint8_t *codes = body->p;
    if ((uint64_t)(body->end - body->p) < (n + 3) / 4u) {
        body->bad = 1;
        return;
    }
    body->p += (n + 3) / 4;
    static const int64_t small[3] = {0, 1, -1};
    for (uint32_t i = 0; i < n; i++) {
        unsigned code = codes[i / 4] >> (2 * (i % 4)) & 3;
        v[i] = code == ESCAPE ? unzigzag(take(body)) : small[code];
    }
    if (n % 4 && codes[n / 4] >> (2 * (n % 4))) body->bad = 1; /* the last byte's unused codes are 0 */
}

/* One time column (an EVENTS chunk's layout, and the SMALL mode) of n values into v. */
static int read_values(struct cursor *c, uint32_t n, int64_t *v) {
    if (c->p >= c->end) return IOLOOM_UNFOLD_TIMES;
    uint8_t mode = *c->p++;
    uint64_t length = take(c);
    if (c->bad || length > (uint64_t)(c->end - c->p) || mode > IOLOOM_FOLD_COL_SMALL) return IOLOOM_UNFOLD_TIMES;
    struct cursor body = {c->p, c->p + length, 0};
    c->p += length;
    if (mode != IOLOOM_FOLD_COL_SMALL)
        return ioloom_column_body(body.p, body.end, mode, n, v) ? IOLOOM_UNFOLD_TIMES : 0;
    read_small(&body, n, v);
    return body.bad || body.p != body.end ? IOLOOM_UNFOLD_TIMES : 0;
}

/* Row i from its shape and time residuals, going on from *st, *end (quanta) and the shape's previous times. */
static int unfold_row(struct folded *f, uint32_t i, struct fold_state *st, uint64_t *end, int64_t *last) {
    const int64_t *s = f->shape + (size_t)f->row_shape[i] * IOLOOM_FOLD_SHAPE_FIELDS;
    int64_t absent = s[F_ABSENT];
    struct ioloom_raw_event *e = &f->rows[i];
    *e = (struct ioloom_raw_event){.op = (uint16_t)s[F_OP], .layer = (uint8_t)s[F_LAYER]};
    int64_t file_id = absent & A_FILE ? -1 : file_of(st, s[F_FILE]);
    if (file_id == -1 && !(absent & A_FILE)) return -1;
    e->file_id = (int32_t)file_id;
    e->err = (int32_t)s[F_ERRNO];
    e->handle = s[F_HANDLE];
    e->req_bytes = s[F_REQ];
    e->ret_bytes = (int64_t)((uint64_t)s[F_REQ] + (uint64_t)s[F_RET_MINUS_REQ]);
    e->aux = s[F_AUX];
    uint64_t *coll, *offset = last_of(st, e->file_id, e->op, &coll);
    e->offset = absent & A_OFFSET ? -1 : (int64_t)(*offset += (uint64_t)s[F_OFFSET]);
    e->call_id = absent & A_CALL ? -1 : (int64_t)(st->call += (uint64_t)s[F_CALL]);
    e->parent = absent & A_PARENT ? -1 : (int64_t)(st->call - (uint64_t)s[F_PARENT]);
    e->coll_seq = absent & A_COLL ? -1 : (int64_t)(*coll += (uint64_t)s[F_COLL]);
    last[0] = (int64_t)((uint64_t)last[0] + (uint64_t)f->gaps[i]);
    last[1] = (int64_t)((uint64_t)last[1] + (uint64_t)f->durations[i]);
    uint64_t start = *end + (uint64_t)last[0];
    *end = start + (uint64_t)last[1];
    e->t_start = start * f->quantum;
    e->t_end = *end * f->quantum;
    return 0;
}

static int read_times(struct cursor *c, struct folded *f) {
    int status = read_values(c, f->n, f->gaps);
    if (!status) status = read_values(c, f->n, f->durations);
    if (status) return status;
    int64_t *last = calloc(2 * (size_t)f->shapes, sizeof *last);
    if (!last) return IOLOOM_UNFOLD_MEMORY;
    struct fold_state st;
    state_start(&st);
    uint64_t end = f->t_base;
    for (uint32_t i = 0; i < f->n && !status; i++)
        status = unfold_row(f, i, &st, &end, last + 2 * (size_t)f->row_shape[i]) ? IOLOOM_UNFOLD_SHAPES : 0;
    free(last);
    return status;
}

static int allocate_rows(struct folded *f) {
    f->row_shape = malloc((size_t)f->n * sizeof *f->row_shape);
    f->gaps = malloc((size_t)f->n * 3 * sizeof *f->gaps);
    f->rows = malloc((size_t)f->n * sizeof *f->rows);
    if (!f->row_shape || !f->gaps || !f->rows) return IOLOOM_UNFOLD_MEMORY;
    f->durations = f->gaps + f->n;
    f->scratch = f->durations + f->n;
    return 0;
}

static void free_folded(struct folded *f) {
    free(f->shape);
    free(f->token);
    free(f->rules);
    free(f->rule_at);
    free(f->row_shape);
    free(f->gaps);
    free(f->rows);
}

int64_t ioloom_unfold_events(const uint8_t *payload, size_t len, uint8_t *out, size_t room) {
    struct cursor c = {payload, payload + len, 0};
    struct folded f;
    int status = read_header(&c, &f);
    if (status) return -status;
    if (room < ioloom_events_bound(f.n)) return -IOLOOM_UNFOLD_MEMORY;
    if (!(status = read_shapes(&c, &f)) && !(status = read_tokens(&c, &f)) && !(status = read_rules(&c, &f)) &&
        !(status = allocate_rows(&f)) && !(status = expand(&f)) && !(status = read_times(&c, &f)))
        status = c.p == c.end ? 0 : IOLOOM_UNFOLD_LENGTH;
    int64_t size = status ? -status : (int64_t)ioloom_encode_events(out, f.scratch, f.tid, f.rows, 1, f.n, NULL);
    free_folded(&f);
    return size;
}
