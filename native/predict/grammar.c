/* Sequitur with predictors (grammar.h), step for step as python/ioloom/predict/grammar.py: the same operations
 * in the same order, so both hold the same grammar and the same marks after every input.
 *
 * Nodes and rules live in two arrays that start small and double as the grammar grows, up to what its cap needs
 * (nodes are named by index, so moving the arrays moves nothing that refers to them); nodes removed and rules
 * deleted during an input are released only when the input is done (the Python objects they mirror stay
 * readable until then too). An input is learnt only with SLACK nodes free (else it counts as past the cap). A digram
 * index (linear probing, deletion by backward shift) maps a pair of symbols to its first node. The uses of a rule, and
 * the occurrences of a terminal, are intrusive lists through `link_*`; the marked terminals one through `exp_*`.
 *
 * Every block comes from the model's memory budget (memory.h). An input whose rewrites need more than the SLACK
 * nodes and the array cannot grow (the budget or malloc refuses) cannot be finished or undone: the rewrite jumps
 * back to pg_grammar_input, the grammar stops learning for good (its arrays freed, nothing predicted from there,
 * every later input counted past the cap) and the budget counts it. */
#include "grammar.h"

#include <assert.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#ifndef PG_SLACK
#define PG_SLACK 64 /* a test build makes it small, so that rewrites outgrow it and the stop is reached */
#endif
enum { NONE = -1, GUARD = INT32_MIN, SLACK = PG_SLACK };

struct node {
    int32_t sym; /* >= 0 a terminal, < 0 the rule -(sym+1), GUARD a rule's guard */
    int32_t rule, owner, prev, next, link_prev, link_next, exp_prev, exp_next;
    uint8_t mark, done;
};

struct rule {
    int32_t guard, uses, nuses, marked;
    uint32_t born; /* rules made before it: the folded format numbers rules in this order, as grammar.py's ids */
    uint8_t alive, seen;
};

struct pg_grammar {
    struct pg_memory *memory;
    jmp_buf *rewriting; /* set while an input's rewrites run: where a node that cannot be had jumps to */
    int stopped;        /* learning stopped (memory.h): the node arrays are freed */
    struct node *n;
    struct rule *r;
    int32_t nnodes, nrules, max_nodes, free_nodes, free_rules, released_nodes, released_rules, navail;
    int32_t cap, max_symbol, size, start, expected;
    uint32_t made; /* rules made so far */
    int64_t past_cap;
    int32_t *terminals; /* max_symbol heads of occurrence lists */
    uint64_t *keys;     /* digram index: key, node (NONE: empty slot) */
    int32_t *values;
    uint32_t mask;
    int32_t *stack, *done, *targets; /* scratch of advance() and discover() */
    uint8_t *flags;                  /* scratch of predicted() */
};

/* ---- storage ------------------------------------------------------------------------------------------- */
static uint32_t find_slot(const struct pg_grammar *g, uint64_t key);
static int grow(struct pg_grammar *g, int32_t nodes);

static int32_t node_alloc(struct pg_grammar *g) {
    /* input() starts with SLACK nodes free, more than one input's rewrites take; past them, grow on demand */
    assert(g->rewriting || g->free_nodes != NONE); /* outside learn(): at creation, where grow() left nodes free */
    if (g->free_nodes == NONE && !grow(g, 2 * g->nnodes))
        longjmp(*g->rewriting, 1); /* a rewrite cannot be left half done: pg_grammar_input stops learning */
    int32_t i = g->free_nodes;
    g->free_nodes = g->n[i].next;
    g->navail--;
    memset(&g->n[i], 0, sizeof g->n[i]);
    g->n[i].prev = g->n[i].next = g->n[i].link_prev = g->n[i].link_next = NONE;
    g->n[i].exp_prev = g->n[i].exp_next = g->n[i].rule = NONE;
    return i;
}

static void node_release(struct pg_grammar *g, int32_t i) {
    g->n[i].link_next = g->released_nodes; /* freed when the input is done */
    g->released_nodes = i;
}

static int32_t rule_new(struct pg_grammar *g) {
    int32_t guard = node_alloc(g), id = g->free_rules;
    assert(id != NONE); /* a rule holds two nodes at least: nodes / 2 + SLACK rules are always enough */
    g->free_rules = g->r[id].uses;
    g->r[id] = (struct rule){guard, NONE, 0, 0, g->made++, 1, 0};
    g->n[guard].sym = GUARD;
    g->n[guard].rule = g->n[guard].owner = id;
    g->n[guard].prev = g->n[guard].next = guard;
    return id;
}

static void rule_delete(struct pg_grammar *g, int32_t id) {
    g->r[id].alive = 0;
    g->r[id].seen = 0;
    g->r[id].nuses = g->released_rules; /* freed with its guard when the input is done */
    g->released_rules = id;
}

static void release_all(struct pg_grammar *g) {
    while (g->released_nodes != NONE) {
        int32_t i = g->released_nodes;
        g->released_nodes = g->n[i].link_next;
        g->n[i].next = g->free_nodes;
        g->free_nodes = i;
        g->navail++;
    }
    while (g->released_rules != NONE) {
        int32_t id = g->released_rules;
        g->released_rules = g->r[id].nuses;
        node_release(g, g->r[id].guard);
        g->r[id].uses = g->free_rules;
        g->free_rules = id;
    }
    if (g->released_nodes != NONE) release_all(g);
}

static int is_guard(const struct pg_grammar *g, int32_t i) { return g->n[i].sym == GUARD; }
static int is_rule(const struct pg_grammar *g, int32_t i) { return g->n[i].sym != GUARD && g->n[i].sym < 0; }
static int32_t first_of(const struct pg_grammar *g, int32_t rule) { return g->n[g->r[rule].guard].next; }
static int32_t last_of(const struct pg_grammar *g, int32_t rule) { return g->n[g->r[rule].guard].prev; }

/* ---- the digram index ---------------------------------------------------------------------------------- */
static uint64_t key_of(int32_t a, int32_t b) { return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b; }

static uint32_t slot_of(const struct pg_grammar *g, uint64_t key) {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32) & g->mask;
}

static uint32_t find_slot(const struct pg_grammar *g, uint64_t key) {
    uint32_t s = slot_of(g, key);
    while (g->values[s] != NONE && g->keys[s] != key) s = (s + 1) & g->mask;
    return s;
}

static int32_t digram_get(const struct pg_grammar *g, uint64_t key) { return g->values[find_slot(g, key)]; }

static void digram_set(struct pg_grammar *g, uint64_t key, int32_t node) {
    uint32_t s = find_slot(g, key);
    g->keys[s] = key;
    g->values[s] = node;
}

static void digram_delete(struct pg_grammar *g, uint32_t s) {
    g->values[s] = NONE;
    for (uint32_t j = (s + 1) & g->mask; g->values[j] != NONE; j = (j + 1) & g->mask) {
        uint32_t home = slot_of(g, g->keys[j]);
        if (((j - home) & g->mask) >= ((j - s) & g->mask)) { /* j's entry may move back into the hole at s */
            g->keys[s] = g->keys[j];
            g->values[s] = g->values[j];
            g->values[j] = NONE;
            s = j;
        }
    }
}

static int rehash(struct pg_grammar *g, uint32_t slots) {
    uint64_t *keys = pg_resize(g->memory, NULL, sizeof *keys * slots), *old_keys = g->keys;
    int32_t *values = keys ? pg_resize(g->memory, NULL, sizeof *values * slots) : NULL, *old_values = g->values;
    uint32_t old_slots = g->mask + 1;
    if (!values) {
        pg_free(g->memory, keys);
        return 0;
    }
    for (uint32_t s = 0; s < slots; s++) values[s] = NONE;
    g->keys = keys;
    g->values = values;
    g->mask = slots - 1;
    for (uint32_t s = 0; s < old_slots; s++)
        if (old_values[s] != NONE) digram_set(g, old_keys[s], old_values[s]);
    pg_free(g->memory, old_keys);
    pg_free(g->memory, old_values);
    return 1;
}

/* Room for `nodes` nodes (and nodes / 2 + SLACK rules, 3 x nodes of scratch, a digram index of 4 x nodes
 * slots); 0 if memory is short (the arrays keep what they had). */
static int grow(struct pg_grammar *g, int32_t nodes) {
    int32_t rules = nodes / 2 + SLACK;
    struct node *n = pg_resize(g->memory, g->n, sizeof *n * (size_t)nodes);
    if (n) g->n = n;
    struct rule *r = n ? pg_resize(g->memory, g->r, sizeof *r * (size_t)rules) : NULL;
    if (r) g->r = r;
    int32_t *stack = r ? pg_resize(g->memory, g->stack, sizeof(int32_t) * 3 * (size_t)nodes) : NULL;
    if (!stack) return 0;
    g->stack = stack;
    g->done = stack + nodes;
    g->targets = stack + 2 * (size_t)nodes;
    for (int32_t i = nodes - 1; i >= g->nnodes; i--) {
        g->n[i].next = g->free_nodes;
        g->free_nodes = i;
    }
    for (int32_t i = rules - 1; i >= g->nrules; i--) {
        g->r[i].uses = g->free_rules;
        g->r[i].alive = 0; /* pg_grammar_rules() reads every slot */
        g->free_rules = i;
    }
    g->navail += nodes - g->nnodes;
    g->nnodes = nodes;
    g->nrules = rules;
    uint32_t slots = g->mask + 1;
    while (slots < 4u * (uint32_t)nodes) slots <<= 1;
    if (slots != g->mask + 1)
        rehash(g, slots); /* failing, the old index still has room: it was sized for half these nodes */
    return 1;
}

/* SLACK nodes free for the next input, growing up to the cap's need; 0 if that cannot be. */
static int reserve(struct pg_grammar *g) {
    if (g->navail > SLACK) return 1;
    int32_t want = g->nnodes * 2 < g->max_nodes ? g->nnodes * 2 : g->max_nodes;
    return want > g->nnodes && grow(g, want) && g->navail > SLACK;
}

/* ---- intrusive lists ----------------------------------------------------------------------------------- */
static int32_t *link_head(struct pg_grammar *g, int32_t i) {
    return g->n[i].rule != NONE ? &g->r[g->n[i].rule].uses : &g->terminals[g->n[i].sym];
}

static void link_add(struct pg_grammar *g, int32_t i) {
    int32_t *head = link_head(g, i);
    g->n[i].link_prev = NONE;
    g->n[i].link_next = *head;
    if (*head != NONE) g->n[*head].link_prev = i;
    *head = i;
    if (g->n[i].rule != NONE) g->r[g->n[i].rule].nuses++;
}

static void link_remove(struct pg_grammar *g, int32_t i) {
    int32_t *head = link_head(g, i), p = g->n[i].link_prev, q = g->n[i].link_next;
    if (p != NONE)
        g->n[p].link_next = q;
    else
        *head = q;
    if (q != NONE) g->n[q].link_prev = p;
    if (g->n[i].rule != NONE) g->r[g->n[i].rule].nuses--;
}

static void expected_add(struct pg_grammar *g, int32_t i) {
    g->n[i].exp_prev = NONE;
    g->n[i].exp_next = g->expected;
    if (g->expected != NONE) g->n[g->expected].exp_prev = i;
    g->expected = i;
}

static void expected_remove(struct pg_grammar *g, int32_t i) {
    int32_t p = g->n[i].exp_prev, q = g->n[i].exp_next;
    if (p != NONE)
        g->n[p].exp_next = q;
    else
        g->expected = q;
    if (q != NONE) g->n[q].exp_prev = p;
}

/* ---- marks --------------------------------------------------------------------------------------------- */
static void mark(struct pg_grammar *g, int32_t i) {
    if (g->n[i].mark) return;
    g->n[i].mark = 1;
    g->r[g->n[i].owner].marked++;
    if (!is_rule(g, i)) expected_add(g, i);
}

static void unmark(struct pg_grammar *g, int32_t i) {
    if (!g->n[i].mark) return;
    g->n[i].mark = 0;
    g->r[g->n[i].owner].marked--;
    if (!is_rule(g, i)) expected_remove(g, i);
}

static void mark_down(struct pg_grammar *g, int32_t i) {
    mark(g, i);
    while (is_rule(g, i)) {
        i = first_of(g, g->n[i].rule);
        mark(g, i);
    }
}

static void unmark_up(struct pg_grammar *g, int32_t i) {
    int32_t owner = g->n[i].owner;
    unmark(g, i);
    if (owner == g->start || g->r[owner].marked != 0) return;
    for (int32_t u = g->r[owner].uses; u != NONE; u = g->n[u].link_next)
        if (g->n[u].mark) unmark_up(g, u);
}

static int any_marked_use(const struct pg_grammar *g, int32_t rule) {
    for (int32_t u = g->r[rule].uses; u != NONE; u = g->n[u].link_next)
        if (g->n[u].mark) return 1;
    return 0;
}

static void drop_orphans(struct pg_grammar *g, int32_t i) {
    if (!is_rule(g, i) || !g->r[g->n[i].rule].marked || any_marked_use(g, g->n[i].rule)) return;
    int32_t rule = g->n[i].rule;
    for (int32_t j = first_of(g, rule); !is_guard(g, j); j = g->n[j].next)
        if (g->n[j].mark) {
            unmark(g, j);
            drop_orphans(g, j);
        }
}

/* ---- predictors ---------------------------------------------------------------------------------------- */
static void advance(struct pg_grammar *g, const int32_t *matched, int32_t count) {
    int32_t top = 0, ndone = 0, ntargets = 0;
    for (int32_t k = 0; k < count; k++) g->stack[top++] = matched[k];
    while (top > 0) {
        int32_t i = g->stack[--top];
        if (g->n[i].done) continue;
        g->n[i].done = 1;
        g->done[ndone++] = i;
        if (!is_guard(g, g->n[i].next))
            g->targets[ntargets++] = g->n[i].next;
        else if (g->n[i].owner != g->start)
            for (int32_t u = g->r[g->n[i].owner].uses; u != NONE; u = g->n[u].link_next)
                if (g->n[u].mark && !g->n[u].done) g->stack[top++] = u;
    }
    for (int32_t k = 0; k < ndone; k++) unmark(g, g->done[k]);
    for (int32_t k = 0; k < ntargets; k++) mark_down(g, g->targets[k]);
    for (int32_t k = 0; k < ndone; k++) {
        drop_orphans(g, g->done[k]);
        g->n[g->done[k]].done = 0;
    }
}

/* Input sym: marks on other terminals are dropped, those on sym move on. */
static void update(struct pg_grammar *g, int32_t sym) {
    int32_t count = 0, matched = 0;
    for (int32_t i = g->expected; i != NONE; i = g->n[i].exp_next)
        g->done[count++] = i; /* a copy: unmarking changes the list */
    for (int32_t k = 0; k < count; k++) {
        int32_t i = g->done[k];
        if (g->n[i].sym == sym)
            g->targets[matched++] = i;
        else if (g->n[i].mark)
            unmark_up(g, i);
    }
    advance(g, g->targets, matched);
}

static void discover(struct pg_grammar *g, int32_t *targets, int32_t count) {
    int32_t top = 0, nseen = 0;
    for (int32_t k = 0; k < count; k++) {
        mark(g, targets[k]);
        g->stack[top++] = targets[k];
    }
    while (top > 0) {
        int32_t owner = g->n[g->stack[--top]].owner;
        if (owner == g->start || g->r[owner].seen) continue;
        g->r[owner].seen = 1;
        g->done[nseen++] = owner;
        for (int32_t u = g->r[owner].uses; u != NONE; u = g->n[u].link_next) {
            mark(g, u);
            g->stack[top++] = u;
        }
    }
    for (int32_t k = 0; k < nseen; k++) g->r[g->done[k]].seen = 0;
    advance(g, targets, count);
}

/* Where symbol node i's symbol appears: a rule's uses, or a terminal's occurrences; into out, how many. */
static int32_t occurrences(struct pg_grammar *g, int32_t head, int32_t *out) {
    int32_t count = 0;
    for (int32_t i = head; i != NONE; i = g->n[i].link_next) out[count++] = i;
    return count;
}

/* ---- Sequitur ------------------------------------------------------------------------------------------ */
static int check(struct pg_grammar *g, int32_t i);

static int32_t node_new(struct pg_grammar *g, int32_t sym, int32_t rule, int32_t owner) {
    int32_t i = node_alloc(g);
    g->n[i].sym = sym;
    g->n[i].rule = rule;
    g->n[i].owner = owner;
    g->size++;
    link_add(g, i);
    return i;
}

static void forget_digram(struct pg_grammar *g, int32_t i) {
    int32_t next = g->n[i].next;
    if (is_guard(g, i) || next == NONE || is_guard(g, next)) return;
    uint32_t s = find_slot(g, key_of(g->n[i].sym, g->n[next].sym));
    if (g->values[s] == i) digram_delete(g, s);
}

static int same3(const struct pg_grammar *g, int32_t i) {
    const struct node *x = &g->n[i];
    return x->prev != NONE && x->next != NONE && x->sym != GUARD && x->sym == g->n[x->prev].sym &&
           x->sym == g->n[x->next].sym;
}

static void join(struct pg_grammar *g, int32_t left, int32_t right) {
    if (g->n[left].next != NONE) {
        forget_digram(g, left);
        if (same3(g, right)) digram_set(g, key_of(g->n[right].sym, g->n[right].sym), right);
        if (same3(g, left)) digram_set(g, key_of(g->n[left].sym, g->n[left].sym), g->n[left].prev);
    }
    g->n[left].next = right;
    g->n[right].prev = left;
}

static void insert_after(struct pg_grammar *g, int32_t left, int32_t i) {
    join(g, i, g->n[left].next);
    join(g, left, i);
}

static void remove_node(struct pg_grammar *g, int32_t i) {
    unmark(g, i);
    join(g, g->n[i].prev, g->n[i].next);
    forget_digram(g, i);
    g->size--;
    link_remove(g, i);
    node_release(g, i);
}

static void expand(struct pg_grammar *g, int32_t i) {
    int32_t rule = g->n[i].rule, owner = g->n[i].owner, left = g->n[i].prev, right = g->n[i].next;
    int32_t first = first_of(g, rule), last = last_of(g, rule);
    if (!g->n[i].mark)
        for (int32_t j = first; !is_guard(g, j); j = g->n[j].next)
            if (g->n[j].mark) {
                unmark(g, j);
                drop_orphans(g, j);
            }
    unmark(g, i);
    forget_digram(g, i);
    forget_digram(g, left);
    link_remove(g, i);
    node_release(g, i);
    g->size--;
    rule_delete(g, rule);
    for (int32_t j = first; !is_guard(g, j); j = g->n[j].next) {
        g->r[rule].marked -= g->n[j].mark;
        g->r[owner].marked += g->n[j].mark;
        g->n[j].owner = owner;
    }
    g->n[left].next = first;
    g->n[first].prev = left;
    g->n[last].next = right;
    g->n[right].prev = last;
    int32_t starts[2] = {left, last};
    for (int k = 0; k < 2; k++) {
        int32_t s = starts[k], next = g->n[s].next;
        if (!is_guard(g, s) && !is_guard(g, next) && digram_get(g, key_of(g->n[s].sym, g->n[next].sym)) == NONE)
            digram_set(g, key_of(g->n[s].sym, g->n[next].sym), s);
    }
}

static void substitute(struct pg_grammar *g, int32_t i, int32_t rule) {
    uint8_t mark_a = g->n[i].mark, mark_b = g->n[g->n[i].next].mark;
    int32_t left = g->n[i].prev;
    remove_node(g, g->n[left].next);
    remove_node(g, g->n[left].next);
    int32_t instance = node_new(g, -rule - 1, rule, g->n[left].owner);
    insert_after(g, left, instance);
    if (mark_a || mark_b) {
        mark(g, instance);
        if (mark_a) mark(g, first_of(g, rule));
        if (mark_b) mark(g, g->n[first_of(g, rule)].next);
    }
    if (!check(g, left)) check(g, instance);
}

static void match(struct pg_grammar *g, int32_t fresh, int32_t old) {
    int32_t rule;
    if (is_guard(g, g->n[old].prev) && is_guard(g, g->n[g->n[old].next].next) && g->n[old].owner != g->start) {
        rule = g->n[old].owner;
        substitute(g, fresh, rule);
    } else {
        rule = rule_new(g);
        int32_t a = node_new(g, g->n[fresh].sym, g->n[fresh].rule, rule);
        int32_t b = node_new(g, g->n[g->n[fresh].next].sym, g->n[g->n[fresh].next].rule, rule);
        insert_after(g, g->r[rule].guard, a);
        insert_after(g, a, b);
        substitute(g, old, rule);
        substitute(g, fresh, rule);
        digram_set(g, key_of(g->n[a].sym, g->n[b].sym), a);
    }
    int32_t pair[2] = {first_of(g, rule), g->n[first_of(g, rule)].next};
    for (int k = 0; k < 2; k++) {
        int32_t j = pair[k];
        if (is_rule(g, j) && g->r[g->n[j].rule].nuses == 1 && g->n[j].owner == rule) expand(g, j);
    }
}

static int check(struct pg_grammar *g, int32_t i) {
    int32_t next = g->n[i].next;
    if (is_guard(g, i) || is_guard(g, next)) return 0;
    uint64_t key = key_of(g->n[i].sym, g->n[next].sym);
    int32_t found = digram_get(g, key);
    if (found == NONE) {
        digram_set(g, key, i);
        return 0;
    }
    if (found != i && g->n[found].next != i && next != found) match(g, i, found);
    return found != i;
}

static void append(struct pg_grammar *g, int32_t sym) {
    int32_t i = node_new(g, sym, NONE, g->start);
    insert_after(g, last_of(g, g->start), i);
    check(g, g->n[i].prev);
}

/* ---- the interface ------------------------------------------------------------------------------------- */
static void free_nodes(struct pg_grammar *g) {
    pg_free(g->memory, g->n);
    pg_free(g->memory, g->r);
    pg_free(g->memory, g->stack);
    pg_free(g->memory, g->keys);
    pg_free(g->memory, g->values);
    g->n = NULL, g->r = NULL, g->stack = NULL, g->keys = NULL, g->values = NULL;
}

/* A rewrite could not get a node: the grammar, half changed, is never read again (memory.h). */
static void stop(struct pg_grammar *g) {
    free_nodes(g);
    g->stopped = 1;
    g->expected = NONE;
    g->past_cap++;
    if (g->memory) g->memory->stopped++;
}

/* x appended to S and Sequitur's constraints kept (docs/predict.md, "Predictors", step 2), then step 3. */
static void learn(struct pg_grammar *g, int32_t sym) {
    jmp_buf rewriting;
    g->rewriting = &rewriting;
    if (setjmp(rewriting)) {
        stop(g);
        return;
    }
    append(g, sym);
    if (g->expected == NONE) {
        int32_t last = last_of(g, g->start);
        int32_t head = is_rule(g, last) ? g->r[g->n[last].rule].uses : g->terminals[g->n[last].sym];
        discover(g, g->targets, occurrences(g, head, g->targets));
    }
    g->rewriting = NULL;
    release_all(g);
}

void pg_grammar_input(struct pg_grammar *g, int32_t sym) {
    assert(sym >= 0 && sym < g->max_symbol);
    if (g->stopped) {
        g->past_cap++;
        return;
    }
    update(g, sym);
    if (g->size < g->cap && reserve(g)) {
        learn(g, sym);
    } else {
        g->past_cap++;
        if (g->expected == NONE) discover(g, g->targets, occurrences(g, g->terminals[sym], g->targets));
        release_all(g);
    }
}

int32_t pg_grammar_predicted(struct pg_grammar *g, int32_t *out, int32_t max) {
    int32_t count = 0;
    for (int32_t i = g->expected; i != NONE; i = g->n[i].exp_next)
        if (!g->flags[g->n[i].sym]) {
            g->flags[g->n[i].sym] = 1;
            g->targets[count++] = g->n[i].sym;
        }
    for (int32_t k = 0; k < count; k++) { /* ascending: insertion sort, the sets are small */
        int32_t v = g->targets[k], j = k;
        for (; j > 0 && g->targets[j - 1] > v; j--) g->targets[j] = g->targets[j - 1];
        g->targets[j] = v;
        g->flags[v] = 0;
    }
    for (int32_t k = 0; k < count && k < max; k++) out[k] = g->targets[k];
    return count;
}

int32_t pg_grammar_size(const struct pg_grammar *g) { return g->size; }

/* ---- the rules written out (folded traces) ---- */

static int by_age(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The live rules by age into ages (each born << 32 | id), S first; how many. */
static int32_t rules_by_age(const struct pg_grammar *g, uint64_t *ages) {
    int32_t count = 0;
    for (int32_t id = 0; id < g->nrules; id++)
        if (g->r[id].alive) ages[count++] = (uint64_t)g->r[id].born << 32 | (uint32_t)id;
    qsort(ages, (size_t)count, sizeof *ages, by_age);
    return count;
}

int64_t pg_grammar_rules(struct pg_grammar *g, int64_t *out, int64_t max) {
    if (g->stopped) return -1;
    /* scratch: 3 x nodes int32 values, rules <= nodes: ages in the first two thirds, numbers by id in the last */
    uint64_t *ages = (uint64_t *)(void *)g->stack;
    int32_t *number = g->targets, count = rules_by_age(g, ages);
    assert(count > 0 && (int32_t)ages[0] == g->start);
    for (int32_t k = 0; k < count; k++) number[(int32_t)ages[k]] = k;
    int64_t at = 0;
    if (at < max) out[at] = count;
    at++;
    for (int32_t k = 0; k < count; k++) {
        int64_t length_at = at++, length = 0;
        for (int32_t i = first_of(g, (int32_t)ages[k]); !is_guard(g, i); i = g->n[i].next, length++, at++)
            if (at < max) out[at] = is_rule(g, i) ? 2 * (int64_t)number[g->n[i].rule] + 1 : 2 * (int64_t)g->n[i].sym;
        if (length_at < max) out[length_at] = length;
    }
    return at;
}
int64_t pg_grammar_past_cap(const struct pg_grammar *g) { return g->past_cap; }
int pg_grammar_stopped(const struct pg_grammar *g) { return g->stopped; }

struct pg_grammar *pg_grammar_new(int32_t cap, int32_t max_symbol, struct pg_memory *memory) {
    struct pg_grammar *g = pg_alloc(memory, sizeof *g);
    if (!g) return NULL;
    g->memory = memory;
    g->cap = cap;
    g->max_symbol = max_symbol;
    g->max_nodes = cap + cap / 2 + 4 * SLACK; /* bodies (at most cap + 1 symbols), guards, one input's rewrites */
    g->free_nodes = g->free_rules = g->released_nodes = g->released_rules = g->expected = NONE;
    g->terminals = pg_alloc(memory, sizeof(int32_t) * (size_t)max_symbol);
    g->flags = pg_alloc(memory, (size_t)max_symbol);
    g->keys = pg_alloc(memory, sizeof(uint64_t) * 16);
    g->values = pg_alloc(memory, sizeof(int32_t) * 16);
    g->mask = 15;
    for (int32_t s = 0; g->values && s < 16; s++) g->values[s] = NONE;
    if (!g->terminals || !g->flags || !g->keys || !g->values || !grow(g, 4 * SLACK)) {
        pg_grammar_free(g);
        return NULL;
    }
    for (int32_t s = 0; s < max_symbol; s++) g->terminals[s] = NONE;
    g->start = rule_new(g);
    return g;
}

void pg_grammar_free(struct pg_grammar *g) {
    if (!g) return;
    free_nodes(g);
    pg_free(g->memory, g->terminals);
    pg_free(g->memory, g->flags);
    pg_free(g->memory, g);
}
