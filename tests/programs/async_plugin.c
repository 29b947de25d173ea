/* Test plugin for libioloom-async: writes one line to stderr per signalled event with the blocks it was given
 * (variable, first element, size, type, dimensions; show_node: variable@block=first element, for node-scope
 * plugins), so that the test can check the plugin saw the iteration's data. The line is built first and written at
 * once: in the helper-thread mode the simulation's own thread prints too. */
#include <stdio.h>
#include <unistd.h>
#include "ioloom_async.h"

void show_blocks(const char *event, long long iteration, int block, const struct ioloom_async_block *blocks,
                 int nblocks) {
    char line[4096];
    int n = snprintf(line, sizeof line, "plugin %s iteration %lld block %d:", event, iteration, block);
    for (int i = 0; i < nblocks && n < (int)sizeof line; i++)
        n += snprintf(line + n, sizeof line - (size_t)n, " %s=%.3f/%zu/%s/%d", blocks[i].variable,
                      ((const double *)blocks[i].data)[0], blocks[i].nbytes, blocks[i].type, blocks[i].ndims);
    n += snprintf(line + n, sizeof line - (size_t)n, "\n");
    if (write(2, line, (size_t)n) != n) _exit(3);
}

void show_node(const char *event, long long iteration, int block, const struct ioloom_async_block *blocks,
               int nblocks) {
    char line[8192];
    int n = snprintf(line, sizeof line, "node plugin %s iteration %lld block %d:", event, iteration, block);
    for (int i = 0; i < nblocks && n < (int)sizeof line; i++)
        n += snprintf(line + n, sizeof line - (size_t)n, " %s@%d=%.3f", blocks[i].variable, blocks[i].block,
                      ((const double *)blocks[i].data)[0]);
    n += snprintf(line + n, sizeof line - (size_t)n, "\n");
    if (write(2, line, (size_t)n) != n) _exit(3);
}
