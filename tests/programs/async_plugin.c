/* Test plugin for libioloom-async: prints, for each signalled event, the blocks it was given (variable, first
 * element, size), so that the test can check the plugin saw the iteration's data. */
#include <stdio.h>
#include "ioloom_async.h"

void show_blocks(const char *event, long long iteration, int block, const struct ioloom_async_block *blocks,
                 int nblocks)
{
    printf("plugin %s iteration %lld block %d:", event, iteration, block);
    for (int i = 0; i < nblocks; i++)
        printf(" %s=%.3f/%zu/%s/%d", blocks[i].variable, ((const double *)blocks[i].data)[0], blocks[i].nbytes,
               blocks[i].type, blocks[i].ndims);
    printf("\n");
    fflush(stdout);
}
