/* The writer of libioloom-async: each writer (a dedicated core, or each process in the synchronous and
 * helper-thread modes) stores blocks through its store (writer.format: files, here, <directory>/<name>.<id>.data;
 * logfs; hdf5) and after each block appends one record to <name>.<id>.index. A block is in the output only once
 * its record is: a write that fails (a full disk) loses that block, is reported with its variable and iteration,
 * and leaves earlier blocks intact. */
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <zstd.h>
#include <unistd.h>
#include "async_internal.h"
#include "async_trace.h"

static int open_file(const struct async_config *cfg, int id, const char *suffix, char msg[ASYNC_MSG_MAX]) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s.%d.%s", cfg->directory, cfg->name, id, suffix);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) snprintf(msg, ASYNC_MSG_MAX, "%.400s: cannot create the output: %s", path, strerror(errno));
    return fd;
}

static int write_all(int fd, const void *data, size_t n, off_t offset) {
    const char *p = data;
    while (n > 0) {
        ssize_t k = pwrite(fd, p, n, offset);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return k < 0 ? -1 : (errno = ENOSPC, -1);
        p += k, n -= (size_t)k, offset += k;
    }
    return 0;
}

static int files_open(struct async_writer *w, const struct async_config *cfg, char msg[ASYNC_MSG_MAX]) {
    return (w->data_fd = open_file(cfg, w->id, "data", msg)) < 0 ? -1 : 0;
}

static int files_put(struct async_writer *w, const struct async_config *cfg, int variable, int block, int64_t iteration,
                     const void *data, size_t nbytes, uint64_t *where) {
    (void)cfg, (void)variable, (void)block, (void)iteration;
    *where = w->offset;
    return write_all(w->data_fd, data, nbytes, (off_t)w->offset);
}

/* Gives back what a partial write took, so that the index and later (smaller) writes may still fit. */
static int files_undo(struct async_writer *w, const struct async_config *cfg, int variable, int block,
                      int64_t iteration) {
    (void)cfg, (void)variable, (void)block, (void)iteration;
    return ftruncate(w->data_fd, (off_t)w->offset);
}

static int files_sync(struct async_writer *w) { return fdatasync(w->data_fd); }

static void files_close(struct async_writer *w) {
    if (w->data_fd >= 0) close(w->data_fd);
    w->data_fd = -1;
}

const struct async_store async_store_files = {"files",    files_open,  files_put, files_undo,
                                              files_sync, files_close, NULL};

const struct async_store *async_store_of(const struct async_config *cfg, char msg[ASYNC_MSG_MAX]) {
    if (cfg->format == FORMAT_LOGFS) return &async_store_logfs;
    if (cfg->format == FORMAT_FILES) return &async_store_files;
#ifdef IOLOOM_ASYNC_HDF5
    (void)msg;
    return cfg->format == FORMAT_HDF5 ? &async_store_hdf5 : &async_store_hdf5_shared;
#else
    snprintf(msg, ASYNC_MSG_MAX,
             "writer: format %s needs libioloom-async-mpich built with parallel HDF5 (Debian's is built against "
             "MPICH); this is libioloom-async-%s: run under MPICH, or use format files or logfs",
             cfg->format == FORMAT_HDF5 ? "hdf5" : "hdf5-shared", IOLOOM_MPI_IMPL);
    return NULL;
#endif
}

/* The writer's own part: the output directory and its index file; 0, or -1 with msg. */
static int open_index(struct async_writer *w, const struct async_config *cfg, char msg[ASYNC_MSG_MAX]) {
    if (mkdir(cfg->directory, 0755) != 0 && errno != EEXIST) {
        snprintf(msg, ASYNC_MSG_MAX, "%.400s: cannot create the output directory: %s", cfg->directory, strerror(errno));
        return -1;
    }
    return (w->index_fd = open_file(cfg, w->id, "index", msg)) < 0 ? -1 : 0;
}

/* Whether any server failed (a collective store opens only when none did). */
static int any_server_failed(int failed) {
    int any;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, async_g.servers);
    return any;
}

int async_writer_open(struct async_writer *w, const struct async_config *cfg, int id, char msg[ASYNC_MSG_MAX]) {
    w->id = id;
    w->offset = w->records = w->synced = 0;
    w->packed = NULL, w->packed_size = 0;
    w->data_fd = w->index_fd = -1;
    w->random = 0x9E3779B97F4A7C15ULL * (uint64_t)(id + 1), w->slowdown_at = -1; /* a generator per writer */
    if (!(w->store = async_store_of(cfg, msg))) return -1; /* the same on every rank: the configuration's */
    w->zstd = cfg->compression ? ZSTD_createCCtx() : NULL;
    int failed = open_index(w, cfg, msg);
    if (w->store->put_iteration && any_server_failed(failed)) return failed ? -1 : (w->store = NULL, 0);
    if (failed || w->store->open(w, cfg, msg) == 0) return failed ? -1 : 0;
    close(w->index_fd);
    w->index_fd = -1;
    return -1;
}

/* A standard normal draw from the writer's own generator (xorshift64*, then Box-Muller). */
static double normal(struct async_writer *w) {
    double u[2];
    for (int i = 0; i < 2; i++) {
        w->random ^= w->random >> 12, w->random ^= w->random << 25, w->random ^= w->random >> 27;
        u[i] = ((double)((w->random * 0x2545F4914F6CDD1DULL) >> 11) + 0.5) / 9007199254740992.0; /* in (0, 1) */
    }
    return sqrt(-2 * log(u[0])) * cos(2 * M_PI * u[1]);
}

/* Storage whose speed varies (writer.variability s): each iteration's blocks take exp(s z - s^2 / 2) times as
 * long (z standard normal: a log-normal slowdown of mean 1), drawn when a writer meets a new iteration. */
static double slowdown(struct async_writer *w, const struct async_config *cfg, int64_t iteration) {
    if (cfg->variability > 0 && iteration != w->slowdown_at) {
        w->slowdown = exp(cfg->variability * normal(w) - cfg->variability * cfg->variability / 2);
        w->slowdown_at = iteration;
    }
    return cfg->variability > 0 ? w->slowdown : 1;
}

/* With a bandwidth limit, the writer takes at least nbytes / bandwidth seconds per block (times the slowdown). */
static void throttle(struct async_writer *w, const struct async_config *cfg, double start, size_t nbytes,
                     int64_t iteration) {
    double seconds = cfg->bandwidth ? (double)nbytes / (double)cfg->bandwidth * slowdown(w, cfg, iteration) : 0;
    double left = start + seconds - async_now();
    if (left > 0) {
        struct timespec t = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
        nanosleep(&t, NULL);
    }
}

/* The block as it is stored: itself, or compressed into the writer's buffer; NULL when compression failed. */
static const void *stored(struct async_writer *w, const void *data, size_t *nbytes) {
    if (!w->zstd) return data;
    size_t bound = ZSTD_compressBound(*nbytes), n;
    if (bound > w->packed_size) {
        free(w->packed);
        w->packed = malloc(bound);
        w->packed_size = w->packed ? bound : 0;
    }
    n = w->packed ? ZSTD_compressCCtx(w->zstd, w->packed, bound, data, *nbytes, 1) : 0;
    if (!w->packed || ZSTD_isError(n)) return errno = ENOMEM, NULL;
    *nbytes = n;
    return w->packed;
}

void async_writer_put(struct async_writer *w, const struct async_config *cfg, struct async_stats *st, int variable,
                      int block, int64_t iteration, const void *data, size_t nbytes) {
    double start = async_now();
    int64_t replaced = async_trace_store_begin(block, iteration, variable);
    data = stored(w, data, &nbytes);
    struct async_index_record rec = {variable, block, iteration, 0, nbytes};
    if (!data || w->store->put(w, cfg, variable, block, iteration, data, nbytes, &rec.offset) ||
        write_all(w->index_fd, &rec, sizeof rec, (off_t)(w->records * sizeof rec))) {
        int error = errno;
        if (w->store->undo(w, cfg, variable, block, iteration) ||
            ftruncate(w->index_fd, (off_t)(w->records * sizeof rec)))
            error = errno;
        fprintf(stderr, "ioloom-async: writer %d: variable %s, iteration %lld, block %d lost: %s\n", w->id,
                cfg->variables[variable].name, (long long)iteration, block, strerror(error));
        st->lost_blocks++;
    } else {
        w->offset += nbytes;
        w->records++;
        st->written_blocks++;
        st->written_bytes += (double)nbytes;
    }
    throttle(w, cfg, start, nbytes, iteration);
    st->writer_busy_seconds += async_now() - start;
    async_trace_store(start, replaced, block, iteration, variable, nbytes);
}

/* A piece's index record after a collective store gave (or lost) its offset; returns 1 when it is in the output. */
static int index_piece(struct async_writer *w, const struct async_config *cfg, struct async_stats *st,
                       const struct async_piece *p, int64_t iteration, uint64_t where) {
    const size_t nbytes = cfg->layouts[cfg->variables[p->variable].layout].bytes;
    struct async_index_record rec = {p->variable, p->block, iteration, where, nbytes};
    const char *why = "the collective write failed";
    if (where != UINT64_MAX) {
        if (write_all(w->index_fd, &rec, sizeof rec, (off_t)(w->records * sizeof rec)) == 0) {
            w->records++;
            st->written_blocks++;
            st->written_bytes += (double)nbytes;
            return 1;
        }
        why = strerror(errno);
        if (ftruncate(w->index_fd, (off_t)(w->records * sizeof rec)) != 0) why = strerror(errno);
    }
    fprintf(stderr, "ioloom-async: writer %d: variable %s, iteration %lld, block %d lost: %s\n", w->id,
            cfg->variables[p->variable].name, (long long)iteration, p->block, why);
    st->lost_blocks++;
    return 0;
}

void async_writer_put_iteration(struct async_writer *w, const struct async_config *cfg, struct async_stats *st,
                                int64_t iteration, const struct async_piece *pieces, int n) {
    double start = async_now();
    uint64_t *where = malloc((size_t)(n + 1) * sizeof *where);
    size_t bytes = 0;
    w->store->put_iteration(w, cfg, iteration, pieces, n, where);
    for (int k = 0; k < n; k++)
        if (index_piece(w, cfg, st, &pieces[k], iteration, where[k]))
            bytes += cfg->layouts[cfg->variables[pieces[k].variable].layout].bytes;
    free(where);
    throttle(w, cfg, start, bytes, iteration);
    st->writer_busy_seconds += async_now() - start;
    async_trace_stores(start, pieces, n, iteration);
}

void async_writer_event(struct async_writer *w, int event, int block, int64_t iteration) {
    struct async_index_record rec = {-1 - event, block, iteration, w->offset, 0};
    if (write_all(w->index_fd, &rec, sizeof rec, (off_t)(w->records * sizeof rec)) == 0) w->records++;
}

void async_writer_sync(struct async_writer *w, const struct async_config *cfg, struct async_stats *st) {
    if (!cfg->fsync || w->synced == w->records) return;
    double start = async_now();
    if (w->store->sync(w) != 0 || fdatasync(w->index_fd) != 0)
        fprintf(stderr, "ioloom-async: writer %d: cannot make its output durable: %s\n", w->id, strerror(errno));
    w->synced = w->records;
    st->syncs++;
    st->writer_busy_seconds += async_now() - start;
}

void async_writer_close(struct async_writer *w) {
    if (w->store) w->store->close(w);
    if (w->index_fd >= 0) close(w->index_fd);
    w->index_fd = -1;
    w->store = NULL;
    ZSTD_freeCCtx(w->zstd);
    free(w->packed);
    w->zstd = w->packed = NULL;
}
