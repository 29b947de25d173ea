/* The global index of an output, <directory>/<name>.json, written by rank 0 at finalize: what the Python reader
 * (ioloom.async_io.open) needs to find every block (the layouts and the writers, whose own .index files list
 * their blocks) and every rank's counters. Written to a temporary name and renamed, so it is whole or absent; the
 * temporary's space is reserved at initialize, so that a disk the writers filled still takes the index. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "async_internal.h"

static const char *const STAT_NAMES[] = {"role",
                                         "iterations",
                                         "blocks",
                                         "bytes",
                                         "visible_seconds",
                                         "blocked",
                                         "blocked_seconds",
                                         "spilled_blocks",
                                         "spilled_bytes",
                                         "spill_high_water",
                                         "skipped_iterations",
                                         "skipped_blocks",
                                         "signals",
                                         "written_blocks",
                                         "written_bytes",
                                         "lost_blocks",
                                         "writer_busy_seconds",
                                         "writer_wall_seconds",
                                         "syncs"};
_Static_assert(sizeof STAT_NAMES / sizeof *STAT_NAMES == ASYNC_STATS_FIELDS, "one name per counter");

static const char *mode_name(enum async_mode m) {
    static const char *const names[] = {"synchronous", "helper-thread", "dedicated-cores", "dedicated-nodes"};
    return names[m];
}

static const char *policy_name(enum async_policy p) {
    return p == POLICY_BLOCK ? "block" : p == POLICY_SPILL ? "spill" : "skip";
}

static const char *format_name(enum async_format f) {
    static const char *const names[] = {"files", "hdf5", "logfs", "hdf5-shared"}; /* enum async_format */
    return names[f];
}

/* A positioned layout's global extents and every block's position (the block is the client's rank among clients). */
static void write_domain(FILE *f, const struct async_layout *l, int nblocks) {
    fprintf(f, ", \"global\": [");
    for (int d = 0; d < l->ndims; d++) fprintf(f, "%s%ld", d ? ", " : "", l->global[d]);
    fprintf(f, "], \"positions\": [");
    for (int b = 0; b < nblocks; b++) {
        fprintf(f, "%s[", b ? ", " : "");
        for (int d = 0; d < l->ndims; d++) fprintf(f, "%s%ld", d ? ", " : "", l->offsets[(size_t)b * l->ndims + d]);
        fprintf(f, "]");
    }
    fprintf(f, "]");
}

static void write_layouts(FILE *f, const struct async_config *c) {
    fprintf(f, "  \"variables\": {");
    for (int i = 0; i < c->nvariables; i++) {
        const struct async_layout *l = &c->layouts[c->variables[i].layout];
        fprintf(f, "%s\n    \"%s\": {\"id\": %d, \"layout\": \"%s\", \"type\": \"%s\", \"dimensions\": [", i ? "," : "",
                c->variables[i].name, i, l->name, l->type);
        for (int d = 0; d < l->ndims; d++) fprintf(f, "%s%ld", d ? ", " : "", l->dims[d]);
        fprintf(f, "]");
        if (l->positioned) write_domain(f, l, async_g.nclients);
        fprintf(f, "}");
    }
    fprintf(f, "\n  },\n  \"events\": [");
    for (int i = 0; i < c->nevents; i++) fprintf(f, "%s\"%s\"", i ? ", " : "", c->events[i]);
    fprintf(f, "],\n");
}

static void write_ranks(FILE *f, const double *all, int size) {
    fprintf(f, "  \"writers\": [");
    for (int r = 0, n = 0; r < size; r++)
        if (all[r * (int)ASYNC_STATS_FIELDS] > 0) fprintf(f, "%s%d", n++ ? ", " : "", r);
    fprintf(f, "],\n  \"ranks\": [");
    for (int r = 0; r < size; r++) {
        fprintf(f, "%s\n    {\"rank\": %d", r ? "," : "", r);
        for (size_t k = 0; k < ASYNC_STATS_FIELDS; k++)
            fprintf(f, ", \"%s\": %.9g", STAT_NAMES[k], all[r * (int)ASYNC_STATS_FIELDS + (int)k]);
        fprintf(f, "}");
    }
    fprintf(f, "\n  ]\n}\n");
}

static void index_paths(char path[1200], char tmp[1210]) {
    snprintf(path, 1200, "%s/%s.json", async_g.cfg.directory, async_g.cfg.name);
    snprintf(tmp, 1210, "%s.tmp", path);
}

/* Bytes the index will take at most (its fixed text, each variable and event, each rank's counters). */
static off_t index_bound(void) {
    const struct async_config *c = &async_g.cfg;
    off_t domains = 0; /* a positioned variable's global extents and positions: 22 characters per number at most */
    for (int i = 0; i < c->nvariables; i++)
        if (c->layouts[c->variables[i].layout].positioned)
            domains += 64 + (off_t)(async_g.nclients + 1) * (22 * ASYNC_DIMS_MAX + 4);
    return 4096 + domains + (off_t)c->nvariables * (3 * ASYNC_NAME_MAX + 32 * ASYNC_DIMS_MAX) +
           (off_t)c->nevents * (ASYNC_NAME_MAX + 4) + (off_t)async_g.size * (off_t)(40 * (ASYNC_STATS_FIELDS + 2));
}

void async_index_reserve(void) {
    char path[1200], tmp[1210];
    if (async_g.rank != 0) return;
    index_paths(path, tmp);
    mkdir(async_g.cfg.directory, 0755); /* rank 0 may not be a writer (dedicated cores) */
    /* Best effort, silent: where it fails (no directory, no fallocate), finalize reports what it cannot write. */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return;
    (void)posix_fallocate(fd, 0, index_bound()); /* any part it took is truncated away when the index is written */
    close(fd);
}

void async_index_unreserve(void) {
    char path[1200], tmp[1210];
    index_paths(path, tmp);
    if (async_g.rank == 0) unlink(tmp);
}

static int write_json(const double *all, int size) {
    const struct async_config *c = &async_g.cfg;
    char path[1200], tmp[1210];
    index_paths(path, tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_CLOEXEC, 0644); /* into the space reserved at initialize */
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        return async_fail(IOLOOM_ASYNC_ESYSTEM, "%s: cannot write the index: %s", tmp, strerror(errno));
    }
    fprintf(f,
            "{\n  \"format\": \"ioloom-async\",\n  \"version\": 1,\n  \"name\": \"%s\",\n  \"mode\": \"%s\",\n"
            "  \"policy\": \"%s\",\n  \"dedicated_cores\": %d,\n  \"dedicated_nodes\": %d,\n  \"nodes\": %d,\n"
            "  \"buffer\": %zu,\n  \"queue\": %d,\n"
            "  \"blocks\": %d,\n  \"compression\": \"%s\",\n  \"writer_format\": \"%s\",\n",
            c->name, mode_name(c->mode), policy_name(c->policy), c->mode == MODE_DEDICATED ? c->dedicated_cores : 0,
            c->mode == MODE_NODES ? c->dedicated_nodes : 0, async_g.nnodes, c->buffer, c->queue, async_g.nclients,
            c->compression ? "zstd" : "none", format_name(c->format));
    write_layouts(f, c);
    write_ranks(f, all, size);
    int bad = fflush(f) | ferror(f) | ftruncate(fd, ftell(f)) | fclose(f);
    if (bad || rename(tmp, path) != 0)
        return async_fail(IOLOOM_ASYNC_ESYSTEM, "%s: cannot write the index: %s", path, strerror(errno));
    return IOLOOM_ASYNC_OK;
}

int async_index_write(void) {
    int rc = IOLOOM_ASYNC_OK;
    double *all = async_g.rank == 0 ? malloc((size_t)async_g.size * sizeof async_g.stats) : NULL;
    MPI_Gather(&async_g.stats, (int)ASYNC_STATS_FIELDS, MPI_DOUBLE, all, (int)ASYNC_STATS_FIELDS, MPI_DOUBLE, 0,
               async_g.comm);
    if (async_g.rank == 0) rc = write_json(all, async_g.size);
    MPI_Bcast(&rc, 1, MPI_INT, 0, async_g.comm);
    free(all);
    return rc == IOLOOM_ASYNC_OK ? rc : async_fail(rc, "rank 0 could not write the index");
}
