/* Zero copy (Damaris's alloc/commit/clear, seed 002 Ch. 4): alloc hands the simulation a block of the ring, which
 * it fills in place; commit tells the writer; clear says the simulation no longer reads it, and only then may
 * the ring reuse it. When the ring is full (spill, skip) or in the synchronous mode, alloc hands out a process
 * buffer instead, and commit writes, spills or drops a copy of it. */
#include <stdlib.h>
#include "async_internal.h"
#include "async_trace.h"
#include "ioloom_ops.h"

enum { NONE = -1, PROCESS_BUFFER = -2 };

static void *process_buffer(int var) {
    if (!async_g.scratch[var]) async_g.scratch[var] = malloc(async_layout_of(var)->bytes);
    async_g.chunk_of[var] = PROCESS_BUFFER;
    return async_g.scratch[var];
}

static void *alloc_block(int var) {
    if (async_g.cfg.mode == MODE_SYNC || async_g.skipping) return process_buffer(var);
    int64_t position = async_reserve(async_layout_of(var)->bytes);
    if (position < 0) return process_buffer(var);
    async_g.chunk_of[var] = position;
    return async_channel_chunk(async_g.channel, (uint64_t)position) + 1;
}

void *ioloom_async_alloc(const char *variable) {
    double start = async_now();
    int var;
    if (async_check_variable(variable, &var)) return async_timed(start, 0), NULL;
    if (async_g.chunk_of[var] != NONE)
        return async_timed(start, async_fail(IOLOOM_ASYNC_EUSAGE,
                                             "variable '%s' is already allocated: commit it "
                                             "before allocating it again",
                                             variable)),
               NULL;
    void *block = alloc_block(var);
    async_timed(start, 0);
    return block;
}

/* A ring chunk goes to the writer as it is; the client keeps it until clear. */
static void commit_chunk(int var) {
    struct async_msg m = {MSG_WRITE, var, async_g.iteration, (uint64_t)async_g.chunk_of[var]};
    async_g.uncleared[var * ASYNC_UNCLEARED_MAX + async_g.nuncleared[var]++] = async_g.chunk_of[var];
    async_g.written_at[var] = async_g.iteration;
    async_g.stats.blocks++;
    async_g.stats.bytes += (double)async_layout_of(var)->bytes;
    async_post(&m);
}

int ioloom_async_commit(const char *variable) {
    double start = async_now();
    int var = async_config_variable(&async_g.cfg, variable);
    if (var < 0 || !async_g.started || async_g.chunk_of[var] == NONE)
        return async_timed(start, async_fail(IOLOOM_ASYNC_EUSAGE, "commit of '%s' without ioloom_async_alloc",
                                             variable ? variable : "(null)"));
    if (async_g.chunk_of[var] == PROCESS_BUFFER)
        async_put(var, async_g.scratch[var], async_layout_of(var)->bytes);
    else if (async_g.nuncleared[var] == ASYNC_UNCLEARED_MAX)
        return async_timed(start, async_fail(IOLOOM_ASYNC_EUSAGE,
                                             "variable '%s': %d committed blocks not cleared; "
                                             "call ioloom_async_clear when done reading one",
                                             variable, ASYNC_UNCLEARED_MAX));
    else
        commit_chunk(var);
    async_g.chunk_of[var] = NONE;
    async_trace_call(IOLOOM_OP_ASYNC_COMMIT, start, async_g.iteration, var, async_layout_of(var)->bytes);
    return async_timed(start, IOLOOM_ASYNC_OK);
}

/* Releases the oldest committed ring block of the variable (a process buffer needs nothing). */
int ioloom_async_clear(const char *variable) {
    double start = async_now();
    int var = async_config_variable(&async_g.cfg, variable);
    if (var < 0 || !async_g.started)
        return async_timed(
            start, async_fail(IOLOOM_ASYNC_EUSAGE, "clear of unknown variable '%s'", variable ? variable : "(null)"));
    int64_t *fifo = &async_g.uncleared[var * ASYNC_UNCLEARED_MAX];
    if (async_g.nuncleared[var] > 0) {
        struct async_chunk *c = async_channel_chunk(async_g.channel, (uint64_t)fifo[0]);
        atomic_fetch_or_explicit(&c->state, CHUNK_CLEARED, memory_order_acq_rel);
        for (int i = 1; i < async_g.nuncleared[var]; i++) fifo[i - 1] = fifo[i];
        async_g.nuncleared[var]--;
    }
    return async_timed(start, IOLOOM_ASYNC_OK);
}

size_t ioloom_async_block_size(const char *variable) {
    int var = async_g.initialized ? async_config_variable(&async_g.cfg, variable) : -1;
    return var < 0 ? 0 : async_layout_of(var)->bytes;
}
