/* libioloom-async's life cycle: initialize (read and check the configuration on every rank, agree on the first
 * error so that every rank returns it and none waits in a collective), start (roles: in the dedicated-cores
 * mode the last k ranks of each node, found with MPI_Comm_split_type, are servers that write for the node's
 * other ranks through an MPI shared window; a helper thread per process otherwise), finalize (flush, stop the
 * writers, write the global index, free everything). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "async_internal.h"

struct async_state async_g;
static char last_error[ASYNC_MSG_MAX];

int async_fail(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

const char *ioloom_async_error(void) { return last_error; }

static int clients_on_node(void) {
    return async_g.cfg.mode == MODE_DEDICATED ? async_g.node_size - async_g.cfg.dedicated_cores : 1;
}

/* Modes whose writers are other ranks (servers), which never return to the simulation. */
static int has_servers(void) { return async_g.cfg.mode == MODE_DEDICATED || async_g.cfg.mode == MODE_NODES; }

/* The ring each client gets: the node's buffer shared by its clients (dedicated cores), else buffer per client
 * (the helper thread's; with dedicated nodes, the client's outbox and its channel on the server each). */
static size_t ring_bytes(void) { return async_g.cfg.buffer / (size_t)clients_on_node() / ASYNC_ALIGN * ASYNC_ALIGN; }

/* The writer keeps each iteration's blocks until the iteration ends: for plugins, or to write it together. */
static int keeps_iterations(void) { return async_g.cfg.nplugins || async_g.cfg.format == FORMAT_HDF5_SHARED; }

/* Checks that depend on this node; fills msg and returns -1 on a mistake. */
static int check_node(char msg[ASYNC_MSG_MAX]) {
    const struct async_config *c = &async_g.cfg;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    size_t need = async_config_ring_need(c);
    if (c->mode == MODE_DEDICATED && (c->dedicated_cores >= async_g.node_size || c->dedicated_cores >= cores))
        return snprintf(msg, ASYNC_MSG_MAX,
                        "dedicated_cores: %d per node leaves no core to compute on a node with "
                        "%d ranks and %ld cores: run more ranks per node or use mode helper-thread",
                        c->dedicated_cores, async_g.node_size, cores),
               -1;
    if (c->mode == MODE_NODES && c->dedicated_nodes >= async_g.nnodes)
        return snprintf(msg, ASYNC_MSG_MAX,
                        "dedicated_nodes: %d of the job's %d node(s) leaves none to compute: run on more nodes, or "
                        "emulate nodes on one machine with ranks_per_node",
                        c->dedicated_nodes, async_g.nnodes),
               -1;
    if (c->mode != MODE_SYNC && ring_bytes() < need)
        return snprintf(msg, ASYNC_MSG_MAX,
                        "buffer: %zu bytes shared by %d client(s) leaves %zu each, less than %s (%zu bytes with "
                        "headers): make buffer at least %zu",
                        c->buffer, clients_on_node(), ring_bytes(),
                        c->nplugins          ? "an iteration's blocks, which plugins keep until its end"
                        : keeps_iterations() ? "an iteration's blocks, which format hdf5-shared keeps until its end"
                                             : "the largest block",
                        need, need * (size_t)clients_on_node() + ASYNC_ALIGN),
               -1;
    return 0;
}

/* Every rank learns the lowest failing rank's message; returns -1 on all ranks if any failed. */
static int agree(int failed, char msg[ASYNC_MSG_MAX]) {
    int first, mine = failed ? async_g.rank : async_g.size;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, async_g.comm);
    if (first == async_g.size) return 0;
    MPI_Bcast(msg, ASYNC_MSG_MAX, MPI_CHAR, first, async_g.comm);
    async_fail(IOLOOM_ASYNC_ECONFIG, "rank %d: %.490s", first, msg);
    if (async_g.rank == 0) fprintf(stderr, "ioloom-async: %s\n", last_error);
    return -1;
}

/* The lowest rank of comm in a communicator of it (a node's leader). */
static int lowest_rank(MPI_Comm part) {
    int lowest;
    MPI_Allreduce(&async_g.rank, &lowest, 1, MPI_INT, MPI_MIN, part);
    return lowest;
}

/* Nodes: the ranks sharing memory, or with ranks_per_node R consecutive groups of R ranks (nodes emulated on one
 * machine). The same collectives run whatever the configuration says, as a rank whose configuration failed must
 * still meet the others in them. Nodes are numbered by their lowest rank. */
static void split_nodes(void) {
    MPI_Comm shared;
    int *leaders = malloc((size_t)async_g.size * sizeof *leaders), leader;
    MPI_Comm_split_type(async_g.comm, MPI_COMM_TYPE_SHARED, async_g.rank, MPI_INFO_NULL, &shared);
    int color = async_g.cfg.ranks_per_node > 0 ? async_g.rank / async_g.cfg.ranks_per_node : lowest_rank(shared);
    MPI_Comm_free(&shared);
    MPI_Comm_split(async_g.comm, color, async_g.rank, &async_g.node);
    MPI_Comm_rank(async_g.node, &async_g.node_rank);
    MPI_Comm_size(async_g.node, &async_g.node_size);
    leader = lowest_rank(async_g.node);
    MPI_Allgather(&leader, 1, MPI_INT, leaders, 1, MPI_INT, async_g.comm);
    async_g.nnodes = async_g.node_index = 0;
    for (int r = 0; r < async_g.size; r++) {
        async_g.nnodes += leaders[r] == r;
        async_g.node_index += leaders[r] == r && r < leader;
    }
    free(leaders);
}

static void split_roles(void) {
    split_nodes();
    if (async_g.cfg.mode == MODE_NODES)
        async_g.is_client = async_g.node_index < async_g.nnodes - async_g.cfg.dedicated_nodes;
    else
        async_g.is_client =
            async_g.cfg.mode != MODE_DEDICATED || async_g.node_rank < async_g.node_size - async_g.cfg.dedicated_cores;
    MPI_Comm_split(async_g.comm, async_g.is_client ? 0 : MPI_UNDEFINED, async_g.rank, &async_g.clients);
    MPI_Comm_split(async_g.comm, async_g.is_client ? MPI_UNDEFINED : 0, async_g.rank, &async_g.servers);
    async_g.client_rank = -1;
    if (async_g.is_client) MPI_Comm_rank(async_g.clients, &async_g.client_rank);
    MPI_Allreduce(&async_g.is_client, &async_g.nclients, 1, MPI_INT, MPI_SUM, async_g.comm);
}

static void allocate_client_state(void) {
    int n = async_g.cfg.nvariables;
    async_g.written_at = malloc((size_t)n * sizeof *async_g.written_at);
    async_g.chunk_of = malloc((size_t)n * sizeof *async_g.chunk_of);
    async_g.uncleared = calloc((size_t)n * ASYNC_UNCLEARED_MAX, sizeof *async_g.uncleared);
    async_g.nuncleared = calloc((size_t)n, sizeof *async_g.nuncleared);
    async_g.scratch = calloc((size_t)n, sizeof *async_g.scratch);
    for (int i = 0; i < n; i++) async_g.written_at[i] = async_g.chunk_of[i] = -1;
}

/* Dedicated mode: every client's channel in one shared window; server j of the node serves the clients whose
 * node rank is j modulo k. */
static void share_channels(void) {
    size_t mine = async_g.is_client ? async_channel_size((size_t)async_g.cfg.queue, ring_bytes()) : 0;
    int k = async_g.cfg.dedicated_cores, nclients = async_g.node_size - k;
    int *blocks = malloc((size_t)async_g.node_size * sizeof *blocks);
    void *base;
    MPI_Win_allocate_shared((MPI_Aint)mine, 1, MPI_INFO_NULL, async_g.node, &base, &async_g.window);
    if (async_g.is_client) {
        async_g.channel = base;
        async_channel_init(async_g.channel, (size_t)async_g.cfg.queue, ring_bytes());
        async_channel_prefault(async_g.channel);
    }
    MPI_Allgather(&async_g.client_rank, 1, MPI_INT, blocks, 1, MPI_INT, async_g.node);
    MPI_Barrier(async_g.node); /* channels initialised before any server reads them */
    async_g.channels = malloc((size_t)nclients * sizeof *async_g.channels);
    async_g.blocks = malloc((size_t)nclients * sizeof *async_g.blocks);
    for (int c = async_g.is_client ? nclients : 0; c < nclients; c++) {
        MPI_Aint size;
        int unit;
        if (c % k != async_g.node_rank - nclients) continue;
        MPI_Win_shared_query(async_g.window, c, &size, &unit, &async_g.channels[async_g.nchannels]);
        async_g.blocks[async_g.nchannels++] = blocks[c];
    }
    free(blocks);
}

/* Helper-thread mode (and a dedicated-nodes client's outbox): the one channel lives in this process's memory. */
static void own_channel(void) {
    size_t ring = ring_bytes();
    async_g.channel = aligned_alloc(ASYNC_ALIGN, async_channel_size((size_t)async_g.cfg.queue, ring));
    async_channel_init(async_g.channel, (size_t)async_g.cfg.queue, ring);
    async_channel_prefault(async_g.channel);
    async_g.channels = malloc(sizeof *async_g.channels);
    async_g.blocks = malloc(sizeof *async_g.blocks);
    async_g.channels[0] = async_g.channel;
    async_g.blocks[0] = async_g.client_rank;
    async_g.nchannels = 1;
}

static void release_all(void);

int ioloom_async_initialize(const char *config_path, MPI_Comm comm) {
    char msg[ASYNC_MSG_MAX] = "";
    if (async_g.initialized) return async_fail(IOLOOM_ASYNC_EUSAGE, "ioloom_async_initialize was already called");
    memset(&async_g, 0, sizeof async_g);
    async_g.window = MPI_WIN_NULL;
    async_g.writer.data_fd = async_g.writer.index_fd = -1;
    MPI_Comm_dup(comm, &async_g.comm);
    MPI_Comm_rank(async_g.comm, &async_g.rank);
    MPI_Comm_size(async_g.comm, &async_g.size);
    int failed = async_config_load(config_path ? config_path : "(null)", &async_g.cfg, msg);
    split_roles();
    failed = failed || check_node(msg) || async_config_check_domain(&async_g.cfg, async_g.nclients, msg);
    /* Agreed before the writers open, as a collective store's open is collective over the servers. */
    if (agree(failed, msg)) return release_all(), IOLOOM_ASYNC_ECONFIG;
    int writes = !has_servers() || !async_g.is_client;
    failed = writes && async_writer_open(&async_g.writer, &async_g.cfg, async_g.rank, msg);
    failed = failed || (writes && async_plugins_load(msg));
    if (!failed) async_index_reserve(); /* before the agreement: before any rank writes */
    if (agree(failed, msg)) {
        async_index_unreserve();
        release_all();
        return IOLOOM_ASYNC_ECONFIG;
    }
    allocate_client_state();
    if (async_g.cfg.mode == MODE_DEDICATED)
        share_channels();
    else if (async_g.cfg.mode == MODE_THREAD || (async_g.cfg.mode == MODE_NODES && async_g.is_client))
        own_channel();
    if (async_g.cfg.mode == MODE_NODES) async_nodes_setup(ring_bytes());
    if (keeps_iterations() && async_g.nchannels) {
        async_g.retained = calloc((size_t)(async_g.nchannels * async_g.cfg.nvariables), sizeof *async_g.retained);
        async_g.nretained = calloc((size_t)async_g.nchannels, sizeof *async_g.nretained);
    }
    async_g.stats.role = has_servers() ? !async_g.is_client : 2;
    async_g.initialized = 1;
    last_error[0] = '\0';
    return IOLOOM_ASYNC_OK;
}

static void *helper_thread(void *arg) {
    (void)arg;
    struct async_server s = {.channels = async_g.channels,
                             .blocks = async_g.blocks,
                             .nchannels = 1,
                             .writer = &async_g.writer,
                             .stats = &async_g.stats,
                             .retained = async_g.retained,
                             .nretained = async_g.nretained};
    async_server_run(&s);
    return NULL;
}

int ioloom_async_start(int *is_client) {
    if (!async_g.initialized || async_g.started)
        return async_fail(IOLOOM_ASYNC_EUSAGE, "%s",
                          async_g.started ? "ioloom_async_start was already called"
                                          : "call ioloom_async_initialize first");
    async_g.started = 1;
    *is_client = async_g.is_client;
    if (async_g.cfg.mode == MODE_THREAD && pthread_create(&async_g.thread, NULL, helper_thread, NULL) != 0) {
        async_g.cfg.mode = MODE_SYNC; /* the process writes for itself: no data is lost */
        return async_fail(IOLOOM_ASYNC_ESYSTEM, "cannot start the helper thread; writing synchronously");
    }
    if (!async_g.is_client) {
        struct async_server s = {.channels = async_g.channels,
                                 .blocks = async_g.blocks,
                                 .nchannels = async_g.nchannels,
                                 .writer = &async_g.writer,
                                 .stats = &async_g.stats,
                                 .retained = async_g.retained,
                                 .nretained = async_g.nretained,
                                 .feed = async_g.cfg.mode == MODE_NODES ? async_nodes_feed : NULL,
                                 .together = async_g.writer.store->put_iteration != NULL};
        async_server_run(&s);
    }
    return IOLOOM_ASYNC_OK;
}

int ioloom_async_client_comm(MPI_Comm *clients) {
    if (!async_g.initialized || !async_g.is_client)
        return async_fail(IOLOOM_ASYNC_EUSAGE, "the client communicator exists on clients after initialize");
    *clients = async_g.clients;
    return IOLOOM_ASYNC_OK;
}

/* A client hands everything over and tells its writer it is done. */
static void stop_client(void) {
    struct async_msg stop = {MSG_STOP, 0, async_g.iteration, 0};
    async_spill_flush(1);
    async_post(&stop);
    if (async_g.cfg.mode == MODE_NODES) async_nodes_flush();
    if (async_g.cfg.mode == MODE_THREAD && async_g.started) pthread_join(async_g.thread, NULL);
}

static void release_all(void) {
    async_writer_close(&async_g.writer);
    if (async_g.window != MPI_WIN_NULL)
        MPI_Win_free(&async_g.window);
    else if (async_g.cfg.mode == MODE_THREAD || async_g.cfg.mode == MODE_NODES)
        free(async_g.channel);
    if (async_g.cfg.mode == MODE_NODES) async_nodes_free();
    for (int i = 0; async_g.scratch && i < async_g.cfg.nvariables; i++) free(async_g.scratch[i]);
    free(async_g.scratch), free(async_g.written_at), free(async_g.chunk_of), free(async_g.uncleared);
    free(async_g.nuncleared), free(async_g.channels), free(async_g.blocks);
    free(async_g.retained), free(async_g.nretained), free(async_g.kept_at);
    for (int i = 0; async_g.kept && i < async_g.cfg.nvariables; i++) free(async_g.kept[i]);
    free(async_g.kept);
    async_plugins_unload();
    if (async_g.clients != MPI_COMM_NULL) MPI_Comm_free(&async_g.clients);
    if (async_g.servers != MPI_COMM_NULL) MPI_Comm_free(&async_g.servers);
    MPI_Comm_free(&async_g.node);
    MPI_Comm_free(&async_g.comm);
    async_config_free(&async_g.cfg);
    memset(&async_g, 0, sizeof async_g);
}

int ioloom_async_finalize(void) {
    if (!async_g.initialized) return async_fail(IOLOOM_ASYNC_EUSAGE, "call ioloom_async_initialize first");
    /* A dedicated server waits for every client's stop, started or not. */
    if (async_g.is_client && (has_servers() || (async_g.started && async_g.cfg.mode == MODE_THREAD))) stop_client();
    async_writer_close(&async_g.writer);
    int rc = async_index_write();
    release_all();
    return rc;
}
