/* The writer side's loop (a dedicated core, or a client's helper thread): takes its clients' messages in order,
 * writes each block straight from the ring, frees ring chunks both sides are done with, and returns when every
 * client has sent MSG_STOP and everything before it is written. The helper thread calls no MPI, so it needs no
 * MPI_THREAD_MULTIPLE; with a collective store (hdf5-shared) the servers write each iteration together. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "async_internal.h"
#include "async_trace.h"

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

int async_completes_within(MPI_Request *request, double seconds) {
    unsigned round = 0;
    int done = 0;
    for (double end = async_now() + seconds;; async_backoff(&round)) {
        MPI_Test(request, &done, MPI_STATUS_IGNORE);
        if (done || async_now() >= end) return done;
    }
}

static void mark_written(struct async_channel *ch, uint64_t position) {
    atomic_fetch_or_explicit(&async_channel_chunk(ch, position)->state, CHUNK_WRITTEN, memory_order_acq_rel);
}

static void write_block(struct async_server *s, int i, const struct async_msg *m) {
    struct async_channel *ch = s->channels[i];
    struct async_chunk *c = async_channel_chunk(ch, m->position);
    int nvariables = async_g.cfg.nvariables;
    if (!s->together) /* together: kept, and written with the servers' other blocks when the iteration ends */
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

/* Appends the blocks channel i keeps to blocks; returns how many there are now. */
static int kept_blocks(struct async_server *s, int i, struct ioloom_async_block *blocks, int n) {
    for (int k = 0; s->retained && k < s->nretained[i]; k++) {
        struct async_retained *r = &s->retained[i * async_g.cfg.nvariables + k];
        blocks[n++] = async_block_of(r->variable, async_channel_chunk(s->channels[i], r->position) + 1, s->blocks[i]);
    }
    return n;
}

static void run_plugins(struct async_server *s, int i, const struct async_msg *m) {
    struct ioloom_async_block blocks[s->retained ? s->nretained[i] + 1 : 1];
    async_plugins_run(m->id, m->iteration, s->blocks[i], blocks, kept_blocks(s, i, blocks, 0), 0);
}

/* Node-scope plugins take the server's clients' iterations in step: a channel is read up to the end of the
 * current iteration and then paused, its blocks kept, until every channel is paused or stopped; then each
 * node-scope plugin whose event every paused channel signalled runs once with all their blocks, and the
 * iteration's blocks are freed. A client that ends an iteration without signalling only stops that iteration's
 * node-scope plugins, and a stopped client is not waited for, so no channel waits forever. */
struct async_lockstep {
    char *paused, *stopped; /* per channel */
    char *signalled;        /* per channel and event, in the current iteration */
    int64_t iteration;
};

static void lockstep_signal(struct async_server *s, int i, int event) {
    if (s->lockstep) s->lockstep->signalled[i * async_g.cfg.nevents + event] = 1;
}

static int all_signalled(const struct async_lockstep *l, int nchannels, int event) {
    for (int i = 0; i < nchannels; i++)
        if (l->paused[i] && !l->signalled[i * async_g.cfg.nevents + event]) return 0;
    return 1;
}

static void run_node_plugins(struct async_server *s) {
    struct ioloom_async_block *blocks = malloc((size_t)(s->nchannels * async_g.cfg.nvariables + 1) * sizeof *blocks);
    int n = 0;
    for (int i = 0; i < s->nchannels; i++)
        if (s->lockstep->paused[i]) n = kept_blocks(s, i, blocks, n);
    for (int e = 0; e < async_g.cfg.nevents; e++)
        if (all_signalled(s->lockstep, s->nchannels, e)) async_plugins_run(e, s->lockstep->iteration, -1, blocks, n, 1);
    free(blocks);
}

static void release_retained(struct async_server *s, int i);

/* The paused channels' blocks as pieces; returns how many. */
static int pieces_of(struct async_server *s, struct async_piece *pieces) {
    int n = 0, nvariables = async_g.cfg.nvariables;
    for (int i = 0; i < s->nchannels; i++)
        for (int k = 0; s->lockstep->paused[i] && k < s->nretained[i]; k++) {
            struct async_retained *r = &s->retained[i * nvariables + k];
            pieces[n++] =
                (struct async_piece){r->variable, s->blocks[i], async_channel_chunk(s->channels[i], r->position) + 1};
        }
    return n;
}

/* A collective store: the servers agree on the iteration they write next (every server's clients end their
 * iterations in order, and a server is ready only when all its clients ended one or stopped), and each gives its
 * blocks of it; a server whose clients all stopped gives none, until no server has an iteration left (finished).
 * Returns 1 when this server's paused iteration was written. */
static int write_together(struct async_server *s, int paused) {
    int64_t ready = paused ? s->lockstep->iteration : ASYNC_NO_ITERATION, agreed;
    MPI_Request agreement;
    /* Servers wait here for the slowest one's clients (sleeping between tests). */
    MPI_Iallreduce(&ready, &agreed, 1, MPI_INT64_T, MPI_MIN, async_g.servers, &agreement);
    async_completes_within(&agreement, INFINITY);
    if (agreed == ASYNC_NO_ITERATION) return s->finished = 1, 0;
    assert(ready == agreed || ready == ASYNC_NO_ITERATION); /* no server runs ahead of another */
    struct async_piece *pieces = malloc((size_t)(s->nchannels * async_g.cfg.nvariables + 1) * sizeof *pieces);
    async_writer_put_iteration(s->writer, &async_g.cfg, s->stats, agreed, pieces, paused ? pieces_of(s, pieces) : 0);
    free(pieces);
    async_writer_sync(s->writer, &async_g.cfg, s->stats);
    return paused > 0;
}

/* When every channel is paused or stopped: with a collective store the servers' iteration, then (when one is
 * paused) the iteration's node-scope plugins and the next iteration. Returns 1 when it resolved one. */
static int resolve(struct async_server *s) {
    struct async_lockstep *l = s->lockstep;
    double start = async_now();
    int paused = 0;
    for (int i = 0; i < s->nchannels; i++) {
        if (!l->paused[i] && !l->stopped[i]) return 0;
        paused += l->paused[i];
    }
    if (s->together && !write_together(s, paused)) return 1;
    if (!paused) return 0;
    run_node_plugins(s);
    for (int i = 0; i < s->nchannels; i++) {
        if (l->paused[i]) async_trace_writer_iteration(start, s->blocks[i], l->iteration);
        if (l->paused[i]) release_retained(s, i);
        l->paused[i] = 0;
    }
    memset(l->signalled, 0, (size_t)(s->nchannels * async_g.cfg.nevents));
    return 1;
}

static struct async_lockstep *lockstep_new(int nchannels) {
    struct async_lockstep *l = calloc(1, sizeof *l);
    l->paused = calloc((size_t)nchannels, 1);
    l->stopped = calloc((size_t)nchannels, 1);
    l->signalled = calloc((size_t)(nchannels * async_g.cfg.nevents) + 1, 1);
    return l;
}

static void lockstep_free(struct async_lockstep *l) {
    if (l) free(l->paused), free(l->stopped), free(l->signalled);
    free(l);
}

/* Handles one message of channel i; returns 1 when it was the client's stop. */
static int handle(struct async_server *s, int i, const struct async_msg *m) {
    switch (m->type) {
        case MSG_WRITE:
            write_block(s, i, m);
            break;
        case MSG_END_ITERATION:
            if (s->lockstep) { /* done with it when the lockstep resolves the iteration */
                s->lockstep->paused[i] = 1, s->lockstep->iteration = m->iteration;
                async_writer_sync(s->writer, &async_g.cfg, s->stats);
            } else {
                double start = async_now();
                release_retained(s, i);
                async_writer_sync(s->writer, &async_g.cfg, s->stats);
                async_trace_writer_iteration(start, s->blocks[i], m->iteration);
            }
            break;
        case MSG_SIGNAL:
            run_plugins(s, i, m);
            lockstep_signal(s, i, m->id);
            async_writer_event(s->writer, m->id, s->blocks[i], m->iteration);
            break;
        case MSG_STOP:
            if (s->together && s->nretained[i]) /* an iteration the client did not end: written as if it had */
                s->lockstep->paused[i] = 1, s->lockstep->iteration = m->iteration;
            else
                release_retained(s, i);
            if (s->lockstep) s->lockstep->stopped[i] = 1;
            break;
    }
    return m->type == MSG_STOP;
}

/* Drains what channel i holds now; returns the number of messages handled, and counts its stop. */
static int drain(struct async_server *s, int i) {
    struct async_msg m;
    int n = 0;
    while ((!s->lockstep || !s->lockstep->paused[i]) && async_channel_receive(s->channels[i], &m) == 0) {
        n++;
        s->stopped += handle(s, i, &m);
    }
    return n;
}

int async_server_holds(const struct async_server *s, int i) {
    return s->lockstep && (s->lockstep->paused[i] || s->lockstep->stopped[i]);
}

void async_server_make_room(struct async_server *s, int i) {
    drain(s, i);
    async_channel_release(s->channels[i]);
}

void async_server_run(struct async_server *s) {
    double start = async_now();
    unsigned round = 0;
    s->lockstep = async_g.cfg.node_plugins || s->together ? lockstep_new(s->nchannels) : NULL;
    while (s->stopped < s->nchannels || (s->together && !s->finished)) {
        int handled = s->feed ? s->feed(s) : 0;
        for (int i = 0; i < s->nchannels; i++) {
            handled += drain(s, i);
            async_channel_release(s->channels[i]); /* chunks the client cleared after they were written */
        }
        handled += s->lockstep ? resolve(s) : 0;
        if (handled)
            round = 0;
        else
            async_backoff(&round);
    }
    lockstep_free(s->lockstep);
    s->lockstep = NULL;
    s->stats->writer_wall_seconds += async_now() - start;
}
