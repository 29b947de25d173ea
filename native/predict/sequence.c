/* Runs and local models (grammar.h): model.py's Sequence and LocalModel in C, the same decisions in the same
 * order (docs/predict.md, "Runs" and "What each candidate says"). */
#include "grammar.h"

#include <assert.h>

struct pg_local {
    int32_t limit, cap, ntokens;
    enum pg_fallback fallback;
    int runs;
    struct pg_memory *memory;
    int64_t values[PG_LIMIT_MAX], counts[PG_LIMIT_MAX];
    struct pg_sequence *sequence; /* NULL once fallen back */
    int64_t last, total, seen, low, high;
    struct pg_local *drift; /* past the fallback to the mean or the largest: a local model of the changes */
    int64_t errors[2];      /* halving averages of the errors of the fallback and of the drift (rule_error) */
    int64_t grammar_error;  /* a model falling back to its mean, before it does: the grammar's average |error| */
    uint32_t exact;         /* the same: bit i set when the grammar was exact i + 1 values ago (PG_HISTORY bits) */
};

enum {
    PG_HISTORY = 8, /* values over which the grammar of a model falling back to its mean must be exact once */
    PG_MISS = 256,  /* a run length's error when its end is mispredicted once (fixed point of the averages) */
};

struct pg_sequence {
    struct pg_grammar *grammar;
    struct pg_local **lengths; /* per value, its run-length model (NULL: none yet) */
    int32_t max_symbol, limit, local_cap, value, count;
    int runs;
    struct pg_memory *memory, *lengths_memory; /* its own blocks; its run-length models' */
    int64_t expected;
};

/* ---- local models -------------------------------------------------------------------------------------- */
struct pg_local *pg_local_new(int32_t limit, enum pg_fallback fallback, int runs, int32_t cap,
                              struct pg_memory *memory) {
    struct pg_local *m = pg_alloc(memory, sizeof *m);
    if (!m || limit < 1 || limit > PG_LIMIT_MAX) {
        pg_free(memory, m);
        return NULL;
    }
    *m = (struct pg_local){.limit = limit, .cap = cap, .fallback = fallback, .runs = runs, .memory = memory};
    m->sequence = pg_sequence_new(cap, limit, limit, runs, cap, memory, memory);
    if (!m->sequence) {
        pg_free(memory, m);
        return NULL;
    }
    return m;
}

void pg_local_free(struct pg_local *m) {
    if (!m) return;
    pg_local_free(m->drift);
    pg_sequence_free(m->sequence);
    pg_free(m->memory, m);
}

static int32_t token_of(const struct pg_local *m, int64_t value) {
    for (int32_t t = 0; t < m->ntokens; t++)
        if (m->values[t] == value) return t;
    return -1;
}

/* a / b (b > 0) rounded half to even, as Python's round(a / b): no libm, which the tracer does not link. */
static int64_t rounded_quotient(int64_t a, int64_t b) {
    int64_t q = a / b, r = a % b;
    if (r < 0) q--, r += b; /* floor division */
    return 2 * r > b || (2 * r == b && (q & 1)) ? q + 1 : q;
}

static int64_t fallen_back(const struct pg_local *m) {
    if (m->fallback == PG_MEAN) return rounded_quotient(m->total, m->seen);
    return m->fallback == PG_MAX ? m->high : 0;
}

static int64_t distance(int64_t a, int64_t b) { return a > b ? a - b : b - a; }

/* How wrong a rule predicting `predicted` was on `value`: a run length (the largest its fallback) by the ends it
 * mispredicts, none if exact, one if longer (the end comes unforeseen), two if shorter (an end foreseen too early,
 * then the real one unforeseen); any other value by its distance. */
static int64_t rule_error(const struct pg_local *m, int64_t predicted, int64_t value) {
    if (m->fallback != PG_MAX) return distance(predicted, value);
    return predicted == value ? 0 : predicted > value ? PG_MISS : 2 * PG_MISS;
}

/* a + b, saturated at INT64_MIN and INT64_MAX (a total of sizes past 2^63 - 1 stays there, as in model.py). */
static int64_t saturated_sum(int64_t a, int64_t b) {
    if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
    return b < 0 && a < INT64_MIN - b ? INT64_MIN : a + b;
}

/* (a + b) / 2 of two values >= 0 without overflowing their sum (the same as model.py's (a + b) // 2). */
static int64_t halved_sum(int64_t a, int64_t b) {
    assert(a >= 0 && b >= 0);
    return a / 2 + b / 2 + (a % 2 + b % 2) / 2;
}

/* The drift's prediction: the last value plus the change it predicts, at least 0 (a model with a drift holds sizes,
 * run lengths or phase lengths and volumes, never negative) and at most INT64_MAX (saturated, no overflow). */
static int64_t drifted(struct pg_local *m) {
    int64_t change = pg_local_predict(m->drift); /* a change seen: >= -INT64_MAX, as values >= 0 */
    if (change > 0 && m->last > INT64_MAX - change) return INT64_MAX;
    return m->last + change > 0 ? m->last + change : 0;
}

/* Past the fallback: scores the fallback and the drift on value (halving averages), then teaches the drift. */
static void drift_observe(struct pg_local *m, int64_t value) {
    assert(value >= 0 && m->last >= 0); /* so value - last fits, and every distance below */
    m->errors[0] = halved_sum(m->errors[0], rule_error(m, fallen_back(m), value));
    m->errors[1] = halved_sum(m->errors[1], rule_error(m, drifted(m), value));
    pg_local_observe(m->drift, value - m->last);
}

/* The local grammar's prediction: its one value, or of the values it predicts the one seen most often, or the
 * last value. */
static int64_t by_grammar(struct pg_local *m) {
    if (m->ntokens == 1) return m->last;
    int32_t tokens[PG_LIMIT_MAX], n = pg_sequence_predicted(m->sequence, tokens, PG_LIMIT_MAX), best = -1;
    for (int32_t k = 0; k < n && k < PG_LIMIT_MAX; k++) /* ascending: ties go to the first seen */
        if (best < 0 || m->counts[tokens[k]] > m->counts[best]) best = tokens[k];
    return best < 0 ? m->last : m->values[best];
}

/* A model falling back to its mean, before it does: scores the grammar and the mean on value. */
static void mean_observe(struct pg_local *m, int64_t value) {
    assert(value >= 0 && m->seen > 0); /* sizes: every distance fits */
    int64_t predicted = by_grammar(m);
    m->exact = (m->exact << 1 | (predicted == value)) & ((1u << PG_HISTORY) - 1);
    m->grammar_error = halved_sum(m->grammar_error, distance(predicted, value));
    m->errors[0] = halved_sum(m->errors[0], distance(fallen_back(m), value));
}

/* The local grammar and its values are freed; a model falling back to its mean or largest value starts a model
 * of the changes from one value to the next (a drift), NULL when the memory budget refuses it. */
static void fall_back(struct pg_local *m) {
    pg_sequence_free(m->sequence);
    m->sequence = NULL;
    m->ntokens = 0;
    m->errors[0] = 0; /* the fallback and the drift are scored alike from here */
    if (m->fallback != PG_ZERO) m->drift = pg_local_new(m->limit, PG_ZERO, 1, m->cap, m->memory);
}

void pg_local_observe(struct pg_local *m, int64_t value) {
    if (m->drift)
        drift_observe(m, value);
    else if (m->fallback == PG_MEAN && m->sequence && m->seen)
        mean_observe(m, value);
    m->low = m->seen ? (value < m->low ? value : m->low) : value;
    m->high = m->seen ? (value > m->high ? value : m->high) : value;
    m->last = value;
    m->total = saturated_sum(m->total, value);
    m->seen++;
    if (!m->sequence) return;
    int32_t token = token_of(m, value);
    if (token < 0) {
        if (m->ntokens == m->limit) {
            fall_back(m);
            return;
        }
        token = m->ntokens++;
        m->values[token] = value;
        m->counts[token] = 0;
    }
    m->counts[token]++;
    pg_sequence_input(m->sequence, token);
}

int64_t pg_local_predict(struct pg_local *m) {
    if (!m->sequence) return m->drift && m->errors[1] < m->errors[0] ? drifted(m) : fallen_back(m);
    if (m->seen > PG_HISTORY && !m->exact && m->errors[0] < m->grammar_error) return fallen_back(m);
    return by_grammar(m);
}

/* ---- sequences ----------------------------------------------------------------------------------------- */
struct pg_sequence *pg_sequence_new(int32_t cap, int32_t max_symbol, int32_t limit, int runs, int32_t local_cap,
                                    struct pg_memory *memory, struct pg_memory *lengths_memory) {
    struct pg_sequence *s = pg_alloc(memory, sizeof *s);
    if (!s) return NULL;
    *s = (struct pg_sequence){.max_symbol = max_symbol,
                              .limit = limit,
                              .local_cap = local_cap,
                              .value = -1,
                              .runs = runs,
                              .memory = memory,
                              .lengths_memory = lengths_memory};
    s->grammar = pg_grammar_new(cap, max_symbol, memory);
    s->lengths = pg_alloc(memory, sizeof *s->lengths * (size_t)max_symbol);
    if (!s->grammar || !s->lengths) {
        pg_sequence_free(s);
        return NULL;
    }
    return s;
}

void pg_sequence_free(struct pg_sequence *s) {
    if (!s) return;
    for (int32_t v = 0; s->lengths && v < s->max_symbol; v++) pg_local_free(s->lengths[v]);
    pg_free(s->memory, s->lengths);
    pg_grammar_free(s->grammar);
    pg_free(s->memory, s);
}

static void end_run(struct pg_sequence *s) {
    if (s->value < 0) return;
    if (!s->lengths[s->value])
        s->lengths[s->value] = pg_local_new(s->limit, PG_MAX, 0, s->local_cap, s->lengths_memory);
    if (s->lengths[s->value]) /* out of memory: this value's runs go unlearnt */
        pg_local_observe(s->lengths[s->value], s->count);
}

void pg_sequence_input(struct pg_sequence *s, int32_t symbol) {
    if (!s->runs) {
        pg_grammar_input(s->grammar, symbol);
        return;
    }
    if (symbol == s->value) {
        s->count++;
        return;
    }
    end_run(s);
    pg_grammar_input(s->grammar, symbol);
    s->value = symbol;
    s->count = 1;
    s->expected = s->lengths[symbol] ? pg_local_predict(s->lengths[symbol]) : 0;
}

/* after, with value added (ascending, no repeat); how many. */
static int32_t with_value(int32_t *out, int32_t n, int32_t max, int32_t value) {
    int32_t k = 0;
    while (k < n && k < max && out[k] < value) k++;
    if (k < n && k < max && out[k] == value) return n;
    for (int32_t j = (n < max ? n : max - 1); j > k; j--) out[j] = out[j - 1];
    if (k < max) out[k] = value;
    return n + 1;
}

int32_t pg_sequence_predicted(struct pg_sequence *s, int32_t *out, int32_t max) {
    int32_t n = pg_grammar_predicted(s->grammar, out, max);
    if (!s->runs || s->value < 0) return n;
    struct pg_local *model = s->lengths[s->value];
    if (!model) return with_value(out, n, max, s->value);
    int ends = s->count == s->expected || (s->count > s->expected && s->count == model->high);
    if (ends && n > 0) return n;
    if (max > 0) out[0] = s->value;
    return 1;
}

const struct pg_grammar *pg_sequence_grammar(const struct pg_sequence *s) { return s->grammar; }
int32_t pg_sequence_value(const struct pg_sequence *s) { return s->value; }
int32_t pg_sequence_count(const struct pg_sequence *s) { return s->count; }
