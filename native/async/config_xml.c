/* Damaris-style XML configurations for libioloom-async (seed 002 Listing 3.2, Damaris 1.x's elements), read with
 * libxml2 into the structure the YAML reader fills:
 *   <simulation name=N language=c|fortran>        fortran: a layout's dimensions are reversed to C order
 *     <architecture> <dedicated cores=K nodes=N/> <buffer size=BYTES/> <queue size=MESSAGES/> </architecture>
 *     <data> <parameter name value/> <layout name type dimensions="64,NY/2,2" [global="..." position="..."]/>
 *            <variable name layout/> <group name=G> variables </group>
 *     <actions> <event name action=FUNCTION using=LIBRARY.so/> </actions>
 *     <ioloom mode policy directory bandwidth fsync compression format ranks_per_node/>   optional, ours
 * cores=0 (or no <dedicated>) is the synchronous mode (Damaris's time partitioning), nodes=N > 0 the dedicated-nodes
 * mode (cores and nodes both > 0 is refused, as Damaris does); a variable of group G is
 * named G/name; Damaris's types real, double, integer, ... map to float32, float64, int32, ...; an event with
 * action and using runs that function (a plugin). Dimensions, Damaris's global extents and our position (a block's
 * offset per dimension) are expressions over the parameters (domain.c), reversed to C order with fortran. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include "async_internal.h"

struct xreader {
    const char *path;
    char *msg;
    int fortran;
};

static int xfail(struct xreader *r, xmlNode *n, const char *fmt, ...) {
    char what[ASYNC_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(r->msg, ASYNC_MSG_MAX, "%.200s:%ld: %.280s", r->path, n ? xmlGetLineNo(n) : 0L, what);
    return -1;
}

static int is(const xmlNode *n, const char *name) {
    return n->type == XML_ELEMENT_NODE && strcmp((const char *)n->name, name) == 0;
}

/* An attribute's text, NULL when absent (points into the document: no copy to free). */
static const char *attr(const xmlNode *n, const char *name) {
    for (xmlAttr *a = n->properties; a; a = a->next)
        if (strcmp((const char *)a->name, name) == 0)
            return a->children && a->children->content ? (const char *)a->children->content : "";
    return NULL;
}

static int number(struct xreader *r, xmlNode *n, const char *name, long min, long *out) {
    const char *s = attr(n, name);
    char *end;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || !*s || *end || v < min)
        return xfail(r, n, "<%s %s=...> must be an integer >= %ld, got '%s'", n->name, name, min, s ? s : "");
    *out = v;
    return 0;
}

static int copy(struct xreader *r, xmlNode *n, const char *name, char *out, size_t size) {
    const char *s = attr(n, name);
    if (!s || !*s || strlen(s) >= size)
        return xfail(r, n, "<%s> needs a %s of 1 to %zu characters", n->name, name, size - 1);
    strcpy(out, s);
    return 0;
}

static const char *ioloom_type(const char *damaris) {
    static const char *const map[][2] = {{"real", "float32"},  {"float", "float32"}, {"double", "float64"},
                                         {"integer", "int32"}, {"int", "int32"},     {"long", "int64"},
                                         {"short", "int16"},   {"char", "int8"},     {"byte", "uint8"}};
    for (size_t i = 0; i < sizeof map / sizeof *map; i++)
        if (strcmp(damaris, map[i][0]) == 0) return map[i][1];
    return damaris;
}

/* An attribute's comma-separated expressions ("64,NY/2,2") into out; their count (0 when absent), or -1. */
static int expressions(struct xreader *r, xmlNode *n, const char *name, char out[][ASYNC_EXPR_MAX]) {
    const char *s = attr(n, name);
    int count = 0;
    for (const char *p = s; p; count++) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (count == ASYNC_DIMS_MAX || len == 0 || len >= ASYNC_EXPR_MAX)
            return xfail(r, n, "<layout %s=...> must be 1 to %d sizes or expressions, such as \"64,NY/2,2\", got '%s'",
                         name, ASYNC_DIMS_MAX, s);
        memcpy(out[count], p, len), out[count][len] = '\0';
        p = comma ? comma + 1 : NULL;
    }
    return count;
}

/* Fortran's dimensions are C's reversed. */
static void reverse(char list[][ASYNC_EXPR_MAX], int n) {
    char t[ASYNC_EXPR_MAX];
    for (int i = 0; i < n / 2; i++) {
        memcpy(t, list[i], sizeof t);
        memcpy(list[i], list[n - 1 - i], sizeof t);
        memcpy(list[n - 1 - i], t, sizeof t);
    }
}

/* dimensions, and Damaris's global with our position (a block's offset per dimension). */
static int shape(struct xreader *r, struct async_config *c, xmlNode *n, struct async_layout *l) {
    char dims[ASYNC_DIMS_MAX][ASYNC_EXPR_MAX];
    int nglobal, nposition;
    if ((l->ndims = expressions(r, n, "dimensions", dims)) <= 0)
        return l->ndims ? -1 : xfail(r, n, "layout '%s' needs dimensions, e.g. \"64,16,2\"", l->name);
    if ((nglobal = expressions(r, n, "global", l->global_expr)) < 0 ||
        (nposition = expressions(r, n, "position", l->position_expr)) < 0)
        return -1;
    if (r->fortran) reverse(dims, l->ndims), reverse(l->global_expr, nglobal), reverse(l->position_expr, nposition);
    l->line = (int)xmlGetLineNo(n);
    return async_layout_resolve(c, l, dims, nglobal, nposition, r->msg) ? xfail(r, n, "%s", r->msg) : 0;
}

/* <parameter name value>: an integer, or an expression of the parameters before it. */
static int parameter(struct xreader *r, struct async_config *c, xmlNode *n) {
    char name[ASYNC_NAME_MAX];
    if (copy(r, n, "name", name, sizeof name)) return -1;
    return async_parameter_add(c, name, attr(n, "value"), r->msg) ? xfail(r, n, "%s", r->msg) : 0;
}

static int layout(struct xreader *r, struct async_config *c, xmlNode *n) {
    struct async_layout *l = &c->layouts[c->nlayouts];
    const char *type = attr(n, "type");
    if (copy(r, n, "name", l->name, sizeof l->name)) return -1;
    if (!type || strlen(ioloom_type(type)) >= sizeof l->type || !(l->element = async_type_size(ioloom_type(type))))
        return xfail(r, n,
                     "layout '%s': type must be real, double, integer, long, short, char, byte or int8 ... "
                     "float64",
                     l->name);
    strcpy(l->type, ioloom_type(type));
    if (shape(r, c, n, l)) return -1;
    c->nlayouts++;
    return 0;
}

static int variable(struct xreader *r, struct async_config *c, xmlNode *n, const char *group) {
    struct async_variable *v = &c->variables[c->nvariables];
    const char *name = attr(n, "name"), *l = attr(n, "layout");
    if (!name || !*name || strlen(name) + (group ? strlen(group) + 1 : 0) >= sizeof v->name)
        return xfail(r, n, "<variable> needs a name (with its group, under %d characters)", ASYNC_NAME_MAX);
    snprintf(v->name, sizeof v->name, "%s%s%s", group ? group : "", group ? "/" : "", name);
    if (!l || (v->layout = async_config_layout(c, l)) < 0)
        return xfail(r, n, "variable '%s': unknown layout '%s' (declare it before, with <layout>)", v->name,
                     l ? l : "");
    if (async_config_variable(c, v->name) >= 0) return xfail(r, n, "variable '%s' is declared twice", v->name);
    c->nvariables++;
    return 0;
}

static int data(struct xreader *r, struct async_config *c, xmlNode *d, const char *group) {
    for (xmlNode *n = d->children; n; n = n->next) {
        const char *g = attr(n, "name");
        if (is(n, "layout")      ? layout(r, c, n)
            : is(n, "variable")  ? variable(r, c, n, group)
            : is(n, "group")     ? (group ? xfail(r, n, "groups inside groups are not supported") : data(r, c, n, g))
            : is(n, "parameter") ? parameter(r, c, n)
            : n->type == XML_ELEMENT_NODE ? xfail(r, n, "unknown element <%s> in <data>", n->name)
                                          : 0)
            return -1;
    }
    return 0;
}

static int event(struct xreader *r, struct async_config *c, xmlNode *n) {
    const char *action = attr(n, "action"), *using = attr(n, "using");
    if (copy(r, n, "name", c->events[c->nevents], ASYNC_NAME_MAX)) return -1;
    if (action) {
        struct async_plugin_decl *p = &c->plugins[c->nplugins++];
        p->event = c->nevents;
        if (copy(r, n, "action", p->function, sizeof p->function) ||
            (using && copy(r, n, "using", p->library, sizeof p->library)))
            return -1;
    }
    c->nevents++;
    return 0;
}

/* <dedicated cores=K nodes=N>: K > 0 the dedicated-cores mode, N > 0 the dedicated-nodes mode, both 0 (or absent)
 * the synchronous mode. */
static int dedicated(struct xreader *r, struct async_config *c, xmlNode *n) {
    long cores = 0, nodes = 0;
    if (attr(n, "cores") && number(r, n, "cores", 0, &cores)) return -1;
    if (attr(n, "nodes") && number(r, n, "nodes", 0, &nodes)) return -1;
    if (cores > 0 && nodes > 0)
        return xfail(r, n, "<dedicated>: give cores or nodes, not both (%ld cores and %ld nodes)", cores, nodes);
    c->dedicated_cores = cores > 0 ? (int)cores : 1;
    c->dedicated_nodes = nodes > 0 ? (int)nodes : 1;
    c->mode = cores > 0 ? MODE_DEDICATED : nodes > 0 ? MODE_NODES : MODE_SYNC;
    return 0;
}

static int architecture(struct xreader *r, struct async_config *c, xmlNode *a) {
    long v;
    for (xmlNode *n = a->children; n; n = n->next) {
        if (is(n, "dedicated")) {
            if (dedicated(r, c, n)) return -1;
        } else if (is(n, "buffer")) {
            if (number(r, n, "size", 1, &v)) return -1;
            c->buffer = (size_t)v;
        } else if (is(n, "queue")) {
            if (number(r, n, "size", 2, &v)) return -1;
            c->queue = (int)v;
        }
    }
    return 0;
}

/* The index of value among names (NULL-terminated), -1 when it is not one of them. */
static int pick(const char *const *names, const char *value) {
    for (int i = 0; value && names[i]; i++)
        if (strcmp(value, names[i]) == 0) return i;
    return -1;
}

/* <ioloom format>: files (default), hdf5, logfs or hdf5-shared, as the YAML's writer.format. */
static int format(struct xreader *r, struct async_config *c, xmlNode *n) {
    static const char *const formats[] = {"files", "hdf5", "logfs", "hdf5-shared", NULL}; /* enum async_format */
    int f = pick(formats, attr(n, "format"));
    if (attr(n, "format") && f < 0) return xfail(r, n, "<ioloom>: format must be files, hdf5, logfs or hdf5-shared");
    c->format = f < 0 ? FORMAT_FILES : (enum async_format)f;
    return async_config_check_format(c, r->msg) ? xfail(r, n, "%s", r->msg) : 0;
}

/* Our own element: the mode, policy and writer, which Damaris's XML does not carry. */
static int ours(struct xreader *r, struct async_config *c, xmlNode *n) {
    static const char *const modes[] = {"synchronous", "helper-thread", "dedicated-cores", "dedicated-nodes", NULL};
    static const char *const policies[] = {"block", "spill", "skip", NULL};
    int mode = pick(modes, attr(n, "mode")), policy = pick(policies, attr(n, "policy"));
    long ranks = 0;
    if ((attr(n, "mode") && mode < 0) || (attr(n, "policy") && policy < 0))
        return xfail(r, n,
                     "<ioloom>: mode must be synchronous, helper-thread, dedicated-cores or dedicated-nodes, and "
                     "policy block, spill or skip");
    if (attr(n, "ranks_per_node") && number(r, n, "ranks_per_node", 0, &ranks)) return -1;
    c->ranks_per_node = (int)ranks;
    c->mode = mode < 0 ? c->mode : (enum async_mode)mode;
    c->policy = policy < 0 ? c->policy : (enum async_policy)policy;
    c->bandwidth = attr(n, "bandwidth") ? strtoul(attr(n, "bandwidth"), NULL, 10) : 0;
    c->fsync = attr(n, "fsync") && strcmp(attr(n, "fsync"), "true") == 0;
    c->compression = attr(n, "compression") && strcmp(attr(n, "compression"), "zstd") == 0;
    if (format(r, c, n)) return -1;
    return attr(n, "directory") ? copy(r, n, "directory", c->directory, sizeof c->directory) : 0;
}

static int count(xmlNode *parent, const char *name) {
    int n = 0;
    for (xmlNode *c = parent ? parent->children : NULL; c; c = c->next)
        n += is(c, name) ? 1 : is(c, "group") ? count(c, name) : 0;
    return n;
}

static xmlNode *child(xmlNode *parent, const char *name) {
    for (xmlNode *c = parent->children; c; c = c->next)
        if (is(c, name)) return c;
    return NULL;
}

static int simulation(struct xreader *r, struct async_config *c, xmlNode *root) {
    xmlNode *d = child(root, "data"), *a = child(root, "actions"), *arch = child(root, "architecture");
    if (!is(root, "simulation")) return xfail(r, root, "the root element must be <simulation>");
    if (copy(r, root, "name", c->name, sizeof c->name)) return -1;
    r->fortran = attr(root, "language") && strcmp(attr(root, "language"), "fortran") == 0;
    c->mode = MODE_SYNC, c->dedicated_cores = 1, c->queue = 256, c->buffer = 64UL << 20;
    snprintf(c->directory, sizeof c->directory, ".");
    c->layouts = calloc((size_t)count(d, "layout") + 1, sizeof *c->layouts);
    c->parameters = calloc((size_t)count(d, "parameter") + 1, sizeof *c->parameters);
    c->variables = calloc((size_t)count(d, "variable") + 1, sizeof *c->variables);
    c->events = calloc((size_t)count(a, "event") + 1, sizeof *c->events);
    c->plugins = calloc((size_t)count(a, "event") + 1, sizeof *c->plugins);
    if (!d || !count(d, "variable")) return xfail(r, root, "<data> must declare at least one <variable>");
    if ((arch && architecture(r, c, arch)) || data(r, c, d, NULL)) return -1;
    for (xmlNode *n = a ? a->children : NULL; n; n = n->next)
        if (is(n, "event") && event(r, c, n)) return -1;
    return child(root, "ioloom") ? ours(r, c, child(root, "ioloom")) : 0;
}

int async_config_load_xml(const char *path, struct async_config *cfg, char msg[ASYNC_MSG_MAX]) {
    struct xreader r = {path, msg, 0};
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->file, sizeof cfg->file, "%s", path);
    xmlDoc *doc = xmlReadFile(path, NULL, XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    if (!doc) {
        const xmlError *e = xmlGetLastError();
        snprintf(msg, ASYNC_MSG_MAX, "%.300s:%d: not valid XML: %.150s", path, e ? e->line : 0,
                 e && e->message ? e->message : "cannot read it");
        return -1;
    }
    int rc = simulation(&r, cfg, xmlDocGetRootElement(doc));
    xmlFreeDoc(doc);
    return rc;
}
