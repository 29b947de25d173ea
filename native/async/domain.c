/* Layouts in one global domain (Damaris's parameters and global layouts, seed 002 Ch. 3-4): a layout's dimensions
 * are expressions over the configuration's parameters, and a positioned layout also gives the variable's global
 * extents and each block's position in them, expressions that may name clients and (position) rank, the client's
 * rank among clients, which is its block's id. The YAML and XML readers resolve the dimensions; once the roles
 * are known, initialize evaluates every block's position on every rank and refuses blocks outside the domain or
 * overlapping. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include "async_internal.h"

static struct async_scope parameters_of(const struct async_config *cfg) {
    return (struct async_scope){.parameters = cfg->parameters, .nparameters = cfg->nparameters};
}

int async_parameter_add(struct async_config *cfg, const char *name, const char *expression, char msg[ASYNC_MSG_MAX]) {
    struct async_scope scope = parameters_of(cfg);
    struct async_parameter *a = &cfg->parameters[cfg->nparameters];
    char why[ASYNC_MSG_MAX];
    for (int i = 0; i < cfg->nparameters; i++)
        if (!strcmp(cfg->parameters[i].name, name))
            return snprintf(msg, ASYNC_MSG_MAX, "parameter '%s' is declared twice", name), -1;
    if (!strcmp(name, "rank") || !strcmp(name, "clients"))
        return snprintf(msg, ASYNC_MSG_MAX, "parameter '%s': rank and clients are given by the run", name), -1;
    if (!expression)
        return snprintf(msg, ASYNC_MSG_MAX, "parameter '%s': give its value, a number or an expression", name), -1;
    if (async_expr_eval(expression, &scope, &a->value, why))
        return snprintf(msg, ASYNC_MSG_MAX, "parameter '%s': %.300s", name, why), -1;
    /* the name fits: both readers take names of at most ASYNC_NAME_MAX - 1 characters */
    assert(strlen(name) < sizeof a->name);
    strcpy(a->name, name);
    cfg->nparameters++;
    return 0;
}

/* The dimensions' values: parameters only, each at least 1. */
static int sizes(const struct async_config *cfg, struct async_layout *l, char dims[][ASYNC_EXPR_MAX],
                 char msg[ASYNC_MSG_MAX]) {
    struct async_scope scope = parameters_of(cfg);
    char why[ASYNC_MSG_MAX];
    l->bytes = l->element;
    for (int d = 0; d < l->ndims; d++) {
        if (async_expr_eval(dims[d], &scope, &l->dims[d], why))
            return snprintf(msg, ASYNC_MSG_MAX, "layout '%s': dimensions: %.300s", l->name, why), -1;
        if (l->dims[d] < 1 || __builtin_mul_overflow(l->bytes, (size_t)l->dims[d], &l->bytes))
            return snprintf(msg, ASYNC_MSG_MAX, "layout '%s': dimension %d is %ld ('%.100s'): give a size >= 1",
                            l->name, d + 1, l->dims[d], dims[d]),
                   -1;
    }
    return 0;
}

/* The syntax and names of the global extents' and positions' expressions (their values wait for the clients). */
static int names(const struct async_config *cfg, const struct async_layout *l, char msg[ASYNC_MSG_MAX]) {
    struct async_scope scope = parameters_of(cfg);
    char why[ASYNC_MSG_MAX];
    long ignored;
    scope.checking = scope.clients_allowed = 1, scope.clients = 1;
    for (int d = 0; d < l->ndims; d++)
        if (async_expr_eval(l->global_expr[d], &scope, &ignored, why))
            return snprintf(msg, ASYNC_MSG_MAX, "layout '%s': global: %.300s", l->name, why), -1;
    scope.rank_allowed = 1;
    for (int d = 0; d < l->ndims; d++)
        if (async_expr_eval(l->position_expr[d], &scope, &ignored, why))
            return snprintf(msg, ASYNC_MSG_MAX, "layout '%s': position: %.300s", l->name, why), -1;
    return 0;
}

int async_layout_resolve(const struct async_config *cfg, struct async_layout *l, char dims[][ASYNC_EXPR_MAX],
                         int nglobal, int nposition, char msg[ASYNC_MSG_MAX]) {
    if (sizes(cfg, l, dims, msg)) return -1;
    if (!nglobal != !nposition)
        return snprintf(msg, ASYNC_MSG_MAX,
                        "layout '%s': give global (the variable's extents) and position (each block's offset in "
                        "them) together",
                        l->name),
               -1;
    if (nglobal && (nglobal != l->ndims || nposition != l->ndims))
        return snprintf(msg, ASYNC_MSG_MAX,
                        "layout '%s': global has %d sizes and position %d offsets for its %d dimensions: give one "
                        "per dimension",
                        l->name, nglobal, nposition, l->ndims),
               -1;
    l->positioned = nglobal > 0;
    return l->positioned ? names(cfg, l, msg) : 0;
}

/* "[a, b, c]" of n values, for messages. */
static const char *list(const long *v, int n, char out[160]) {
    int at = snprintf(out, 160, "[");
    for (int d = 0; d < n && at < 150; d++) at += snprintf(out + at, (size_t)(160 - at), "%s%ld", d ? ", " : "", v[d]);
    snprintf(out + at, (size_t)(160 - at), "]");
    return out;
}

static int layout_fail(const struct async_config *cfg, const struct async_layout *l, char msg[ASYNC_MSG_MAX],
                       const char *what) {
    snprintf(msg, ASYNC_MSG_MAX, "%.120s:%d: layout '%s': %.250s", cfg->file, l->line, l->name, what);
    return -1;
}

static int extents(const struct async_config *cfg, struct async_layout *l, int nclients, char msg[ASYNC_MSG_MAX]) {
    struct async_scope scope = parameters_of(cfg);
    char why[ASYNC_MSG_MAX], text[ASYNC_MSG_MAX];
    scope.clients_allowed = 1, scope.clients = nclients;
    for (int d = 0; d < l->ndims; d++) {
        if (async_expr_eval(l->global_expr[d], &scope, &l->global[d], why)) {
            snprintf(text, sizeof text, "global: %.300s", why);
            return layout_fail(cfg, l, msg, text);
        }
        if (l->global[d] < 1) {
            snprintf(text, sizeof text, "global extent %d is %ld ('%.100s'): give a size >= 1", d + 1, l->global[d],
                     l->global_expr[d]);
            return layout_fail(cfg, l, msg, text);
        }
    }
    return 0;
}

/* Block b's position, inside the global extents. */
static int place(const struct async_config *cfg, struct async_layout *l, int b, int nclients, char msg[ASYNC_MSG_MAX]) {
    struct async_scope scope = parameters_of(cfg);
    char why[ASYNC_MSG_MAX], text[ASYNC_MSG_MAX], at[160], size[160], global[160];
    long *offset = l->offsets + (size_t)b * (size_t)l->ndims;
    int inside = 1;
    scope.clients_allowed = scope.rank_allowed = 1, scope.clients = nclients, scope.rank = b;
    for (int d = 0; d < l->ndims; d++) {
        if (async_expr_eval(l->position_expr[d], &scope, &offset[d], why)) {
            snprintf(text, sizeof text, "position of block %d (rank %d of %d clients): %.300s", b, b, nclients, why);
            return layout_fail(cfg, l, msg, text);
        }
        inside &= offset[d] >= 0 && offset[d] <= l->global[d] - l->dims[d];
    }
    if (inside) return 0;
    snprintf(text, sizeof text,
             "block %d (rank %d of %d clients) at %s of size %s is outside the global extents %s: change position "
             "or global, or run another number of clients",
             b, b, nclients, list(offset, l->ndims, at), list(l->dims, l->ndims, size),
             list(l->global, l->ndims, global));
    return layout_fail(cfg, l, msg, text);
}

/* Blocks all have the layout's size, so two overlap when their offsets differ by less than it in every dimension.
 * In the grid of cells of that size (a block's cell: its offset divided by the size, per dimension), two blocks
 * in one cell overlap, and two that overlap are in the same or neighbouring cells (one apart at most in each
 * dimension). So, with the blocks sorted by cell, a disjoint layout has one block per cell, and each block is
 * compared only with those in its 3^ndims - 1 neighbouring cells, each found by binary search: O(P log P). */
struct placed {
    const long *at;
    long cell[ASYNC_DIMS_MAX];
    int ndims, block;
};

static int by_cell(const void *a, const void *b) {
    const struct placed *x = a, *y = b;
    for (int d = 0; d < x->ndims; d++)
        if (x->cell[d] != y->cell[d]) return x->cell[d] < y->cell[d] ? -1 : 1;
    return (x->block > y->block) - (x->block < y->block);
}

static int overlap(const struct placed *x, const struct placed *y, const long *size) {
    for (int d = 0; d < x->ndims; d++)
        if (labs(x->at[d] - y->at[d]) >= size[d]) return 0;
    return 1;
}

/* The first of p[lo, hi) (sorted by cell, the same cells in dimensions before d) whose cell in d is c or more. */
static int first_at(const struct placed *p, int lo, int hi, int d, long c) {
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (p[mid].cell[d] < c)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* A block of p[lo, hi) that overlaps p[i], or -1: those in p[i]'s neighbouring cells in dimensions d and after
 * (p[lo, hi) are the blocks in its neighbouring cells in the dimensions before d). */
static int neighbour(const struct placed *p, int i, int d, int lo, int hi, const long *size) {
    if (d == p[i].ndims) {
        for (int k = lo; k < hi; k++)
            if (k != i && overlap(&p[i], &p[k], size)) return k;
        return -1;
    }
    for (long c = p[i].cell[d] - 1; c <= p[i].cell[d] + 1; c++) {
        int from = first_at(p, lo, hi, d, c), to = first_at(p, from, hi, d, c + 1);
        int k = from < to ? neighbour(p, i, d + 1, from, to, size) : -1;
        if (k >= 0) return k;
    }
    return -1;
}

static int disjoint(const struct async_config *cfg, const struct async_layout *l, int nclients,
                    char msg[ASYNC_MSG_MAX]) {
    struct placed *p = malloc((size_t)nclients * sizeof *p);
    char text[ASYNC_MSG_MAX], a[160], b[160], size[160];
    int i = 0, k = -1;
    for (int n = 0; n < nclients; n++) {
        p[n] = (struct placed){.at = l->offsets + (size_t)n * (size_t)l->ndims, .ndims = l->ndims, .block = n};
        for (int d = 0; d < l->ndims; d++) p[n].cell[d] = p[n].at[d] / l->dims[d]; /* offsets are >= 0 (place) */
    }
    qsort(p, (size_t)nclients, sizeof *p, by_cell);
    while (i < nclients && (k = neighbour(p, i, 0, 0, nclients, l->dims)) < 0) i++;
    if (k >= 0) {
        int first = p[i].block < p[k].block ? i : k, second = first == i ? k : i;
        snprintf(text, sizeof text,
                 "blocks %d and %d overlap (at %s and %s, each of size %s): give each rank its own part of the "
                 "global extents",
                 p[first].block, p[second].block, list(p[first].at, l->ndims, a), list(p[second].at, l->ndims, b),
                 list(l->dims, l->ndims, size));
    }
    free(p);
    return k >= 0 ? layout_fail(cfg, l, msg, text) : 0;
}

int async_config_check_domain(struct async_config *cfg, int nclients, char msg[ASYNC_MSG_MAX]) {
    for (int i = 0; i < cfg->nlayouts; i++) {
        struct async_layout *l = &cfg->layouts[i];
        if (!l->positioned) continue;
        if (extents(cfg, l, nclients, msg)) return -1;
        l->offsets = malloc((size_t)(nclients ? nclients : 1) * (size_t)l->ndims * sizeof *l->offsets);
        for (int b = 0; b < nclients; b++)
            if (place(cfg, l, b, nclients, msg)) return -1;
        if (disjoint(cfg, l, nclients, msg)) return -1;
    }
    return 0;
}

int ioloom_async_check(const char *config_path, int clients) {
    struct async_config cfg;
    char msg[ASYNC_MSG_MAX];
    if (clients < 1)
        return async_fail(IOLOOM_ASYNC_EUSAGE, "ioloom_async_check: give 1 client or more, not %d", clients);
    int failed = async_config_load(config_path ? config_path : "(null)", &cfg, msg) ||
                 async_config_check_domain(&cfg, clients, msg);
    async_config_free(&cfg);
    return failed ? async_fail(IOLOOM_ASYNC_ECONFIG, "%s", msg) : IOLOOM_ASYNC_OK;
}

int ioloom_async_block_position(const char *variable, int *ndims, long long *offset) {
    int var = async_g.initialized ? async_config_variable(&async_g.cfg, variable) : -1;
    if (var < 0)
        return async_fail(IOLOOM_ASYNC_EUSAGE, "ioloom_async_block_position: %s '%.100s'",
                          async_g.initialized ? "no variable" : "call ioloom_async_initialize first, for",
                          variable ? variable : "(null)");
    const struct async_layout *l = async_layout_of(var);
    if (!l->positioned || !async_g.is_client)
        return async_fail(IOLOOM_ASYNC_EUSAGE, "ioloom_async_block_position: %s",
                          !async_g.is_client ? "a server has no block"
                                             : "the variable's layout gives no global extents and position");
    *ndims = l->ndims;
    for (int d = 0; d < l->ndims; d++) offset[d] = l->offsets[(size_t)async_g.client_rank * (size_t)l->ndims + d];
    return IOLOOM_ASYNC_OK;
}
