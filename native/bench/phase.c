/* One timed phase (write or read) of the generic patterns. Each rank times its own open, data calls, sync
 * and close after a common barrier; the report turns those into effective (open to close) and raw (data
 * calls only) bandwidth, as fs_test does. Filling and checking buffers is timed apart ("prep") and
 * deducted. On an I/O error the run is aborted: a benchmark with a failed call has no figure to give. */
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whose data this rank moves: its own when writing, its neighbour's `shift` ranks on when reading with -C, so
 * that it does not read back what its own node still has in cache. */
static int data_owner(const struct bench_options *o, enum bench_phase_kind kind, int rank, int nranks) {
    if (kind == PHASE_READ && o->reorder) return (int)(((long)rank + o->shift) % nranks);
    return rank;
}

/* -z: the order in which a rank visits its transfers, a Fisher-Yates shuffle seeded by the data's owner and
 * file, so the write and the read of one run (and every rank, for the collective calls) agree on it. */
static uint64_t *random_order(uint64_t n, uint64_t seed) {
    uint64_t *order = bench_alloc(n * sizeof *order);
    for (uint64_t i = 0; i < n; i++) order[i] = i;
    uint64_t state = seed | 1;
    for (uint64_t i = n; i > 1; i--) {
        state = state * 6364136223846793005ull + 1442695040888963407ull; /* 64-bit LCG (Knuth's MMIX) */
        uint64_t j = (state >> 33) % i;
        uint64_t tmp = order[i - 1];
        order[i - 1] = order[j];
        order[j] = tmp;
    }
    return order;
}

/* Whether each transfer is written with its own pattern: when its bytes can be checked (--verify, or files kept
 * for a later check). Otherwise the buffer holds the pattern of offset 0 for the whole phase, as IOR writes one
 * buffer by default: filling every transfer costs CPU time that the deducted prep time does not cover (the
 * kernel's copy of a freshly written buffer takes longer too), so under CPU contention the phase would slow
 * down more than IOR's (docs/bench.md, "Under CPU contention"). Offset 0 of every file still holds the pattern,
 * which is how a later run recognises the file as ours. */
static int fill_each_transfer(const struct bench_options *o) { return o->verify || o->keep; }

/* One data call at `offset` of file `name`, with the pattern filled before a write (fill_each_transfer) and
 * checked after a read (timed as prep), and the --wait idle time before every call but the first. */
static void move_transfer(const struct bench_options *o, const struct bench_backend *be, struct bench_file *f,
                          unsigned char *buf, uint64_t offset, int owner, int writing, const char *name,
                          struct bench_times *t) {
    double p0 = bench_now();
    if (writing && fill_each_transfer(o)) bench_fill(buf, o->transfer_size, offset, owner);
    t->prep += bench_now() - p0;
    if (o->wait_ms > 0 && t->bytes > 0) {
        double w0 = bench_now();
        bench_sleep_ms(o->wait_ms);
        t->wait += bench_now() - w0;
    }
    double d0 = bench_now();
    if (be->transfer(f, buf, o->transfer_size, offset, writing)) bench_abort_io();
    bench_count_call(t, d0, bench_now(), o->transfer_size);
    if (!writing && o->verify) {
        double v0 = bench_now();
        t->errors += bench_verify(buf, o->transfer_size, offset, owner, name, t->errors);
        t->prep += bench_now() - v0;
    }
}

/* Opens, moves the transfers of segments [first, first+count) (in a shuffled order with -z) and closes one
 * file; adds to *t. */
static void run_file(const struct bench_options *o, enum bench_phase_kind kind, MPI_Comm comm, int owner,
                     uint64_t first, uint64_t count, unsigned char *buf, struct bench_times *t, MPI_Info *hints) {
    const struct bench_backend *be = bench_backend(o->api);
    int nranks, writing = kind == PHASE_WRITE;
    MPI_Comm_size(comm, &nranks);
    MPI_Comm file_comm = bench_shared_file(o) ? comm : MPI_COMM_SELF;
    char name[sizeof o->path + 64];
    bench_file_name(o, bench_place(o, nranks, owner, first, 0).file_index, name, sizeof name);

    double t0 = bench_now();
    struct bench_file *f = be->open(o, name, file_comm, writing, bench_file_size(o, nranks));
    if (!f) bench_abort_io();
    t->open += bench_now() - t0;
    if (hints && *hints == MPI_INFO_NULL) *hints = be->info(f);

    uint64_t per_block = o->block_size / o->transfer_size, transfers = count * per_block;
    uint64_t *order = o->random ? random_order(transfers, (uint64_t)owner * 0x9e3779b97f4a7c15ull + first) : NULL;
    for (uint64_t k = 0; k < transfers; k++) {
        uint64_t i = order ? order[k] : k;
        uint64_t offset = bench_place(o, nranks, owner, first + i / per_block, i % per_block).offset;
        move_transfer(o, be, f, buf, offset, owner, writing, name, t);
    }
    free(order);
    if (o->fsync && writing) {
        double s0 = bench_now();
        if (be->sync(f)) bench_abort_io();
        t->sync += bench_now() - s0;
    }
    double c0 = bench_now();
    if (be->close(f)) bench_abort_io();
    t->close += bench_now() - c0;
}

void bench_run_phase(const struct bench_options *o, enum bench_phase_kind kind, MPI_Comm comm, struct bench_times *t,
                     MPI_Info *hints) {
    int rank, nranks;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &nranks);
    memset(t, 0, sizeof *t);
    unsigned char *buf = NULL;
    if (posix_memalign((void **)&buf, 4096, o->transfer_size)) {
        bench_error("cannot allocate a %llu-byte transfer buffer", (unsigned long long)o->transfer_size);
        MPI_Abort(comm, BENCH_EXIT_IO);
    }
    int owner = data_owner(o, kind, rank, nranks);
    bench_fill(buf, o->transfer_size, 0, owner); /* what every transfer writes unless fill_each_transfer */
    /* nfiles opens one file per segment; the other patterns open one file for all segments */
    int per_segment = o->pattern == PATTERN_NFILES;
    uint64_t opens = per_segment ? o->segment_count : 1, count = per_segment ? 1 : o->segment_count;

    double start = t->start = bench_phase_begin(o, comm);
    for (uint64_t g = 0; g < opens; g++)
        run_file(o, kind, comm, owner, g * count, count, buf, t, g == 0 ? hints : NULL);
    t->total = bench_now() - start;
    t->end = bench_wallclock();
    free(buf);
}

void bench_remove_files(const struct bench_options *o, MPI_Comm comm) {
    int rank, nranks;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &nranks);
    char name[sizeof o->path + 64];
    MPI_Barrier(comm); /* with -C another rank may still be about to open our file */
    if (bench_shared_file(o)) {
        if (rank == 0) {
            bench_file_name(o, 0, name, sizeof name);
            bench_unlink(name);
        }
    } else {
        uint64_t files = o->pattern == PATTERN_NFILES ? o->segment_count : 1;
        for (uint64_t s = 0; s < files; s++) {
            bench_file_name(o, bench_place(o, nranks, rank, s, 0).file_index, name, sizeof name);
            bench_unlink(name);
        }
    }
    MPI_Barrier(comm);
}
