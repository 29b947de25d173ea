/* libioloom-async internals: the configuration, the shared-memory channel (one per client: a bounded message
 * queue and a data ring, each with one producer and one consumer), the writer, counters and the global state. */
#ifndef IOLOOM_ASYNC_INTERNAL_H
#define IOLOOM_ASYNC_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include "ioloom_async.h"

#define ASYNC_NAME_MAX 64
#define ASYNC_DIMS_MAX IOLOOM_ASYNC_DIMS_MAX
#define ASYNC_MSG_MAX 512
#define ASYNC_ALIGN 64        /* ring chunks and headers are cache-line aligned */
#define ASYNC_UNCLEARED_MAX 4 /* committed blocks of one variable a client may still read (double buffers) */

enum async_mode { MODE_SYNC, MODE_THREAD, MODE_DEDICATED, MODE_NODES };
enum async_policy { POLICY_BLOCK, POLICY_SPILL, POLICY_SKIP };
/* Where a writer puts its blocks' data; hdf5-shared: one file that every server writes together (collective). */
enum async_format { FORMAT_FILES, FORMAT_HDF5, FORMAT_LOGFS, FORMAT_HDF5_SHARED };

#define ASYNC_EXPR_MAX 128 /* characters of one dimension's expression */

struct async_layout {
    char name[ASYNC_NAME_MAX];
    char type[16];  /* int8 ... uint64, float32, float64 */
    size_t element; /* bytes per element */
    int ndims;
    long dims[ASYNC_DIMS_MAX];
    size_t bytes; /* one block */
    int line;     /* where the configuration declares it, for the mistakes found once the clients are known */
    /* A layout in one global domain (Damaris's global layouts): the variable's global extents and each block's
     * position (offset per dimension), expressions over the parameters, clients and (position) rank, evaluated
     * by async_config_check_domain into global and offsets (nblocks x ndims). positioned 0: blocks stand alone. */
    int positioned;
    char global_expr[ASYNC_DIMS_MAX][ASYNC_EXPR_MAX], position_expr[ASYNC_DIMS_MAX][ASYNC_EXPR_MAX];
    long global[ASYNC_DIMS_MAX];
    long *offsets;
};

/* A parameter of the configuration (Damaris's <parameter>): a name for an integer in layouts' expressions. */
struct async_parameter {
    char name[ASYNC_NAME_MAX];
    long value;
};

struct async_variable {
    char name[ASYNC_NAME_MAX];
    int layout; /* index into config.layouts */
};

/* A plugin: a function of a shared library, or of a Python script, run on the writer side when its event is
 * signalled. */
struct async_plugin_decl {
    int event;
    char library[1024]; /* empty: the program's own function (or a Python plugin) */
    char script[1024];  /* a Python plugin's script, empty for a C plugin */
    char function[ASYNC_NAME_MAX];
    int node_scope; /* scope: node, run once all the server's clients signalled the event (dedicated modes) */
};

struct async_config {
    char name[ASYNC_NAME_MAX];
    char file[1024]; /* the configuration's path, for messages */
    enum async_mode mode;
    int dedicated_cores; /* per node, dedicated mode */
    int dedicated_nodes; /* of the job, dedicated-nodes mode: the last ones */
    int ranks_per_node;  /* > 0: nodes are emulated as consecutive groups of ranks (one machine); 0: real nodes */
    size_t buffer;       /* bytes per node (dedicated) or per process (helper thread) */
    int queue;           /* messages per client */
    enum async_policy policy;
    char directory[1024]; /* the writer's output directory */
    size_t bandwidth;     /* bytes per second each writer may write, 0: no limit (spreads out a node's writes) */
    double variability;   /* > 0: the bandwidth's log-normal slowdown per iteration (sigma), a storage model */
    int fsync;            /* make each iteration durable (fdatasync) when its end reaches the writer */
    int compression;      /* 1: blocks are stored compressed with zstd (the index holds the stored size) */
    enum async_format format;
    int nlayouts, nvariables, nevents, nplugins, node_plugins, nparameters;
    struct async_parameter *parameters;
    struct async_layout *layouts;
    struct async_variable *variables;
    char (*events)[ASYNC_NAME_MAX];
    struct async_plugin_decl *plugins;
    char python[1024]; /* the interpreter whose libpython and packages Python plugins use */
};

/* Reads and checks the YAML file; on error fills msg (one line, with the file's line) and returns -1. */
int async_config_load(const char *path, struct async_config *cfg, char msg[ASYNC_MSG_MAX]);
void async_config_free(struct async_config *cfg);
/* A Damaris-style XML configuration (config_xml.c, chosen by the .xml suffix), into the same structure. */
int async_config_load_xml(const char *path, struct async_config *cfg, char msg[ASYNC_MSG_MAX]);
/* The writer format against the mode and compression: 0, or -1 with msg (hdf5: no helper thread, no zstd;
 * hdf5-shared: servers only). */
int async_config_check_format(const struct async_config *cfg, char msg[ASYNC_MSG_MAX]);
size_t async_type_size(const char *type); /* bytes of int8 ... float64, 0 for another name */

/* What an expression may name (expr.c): the parameters declared so far, and rank and clients where allowed.
 * checking: only the syntax and the names are checked (a division by zero gives 0). */
struct async_scope {
    const struct async_parameter *parameters;
    int nparameters;
    int rank_allowed, clients_allowed, checking;
    long rank, clients;
};
/* 0 with *out, or -1 with why (one phrase quoting the expression). */
int async_expr_eval(const char *text, const struct async_scope *scope, long *out, char why[ASYNC_MSG_MAX]);
/* Declares a parameter after those before it (the reader made room for it in cfg->parameters): a name not yet
 * declared, neither rank nor clients, and its value from expression, over the parameters before it (NULL: none
 * given). 0, or -1 with msg (without the file and line, which the readers add). */
int async_parameter_add(struct async_config *cfg, const char *name, const char *expression, char msg[ASYNC_MSG_MAX]);
/* A layout's dimensions from their expressions (parameters only: every block has the same size) and its global
 * extents and positions checked for syntax and names (their values need the clients: check_domain below). 0, or
 * -1 with msg (without the file and line, which the readers add). */
int async_layout_resolve(const struct async_config *cfg, struct async_layout *l, char dims[][ASYNC_EXPR_MAX],
                         int nglobal, int nposition, char msg[ASYNC_MSG_MAX]);
/* Every positioned layout's global extents and every block's position for nclients clients: inside the global
 * extents, no two blocks overlapping. The same on every rank (no communication). 0, or -1 with msg. */
int async_config_check_domain(struct async_config *cfg, int nclients, char msg[ASYNC_MSG_MAX]);
int async_config_layout(const struct async_config *cfg, const char *name);
int async_config_variable(const struct async_config *cfg, const char *name);
int async_config_event(const struct async_config *cfg, const char *name);
size_t async_config_largest_block(const struct async_config *cfg);
/* Bytes a client's ring needs at least: the largest block, or with plugins or a collective format a whole
 * iteration's blocks. */
size_t async_config_ring_need(const struct async_config *cfg);

/* A message from a client to its writer. */
enum async_msg_type { MSG_WRITE, MSG_SIGNAL, MSG_END_ITERATION, MSG_STOP };
struct async_msg {
    int32_t type, id; /* id: variable (write) or event (signal); skipped blocks (end of iteration) */
    int64_t iteration;
    uint64_t position; /* ring position of the chunk's header (write) */
};

/* Each ring chunk starts with this header; the client sets CLEARED, the writer WRITTEN; both: free. */
enum { CHUNK_WRITTEN = 1, CHUNK_CLEARED = 2, CHUNK_FREE = 3 };
struct async_chunk {
    uint64_t total;  /* bytes from this header to the next chunk, padding included */
    uint64_t nbytes; /* payload */
    _Atomic uint32_t state;
    char pad[ASYNC_ALIGN - 20];
};

/* One client's channel, in node-shared memory (dedicated) or process memory (helper thread). Positions grow
 * forever; the offset in the array is position % capacity. Heads are the client's, tails the writer's. */
struct async_channel {
    _Atomic uint64_t queue_head;
    char pad0[ASYNC_ALIGN - 8];
    _Atomic uint64_t queue_tail;
    char pad1[ASYNC_ALIGN - 8];
    _Atomic uint64_t ring_head;
    char pad2[ASYNC_ALIGN - 8];
    _Atomic uint64_t ring_tail;
    char pad3[ASYNC_ALIGN - 8];
    uint64_t queue_capacity, ring_capacity;
    char pad4[ASYNC_ALIGN - 16];
    /* then queue_capacity messages, then ring_capacity bytes (a multiple of ASYNC_ALIGN) */
};
size_t async_channel_size(size_t queue, size_t ring);
void async_channel_init(struct async_channel *ch, size_t queue, size_t ring); /* empty, its pages untouched */
/* Writes every page of the queue and ring, at initialize, in the process that fills them (the client's side): they
 * are then mapped (and local to it) before the simulation's first hand-over, which would otherwise take a page
 * fault per page it copies into. Not on a server's side: it would commit the whole buffer for nothing. */
void async_channel_prefault(struct async_channel *ch);
struct async_msg *async_channel_queue(struct async_channel *ch);
char *async_channel_ring(struct async_channel *ch);
/* Client side. */
int async_channel_send(struct async_channel *ch, const struct async_msg *m);
int64_t async_channel_reserve(struct async_channel *ch, size_t nbytes); /* header position, or -1: full */
struct async_chunk *async_channel_chunk(struct async_channel *ch, uint64_t position);
/* Writer side. */
int async_channel_receive(struct async_channel *ch, struct async_msg *m);
void async_channel_release(struct async_channel *ch);

/* Counters of one rank; gathered at finalize into the global index. All doubles so one MPI type carries it. */
struct async_stats {
    double role; /* 0 client, 1 server, 2 client and writer (synchronous, helper thread) */
    double iterations, blocks, bytes;
    double visible_seconds; /* time the simulation spent inside write/alloc/commit/clear/signal/end_iteration */
    double blocked, blocked_seconds, spilled_blocks, spilled_bytes, spill_high_water;
    double skipped_iterations, skipped_blocks, signals;
    double written_blocks, written_bytes, lost_blocks;
    double writer_busy_seconds, writer_wall_seconds;
    double syncs; /* fdatasync calls (writer.fsync) */
};
#define ASYNC_STATS_FIELDS (sizeof(struct async_stats) / sizeof(double))

/* The writer: one data file and one index file per writer. */
struct async_index_record {
    int32_t variable, block;
    int64_t iteration;
    uint64_t offset, nbytes;
};
/* One block a server gives a collective store: the client's block of a variable. */
struct async_piece {
    int variable, block;
    const void *data;
};
struct async_store;
struct async_writer {
    int id, data_fd, index_fd; /* data_fd: format files only */
    const struct async_store *store;
    void *handle;             /* the store's own: an lf_file (logfs), an HDF5 file (hdf5) */
    uint64_t offset, records; /* bytes in the data file, records in the index file */
    uint64_t synced;          /* records made durable */
    void *zstd;               /* a compression context (writer.compression: zstd), NULL without */
    void *packed;             /* the compressed block, packed_size bytes */
    size_t packed_size;
    uint64_t random; /* the storage model's generator (writer.variability) */
    double slowdown; /* its factor for iteration slowdown_at */
    int64_t slowdown_at;
};
/* Where a writer's block data goes (writer.format): plain files (writer.c), a logfs container (store_logfs.c),
 * an HDF5 file (store_hdf5.c, MPICH build). The .index file is the same for all; its offset is where the block's
 * bytes start: in the data file, in the container's logical file, or in the HDF5 file (its dataset's address). */
struct async_store {
    const char *name;
    int (*open)(struct async_writer *w, const struct async_config *cfg, char msg[ASYNC_MSG_MAX]);
    /* Stores one block; 0 with *where set, or -1 with errno (then undo gives back what it took). */
    int (*put)(struct async_writer *w, const struct async_config *cfg, int variable, int block, int64_t iteration,
               const void *data, size_t nbytes, uint64_t *where);
    /* Gives back what a failed put took (so that the index and later writes may still fit): 0, or -1 with errno. */
    int (*undo)(struct async_writer *w, const struct async_config *cfg, int variable, int block, int64_t iteration);
    int (*sync)(struct async_writer *w); /* durable: 0, or -1 with errno */
    void (*close)(struct async_writer *w);
    /* A collective store (hdf5-shared; put is NULL): every server calls it once per iteration with its blocks of
     * that iteration, maybe none, and open and close together. where[k]: piece k's offset, UINT64_MAX if lost. */
    void (*put_iteration)(struct async_writer *w, const struct async_config *cfg, int64_t iteration,
                          const struct async_piece *pieces, int n, uint64_t *where);
};
extern const struct async_store async_store_files, async_store_logfs, async_store_hdf5, async_store_hdf5_shared;
/* The store of a configuration, or NULL with msg filled when this build cannot write it. */
const struct async_store *async_store_of(const struct async_config *cfg, char msg[ASYNC_MSG_MAX]);

/* Collective over the servers with a collective store: when another server failed, this one opens nothing and
 * returns 0 (initialize's agreement then reports that server's message). */
int async_writer_open(struct async_writer *w, const struct async_config *cfg, int id, char msg[ASYNC_MSG_MAX]);
/* Appends one block; on failure reports the lost block on stderr, counts it and leaves earlier ones intact. */
void async_writer_put(struct async_writer *w, const struct async_config *cfg, struct async_stats *st, int variable,
                      int block, int64_t iteration, const void *data, size_t nbytes);
/* With writer.fsync, makes what was written so far durable (nothing to do when nothing new was written). */
void async_writer_sync(struct async_writer *w, const struct async_config *cfg, struct async_stats *st);
/* A collective store's iteration: every server calls it together with its blocks (maybe none); each is counted,
 * indexed and traced as async_writer_put does, or reported lost. */
void async_writer_put_iteration(struct async_writer *w, const struct async_config *cfg, struct async_stats *st,
                                int64_t iteration, const struct async_piece *pieces, int n);
/* Records a signalled event in the index (variable -1 - event, no data). */
void async_writer_event(struct async_writer *w, int event, int block, int64_t iteration);
void async_writer_close(struct async_writer *w);

/* Collective at finalize: gathers every rank's counters; rank 0 writes <directory>/<name>.json, the global
 * index (layouts, variables, events, the writers' files, the counters). */
int async_index_write(void);
/* At initialize, rank 0 reserves the index's space (its temporary file), so that a full disk cannot refuse it;
 * unreserve removes it when initialize fails. */
void async_index_reserve(void);
void async_index_unreserve(void);

/* Plugins (plugin.c): loaded on writer-side ranks at initialize, run when their event is signalled. */
int async_plugins_load(char msg[ASYNC_MSG_MAX]);
/* dlopen of a library of ioloom's beside libioloom-async (the build's lib/, or the installed one), else on the
 * search path; NULL with dlerror() set. */
void *async_dlopen_beside(const char *name, int flags);
void async_plugins_unload(void);
/* Runs the plugins of the event and scope (node: the node-scope ones, block -1). */
void async_plugins_run(int event, int64_t iteration, int block, const struct ioloom_async_block *blocks, int n,
                       int node);
struct ioloom_async_block async_block_of(int var, const void *data, int block);

/* With plugins, the writer keeps each block of the current iteration in the ring until the client ends the
 * iteration, so that a signalled plugin sees it. */
struct async_retained {
    uint64_t position;
    int variable;
};

/* The writer side's loop over its clients' channels until each has sent MSG_STOP. */
struct async_server {
    struct async_channel **channels;
    int *blocks; /* the block id (client rank among clients) of each channel */
    int nchannels;
    struct async_writer *writer;
    struct async_stats *stats;
    struct async_retained *retained; /* nvariables per channel, NULL without plugins */
    int *nretained;
    int stopped;                         /* channels whose client sent MSG_STOP */
    int together, finished;              /* a collective store: servers write each iteration together, until
                                            every server's clients stopped (finished) */
    struct async_lockstep *lockstep;     /* with node-scope plugins (server.c), else NULL */
    int (*feed)(struct async_server *s); /* dedicated nodes: fills the channels from MPI; messages received */
};
void async_server_run(struct async_server *s);
/* Whether the server's lockstep holds channel i at the end of an iteration (paused) or for good (stopped). */
int async_server_holds(const struct async_server *s, int i);
/* Writes what channel i holds and frees its chunks (a feed that finds the channel full). */
void async_server_make_room(struct async_server *s, int i);

/* The dedicated-nodes mode (nodes.c): roles and channels at initialize (ring: bytes of each channel's ring), the
 * client's sends from within the library's calls (async_progress: nothing in other modes), the client's last
 * sends at finalize, the server's feed. */
void async_nodes_setup(size_t ring);
void async_nodes_free(void);
void async_progress(void);
void async_nodes_flush(void);
int async_nodes_feed(struct async_server *s);

/* Waiting without a busy loop on an oversubscribed node: spins briefly, then sleeps longer and longer. */
void async_backoff(unsigned *round);
/* Whether a request completed within `seconds` (INFINITY: waits until it does), tested between async_backoff's
 * naps: not spinning in MPI on cores the clients compute on. */
int async_completes_within(MPI_Request *request, double seconds);
double async_now(void);

/* A spilled message waiting in process memory (policy spill), in order. */
struct async_spill {
    struct async_msg msg;
    void *data;
    size_t nbytes;
    int committed, cleared;
    struct async_spill *next;
};

/* The library's state in one process. */
/* An iteration no server waits for: every server's clients have stopped. */
#define ASYNC_NO_ITERATION INT64_MAX

struct async_state {
    int initialized, started, is_client, rank, size, node_rank, node_size, client_rank;
    int node_index, nnodes; /* this rank's node among the job's (emulated with ranks_per_node) */
    int nclients;           /* of the job: the blocks of each variable per iteration */
    int nchannels;          /* a server's clients */
    struct async_channel **channels;
    int *blocks;
    struct async_config cfg;
    MPI_Comm comm, node, clients, servers; /* servers: the ranks that never return to the simulation */
    MPI_Win window;
    struct async_channel *channel; /* this client's (thread and dedicated modes) */
    struct async_writer writer;    /* synchronous and helper-thread: own; dedicated servers: node's */
    struct async_stats stats;
    pthread_t thread;
    int64_t iteration;
    int64_t *written_at; /* per variable: iteration of its last block */
    int64_t *chunk_of;   /* per variable: ring position of its allocated chunk, -1 none,
                            -2 its process buffer (synchronous mode, or a full ring) */
    int64_t *uncleared;  /* per variable: ASYNC_UNCLEARED_MAX committed chunks, oldest first */
    int *nuncleared;
    void **scratch; /* per variable: process buffer (synchronous alloc, skip, spill) */
    struct async_spill *spill_head, *spill_tail;
    size_t spill_bytes;
    int skipping; /* this client drops the rest of its iteration (policy skip) */
    ioloom_async_plugin *plugin_fns;
    void **plugin_handles;
    void **python_plugins;           /* per plugin: its Python function (libioloom-async-python), NULL for a C plugin */
    struct async_retained *retained; /* the writer side's (helper thread, dedicated server) */
    int *nretained;
    void **kept; /* synchronous mode with plugins: a copy of each variable's block of this iteration */
    int64_t *kept_at;
};
extern struct async_state async_g;

/* Client helpers shared by client.c and zerocopy.c. */
int async_check_variable(const char *name, int *var); /* known, started, not yet written this iteration */
const struct async_layout *async_layout_of(int var);
void async_post(const struct async_msg *m); /* after any spilled messages, waiting on a full queue */
void async_put(int var, const void *data, size_t nbytes);
int64_t async_reserve(size_t nbytes); /* a ring chunk, policy applied; -1: not in the ring */
void async_spill_push(const struct async_msg *m, const void *data, size_t nbytes);
void async_spill_flush(int wait);
void async_skip_rest_of_iteration(void);
int async_timed(double start, int rc); /* adds the call's time to what the simulation saw */
int async_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
