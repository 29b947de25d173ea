/* Plugins of libioloom-async: functions of shared libraries named in the configuration, loaded with dlopen on
 * the writer side at initialize (a missing library or function is a configuration error on every rank) and run
 * when a client signals their event, with the blocks that client wrote in the iteration so far. */
#include <dlfcn.h>
#include <stdlib.h>
#include "async_internal.h"

int async_plugins_load(char msg[ASYNC_MSG_MAX]) {
    const struct async_config *c = &async_g.cfg;
    async_g.plugin_fns = calloc((size_t)c->nplugins + 1, sizeof *async_g.plugin_fns);
    async_g.plugin_handles = calloc((size_t)c->nplugins + 1, sizeof *async_g.plugin_handles);
    for (int i = 0; i < c->nplugins; i++) {
        const char *library = c->plugins[i].library[0] ? c->plugins[i].library : NULL; /* none: the program */
        void *h = async_g.plugin_handles[i] = dlopen(library, RTLD_NOW | RTLD_LOCAL);
        if (!h) return snprintf(msg, ASYNC_MSG_MAX, "plugin: cannot load %.400s", dlerror()), -1;
        *(void **)&async_g.plugin_fns[i] = dlsym(h, c->plugins[i].function);
        if (!async_g.plugin_fns[i])
            return snprintf(msg, ASYNC_MSG_MAX, "plugin: %.300s has no function %s (exported, not static)",
                            library ? library : "the program", c->plugins[i].function),
                   -1;
    }
    return 0;
}

void async_plugins_unload(void) {
    for (int i = 0; async_g.plugin_handles && i < async_g.cfg.nplugins; i++)
        if (async_g.plugin_handles[i]) dlclose(async_g.plugin_handles[i]);
    free(async_g.plugin_handles);
    free(async_g.plugin_fns);
}

struct ioloom_async_block async_block_of(int var, const void *data) {
    const struct async_layout *l = async_layout_of(var);
    return (struct ioloom_async_block){async_g.cfg.variables[var].name, l->type, l->ndims, l->dims, data, l->bytes};
}

void async_plugins_run(int event, int64_t iteration, int block, const struct ioloom_async_block *blocks, int n) {
    for (int i = 0; i < async_g.cfg.nplugins; i++)
        if (async_g.cfg.plugins[i].event == event)
            async_g.plugin_fns[i](async_g.cfg.events[event], (long long)iteration, block, blocks, n);
}
