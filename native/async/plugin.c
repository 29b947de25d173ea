/* Plugins of libioloom-async: functions of shared libraries named in the configuration, loaded with dlopen on
 * the writer side at initialize (a missing library or function is a configuration error on every rank), and
 * functions of Python scripts, run by libioloom-async-python, which is loaded (after the configured interpreter's
 * libpython) only when a Python plugin is configured. Each runs when a client signals its event, with the blocks
 * that client wrote in the iteration so far. */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "async_internal.h"
#include "async_trace.h"

void *async_dlopen_beside(const char *name, int flags) {
    Dl_info self;
    char dir[PATH_MAX], path[PATH_MAX + 64];
    if (dladdr((void *)async_dlopen_beside, &self) && self.dli_fname && strlen(self.dli_fname) < sizeof dir) {
        snprintf(dir, sizeof dir, "%s", self.dli_fname);
        snprintf(path, sizeof path, "%s/%s", dirname(dir), name);
        void *h = dlopen(path, flags);
        if (h) return h;
    }
    return dlopen(name, flags);
}

/* The Python bridge's calls (python_plugin.c), found once; never dlclosed (the interpreter lives on). */
static struct {
    void *(*load)(const char *, const char *, const char *, char *, size_t);
    void (*call)(void *, const char *, long long, int, const struct ioloom_async_block *, int);
} py;

/* The interpreter's file: a path, or a name found on PATH, with its links resolved. */
static int interpreter(const char *python, char out[PATH_MAX]) {
    const char *path = getenv("PATH");
    char candidate[PATH_MAX + 64];
    if (strchr(python, '/')) return realpath(python, out) ? 0 : -1;
    for (const char *p = path ? path : ""; *p; p += strcspn(p, ":") + (p[strcspn(p, ":")] == ':')) {
        snprintf(candidate, sizeof candidate, "%.*s/%s", (int)strcspn(p, ":"), p, python);
        if (access(candidate, X_OK) == 0 && realpath(candidate, out)) return 0;
    }
    return -1;
}

/* libpython of the interpreter (<prefix>/lib/libpython3.N.so.1.0, else the system's of that version), global so
 * that numpy's extension modules find it; its version must be the one this build embeds. */
static int load_libpython(const char *python, char msg[ASYNC_MSG_MAX]) {
    char real[PATH_MAX], prefix[PATH_MAX], lib[PATH_MAX + 64], soname[64];
    int minor = -1;
    if (interpreter(python, real) || sscanf(strrchr(real, '/') + 1, "python3.%d", &minor) != 1)
        return snprintf(msg, ASYNC_MSG_MAX,
                        "python plugins: python: %.300s is not a python3.N interpreter (give "
                        "its path, e.g. python: /usr/bin/python3)",
                        python),
               -1;
    if (IOLOOM_PYTHON_MINOR == 0) /* built without Python's headers */
        return snprintf(msg, ASYNC_MSG_MAX, "python plugins: this build has none (build with python3-dev)"), -1;
    if (minor != IOLOOM_PYTHON_MINOR)
        return snprintf(msg, ASYNC_MSG_MAX, "python plugins: %.300s is Python 3.%d; this build embeds Python 3.%d",
                        real, minor, IOLOOM_PYTHON_MINOR),
               -1;
    snprintf(prefix, sizeof prefix, "%s", real);
    snprintf(soname, sizeof soname, "libpython3.%d.so.1.0", minor);
    snprintf(lib, sizeof lib, "%s/lib/%s", dirname(dirname(prefix)), soname);
    if (dlopen(lib, RTLD_NOW | RTLD_GLOBAL) || dlopen(soname, RTLD_NOW | RTLD_GLOBAL)) return 0;
    return snprintf(msg, ASYNC_MSG_MAX, "python plugins: cannot load %s: %.300s", soname, dlerror()), -1;
}

static int load_bridge(char msg[ASYNC_MSG_MAX]) {
    if (py.call) return 0;
    if (load_libpython(async_g.cfg.python, msg)) return -1;
    void *h = async_dlopen_beside("libioloom-async-python.so", RTLD_NOW | RTLD_LOCAL);
    *(void **)&py.load = h ? dlsym(h, "ioloom_async_python_load") : NULL;
    *(void **)&py.call = py.load ? dlsym(h, "ioloom_async_python_call") : NULL;
    if (py.call) return 0;
    return snprintf(msg, ASYNC_MSG_MAX, "python plugins: cannot load libioloom-async-python.so: %.300s",
                    h ? "it lacks its functions" : dlerror()),
           -1;
}

static int load_python(int i, char msg[ASYNC_MSG_MAX]) {
    const struct async_plugin_decl *p = &async_g.cfg.plugins[i];
    if (load_bridge(msg)) return -1;
    async_g.python_plugins[i] = py.load(async_g.cfg.python, p->script, p->function, msg, ASYNC_MSG_MAX);
    return async_g.python_plugins[i] ? 0 : -1;
}

static int load_c(int i, char msg[ASYNC_MSG_MAX]) {
    const struct async_plugin_decl *p = &async_g.cfg.plugins[i];
    const char *library = p->library[0] ? p->library : NULL; /* none: the program */
    void *h = async_g.plugin_handles[i] = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!h) return snprintf(msg, ASYNC_MSG_MAX, "plugin: cannot load %.400s", dlerror()), -1;
    *(void **)&async_g.plugin_fns[i] = dlsym(h, p->function);
    if (async_g.plugin_fns[i]) return 0;
    return snprintf(msg, ASYNC_MSG_MAX, "plugin: %.300s has no function %s (exported, not static)",
                    library ? library : "the program", p->function),
           -1;
}

int async_plugins_load(char msg[ASYNC_MSG_MAX]) {
    const struct async_config *c = &async_g.cfg;
    async_g.plugin_fns = calloc((size_t)c->nplugins + 1, sizeof *async_g.plugin_fns);
    async_g.plugin_handles = calloc((size_t)c->nplugins + 1, sizeof *async_g.plugin_handles);
    async_g.python_plugins = calloc((size_t)c->nplugins + 1, sizeof *async_g.python_plugins);
    for (int i = 0; i < c->nplugins; i++)
        if (c->plugins[i].script[0] ? load_python(i, msg) : load_c(i, msg)) return -1;
    return 0;
}

/* Python functions stay referenced: the interpreter outlives the library's state (it cannot start twice). */
void async_plugins_unload(void) {
    for (int i = 0; async_g.plugin_handles && i < async_g.cfg.nplugins; i++)
        if (async_g.plugin_handles[i]) dlclose(async_g.plugin_handles[i]);
    free(async_g.plugin_handles);
    free(async_g.plugin_fns);
    free(async_g.python_plugins);
}

struct ioloom_async_block async_block_of(int var, const void *data, int block) {
    const struct async_layout *l = async_layout_of(var);
    return (struct ioloom_async_block){
        async_g.cfg.variables[var].name, l->type, l->ndims, l->dims, data, l->bytes, block};
}

void async_plugins_run(int event, int64_t iteration, int block, const struct ioloom_async_block *blocks, int n,
                       int node) {
    size_t nbytes = 0;
    for (int k = 0; k < n; k++) nbytes += blocks[k].nbytes;
    for (int i = 0; i < async_g.cfg.nplugins; i++) {
        if (async_g.cfg.plugins[i].event != event || async_g.cfg.plugins[i].node_scope != node) continue;
        double start = async_now();
        if (async_g.python_plugins[i])
            py.call(async_g.python_plugins[i], async_g.cfg.events[event], (long long)iteration, block, blocks, n);
        else
            async_g.plugin_fns[i](async_g.cfg.events[event], (long long)iteration, block, blocks, n);
        async_trace_plugin(start, block, iteration, nbytes);
    }
}
