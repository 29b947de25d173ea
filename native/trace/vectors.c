/* Writes the shared test vectors of the trace format (tests/vectors/trace/): for each vector, a stream file
 * made with the tracer's own encoder (trace_format.c) and a CSV of the events it holds; for the crafted vector,
 * also the list of its damaged chunks (crafted.damage: byte offset and kind), which both readers (the native
 * index and the Python one) must skip, each with its own problem. The Python tests check that this program's
 * output equals the committed files byte for byte, and that the reader decodes the committed stream into
 * exactly the CSV's events.
 *
 * usage: ioloom-trace-vectors OUTDIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fold.h"
#include "ioloom_trace.h"
#include "trace_format.h"

static const char *op_names[] = {"process_start", "pwrite", "fwrite", "MPI_File_write_at_all", "open"};
static const uint8_t op_layers[] = {IOLOOM_PROCESS, IOLOOM_POSIX, IOLOOM_STDIO, IOLOOM_MPIIO, IOLOOM_POSIX};
#define N_OPS (sizeof op_names / sizeof *op_names)

struct out {
    FILE *stream, *csv, *damage;
    uint8_t *chunk;
    int64_t *scratch;
    uint32_t chain; /* the checksum of the last chunk written */
};

/* Writes a sealed chunk with its checksum chained to the last one written, as the tracer does. */
static void emit(struct out *o, uint8_t *chunk, size_t len) {
    o->chain = ioloom_chain_stream_chunk(chunk, o->chain);
    fwrite(chunk, 1, len, o->stream);
}

/* Writes a chunk as it is (damage): the next one chains to the checksum it holds. */
static void emit_as_is(struct out *o, const uint8_t *chunk, size_t len) {
    o->chain = (uint32_t)chunk[8] | (uint32_t)chunk[9] << 8 | (uint32_t)chunk[10] << 16 | (uint32_t)chunk[11] << 24;
    fwrite(chunk, 1, len, o->stream);
}

static void put_chunk(struct out *o, uint32_t type, uint8_t *end) {
    uint32_t payload = (uint32_t)(end - o->chunk - IOLOOM_CHUNK_HEADER_BYTES);
    ioloom_seal_chunk(o->chunk, type, payload);
    emit(o, o->chunk, IOLOOM_CHUNK_HEADER_BYTES + payload);
}

/* Notes that the chunk about to be written is damage of `kind` (info, checksum, bad-value, bad-column, repeat). */
static void damaged(struct out *o, const char *kind) { fprintf(o->damage, "%ld %s\n", ftell(o->stream), kind); }

static void put_info(struct out *o, const char *key, const char *value) {
    put_chunk(o, IOLOOM_CHUNK_INFO, ioloom_put_cstr(ioloom_put_cstr(o->chunk + IOLOOM_CHUNK_HEADER_BYTES, key), value));
}

/* The file table every vector holds: file 0 /data/shared.dat, 1 pipe:[77]. As a FILES chunk, or (deltas, the folded
 * trace's) a FILE_DELTAS chunk in which file 1 is first named /data/older.dat (sharing a head and a tail with the
 * path before), then renamed (a later entry replaces it) with changes down (the id, dev and ino). */
static void put_files(struct out *o, int deltas) {
    static const struct ioloom_file_ref entries[] = {
        {0, 65024, 123456, "/data/shared.dat"}, {1, 65024, 123499, "/data/older.dat"}, {1, 0, 0, "pipe:[77]"}};
    uint8_t *p = o->chunk + IOLOOM_CHUNK_HEADER_BYTES;
    struct ioloom_file_ref previous = IOLOOM_FILE_REF_START;
    for (size_t k = 0; k < 3; k++) {
        if (!deltas && k == 1) continue;
        p = deltas ? ioloom_put_file_delta(p, &previous, &entries[k]) : ioloom_put_file(p, &entries[k]);
        previous = entries[k];
    }
    put_chunk(o, deltas ? IOLOOM_CHUNK_FILE_DELTAS : IOLOOM_CHUNK_FILES, p);
}

static void put_preamble(struct out *o, const char *name) {
    uint8_t header[IOLOOM_HEADER_BYTES];
    ioloom_file_header(header);
    fwrite(header, 1, sizeof header, o->stream);
    put_info(o, "pid", "4242");
    put_info(o, "rank", "3");
    put_info(o, "vector", name);
    uint8_t *p = o->chunk + IOLOOM_CHUNK_HEADER_BYTES;
    for (size_t i = 0; i < N_OPS; i++) {
        p = ioloom_put_varint(p, i);
        *p++ = op_layers[i];
        p = ioloom_put_cstr(p, op_names[i]);
    }
    put_chunk(o, IOLOOM_CHUNK_OPS, p);
    put_files(o, !strcmp(name, "folded"));
    fprintf(o->csv, "tid,t_start,t_end,op,layer,file_id,handle,offset,req_bytes,ret_bytes,errno,aux,call_id,parent,"
                    "coll_seq\n");
}

/* The CSV lines of the n rows ev[0], ev[stride], ... of thread `tid`. */
static void put_csv(struct out *o, uint32_t tid, const struct ioloom_raw_event *ev, size_t stride, size_t n) {
    static const char *layers[] = {"posix", "stdio", "mpiio", "process", "async"};
    for (size_t i = 0; i < n; i++) {
        const struct ioloom_raw_event *e = &ev[i * stride];
        fprintf(o->csv, "%u,%llu,%llu,%s,%s,%d,%lld,%lld,%lld,%lld,%d,%lld,%lld,%lld,%lld\n", tid,
                (unsigned long long)e->t_start, (unsigned long long)e->t_end, op_names[e->op], layers[e->layer],
                e->file_id, (long long)e->handle, (long long)e->offset, (long long)e->req_bytes,
                (long long)e->ret_bytes, e->err, (long long)e->aux, (long long)e->call_id, (long long)e->parent,
                (long long)e->coll_seq);
    }
}

/* An EVENTS chunk of the n rows ev[0], ev[stride], ... of thread `tid`, and their CSV lines. */
static void put_rows(struct out *o, uint32_t tid, const struct ioloom_raw_event *ev, size_t stride, size_t n) {
    emit(o, o->chunk, ioloom_encode_events(o->chunk, o->scratch, tid, ev, stride, n, NULL));
    put_csv(o, tid, ev, stride, n);
}

static void put_events(struct out *o, uint32_t tid, const struct ioloom_raw_event *ev, size_t n) {
    put_rows(o, tid, ev, 1, n);
}

static struct ioloom_raw_event blank(uint16_t op) {
    return (struct ioloom_raw_event){.offset = -1,
                                     .req_bytes = -1,
                                     .ret_bytes = -1,
                                     .handle = -1,
                                     .aux = -1,
                                     .coll_seq = -1,
                                     .call_id = -1,
                                     .parent = -1,
                                     .file_id = -1,
                                     .op = op,
                                     .layer = op_layers[op]};
}

/* A rank writing 64 KiB blocks at a stride of 4 blocks, with a steady rhythm: the loop the run encoding is for. Its
 * two chunks (rows 0-499 and 500-999) are encoded in place from every other row of one array holding them in
 * turns, as the writer encodes a buffer of two operations taking turns: the same bytes as from rows side by side. */
static void strided(struct out *o) {
    enum { N = 1000 };
    static struct ioloom_raw_event ev[N], turns[N];
    uint64_t t = 1000000000ull;
    for (int i = 0; i < N; i++) {
        ev[i] = blank(1);
        ev[i].t_start = t;
        ev[i].t_end = t + 1500 + (uint64_t)(i % 3) * 100; /* durations vary a little, as real ones do */
        t = ev[i].t_end + 60;
        ev[i].file_id = 0;
        ev[i].handle = 5;
        ev[i].offset = (int64_t)i * 4 * 65536 + 3 * 65536;
        ev[i].req_bytes = ev[i].ret_bytes = 65536;
    }
    for (int i = 0; i < N / 2; i++) {
        turns[2 * i] = ev[i];
        turns[2 * i + 1] = ev[N / 2 + i];
    }
    put_rows(o, 101, turns, 2, N / 2);
    put_rows(o, 101, turns + 1, 2, N / 2);
    put_info(o, "clean_exit", "1");
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_random(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
/* A signed value with a random magnitude of up to `bits` bits. */
static int64_t random_value(int bits) {
    uint64_t r = next_random();
    int64_t v = (int64_t)(r >> (64 - 1 - (int)(r % (uint64_t)bits)));
    return r & 1 ? -v : v;
}

/* n rows with every field exercised (the mixed vector's). */
static void random_rows(struct ioloom_raw_event *ev, int n) {
    uint64_t t = 5000;
    for (int i = 0; i < n; i++) {
        ev[i] = blank((uint16_t)(next_random() % N_OPS));
        ev[i].t_start = t;
        ev[i].t_end = t + (uint64_t)(next_random() % 100000);
        t = i % 50 == 49 ? t - 2000 : ev[i].t_end + next_random() % 5000; /* sometimes earlier (a parent call) */
        ev[i].file_id = (int32_t)(next_random() % 3) - 1;
        ev[i].handle = random_value(20);
        ev[i].offset = random_value(60);
        ev[i].req_bytes = random_value(40);
        ev[i].ret_bytes = i % 7 ? ev[i].req_bytes : -1;
        ev[i].err = i % 7 ? 0 : 5;
        ev[i].aux = random_value(33);
        ev[i].call_id = ev[i].layer == IOLOOM_MPIIO ? i : -1;
        ev[i].parent = ev[i].layer == IOLOOM_POSIX ? i / 10 : -1;
        ev[i].coll_seq = ev[i].layer == IOLOOM_MPIIO ? ((int64_t)1 << 32) + i : -1;
    }
}

/* Every field exercised: all layers, negative and 60-bit values, errors, cross-layer links, an event nested in
 * time before its predecessor, chunks of 1, 7 and 300 events on two threads, a constant chunk, and a chunk of
 * an unknown type the reader must skip. */
static void mixed(struct out *o) {
    static struct ioloom_raw_event ev[300];
    random_rows(ev, 300);
    put_events(o, 7, ev, 1);
    put_events(o, 8, ev + 1, 7);
    uint8_t *p = ioloom_put_cstr(o->chunk + IOLOOM_CHUNK_HEADER_BYTES, "a chunk type from the future");
    put_chunk(o, 99, p);
    put_events(o, 7, ev, 300);
    struct ioloom_raw_event same[50];
    for (int i = 0; i < 50; i++) same[i] = ev[10];
    put_events(o, 8, same, 50);
    put_info(o, "clean_exit", "1");
}

/* An EVENTS chunk of rows [0, n) of thread `tid` encoded into o->chunk, not written; returns its size. */
static size_t encode_only(struct out *o, uint32_t tid, const struct ioloom_raw_event *ev, size_t n) {
    return ioloom_encode_events(o->chunk, o->scratch, tid, ev, 1, n, NULL);
}

/* A regular pwrite loop of thread `tid` from time t: n rows. */
static void loop_rows(struct ioloom_raw_event *ev, size_t n, uint64_t t) {
    for (size_t i = 0; i < n; i++) {
        ev[i] = blank(1);
        ev[i].t_start = t + i * 1000;
        ev[i].t_end = ev[i].t_start + 400 + i % 5;
        ev[i].file_id = 0;
        ev[i].handle = 3;
        ev[i].offset = (int64_t)i * 512;
        ev[i].req_bytes = ev[i].ret_bytes = 512;
    }
}

/* What a crafted or damaged file holds: good chunks around chunks that break each rule the readers check, each
 * of which must be skipped alone (docs/trace-format.md, "Chunks"); a repeated chunk and a removed one break the
 * checksum chain at the repeat and at the chunk after the removed one. */
static void crafted(struct out *o) {
    struct ioloom_raw_event ev[20];
    loop_rows(ev, 20, 2000000);
    put_events(o, 11, ev, 20);
    uint8_t good[1024];
    size_t good_len = encode_only(o, 11, ev, 20);
    memcpy(good, o->chunk, good_len);
    damaged(o, "info");
    put_info(o, "pid", "12ab");
    damaged(o, "info");
    put_info(o, "dropped_events", "x");
    damaged(o, "info");
    put_info(o, "exclude:/scratch", "7");
    damaged(o, "info");
    put_info(o, "clock_init", "1 2");
    loop_rows(ev, 20, 3000000);
    ev[4].op = 40000; /* outside the op dictionary's int16 */
    damaged(o, "bad-value");
    emit(o, o->chunk, encode_only(o, 11, ev, 20));
    loop_rows(ev, 20, 4000000);
    ev[7].layer = 9;
    damaged(o, "bad-value");
    emit(o, o->chunk, encode_only(o, 11, ev, 20));
    damaged(o, "checksum");
    emit_as_is(o, good, good_len); /* a repeat */
    loop_rows(ev, 20, 5000000);
    size_t len = encode_only(o, 11, ev, 20);
    ioloom_chain_stream_chunk(o->chunk, o->chain);
    o->chunk[0] = IOLOOM_CHUNK_OPS; /* a flipped type: under the checksum */
    damaged(o, "checksum");
    emit_as_is(o, o->chunk, len);
    len = encode_only(o, 11, ev, 20);
    o->chunk[IOLOOM_CHUNK_HEADER_BYTES + 1] = 21; /* one event more than the columns hold */
    damaged(o, "bad-column");
    emit(o, o->chunk, len);
    loop_rows(ev, 20, 5500000);
    o->chain = ioloom_chain_stream_chunk(o->chunk, o->chain); /* a chunk removed: the next one is cut from the chain */
    damaged(o, "checksum");
    emit(o, o->chunk, encode_only(o, 11, ev, 20));
    uint8_t *p = ioloom_put_varint(
        ioloom_put_varint(ioloom_put_varint(o->chunk + IOLOOM_CHUNK_HEADER_BYTES, 11), 1u << 30), 6000000);
    for (int c = 0; c < IOLOOM_COLUMNS; c++) { /* 2^30 events, every column constant: a few bytes */
        *p++ = 0;
        *p++ = 1;
        *p++ = 0;
    }
    damaged(o, "bad-value");
    put_chunk(o, IOLOOM_CHUNK_EVENTS, p);
    loop_rows(ev, 5, 7000000);
    put_events(o, 12, ev, 5);
    put_info(o, "clean_exit", "1");
}

/* A FOLDED chunk of rows [0, n) of thread `tid` at `quantum` ns (fold.h), and their CSV lines: the times rounded down
 * to multiples of the quantum, as the reader gives them. */
static void put_folded(struct out *o, uint32_t tid, struct ioloom_raw_event *ev, uint32_t n, uint64_t quantum) {
    struct ioloom_fold_area *area = ioloom_fold_area_new(n, 0);
    uint8_t *chunk = malloc(ioloom_fold_bound(n));
    size_t size = 0;
    const struct ioloom_tick_clock at_quantum = {.quantum = quantum}; /* no tick times: the rounding alone */
    if (!area || !chunk || ioloom_fold_events(area, chunk, &size, tid, ev, n, &at_quantum, SIZE_MAX) != IOLOOM_FOLDED)
        abort();
    emit(o, chunk, size);
    free(chunk);
    free(area);
    for (uint32_t i = 0; i < n; i++) {
        ev[i].t_start = ioloom_round_down(ev[i].t_start, quantum);
        ev[i].t_end = ioloom_round_down(ev[i].t_end, quantum);
    }
    put_csv(o, tid, ev, 1, n);
}

/* The mixed vector's rows (every field, negative and 60-bit values, some offsets -1) folded at 1 us; a program's
 * loop (open, 24 writes, close, 40 times; noisy times, one write failing) folded exactly; an EVENTS chunk (a stream
 * holds both when the tracer could not fold a buffer); the loop again at 1 us. */
static void folded(struct out *o) {
    enum { STEPS = 40, PER_STEP = 26, N = STEPS * PER_STEP };
    static struct ioloom_raw_event ev[N], rows[300];
    random_rows(rows, 300);
    for (int i = 0; i < 300; i += 3) rows[i].offset = -1;
    put_folded(o, 22, rows, 300, 1000);
    uint64_t t = 7000000000ull;
    for (int i = 0; i < N; i++) {
        int k = i % PER_STEP;
        ev[i] = blank(k == 0 || k == PER_STEP - 1 ? 4 : 1);
        ev[i].t_start = t + next_random() % 300;
        ev[i].t_end = ev[i].t_start + (k == 0 ? 9000 : 2000) + next_random() % 500;
        t = ev[i].t_end + 800;
        ev[i].file_id = 0;
        ev[i].handle = k == PER_STEP - 1 ? 7 : 3 + (i / PER_STEP) % 2;
        ev[i].offset = k == 0 || k == PER_STEP - 1 ? 0 : (int64_t)(k - 1) * 65536;
        ev[i].req_bytes = k == 0 ? 0644 : k == PER_STEP - 1 ? -1 : 65536;
        ev[i].ret_bytes = i == 300 ? -1 : k == 0 ? 3 + (i / PER_STEP) % 2 : k == PER_STEP - 1 ? 0 : 65536;
        ev[i].err = i == 300 ? 28 : 0;
        ev[i].parent = i / PER_STEP + 100;
    }
    put_folded(o, 21, ev, N, 1);
    struct ioloom_raw_event plain[20];
    loop_rows(plain, 20, 9000000000ull);
    put_events(o, 21, plain, 20);
    for (int i = 0; i < N; i++) { /* the loop again a second later, at 1 us: its time columns take the SMALL mode */
        ev[i].t_start += 1000000000ull;
        ev[i].t_end += 1000000000ull;
    }
    put_folded(o, 23, ev, N, 1000);
    put_info(o, "clean_exit", "1");
}

static int write_vector(const char *dir, const char *name, void (*fill)(struct out *)) {
    char path[4096];
    struct out o = {0};
    snprintf(path, sizeof path, "%s/%s.ioloom", dir, name);
    o.stream = fopen(path, "wb");
    snprintf(path, sizeof path, "%s/%s.csv", dir, name);
    o.csv = fopen(path, "w");
    snprintf(path, sizeof path, "%s/%s.damage", dir, name);
    o.damage = fill == crafted ? fopen(path, "w") : NULL;
    o.chunk = malloc(ioloom_events_bound(4000));
    o.scratch = malloc(4000 * sizeof(int64_t));
    if (!o.stream || !o.csv || !o.chunk || !o.scratch) {
        perror(path);
        return 1;
    }
    put_preamble(&o, name);
    fill(&o);
    fclose(o.stream);
    fclose(o.csv);
    if (o.damage) fclose(o.damage);
    free(o.chunk);
    free(o.scratch);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
        return 2;
    }
    return write_vector(argv[1], "strided", strided) || write_vector(argv[1], "mixed", mixed) ||
           write_vector(argv[1], "crafted", crafted) || write_vector(argv[1], "folded", folded);
}
