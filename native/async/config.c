/* The YAML configuration of libioloom-async (docs/async.md): read with libyaml's document API and checked
 * completely here, so that every mistake is one line naming the file's line, before any rank starts. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>
#include "async_internal.h"

struct reader {
    yaml_document_t doc;
    const char *path;
    char *msg;
};

static int fail(struct reader *r, const yaml_node_t *n, const char *fmt, ...) {
    char what[ASYNC_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(r->msg, ASYNC_MSG_MAX, "%.200s:%lu: %.280s", r->path, n ? (unsigned long)n->start_mark.line + 1 : 0UL,
             what);
    return -1;
}

static const char *scalar(const yaml_node_t *n) {
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static yaml_node_t *node(struct reader *r, int id) { return yaml_document_get_node(&r->doc, id); }

/* The value of key in mapping m, NULL when absent. */
static yaml_node_t *lookup(struct reader *r, yaml_node_t *m, const char *key) {
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        const char *k = scalar(node(r, p->key));
        if (k && strcmp(k, key) == 0) return node(r, p->value);
    }
    return NULL;
}

/* Every key of mapping m must be one of the NULL-terminated allowed ones (a misspelt key is an error). */
static int known_keys(struct reader *r, yaml_node_t *m, const char *where, const char *const *allowed) {
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        const char *k = scalar(node(r, p->key));
        const char *const *a = allowed;
        while (*a && (!k || strcmp(*a, k) != 0)) a++;
        if (!*a) return fail(r, node(r, p->key), "unknown key '%s' in %s", k ? k : "?", where);
    }
    return 0;
}

static int is_mapping(struct reader *r, yaml_node_t *n, const char *what) {
    return n && n->type == YAML_MAPPING_NODE ? 0 : fail(r, n, "%s must be a mapping", what);
}

static int name_copy(struct reader *r, yaml_node_t *n, char out[ASYNC_NAME_MAX], const char *what) {
    const char *s = scalar(n);
    if (!s || !*s || strlen(s) >= ASYNC_NAME_MAX)
        return fail(r, n, "%s must be a name of 1 to %d characters", what, ASYNC_NAME_MAX - 1);
    strcpy(out, s);
    return 0;
}

static int integer(struct reader *r, yaml_node_t *n, const char *what, long min, long *out) {
    const char *s = scalar(n);
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v < min)
        return fail(r, n, "%s must be an integer >= %ld, got '%s'", what, min, s ? s : "(not a scalar)");
    *out = v;
    return 0;
}

/* A number from 0 to 4 (a log-normal's sigma). */
static int fraction(struct reader *r, yaml_node_t *n, const char *what, double *out) {
    const char *s = scalar(n);
    char *end;
    double v = s ? strtod(s, &end) : -1;
    if (!s || !*s || *end || !(v >= 0 && v <= 4)) return fail(r, n, "%s must be a number from 0 to 4", what);
    *out = v;
    return 0;
}

/* A byte count with an optional unit: 4096, 64KiB, 16MiB, 1GiB (K, M, G mean the same). */
static int size_value(struct reader *r, yaml_node_t *n, const char *what, size_t *out) {
    static const char *const units[] = {"", "k", "kib", "m", "mib", "g", "gib"};
    static const size_t scale[] = {1, 1UL << 10, 1UL << 10, 1UL << 20, 1UL << 20, 1UL << 30, 1UL << 30};
    const char *s = scalar(n);
    char *end;
    unsigned long long v = s ? strtoull(s, &end, 10) : 0;
    for (size_t i = 0; s && end != s && i < sizeof units / sizeof *units; i++)
        if (strcasecmp(end, units[i]) == 0 && v > 0) {
            *out = (size_t)v * scale[i];
            return 0;
        }
    return fail(r, n, "%s must be a size such as 64MiB, 512KiB or 1048576, got '%s'", what, s ? s : "?");
}

static int boolean(struct reader *r, yaml_node_t *n, const char *what, int *out) {
    const char *s = scalar(n);
    if (s && (!strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "false") || !strcmp(s, "no"))) {
        *out = s[0] == 't' || s[0] == 'y';
        return 0;
    }
    return fail(r, n, "%s must be true or false, got '%s'", what, s ? s : "?");
}

static int choice(struct reader *r, yaml_node_t *n, const char *what, const char *const *names, int *out) {
    const char *s = scalar(n);
    for (int i = 0; s && names[i]; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = i;
            return 0;
        }
    char list[256] = "";
    for (int i = 0; names[i]; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
    return fail(r, n, "%s must be one of %s; got '%s'", what, list, s ? s : "?");
}

size_t async_type_size(const char *type) {
    static const char *const names[] = {"int8",   "uint8", "int16",  "uint16",  "int32",
                                        "uint32", "int64", "uint64", "float32", "float64"};
    static const size_t sizes[] = {1, 1, 2, 2, 4, 4, 8, 8, 4, 8};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        if (strcmp(type, names[i]) == 0) return sizes[i];
    return 0;
}

/* A list of 1 to ASYNC_DIMS_MAX expressions (integers, or text over parameters) into out; their count, or -1. */
static int expressions(struct reader *r, yaml_node_t *n, const char *what, char out[][ASYNC_EXPR_MAX]) {
    int count = 0;
    if (!n || n->type != YAML_SEQUENCE_NODE || n->data.sequence.items.top == n->data.sequence.items.start ||
        n->data.sequence.items.top - n->data.sequence.items.start > ASYNC_DIMS_MAX)
        return fail(r, n, "%s must be a list of 1 to %d sizes or expressions, e.g. [64, 16, NZ]", what, ASYNC_DIMS_MAX);
    for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
        const char *e = scalar(node(r, *i));
        if (!e || !*e || strlen(e) >= ASYNC_EXPR_MAX)
            return fail(r, node(r, *i), "%s: each must be a number or an expression of 1 to %d characters", what,
                        ASYNC_EXPR_MAX - 1);
        strcpy(out[count++], e);
    }
    return count;
}

static int layout(struct reader *r, struct async_config *cfg, yaml_node_pair_t *p, struct async_layout *l) {
    static const char *const keys[] = {"type", "dimensions", "global", "position", NULL};
    yaml_node_t *v = node(r, p->value), *t, *d, *g, *at;
    char dims[ASYNC_DIMS_MAX][ASYNC_EXPR_MAX], what[ASYNC_NAME_MAX + 32];
    int nglobal = 0, nposition = 0;
    if (name_copy(r, node(r, p->key), l->name, "a layout's name") || is_mapping(r, v, "a layout") ||
        known_keys(r, v, "a layout", keys))
        return -1;
    l->line = (int)v->start_mark.line + 1;
    if (!(t = lookup(r, v, "type")) || !scalar(t) || strlen(scalar(t)) >= sizeof l->type ||
        !(l->element = async_type_size(scalar(t))))
        return fail(r, t ? t : v,
                    "layout '%s': type must be one of int8, uint8, int16, uint16, int32, uint32, "
                    "int64, uint64, float32, float64",
                    l->name);
    strcpy(l->type, scalar(t));
    snprintf(what, sizeof what, "layout '%s': dimensions", l->name);
    if ((l->ndims = expressions(r, (d = lookup(r, v, "dimensions")) ? d : v, what, dims)) < 0) return -1;
    snprintf(what, sizeof what, "layout '%s': global", l->name);
    if ((g = lookup(r, v, "global")) && (nglobal = expressions(r, g, what, l->global_expr)) < 0) return -1;
    snprintf(what, sizeof what, "layout '%s': position", l->name);
    if ((at = lookup(r, v, "position")) && (nposition = expressions(r, at, what, l->position_expr)) < 0) return -1;
    return async_layout_resolve(cfg, l, dims, nglobal, nposition, r->msg) ? fail(r, at ? at : v, "%s", r->msg) : 0;
}

/* parameters: {NAME: integer or expression of the parameters before it}, in order. */
static int parameters(struct reader *r, struct async_config *cfg, yaml_node_t *m) {
    char name[ASYNC_NAME_MAX];
    if (!m) return 0;
    if (is_mapping(r, m, "parameters")) return -1;
    cfg->parameters =
        calloc((size_t)(m->data.mapping.pairs.top - m->data.mapping.pairs.start) + 1, sizeof *cfg->parameters);
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        if (name_copy(r, node(r, p->key), name, "a parameter's name")) return -1;
        if (async_parameter_add(cfg, name, scalar(node(r, p->value)), r->msg))
            return fail(r, node(r, p->key), "%s", r->msg);
    }
    return 0;
}

int async_config_layout(const struct async_config *cfg, const char *name) {
    for (int i = 0; i < cfg->nlayouts; i++)
        if (strcmp(cfg->layouts[i].name, name) == 0) return i;
    return -1;
}

static int variable(struct reader *r, struct async_config *cfg, yaml_node_pair_t *p, struct async_variable *v) {
    static const char *const keys[] = {"layout", NULL};
    yaml_node_t *m = node(r, p->value), *l;
    if (name_copy(r, node(r, p->key), v->name, "a variable's name") || is_mapping(r, m, "a variable") ||
        known_keys(r, m, "a variable", keys))
        return -1;
    if (!(l = lookup(r, m, "layout")) || !scalar(l)) return fail(r, m, "variable '%s' needs a layout", v->name);
    if ((v->layout = async_config_layout(cfg, scalar(l))) < 0)
        return fail(r, l, "variable '%s': unknown layout '%s' (declare it under layouts)", v->name, scalar(l));
    return 0;
}

static int section_count(yaml_node_t *m) {
    return m ? (int)(m->data.mapping.pairs.top - m->data.mapping.pairs.start) : 0;
}

static int layouts(struct reader *r, struct async_config *cfg, yaml_node_t *m) {
    if (!m || is_mapping(r, m, "layouts") || !(cfg->nlayouts = section_count(m)))
        return fail(r, m, "layouts: declare at least one layout (name: {type: float64, dimensions: [...]})");
    cfg->layouts = calloc((size_t)cfg->nlayouts, sizeof *cfg->layouts);
    for (int i = 0; i < cfg->nlayouts; i++)
        if (layout(r, cfg, m->data.mapping.pairs.start + i, &cfg->layouts[i])) return -1;
    return 0;
}

static int variables(struct reader *r, struct async_config *cfg, yaml_node_t *m) {
    if (!m || is_mapping(r, m, "variables") || !(cfg->nvariables = section_count(m)))
        return fail(r, m, "variables: declare at least one variable (name: {layout: L})");
    cfg->variables = calloc((size_t)cfg->nvariables, sizeof *cfg->variables);
    for (int i = 0; i < cfg->nvariables; i++)
        if (variable(r, cfg, m->data.mapping.pairs.start + i, &cfg->variables[i])) return -1;
    for (int i = 0; i < cfg->nvariables; i++)
        if (async_config_variable(cfg, cfg->variables[i].name) != i)
            return fail(r, m, "variable '%s' is declared twice", cfg->variables[i].name);
    return 0;
}

static int events(struct reader *r, struct async_config *cfg, yaml_node_t *s) {
    if (!s) return 0;
    if (s->type != YAML_SEQUENCE_NODE) return fail(r, s, "events must be a list of names, e.g. [checkpoint, analyse]");
    cfg->nevents = (int)(s->data.sequence.items.top - s->data.sequence.items.start);
    cfg->events = calloc((size_t)cfg->nevents + 1, sizeof *cfg->events);
    for (int i = 0; i < cfg->nevents; i++)
        if (name_copy(r, node(r, s->data.sequence.items.start[i]), cfg->events[i], "an event")) return -1;
    return 0;
}

static int path_copy(struct reader *r, yaml_node_t *n, char *out, size_t size, const char *what) {
    const char *s = scalar(n);
    if (!s || !*s || strlen(s) >= size) return fail(r, n, "%s must be a path", what);
    strcpy(out, s);
    return 0;
}

/* A plugin: {event, library, function} (C) or {event, script, function} (Python). */
static int plugin(struct reader *r, struct async_config *cfg, yaml_node_t *m, struct async_plugin_decl *p) {
    static const char *const keys[] = {"event", "library", "script", "function", "scope", NULL};
    static const char *const scopes[] = {"client", "node", NULL};
    yaml_node_t *e, *library, *script;
    if (is_mapping(r, m, "a plugin") || known_keys(r, m, "a plugin", keys)) return -1;
    if ((e = lookup(r, m, "scope")) && choice(r, e, "plugin: scope", scopes, &p->node_scope)) return -1;
    if (p->node_scope && cfg->mode != MODE_DEDICATED && cfg->mode != MODE_NODES)
        return fail(r, e,
                    "plugin: scope node runs on a server once all its clients signalled: it needs mode "
                    "dedicated-cores or dedicated-nodes");
    cfg->node_plugins += p->node_scope;
    if (!(e = lookup(r, m, "event")) || (p->event = async_config_event(cfg, scalar(e))) < 0)
        return fail(r, e ? e : m, "plugin: event '%s' is not declared under events", e && scalar(e) ? scalar(e) : "");
    library = lookup(r, m, "library"), script = lookup(r, m, "script");
    if (!lookup(r, m, "function") || !library == !script)
        return fail(r, m, "plugin: give its function and either its library (a .so path) or its script (a .py path)");
    return (library ? path_copy(r, library, p->library, sizeof p->library, "plugin: library")
                    : path_copy(r, script, p->script, sizeof p->script, "plugin: script")) ||
           name_copy(r, lookup(r, m, "function"), p->function, "plugin: function");
}

static int plugins(struct reader *r, struct async_config *cfg, yaml_node_t *s) {
    if (!s) return 0;
    if (s->type != YAML_SEQUENCE_NODE)
        return fail(r, s, "plugins must be a list of {event: E, library: L.so, function: F}");
    cfg->nplugins = (int)(s->data.sequence.items.top - s->data.sequence.items.start);
    cfg->plugins = calloc((size_t)cfg->nplugins + 1, sizeof *cfg->plugins);
    for (int i = 0; i < cfg->nplugins; i++)
        if (plugin(r, cfg, node(r, s->data.sequence.items.start[i]), &cfg->plugins[i])) return -1;
    return 0;
}

/* writer.format, checked against the mode and compression (the hdf5 stores are not thread-safe nor compressed). */
static int format(struct reader *r, struct async_config *cfg, yaml_node_t *n) {
    static const char *const formats[] = {"files", "hdf5", "logfs", "hdf5-shared", NULL}; /* enum async_format */
    int f;
    if (n && choice(r, n, "writer: format", formats, &f)) return -1;
    cfg->format = n ? (enum async_format)f : FORMAT_FILES;
    return async_config_check_format(cfg, r->msg) ? fail(r, n, "%s", r->msg) : 0;
}

int async_config_check_format(const struct async_config *cfg, char msg[ASYNC_MSG_MAX]) {
    if (cfg->format == FORMAT_HDF5_SHARED && cfg->mode != MODE_DEDICATED && cfg->mode != MODE_NODES)
        return snprintf(msg, ASYNC_MSG_MAX,
                        "writer: format hdf5-shared is written together by the servers of mode dedicated-cores or "
                        "dedicated-nodes: change the mode, or use format hdf5 (a file per writer)"),
               -1;
    if (cfg->format != FORMAT_HDF5 && cfg->format != FORMAT_HDF5_SHARED) return 0;
    if (cfg->mode == MODE_THREAD)
        return snprintf(msg, ASYNC_MSG_MAX,
                        "writer: format hdf5 is written by dedicated cores or synchronously, not by a helper "
                        "thread (HDF5 is not thread-safe beside the simulation): change the mode or the format"),
               -1;
    if (cfg->compression)
        return snprintf(msg, ASYNC_MSG_MAX, "writer: the hdf5 formats store blocks uncompressed: use compression none"),
               -1;
    return 0;
}

static int writer(struct reader *r, struct async_config *cfg, yaml_node_t *m) {
    static const char *const keys[] = {"directory", "bandwidth", "variability", "fsync", "compression", "format", NULL};
    yaml_node_t *d;
    if (!m) return fail(r, m, "writer: give the output directory (writer: {directory: out})");
    if (is_mapping(r, m, "writer") || known_keys(r, m, "writer", keys)) return -1;
    if (!(d = lookup(r, m, "directory")) || !scalar(d) || !*scalar(d) || strlen(scalar(d)) >= sizeof cfg->directory)
        return fail(r, d ? d : m, "writer: directory must be a path");
    strcpy(cfg->directory, scalar(d));
    if ((d = lookup(r, m, "fsync")) && boolean(r, d, "writer: fsync", &cfg->fsync)) return -1;
    if ((d = lookup(r, m, "compression")) && (!scalar(d) || (strcmp(scalar(d), "zstd") && strcmp(scalar(d), "none"))))
        return fail(r, d, "writer: compression must be zstd or none");
    cfg->compression = d && strcmp(scalar(d), "zstd") == 0;
    if (format(r, cfg, lookup(r, m, "format"))) return -1;
    if ((d = lookup(r, m, "variability")) && fraction(r, d, "writer: variability", &cfg->variability)) return -1;
    return (d = lookup(r, m, "bandwidth")) ? size_value(r, d, "writer: bandwidth (bytes per second)", &cfg->bandwidth)
                                           : 0;
}

static int architecture(struct reader *r, struct async_config *cfg, yaml_node_t *root) {
    static const char *const modes[] = {"synchronous", "helper-thread", "dedicated-cores", "dedicated-nodes", NULL};
    static const char *const policies[] = {"block", "spill", "skip", NULL};
    yaml_node_t *n;
    long v;
    int c;
    if ((n = lookup(r, root, "mode")) && choice(r, n, "mode", modes, &c)) return -1;
    cfg->mode = n ? (enum async_mode)c : MODE_SYNC;
    if ((n = lookup(r, root, "policy")) && choice(r, n, "policy", policies, &c)) return -1;
    cfg->policy = n ? (enum async_policy)c : POLICY_BLOCK;
    if ((n = lookup(r, root, "dedicated_cores")) && integer(r, n, "dedicated_cores", 1, &v)) return -1;
    cfg->dedicated_cores = n ? (int)v : 1;
    if ((n = lookup(r, root, "dedicated_nodes")) && integer(r, n, "dedicated_nodes", 1, &v)) return -1;
    cfg->dedicated_nodes = n ? (int)v : 1;
    if ((n = lookup(r, root, "ranks_per_node")) && integer(r, n, "ranks_per_node", 0, &v)) return -1;
    cfg->ranks_per_node = n ? (int)v : 0;
    if ((n = lookup(r, root, "queue")) && integer(r, n, "queue", 2, &v)) return -1;
    cfg->queue = n ? (int)v : 256;
    cfg->buffer = 64UL << 20;
    return (n = lookup(r, root, "buffer")) ? size_value(r, n, "buffer", &cfg->buffer) : 0;
}

static int document(struct reader *r, struct async_config *cfg) {
    static const char *const keys[] = {
        "name",   "mode",    "dedicated_cores", "dedicated_nodes", "ranks_per_node", "buffer", "queue",      "policy",
        "writer", "layouts", "variables",       "events",          "plugins",        "python", "parameters", NULL};
    yaml_node_t *root = yaml_document_get_root_node(&r->doc), *n;
    if (!root || is_mapping(r, root, "the configuration") || known_keys(r, root, "the configuration", keys)) return -1;
    if (!(n = lookup(r, root, "name")) || name_copy(r, n, cfg->name, "name"))
        return n ? -1 : fail(r, root, "name: give the output's name (name: cm1)");
    snprintf(cfg->python, sizeof cfg->python, "python3");
    if ((n = lookup(r, root, "python")) && path_copy(r, n, cfg->python, sizeof cfg->python, "python")) return -1;
    return architecture(r, cfg, root) || writer(r, cfg, lookup(r, root, "writer")) ||
                   parameters(r, cfg, lookup(r, root, "parameters")) || layouts(r, cfg, lookup(r, root, "layouts")) ||
                   variables(r, cfg, lookup(r, root, "variables")) || events(r, cfg, lookup(r, root, "events")) ||
                   plugins(r, cfg, lookup(r, root, "plugins"))
               ? -1
               : 0;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcasecmp(s + n - k, suffix) == 0;
}

int async_config_load(const char *path, struct async_config *cfg, char msg[ASYNC_MSG_MAX]) {
    if (ends_with(path, ".xml")) return async_config_load_xml(path, cfg, msg);
    struct reader r = {.path = path, .msg = msg};
    yaml_parser_t parser;
    FILE *f = fopen(path, "r");
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->file, sizeof cfg->file, "%s", path);
    if (!f) {
        snprintf(msg, ASYNC_MSG_MAX, "%.400s: cannot read the configuration: %s", path, strerror(errno));
        return -1;
    }
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_file(&parser, f);
    int ok = yaml_parser_load(&parser, &r.doc);
    if (!ok)
        snprintf(msg, ASYNC_MSG_MAX, "%.300s:%lu: not valid YAML: %.150s", path,
                 (unsigned long)parser.problem_mark.line + 1, parser.problem ? parser.problem : "syntax error");
    int rc = ok ? document(&r, cfg) : -1;
    if (ok) yaml_document_delete(&r.doc);
    yaml_parser_delete(&parser);
    fclose(f);
    return rc;
}

void async_config_free(struct async_config *cfg) {
    for (int i = 0; cfg->layouts && i < cfg->nlayouts; i++) free(cfg->layouts[i].offsets);
    free(cfg->layouts);
    free(cfg->parameters);
    free(cfg->variables);
    free(cfg->events);
    free(cfg->plugins);
    memset(cfg, 0, sizeof *cfg);
}

int async_config_variable(const struct async_config *cfg, const char *name) {
    for (int i = 0; name && i < cfg->nvariables; i++)
        if (strcmp(cfg->variables[i].name, name) == 0) return i;
    return -1;
}

int async_config_event(const struct async_config *cfg, const char *name) {
    for (int i = 0; name && i < cfg->nevents; i++)
        if (strcmp(cfg->events[i], name) == 0) return i;
    return -1;
}

size_t async_config_largest_block(const struct async_config *cfg) {
    size_t largest = 0;
    for (int i = 0; i < cfg->nvariables; i++)
        if (cfg->layouts[cfg->variables[i].layout].bytes > largest)
            largest = cfg->layouts[cfg->variables[i].layout].bytes;
    return largest;
}

size_t async_config_ring_need(const struct async_config *cfg) {
    size_t header = sizeof(struct async_chunk), need = async_config_largest_block(cfg) + header;
    int whole = cfg->nplugins || cfg->format == FORMAT_HDF5_SHARED; /* the writer keeps an iteration's blocks */
    for (int i = 0; whole && i < cfg->nvariables; i++)              /* a whole iteration, plus the padding at the end */
        need += (cfg->layouts[cfg->variables[i].layout].bytes + ASYNC_ALIGN - 1) / ASYNC_ALIGN * ASYNC_ALIGN + header;
    return need;
}
