/* The writer side's loop (a dedicated core, or a client's helper thread): takes its clients' messages in order,
 * writes each block straight from the ring, frees ring chunks both sides are done with, and returns when every
 * client has sent MSG_STOP and everything before it is written. It calls no MPI, so the helper thread needs no
 * MPI_THREAD_MULTIPLE. */
#include <assert.h>
#include <time.h>
#include "async_internal.h"

double async_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void async_backoff(unsigned *round) {
    enum { SPINS = 64, MAX_SLEEP_NS = 1000000 };
    if (++*round < SPINS) return;
    long ns = 1000L << (*round - SPINS < 10 ? *round - SPINS : 10);
    struct timespec t = {0, ns < MAX_SLEEP_NS ? ns : MAX_SLEEP_NS};
    nanosleep(&t, NULL);
}

static void mark_written(struct async_channel *ch, uint64_t position) {
    atomic_fetch_or_explicit(&async_channel_chunk(ch, position)->state, CHUNK_WRITTEN, memory_order_acq_rel);
}

static void write_block(struct async_server *s, int i, const struct async_msg *m) {
    struct async_channel *ch = s->channels[i];
    struct async_chunk *c = async_channel_chunk(ch, m->position);
    int nvariables = async_g.cfg.nvariables;
    async_writer_put(s->writer, &async_g.cfg, s->stats, m->id, s->blocks[i], m->iteration, c + 1, c->nbytes);
    if (!s->retained) {
        mark_written(ch, m->position);
        return;
    }
    /* One block per variable and iteration (the client checks), so nvariables entries suffice. */
    assert(s->nretained[i] < nvariables);
    s->retained[i * nvariables + s->nretained[i]++] = (struct async_retained){m->position, m->id};
}

/* The client ended its iteration: the blocks kept for plugins may be freed. */
static void release_retained(struct async_server *s, int i) {
    for (int k = 0; s->retained && k < s->nretained[i]; k++)
        mark_written(s->channels[i], s->retained[i * async_g.cfg.nvariables + k].position);
    if (s->retained) s->nretained[i] = 0;
}

static void run_plugins(struct async_server *s, int i, const struct async_msg *m) {
    struct ioloom_async_block blocks[s->retained ? s->nretained[i] + 1 : 1];
    int n = 0;
    for (int k = 0; s->retained && k < s->nretained[i]; k++) {
        struct async_retained *r = &s->retained[i * async_g.cfg.nvariables + k];
        blocks[n++] = async_block_of(r->variable, async_channel_chunk(s->channels[i], r->position) + 1);
    }
    async_plugins_run(m->id, m->iteration, s->blocks[i], blocks, n);
}

/* Handles one message of channel i; returns 1 when it was the client's stop. */
static int handle(struct async_server *s, int i, const struct async_msg *m) {
    switch (m->type) {
        case MSG_WRITE:
            write_block(s, i, m);
            break;
        case MSG_END_ITERATION:
            release_retained(s, i);
            async_writer_sync(s->writer, &async_g.cfg, s->stats);
            break;
        case MSG_SIGNAL:
            run_plugins(s, i, m);
            async_writer_event(s->writer, m->id, s->blocks[i], m->iteration);
            break;
        case MSG_STOP:
            release_retained(s, i);
            break;
    }
    return m->type == MSG_STOP;
}

/* Drains what channel i holds now; returns the number of messages handled, and counts its stop. */
static int drain(struct async_server *s, int i) {
    struct async_msg m;
    int n = 0;
    while (async_channel_receive(s->channels[i], &m) == 0) {
        n++;
        s->stopped += handle(s, i, &m);
    }
    return n;
}

void async_server_make_room(struct async_server *s, int i) {
    drain(s, i);
    async_channel_release(s->channels[i]);
}

void async_server_run(struct async_server *s) {
    double start = async_now();
    unsigned round = 0;
    while (s->stopped < s->nchannels) {
        int handled = s->feed ? s->feed(s) : 0;
        for (int i = 0; i < s->nchannels; i++) {
            handled += drain(s, i);
            async_channel_release(s->channels[i]); /* chunks the client cleared after they were written */
        }
        if (handled)
            round = 0;
        else
            async_backoff(&round);
    }
    s->stats->writer_wall_seconds += async_now() - start;
}
