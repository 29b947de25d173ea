/* The dedicated-nodes mode of libioloom-async (Dorier's dedicated nodes, seed 002 Ch. 5): every rank of the last
 * dedicated_nodes nodes is a server, and client c (among clients) sends to server c modulo the number of servers.
 * No memory is shared across nodes, so each side keeps the channels of the other modes in its own memory and MPI
 * carries the messages between them: a client's channel is its outbox (the client calls are those of the other
 * modes, back-pressure included), which async_progress empties with MPI_Isend (a header, then the block straight
 * from the ring) from within the library's calls; a server receives each header, reserves the block in that
 * client's channel, receives the block into it, and its loop (server.c) writes as in the other modes. Only the
 * simulation's own thread calls MPI. */
#include <assert.h>
#include <limits.h>
#include <stdlib.h>
#include "async_internal.h"

enum { TAG_HEADER = 1, TAG_DATA = 2, FEED_MAX = 64 /* messages received per round, so that the server writes */ };

/* A client's messages in flight: a header and a block per slot, completed in order. */
static struct {
    int server; /* this client's server, a rank of async_g.comm */
    struct async_msg *slots;
    MPI_Request *requests; /* two per slot: the header, the block (MPI_REQUEST_NULL without) */
    uint64_t posted, done;
    int *rank_of_channel; /* a server's: the client rank of each channel */
    char *ended;          /* a server's, per channel: an end of iteration (or stop) was fed and not yet resolved */
} out;

static size_t slots(void) { return (size_t)async_g.cfg.queue; }

/* Every rank's role, so each client finds its server and each server its clients. */
static int *roles(void) {
    int *is_client = malloc((size_t)async_g.size * sizeof *is_client);
    MPI_Allgather(&async_g.is_client, 1, MPI_INT, is_client, 1, MPI_INT, async_g.comm);
    return is_client;
}

static void client_setup(const int *servers, int nservers) {
    out.server = servers[async_g.client_rank % nservers];
    out.slots = calloc(slots(), sizeof *out.slots);
    out.requests = malloc(2 * slots() * sizeof *out.requests);
}

/* Server j of S serves clients c with c mod S == j, each through a channel of its own memory. */
static void server_setup(const int *is_client, int j, int nservers, size_t ring) {
    out.rank_of_channel = malloc((size_t)async_g.size * sizeof *out.rank_of_channel);
    out.ended = calloc((size_t)async_g.size, 1);
    async_g.channels = malloc((size_t)async_g.size * sizeof *async_g.channels);
    async_g.blocks = malloc((size_t)async_g.size * sizeof *async_g.blocks);
    for (int r = 0, c = 0; r < async_g.size; r++) {
        if (!is_client[r] || c++ % nservers != j) continue;
        struct async_channel *ch = aligned_alloc(ASYNC_ALIGN, async_channel_size(slots(), ring));
        async_channel_init(ch, slots(), ring);
        out.rank_of_channel[async_g.nchannels] = r;
        async_g.blocks[async_g.nchannels] = c - 1;
        async_g.channels[async_g.nchannels++] = ch;
    }
}

void async_nodes_setup(size_t ring) {
    int *is_client = roles(), nservers = 0, me = -1, *servers = malloc((size_t)async_g.size * sizeof *servers);
    for (int r = 0; r < async_g.size; r++) {
        if (is_client[r]) continue;
        if (r == async_g.rank) me = nservers;
        servers[nservers++] = r;
    }
    assert(nservers > 0); /* initialize refuses a job whose every node is dedicated, and one without */
    if (async_g.is_client)
        client_setup(servers, nservers);
    else
        server_setup(is_client, me, nservers, ring);
    free(is_client);
    free(servers);
}

void async_nodes_free(void) {
    for (int i = 0; out.rank_of_channel && i < async_g.nchannels; i++) free(async_g.channels[i]);
    free(out.slots), free(out.requests), free(out.rank_of_channel), free(out.ended);
    out.slots = NULL, out.requests = NULL, out.rank_of_channel = NULL, out.ended = NULL;
    out.posted = out.done = 0;
}

/* Client: sends one message of the outbox (its block straight from the ring). */
static void post(const struct async_msg *m) {
    size_t k = out.posted++ % slots();
    out.slots[k] = *m;
    MPI_Isend(&out.slots[k], sizeof *m, MPI_BYTE, out.server, TAG_HEADER, async_g.comm, &out.requests[2 * k]);
    out.requests[2 * k + 1] = MPI_REQUEST_NULL;
    if (m->type != MSG_WRITE) return;
    struct async_chunk *c = async_channel_chunk(async_g.channel, m->position);
    assert(c->nbytes <= INT_MAX); /* one MPI message per block */
    MPI_Isend(c + 1, (int)c->nbytes, MPI_BYTE, out.server, TAG_DATA, async_g.comm, &out.requests[2 * k + 1]);
}

/* Client: frees, in order, what the server has received (a block's chunk once it is also cleared). */
static void complete(void) {
    int flag = 1;
    while (out.done < out.posted && flag) {
        size_t k = out.done % slots();
        MPI_Status statuses[2]; /* not MPI_STATUSES_IGNORE: GCC 12 misreads MPICH's as an empty array */
        MPI_Testall(2, &out.requests[2 * k], &flag, statuses);
        if (!flag) break;
        if (out.slots[k].type == MSG_WRITE)
            atomic_fetch_or_explicit(&async_channel_chunk(async_g.channel, out.slots[k].position)->state, CHUNK_WRITTEN,
                                     memory_order_acq_rel);
        out.done++;
    }
    async_channel_release(async_g.channel);
}

void async_progress(void) {
    struct async_msg m;
    if (async_g.cfg.mode != MODE_NODES || !async_g.is_client || !out.slots) return;
    complete();
    while (out.posted - out.done < slots() && async_channel_receive(async_g.channel, &m) == 0) post(&m);
}

void async_nodes_flush(void) {
    unsigned round = 0;
    struct async_channel *ch = async_g.channel;
    for (async_progress(); out.done < out.posted || atomic_load(&ch->queue_tail) < atomic_load(&ch->queue_head);
         async_progress())
        async_backoff(&round);
}

/* Server: receives one message from channel i's client into its channel, making room by writing. */
static void receive(struct async_server *s, int i) {
    struct async_channel *ch = s->channels[i];
    struct async_msg m;
    int source = out.rank_of_channel[i];
    MPI_Recv(&m, sizeof m, MPI_BYTE, source, TAG_HEADER, async_g.comm, MPI_STATUS_IGNORE);
    out.ended[i] = m.type == MSG_END_ITERATION || m.type == MSG_STOP;
    if (m.type == MSG_WRITE) {
        size_t nbytes = async_layout_of(m.id)->bytes;
        int64_t position;
        while ((position = async_channel_reserve(ch, nbytes)) < 0) async_server_make_room(s, i);
        struct async_chunk *c = async_channel_chunk(ch, (uint64_t)position);
        MPI_Recv(c + 1, (int)nbytes, MPI_BYTE, source, TAG_DATA, async_g.comm, MPI_STATUS_IGNORE);
        atomic_store_explicit(&c->state, CHUNK_CLEARED, memory_order_release); /* the client's copy is its own */
        m.position = (uint64_t)position;
    }
    while (async_channel_send(ch, &m) != 0) async_server_make_room(s, i);
}

/* Server: whether channel i may take another message. Where the server takes its clients' iterations in step
 * (a lockstep: node-scope plugins, a collective store), a channel is fed up to the end of its current iteration,
 * then not until that iteration is resolved (the channel neither paused nor holding messages): the blocks kept for
 * the iteration then never wait for room that only the next iteration's would free. */
static int feedable(const struct async_server *s, int i) {
    const struct async_channel *ch = s->channels[i];
    if (!s->lockstep || !out.ended[i]) return 1;
    if (!async_server_holds(s, i) && atomic_load(&ch->queue_tail) == atomic_load(&ch->queue_head)) out.ended[i] = 0;
    return !out.ended[i];
}

int async_nodes_feed(struct async_server *s) {
    int n = 0;
    for (int i = 0; i < s->nchannels; i++) {
        int flag = 1;
        while (n < FEED_MAX && flag && feedable(s, i)) {
            MPI_Iprobe(out.rank_of_channel[i], TAG_HEADER, async_g.comm, &flag, MPI_STATUS_IGNORE);
            if (flag) receive(s, i), n++;
        }
    }
    return n;
}
