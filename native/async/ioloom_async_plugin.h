/* libioloom-async's plugin interface: what a plugin function receives (docs/async.md, Plugins). It needs no MPI,
 * so plugin libraries and the Python bridge (python_plugin.c) include it alone; ioloom_async.h includes it. */
#ifndef IOLOOM_ASYNC_PLUGIN_H
#define IOLOOM_ASYNC_PLUGIN_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a plugin receives: one block of one variable, read-only and valid during the call (in the helper-thread and
 * dedicated-cores modes it points into the shared memory: no copy). */
struct ioloom_async_block {
    const char *variable;
    const char *type; /* int8 ... uint64, float32, float64 */
    int ndims;
    const long *dimensions; /* C order, slowest first */
    const void *data;
    size_t nbytes;
    int block; /* the client's block id (its rank among clients) */
};
/* A plugin (configuration: plugins: [{event: E, library: L.so, function: F}]) runs on the writer side when a
 * client signals E, with the blocks that client has written in the iteration so far; with scope: node, once per
 * iteration when all the server's clients signalled E, with all their blocks of the iteration (block -1). */
typedef void (*ioloom_async_plugin)(const char *event, long long iteration, int block,
                                    const struct ioloom_async_block *blocks, int nblocks);

#ifdef __cplusplus
}
#endif
#endif
