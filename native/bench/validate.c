/* Refusing impossible parameters before any I/O, with a message naming the option and what to do.
 * check_consistency is arithmetic on the options (every rank reaches the same verdict); check_filesystem
 * looks at the directory and files on rank 0, and its verdict is broadcast. Nothing here creates a test file
 * (the writability probe is created and removed at once). */
#include "bench.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h> /* mkstemp */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int bench_is_root(void) {
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank == 0;
}

/* Refuses the parameters: rank 0 says which one and what to do. */
int bench_refuse(const char *fmt, ...) {
    if (bench_is_root()) {
        va_list ap;
        va_start(ap, fmt);
        fputs("ioloom-bench: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputs("\n(ioloom-bench --help lists the options; nothing was written)\n", stderr);
        va_end(ap);
    }
    return BENCH_EXIT_USAGE;
}

static int has_hint(const struct bench_options *o, const char *key) {
    for (int i = 0; i < o->nhints; i++)
        if (strcmp(o->hints[i].key, key) == 0) return 1;
    return 0;
}

/* With --ranks-per-node and collective I/O, ROMIO would pick one aggregator for this one real node; a run on
 * N/R nodes would have N/R of them. Unless the user chose the aggregators, ask for that many (ROMIO's
 * cb_nodes and cb_config_list; OMPIO ignores them). */
static void emulate_aggregators(struct bench_options *o, int nranks) {
    if (!o->ranks_per_node_given || !o->collective || has_hint(o, "cb_nodes") || has_hint(o, "cb_config_list") ||
        o->nhints + 2 > BENCH_MAX_HINTS)
        return;
    o->emulated_nodes = (nranks + o->ranks_per_node - 1) / o->ranks_per_node;
    struct bench_hint *h = &o->hints[o->nhints];
    snprintf(h[0].key, sizeof h[0].key, "cb_nodes");
    snprintf(h[0].value, sizeof h[0].value, "%d", o->emulated_nodes);
    snprintf(h[1].key, sizeof h[1].key, "cb_config_list");
    snprintf(h[1].value, sizeof h[1].value, "*:%d", o->emulated_nodes);
    o->nhints += 2;
}

/* Options whose meaning depends on others. Pure arithmetic: the same verdict on every rank. */
static int check_consistency(struct bench_options *o, int nranks) {
    if (o->kernel == KERNEL_NONE) {
        if (o->transfer_size == 0 || o->block_size == 0)
            return bench_refuse("-b/--block-size and -t/--transfer-size must be at least 1 byte");
        if (o->transfer_size > o->block_size)
            return bench_refuse("-t/--transfer-size (%llu bytes) is larger than -b/--block-size (%llu bytes): "
                                "one call cannot move more than a block; make -t at most -b",
                                (unsigned long long)o->transfer_size, (unsigned long long)o->block_size);
        if (o->block_size % o->transfer_size)
            return bench_refuse("-b/--block-size (%llu bytes) is not a multiple of -t/--transfer-size (%llu bytes): "
                                "choose sizes that divide, e.g. -b %llu",
                                (unsigned long long)o->block_size, (unsigned long long)o->transfer_size,
                                (unsigned long long)(o->block_size / o->transfer_size + 1) * o->transfer_size);
        uint64_t per_rank = o->block_size * o->segment_count;
        if (per_rank / o->segment_count != o->block_size || per_rank > UINT64_MAX / 8 / (uint64_t)nranks)
            return bench_refuse("-b/--block-size times -s/--segments times ranks overflows a file offset");
        if (o->random && per_rank / o->transfer_size > (1u << 27))
            return bench_refuse("-z/--random: %llu transfers per rank are too many to shuffle in memory; use a "
                                "larger -t",
                                (unsigned long long)(per_rank / o->transfer_size));
        if (o->pattern == PATTERN_NFILES && o->segment_count * (uint64_t)nranks > 1000000)
            return bench_refuse("-s/--segments: --pattern nfiles would create more than a million files");
    }
    if (o->transfer_size > INT_MAX)
        return bench_refuse("-t/--transfer-size (%llu bytes) must be below 2 GiB: MPI counts are int",
                            (unsigned long long)o->transfer_size);
    if (o->collective && o->api == API_POSIX && o->kernel == KERNEL_NONE)
        return bench_refuse("-c/--collective needs -a mpiio or -a hdf5 (POSIX has no collective calls)");
    if (o->verify && !o->read) return bench_refuse("--verify checks the bytes read: add -r (e.g. -w -r --verify)");
    if (o->reads > 1 && (!o->read || o->kernel != KERNEL_NONE))
        return bench_refuse("--reads repeats the read phase of the patterns: add -r and drop --kernel");
#ifndef IOLOOM_BENCH_HDF5
    if (o->api == API_HDF5 || o->kernel == KERNEL_FLASH) {
        const char *what = o->kernel == KERNEL_FLASH ? "--kernel flash" : "-a hdf5";
        if (strcmp(IOLOOM_MPI_IMPL, "mpich") != 0)
            return bench_refuse("%s: HDF5 needs the MPICH build (ioloom-bench-mpich): Debian's parallel HDF5 is built "
                                "against MPICH; this is ioloom-bench-%s",
                                what, IOLOOM_MPI_IMPL);
        return bench_refuse("%s: this ioloom-bench-mpich was built without parallel HDF5; install libhdf5-mpich-dev "
                            "(pkg-config hdf5-mpich) and rebuild",
                            what);
    }
#endif
    o->shift = (int)(((long)o->node_offset * o->ranks_per_node) % nranks);
    emulate_aggregators(o, nranks);
    if (o->reorder && o->shift == 0 && o->read)
        bench_note("-C shifts by %d node(s) of %d ranks = 0 ranks mod %d: every rank reads its own data (IOR's -C "
                   "does the same on one node); emulate nodes with --ranks-per-node, e.g. --ranks-per-node 1",
                   o->node_offset, o->ranks_per_node, nranks);
    if (o->oversubscribed)
        bench_note("%d ranks shared %d CPUs on a node: their data calls could not all run at once, so raw bandwidth "
                   "(bytes over the slowest rank's time in data calls) overstates what the storage sustained; "
                   "access bandwidth (bytes over the span in which any rank was in a data call) does not",
                   o->node_ranks, o->node_cpus);
    return 0;
}

/* A read-only run reads files an earlier -w -k run left: every one must be there and long enough. */
static int check_input_files(const struct bench_options *o, int nranks) {
    uint64_t need = bench_file_size(o, nranks);
    for (int i = 0; i < bench_file_count(o, nranks); i++) {
        char name[sizeof o->path + 64];
        struct stat st;
        bench_file_name(o, i, name, sizeof name);
        if (stat(name, &st) != 0)
            return bench_refuse("-r without -w reads existing files, but %s does not exist (%s): write it first with "
                                "the same parameters and -w -k",
                                name, strerror(errno));
        if ((uint64_t)st.st_size < need && o->api != API_HDF5)
            return bench_refuse("-r: %s has %lld bytes, the parameters need %llu: write it with the same -b -t -s "
                                "and ranks",
                                name, (long long)st.st_size, (unsigned long long)need);
    }
    return 0;
}

/* Rank 0 looks at the file system: for a read-only run, are the files there; otherwise is the directory
 * writable (by creating and removing a probe file, since access(2) says yes to root on a read-only one)? */
static int check_filesystem(const struct bench_options *o, int nranks) {
    char dir[sizeof o->path];
    strcpy(dir, o->path);
    char *d = dirname(dir);
    struct stat st;
    if (stat(d, &st) != 0)
        return bench_refuse("-o/--output %s: directory %s does not exist (%s); create it or choose another -o", o->path,
                            d, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return bench_refuse("-o/--output %s: %s is not a directory", o->path, d);
    if (stat(o->path, &st) == 0 && S_ISDIR(st.st_mode))
        return bench_refuse("-o/--output %s is a directory: give a file name in it, e.g. -o %s/testfile", o->path,
                            o->path);
    if (o->read && !o->write && o->kernel == KERNEL_NONE)
        return check_input_files(o, nranks); /* reading needs no write permission */
    char probe[sizeof o->path + 64];
    snprintf(probe, sizeof probe, "%s/.ioloom-bench-probe-XXXXXX", d);
    int fd = mkstemp(probe);
    if (fd < 0)
        return bench_refuse("-o/--output %s: directory %s is not writable (%s); choose a directory you can write",
                            o->path, d, strerror(errno));
    close(fd);
    unlink(probe);
    return bench_check_replaceable(o, nranks);
}

int bench_validate_options(struct bench_options *o, int nranks, MPI_Comm comm) {
    int rc = check_consistency(o, nranks);
    if (rc) return rc;
    rc = bench_is_root() ? check_filesystem(o, nranks) : 0;
    MPI_Bcast(&rc, 1, MPI_INT, 0, comm);
    return rc;
}
