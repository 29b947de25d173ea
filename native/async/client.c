/* The client calls of libioloom-async: write, alloc/commit/clear, signal, end_iteration. In the synchronous mode
 * they write at once; otherwise a block goes into this client's ring and a message tells the writer. When the
 * ring is full the configured policy applies: block (wait for the writer to free room), spill (keep a copy in
 * process memory, sent in order as room appears) or skip (drop the rest of this iteration); each is counted. */
#include <stdlib.h>
#include <string.h>
#include "async_internal.h"
#include "async_trace.h"
#include "ioloom_ops.h"

static struct async_stats *st(void) { return &async_g.stats; }

static int check_client(void);

int async_check_variable(const char *name, int *var) {
    if (check_client()) return IOLOOM_ASYNC_EUSAGE;
    if ((*var = async_config_variable(&async_g.cfg, name)) < 0)
        return async_fail(IOLOOM_ASYNC_EUSAGE,
                          "unknown variable '%s': declare it under variables in the "
                          "configuration",
                          name ? name : "(null)");
    if (async_g.written_at[*var] == async_g.iteration)
        return async_fail(IOLOOM_ASYNC_EUSAGE,
                          "variable '%s' was already written in iteration %lld: call "
                          "ioloom_async_end_iteration between blocks",
                          name, (long long)async_g.iteration);
    return IOLOOM_ASYNC_OK;
}

const struct async_layout *async_layout_of(int var) { return &async_g.cfg.layouts[async_g.cfg.variables[var].layout]; }

/* Waits a little for the writer, sending what the dedicated-nodes mode has queued meanwhile. */
static void wait_round(unsigned *round) {
    async_progress();
    async_backoff(round);
}

/* Sends a message, waiting while the queue is full (the writer always drains it). */
static void send_waiting(const struct async_msg *m) {
    unsigned round = 0;
    double start = async_now();
    if (async_channel_send(async_g.channel, m) == 0) return async_progress();
    st()->blocked++;
    while (async_channel_send(async_g.channel, m) != 0) wait_round(&round);
    st()->blocked_seconds += async_now() - start;
    async_progress();
}

void async_spill_push(const struct async_msg *m, const void *data, size_t nbytes) {
    struct async_spill *s = calloc(1, sizeof *s);
    s->msg = *m;
    s->nbytes = nbytes;
    if (data) {
        s->data = malloc(nbytes);
        memcpy(s->data, data, nbytes);
        async_g.spill_bytes += nbytes;
        st()->spilled_blocks++;
        st()->spilled_bytes += (double)nbytes;
        if ((double)async_g.spill_bytes > st()->spill_high_water) st()->spill_high_water = (double)async_g.spill_bytes;
    }
    *(async_g.spill_tail ? &async_g.spill_tail->next : &async_g.spill_head) = s;
    async_g.spill_tail = s;
}

/* Copies a block into a reserved chunk and tells the writer; the client is done with it (cleared). */
static void send_block(struct async_msg *m, int64_t position, const void *data, size_t nbytes) {
    struct async_chunk *c = async_channel_chunk(async_g.channel, (uint64_t)position);
    memcpy(c + 1, data, nbytes);
    atomic_store_explicit(&c->state, CHUNK_CLEARED, memory_order_release);
    m->position = (uint64_t)position;
    send_waiting(m);
}

/* Sends spilled messages in order while the ring has room; with `wait`, all of them. */
void async_spill_flush(int wait) {
    unsigned round = 0;
    while (async_g.spill_head) {
        struct async_spill *s = async_g.spill_head;
        int64_t position = s->data ? async_channel_reserve(async_g.channel, s->nbytes) : 0;
        if (position < 0) {
            if (!wait) return;
            wait_round(&round);
            continue;
        }
        if (s->data)
            send_block(&s->msg, position, s->data, s->nbytes);
        else
            send_waiting(&s->msg);
        async_g.spill_bytes -= s->data ? s->nbytes : 0;
        async_g.spill_head = s->next;
        async_g.spill_tail = s->next ? async_g.spill_tail : NULL;
        free(s->data);
        free(s);
    }
}

/* Sends a message after any spilled ones, keeping the client's order. */
void async_post(const struct async_msg *m) {
    async_spill_flush(0);
    if (async_g.spill_head)
        async_spill_push(m, NULL, 0);
    else
        send_waiting(m);
}

void async_skip_rest_of_iteration(void) {
    if (!async_g.skipping) st()->skipped_iterations++;
    async_g.skipping = 1;
    st()->skipped_blocks++;
}

/* A ring chunk for nbytes, applying the policy when the ring is full: -1 when the block goes elsewhere. */
int64_t async_reserve(size_t nbytes) {
    unsigned round = 0;
    async_spill_flush(0);
    int64_t position = async_g.spill_head ? -1 : async_channel_reserve(async_g.channel, nbytes);
    if (position >= 0 || async_g.cfg.policy != POLICY_BLOCK) return position;
    double start = async_now();
    st()->blocked++;
    while ((position = async_channel_reserve(async_g.channel, nbytes)) < 0) wait_round(&round);
    st()->blocked_seconds += async_now() - start;
    return position;
}

static void queue_block(int var, const void *data, size_t nbytes) {
    struct async_msg m = {MSG_WRITE, var, async_g.iteration, 0};
    int64_t position = async_g.skipping ? -1 : async_reserve(nbytes);
    if (position >= 0)
        send_block(&m, position, data, nbytes);
    else if (async_g.skipping || async_g.cfg.policy == POLICY_SKIP)
        async_skip_rest_of_iteration();
    else
        async_spill_push(&m, data, nbytes);
}

/* Synchronous mode with plugins: a copy of the block for the plugins signalled later in this iteration. */
static void keep(int var, const void *data, size_t nbytes) {
    if (!async_g.kept) {
        async_g.kept = calloc((size_t)async_g.cfg.nvariables, sizeof *async_g.kept);
        async_g.kept_at = calloc((size_t)async_g.cfg.nvariables, sizeof *async_g.kept_at);
    }
    if (!async_g.kept[var]) async_g.kept[var] = malloc(nbytes);
    memcpy(async_g.kept[var], data, nbytes);
    async_g.kept_at[var] = async_g.iteration + 1; /* + 1: zero means never */
}

static void run_plugins_here(int event) {
    struct ioloom_async_block blocks[async_g.cfg.nvariables];
    int n = 0;
    for (int v = 0; async_g.kept && v < async_g.cfg.nvariables; v++)
        if (async_g.kept_at[v] == async_g.iteration + 1)
            blocks[n++] = async_block_of(v, async_g.kept[v], async_g.client_rank);
    async_plugins_run(event, async_g.iteration, async_g.client_rank, blocks, n, 0);
}

/* One block of var, by copy, whatever the mode. */
void async_put(int var, const void *data, size_t nbytes) {
    async_g.written_at[var] = async_g.iteration;
    st()->blocks++;
    st()->bytes += (double)nbytes;
    if (async_g.cfg.mode != MODE_SYNC) {
        queue_block(var, data, nbytes);
        return;
    }
    async_writer_put(&async_g.writer, &async_g.cfg, st(), var, async_g.client_rank, async_g.iteration, data, nbytes);
    if (async_g.cfg.nplugins) keep(var, data, nbytes);
}

int async_timed(double start, int rc) {
    st()->visible_seconds += async_now() - start;
    return rc;
}

int ioloom_async_write(const char *variable, const void *data, size_t nbytes) {
    double start = async_now();
    int var, rc = async_check_variable(variable, &var);
    if (rc) return async_timed(start, rc);
    if (nbytes != async_layout_of(var)->bytes || !data)
        return async_timed(start, async_fail(IOLOOM_ASYNC_EUSAGE,
                                             "variable '%s': the buffer has %zu bytes but its layout "
                                             "'%s' needs %zu",
                                             variable, data ? nbytes : 0, async_layout_of(var)->name,
                                             async_layout_of(var)->bytes));
    async_put(var, data, nbytes);
    async_trace_call(IOLOOM_OP_ASYNC_WRITE, start, async_g.iteration, var, nbytes);
    return async_timed(start, IOLOOM_ASYNC_OK);
}

static int check_client(void) {
    if (!async_g.started || !async_g.is_client)
        return async_fail(IOLOOM_ASYNC_EUSAGE, "%s",
                          async_g.initialized ? "call ioloom_async_start first (clients "
                                                "only)"
                                              : "call ioloom_async_initialize and ioloom_async_start first");
    return IOLOOM_ASYNC_OK;
}

int ioloom_async_signal(const char *event) {
    double start = async_now();
    int rc = check_client(), id = rc ? -1 : async_config_event(&async_g.cfg, event);
    if (!rc && id < 0)
        rc = async_fail(IOLOOM_ASYNC_EUSAGE, "unknown event '%s': declare it under events in the configuration",
                        event ? event : "(null)");
    if (rc) return async_timed(start, rc);
    struct async_msg m = {MSG_SIGNAL, id, async_g.iteration, 0};
    st()->signals++;
    if (async_g.cfg.mode != MODE_SYNC)
        async_post(&m);
    else {
        run_plugins_here(id);
        async_writer_event(&async_g.writer, id, async_g.client_rank, async_g.iteration);
    }
    async_trace_call(IOLOOM_OP_ASYNC_SIGNAL, start, async_g.iteration, -1, 0);
    return async_timed(start, IOLOOM_ASYNC_OK);
}

int ioloom_async_end_iteration(void) {
    double start = async_now();
    int rc = check_client();
    if (rc) return async_timed(start, rc);
    struct async_msg m = {MSG_END_ITERATION, async_g.skipping, async_g.iteration, 0};
    if (async_g.cfg.mode != MODE_SYNC) {
        async_post(&m);
    } else {
        double synced = async_now();
        async_writer_sync(&async_g.writer, &async_g.cfg, st());
        async_trace_writer_iteration(synced, async_g.client_rank, async_g.iteration);
    }
    async_trace_call(IOLOOM_OP_ASYNC_END_ITERATION, start, async_g.iteration, ASYNC_TRACE_END_SLOT, 0);
    async_g.iteration++;
    async_g.skipping = 0;
    st()->iterations++;
    return async_timed(start, IOLOOM_ASYNC_OK);
}
