/* ioloom-predict-vectors DIR: writes DIR/sequences.txt, the shared test vectors of the predictor's grammar (docs/
 * predict.md): streams of symbols fed to the C grammar, sequence and local model, with what each predicted after
 * every input; DIR/folded.txt, the same streams' symbols folded as a folded trace's grammar section stores them
 * (docs/trace-format.md, "Folded traces"); and DIR/process.txt, streams of operations fed to the C process model
 * (process.h), with the candidates it predicted before each; DIR/phases.txt, streams of operations fed to the process
 * model and the phase interface (phase.h), with the phase it gave before each operation (asked at the operation's
 * start) and after it. tests/test_predict_vectors.py holds the Python model to the same predictions, and this
 * program's output to the committed copies (tests/vectors/predict/).
 * ioloom-predict-vectors --cost N [PERCENT]: feeds N inputs of a loop (open, 24 writes, close; PERCENT of the
 * inputs, default 10, random) to a sequence and asks its prediction after each, printing nothing: run under
 * callgrind with two values of N, the difference of the instruction counts over that of N is the cost of one
 * input and one prediction. */
#include "grammar.h"
#include "phase.h"
#include "process.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_SYMBOLS = 64, MAX_INPUTS = 4096 };

struct stream {
    const char *name;
    int32_t cap, runs, n;
    int32_t in[MAX_INPUTS];
};

static unsigned lcg(unsigned *state) {
    *state = *state * 1103515245u + 12345u;
    return (*state >> 16) & 0x7fff;
}

static void print_set(FILE *out, const int32_t *set, int32_t n) {
    for (int32_t k = 0; k < n; k++) fprintf(out, "%s%d", k ? "," : "", set[k]);
}

/* The grammar alone (runs 0) or a sequence (runs 1) over the stream: after each input, its predictions. */
static int write_stream(FILE *out, const struct stream *st) {
    struct pg_sequence *s = pg_sequence_new(st->cap, MAX_SYMBOLS, 24, st->runs, 4096, NULL, NULL);
    int32_t set[MAX_SYMBOLS];
    if (!s) return -1;
    fprintf(out, "stream %s cap %d runs %d\n", st->name, st->cap, st->runs);
    for (int32_t i = 0; i < st->n; i++) {
        pg_sequence_input(s, st->in[i]);
        int32_t n = pg_sequence_predicted(s, set, MAX_SYMBOLS);
        fprintf(out, "%d\t", st->in[i]);
        print_set(out, set, n);
        fprintf(out, "\t%d\t%lld\n", pg_grammar_size(pg_sequence_grammar(s)),
                (long long)pg_grammar_past_cap(pg_sequence_grammar(s)));
    }
    pg_sequence_free(s);
    return 0;
}

/* The stream's symbols folded as a folded trace folds its tokens (python/ioloom/trace/folded.py's fold(): taken
 * while the grammar holds fewer than cap symbols): the rules as pg_grammar_rules() writes them, and how many
 * symbols were left for the tail. */
static int write_fold(FILE *out, const struct stream *st) {
    enum { MAX_VALUES = 4 * MAX_INPUTS + 8 };
    static int64_t values[MAX_VALUES];
    struct pg_grammar *g = pg_grammar_new(st->cap, MAX_SYMBOLS, NULL);
    int32_t taken = 0;
    if (!g) return -1;
    for (; taken < st->n && pg_grammar_size(g) < st->cap; taken++) pg_grammar_input(g, st->in[taken]);
    int64_t n = pg_grammar_rules(g, values, MAX_VALUES);
    fprintf(out, "stream %s cap %d tail %d\n", st->name, st->cap, st->n - taken);
    for (int64_t k = 0; k < n && k < MAX_VALUES; k++) fprintf(out, "%s%lld", k ? " " : "", (long long)values[k]);
    fputc('\n', out);
    pg_grammar_free(g);
    return n < 0 || n > MAX_VALUES ? -1 : 0;
}

static void textbook(struct stream *st) {
    const char *text = "abcabdabcabd";
    *st = (struct stream){"textbook", 1 << 16, 0, 0, {0}};
    for (const char *c = text; *c; c++) st->in[st->n++] = *c - 'a';
}

static void loop(struct stream *st, int runs) {
    *st = (struct stream){runs ? "loop-runs" : "loop", 1 << 16, runs, 0, {0}};
    for (int step = 0; step < 20; step++) {
        st->in[st->n++] = 0;
        for (int w = 0; w < 24; w++) st->in[st->n++] = 1;
        st->in[st->n++] = 2;
    }
}

static void particles(struct stream *st) {
    unsigned seed = 7;
    *st = (struct stream){"particles", 1 << 16, 1, 0, {0}};
    for (int step = 0; step < 20 && st->n < MAX_INPUTS - 200; step++) {
        st->in[st->n++] = 0;
        st->in[st->n++] = 3;
        for (int p = 80 + (int)(lcg(&seed) % 60); p > 0; p--) st->in[st->n++] = 1;
        st->in[st->n++] = 2;
    }
}

static void noisy(struct stream *st, const char *name, int runs, int32_t cap, int alphabet, unsigned seed) {
    int32_t period[9], length = 1 + (int)(lcg(&seed) % 9);
    *st = (struct stream){name, cap, runs, 0, {0}};
    for (int k = 0; k < length; k++) period[k] = (int32_t)(lcg(&seed) % (unsigned)alphabet);
    for (int i = 0; i < 600; i++)
        st->in[st->n++] = lcg(&seed) % 10 < 8 ? period[i % length] : (int32_t)(lcg(&seed) % (unsigned)alphabet);
}

/* A local model of `limit` distinct values: one value, a local grammar, then past the limit its fallback (and its
 * drift, but for 0). */
static int write_local(FILE *out, int32_t limit, enum pg_fallback fallback, int runs, const int64_t *values, size_t n) {
    static const char *const names[] = {"mean", "zero", "max"};
    struct pg_local *m = pg_local_new(limit, fallback, runs, 4096, NULL);
    if (!m) return -1;
    fprintf(out, "local limit %d fallback %s runs %d\n", (int)limit, names[fallback], runs);
    for (size_t i = 0; i < n; i++) {
        pg_local_observe(m, values[i]);
        fprintf(out, "%lld\t%lld\n", (long long)values[i], (long long)pg_local_predict(m));
    }
    pg_local_free(m);
    return 0;
}

/* A sawtooth with uneven peaks, 0, 3, ... up to 20, 35, 15 in turn, then from 0 again: n values. Its drift
 * mistakes one drop for another (a change of -33 after a peak of 18) and would predict a length below 0. */
static void sawtooth_of(int64_t *values, size_t n) {
    static const int64_t peaks[] = {20, 35, 15};
    for (size_t i = 0, peak = 0; i < n; i++) {
        values[i] = i && values[i - 1] + 3 <= peaks[peak % 3] ? values[i - 1] + 3 : 0;
        peak += i && values[i] == 0;
    }
}

/* Sizes scattered over 9 values around 1,000 without a pattern (the mean replaces the grammar, version 1.2), then
 * alternating 990 and 1,010 (the grammar, exact again, takes over): n values. */
static void scattered_of(int64_t *values, size_t n) {
    unsigned seed = 5;
    for (size_t i = 0; i < n; i++)
        values[i] = i < n / 2 ? 996 + (int64_t)(lcg(&seed) % 9) : 990 + 20 * (int64_t)(i % 2);
}

/* Run lengths of 40 to 48 without a pattern: past the fallback to the longest, the drift is no better (version
 * 1.2: scored by the run ends each would mispredict, not by distance). */
static void random_lengths_of(int64_t *values, size_t n) {
    unsigned seed = 11;
    for (size_t i = 0; i < n; i++) values[i] = 40 + (int64_t)(lcg(&seed) % 9);
}

static int write_locals(FILE *out) {
    static const int64_t sizes[] = {4096, 4096, 512, 4096, 4096, 512, 4096, 4096, 512, 7, 8, 9, 10, 11, 4096};
    static const int64_t huge[] = {0, 1, 2, 3, 4, 5, INT64_MAX / 2, INT64_MAX - 1, INT64_MAX, 0, INT64_MAX, INT64_MAX};
    int64_t cycling[120]; /* a count changing by +8 modulo 29 (a drift that cycles: +8, +8, -21, ...), then noise */
    int64_t sawtooth[120];
    for (int i = 0; i < 120; i++) cycling[i] = i < 100 ? 40 + (i * 8) % 29 : 40 + (i * 7919) % 31;
    int64_t scattered[100], lengths[100];
    sawtooth_of(sawtooth, 120);
    scattered_of(scattered, 100);
    random_lengths_of(lengths, 100);
    return write_local(out, 4, PG_MEAN, 1, sizes, sizeof sizes / sizeof *sizes) |
           write_local(out, 4, PG_MAX, 0, cycling, 120) | write_local(out, 4, PG_MEAN, 1, cycling, 120) |
           write_local(out, 4, PG_MAX, 0, sawtooth, 120) | write_local(out, 4, PG_MEAN, 0, huge, 12) |
           write_local(out, 4, PG_MAX, 0, huge, 12) | write_local(out, 24, PG_MEAN, 1, scattered, 100) |
           write_local(out, 4, PG_MAX, 0, lengths, 100);
}

/* ---- process streams: operations and the candidates predicted before each ---- */

enum { PROCESS_OPS = 2400, CANDIDATES = 64 };

struct ops {
    const char *name;
    int32_t n;
    struct pg_operation op[PROCESS_OPS];
    int64_t now;   /* the clock: where the next operation starts */
    int64_t at[8]; /* per file key, the offset of the next contiguous access */
};

/* Appends an operation of symbol (kind, file key) starting `gap` ns after the last one ended, taking 2 us. */
static void add_op(struct ops *o, int32_t symbol, enum pg_kind kind, int32_t key, int64_t offset, int64_t size,
                   int64_t gap) {
    if (o->n == PROCESS_OPS) return;
    o->now += gap;
    o->op[o->n++] = (struct pg_operation){symbol, key, kind, offset, size, o->now, o->now + 2000, -1};
    o->now += 2000;
    if (kind == PG_OPEN || kind == PG_CLOSE)
        o->at[key] = 0;
    else if (offset >= 0)
        o->at[key] = offset + size;
}

/* One contiguous write on key of size bytes. */
static void append(struct ops *o, int32_t symbol, int32_t key, int64_t size, int64_t gap) {
    add_op(o, symbol, PG_WRITE, key, o->at[key], size, gap);
}

/* A file per step: open, 24 writes of 1 MiB, close; steps 50 ms apart. */
static void file_per_step(struct ops *o) {
    *o = (struct ops){.name = "file-per-step"};
    for (int step = 0; step < 30; step++) {
        add_op(o, 0, PG_OPEN, 0, -1, 0, 50000000);
        for (int w = 0; w < 24; w++) append(o, 1, 0, 1 << 20, 10000);
        add_op(o, 2, PG_CLOSE, 0, -1, 0, 10000);
    }
}

/* HDF5-like: a header, compressed chunks of varying sizes, then metadata written back where the header and the
 * second chunk ended (returns), and a superblock update at 0. */
static void hdf5(struct ops *o) {
    unsigned seed = 11;
    *o = (struct ops){.name = "hdf5-returns"};
    for (int step = 0; step < 30; step++) {
        add_op(o, 0, PG_OPEN, 0, -1, 0, 20000000);
        append(o, 1, 0, 96, 5000);
        int64_t ends[6];
        for (int c = 0; c < 6; c++) append(o, 2, 0, 3000 + lcg(&seed) % 1000, 5000), ends[c] = o->at[0];
        add_op(o, 3, PG_WRITE, 0, 96, 40, 5000);
        add_op(o, 3, PG_WRITE, 0, ends[1], 40, 5000);
        add_op(o, 4, PG_WRITE, 0, 0, 8, 5000);
        add_op(o, 5, PG_CLOSE, 0, -1, 0, 5000);
    }
}

/* GTC-like: a header, then a varying count of 28-byte particle writes, and reads of unknown offset. */
static void particle_ops(struct ops *o) {
    unsigned seed = 5;
    *o = (struct ops){.name = "particles"};
    for (int step = 0; step < 20; step++) {
        add_op(o, 0, PG_OPEN, 1, -1, 0, 3000000 + lcg(&seed) % 2000000);
        append(o, 1, 1, 64, 3000);
        for (int p = 40 + (int)(lcg(&seed) % 30); p > 0; p--) append(o, 2, 1, 28, 500 + lcg(&seed) % 100);
        add_op(o, 3, PG_READ, 2, -1, 4096, 800);
        add_op(o, 4, PG_CLOSE, 1, -1, 0, 1000);
    }
}

/* GTC-like with a particle count that changes by +8 modulo 29 each step (more than 24 counts: the run-length
 * model falls back, and its drift learns the cycle of changes). */
static void cycling_particles(struct ops *o) {
    *o = (struct ops){.name = "cycling-particles"};
    for (int step = 0; step < 75; step++) {
        add_op(o, 0, PG_OPEN, 1, -1, 0, 3000000);
        append(o, 1, 1, 64, 3000);
        for (int p = 4 + (step * 8) % 29; p > 0; p--) append(o, 2, 1, 28, 500);
        add_op(o, 4, PG_CLOSE, 1, -1, 0, 1000);
    }
}

/* GTC's restart record through libgfortran (docs/predict.md, "GTC's own I/O"), one symbol for all writes (as
 * operation+file symbols): per step an open, full 4 KiB buffers from 0 while the record lasts (its size varies, so
 * the count of buffers and the last one's size vary), the record's length written back at offset 1,000, inside the
 * first buffer (no earlier access ends there, and the change from the last end varies: only the absolute offset of
 * the last time at that transition and place predicts it, version 1.3), its trailing copy at the record's end,
 * a close. */
static void write_back(struct ops *o) {
    unsigned seed = 7;
    *o = (struct ops){.name = "write-back"};
    for (int step = 0; step < 40; step++) {
        add_op(o, 0, PG_OPEN, 0, -1, 0, 3000000);
        int64_t end = 20000 + lcg(&seed) % 4000;
        while (o->at[0] < end) append(o, 1, 0, end - o->at[0] < 4096 ? end - o->at[0] : 4096, 20000);
        add_op(o, 1, PG_WRITE, 0, 1000, 4, 1000);
        add_op(o, 1, PG_WRITE, 0, end, 4, 1000);
        add_op(o, 2, PG_CLOSE, 0, -1, 0, 1000);
    }
}

/* An input read line by line as fgets reads it (version 1.4): per step an open, reads asking 255 bytes that each
 * move one line (4 to 43 bytes, the last none: the end of the file), each at the end of the one before, a close.
 * Only the bytes moved say where a read ended. */
static void line_reads(struct ops *o) {
    unsigned seed = 13;
    *o = (struct ops){.name = "line-reads"};
    for (int step = 0; step < 20; step++) {
        add_op(o, 0, PG_OPEN, 0, -1, 0, 3000000);
        for (int line = 0; line <= 16; line++) {
            int64_t moved = line < 16 ? 4 + (int64_t)(lcg(&seed) % 40) : 0;
            add_op(o, 1, PG_READ, 0, o->at[0], 255, 1000);
            o->op[o->n - 1].moved = moved, o->at[0] -= 255 - moved;
        }
        add_op(o, 2, PG_CLOSE, 0, -1, 0, 1000);
    }
}

/* Noise over three files: symbols 0-8 of fixed kinds and keys, sizes from more than 24 values (the fallback),
 * offsets contiguous, repeated or jumping, gaps near the 1 ms threshold. */
static void noisy_ops(struct ops *o, const char *name, unsigned seed) {
    static const enum pg_kind kinds[9] = {PG_OPEN, PG_WRITE, PG_WRITE, PG_READ, PG_CLOSE,
                                          PG_OPEN, PG_READ,  PG_WRITE, PG_CLOSE};
    static const int32_t keys[9] = {0, 0, 0, 0, 0, 1, 1, 1, 1};
    *o = (struct ops){.name = name};
    for (int i = 0; i < 1500; i++) {
        int32_t s = lcg(&seed) % 10 < 7 ? (int32_t)(i % 9) : (int32_t)(lcg(&seed) % 9), key = keys[s];
        int64_t size = lcg(&seed) % 4 ? (int64_t)512 << (i % 3) : 1 + (int64_t)(lcg(&seed) % 64);
        int64_t gap = lcg(&seed) % 2000000;
        unsigned jump = lcg(&seed) % 10;
        int64_t offset = jump < 7 ? o->at[key] : jump < 9 ? (int64_t)(lcg(&seed) % 16) * 512 : -1;
        if (kinds[s] == PG_OPEN || kinds[s] == PG_CLOSE)
            add_op(o, s, kinds[s], key, -1, 0, gap);
        else
            add_op(o, s, kinds[s], key, offset, size, gap);
    }
}

static void print_candidates(FILE *out, const struct pg_candidate *c, int32_t n) {
    for (int32_t k = 0; k < n && k < CANDIDATES; k++)
        fprintf(out, "%s%d,%lld,%lld,%.17g", k ? ";" : "", c[k].symbol, (long long)c[k].size, (long long)c[k].offset,
                c[k].gap_ns);
}

/* Per operation: its fields, then how many candidates the model gave before it, and the candidates. */
static int write_process(FILE *out, const struct ops *o, int32_t run_positions) {
    struct pg_options options = {1 << 16, 24, 4096, run_positions, 64, 1000000, MAX_SYMBOLS, 8, 1 << 16, 0};
    struct pg_process *p = pg_process_new(&options);
    struct pg_candidate c[CANDIDATES];
    if (!p) return -1;
    fprintf(out, "process %s run_positions %d\n", o->name, run_positions);
    for (int32_t i = 0; i < o->n; i++) {
        const struct pg_operation *op = &o->op[i];
        int32_t n = pg_process_predict(p, c, CANDIDATES);
        fprintf(out, "%d %d %d %lld %lld %lld %lld %lld\t%d\t", op->symbol, op->kind, op->place, (long long)op->offset,
                (long long)op->size, (long long)op->t_start, (long long)op->t_end, (long long)op->moved, n);
        print_candidates(out, c, n);
        fputc('\n', out);
        pg_process_observe(p, op);
    }
    pg_process_free(p);
    return 0;
}

/* DIR/NAME opened for writing, or NULL (said on stderr). */
static FILE *vector_file(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *out = fopen(path, "w");
    if (!out) perror(path);
    return out;
}

static int write_processes(const char *dir) {
    static struct ops o;
    FILE *out = vector_file(dir, "process.txt");
    if (!out) return -1;
    int failed = 0;
    file_per_step(&o), failed |= write_process(out, &o, 64);
    hdf5(&o), failed |= write_process(out, &o, 64);
    hdf5(&o), failed |= write_process(out, &o, 3);
    particle_ops(&o), failed |= write_process(out, &o, 64);
    cycling_particles(&o), failed |= write_process(out, &o, 64);
    write_back(&o), failed |= write_process(out, &o, 64);
    line_reads(&o), failed |= write_process(out, &o, 64);
    noisy_ops(&o, "noisy-1", 1), failed |= write_process(out, &o, 64);
    noisy_ops(&o, "noisy-2", 2), failed |= write_process(out, &o, 4);
    return fclose(out) != 0 || failed ? -1 : 0;
}

/* Phases of 26 and 98 operations, 2:1 (open, writes of 64 KiB, close), 5 ms apart. */
static void alternating(struct ops *o) {
    *o = (struct ops){.name = "alternating"};
    for (int step = 0; step < 18; step++) {
        add_op(o, 0, PG_OPEN, 0, -1, 0, 5000000);
        for (int w = step % 3 == 2 ? 96 : 24; w > 0; w--) append(o, 1, 0, 1 << 16, 10000);
        add_op(o, 2, PG_CLOSE, 0, -1, 0, 10000);
    }
}

static void print_phase(FILE *out, const struct pg_phase *ph) {
    fprintf(out, "%lld %lld %lld %lld %lld %lld", (long long)ph->done, (long long)ph->remaining, (long long)ph->end_ns,
            (long long)ph->length, (long long)ph->written, (long long)ph->to_write);
}

/* Per operation: its fields and the time the process was held before it (every seventh operation of a stream
 * with `hold`: 2 ms), the phase asked at its start (before it is learnt), and the phase after it. */
static int write_phase_stream(FILE *out, const struct ops *o, int64_t gap_ns, int64_t hold) {
    struct pg_options options = {1 << 16, 24, 4096, 64, 64, 1000000, MAX_SYMBOLS, 8, 1 << 16, 0};
    struct pg_process *p = pg_process_new(&options);
    struct pg_phases *ph = pg_phases_new(24, 4096, gap_ns, NULL);
    struct pg_candidate c[CANDIDATES];
    struct pg_phase now;
    int failed = !p || !ph;
    fprintf(out, "phases %s gap_ns %lld hold_ns %lld\n", o->name, (long long)gap_ns, (long long)hold);
    for (int32_t i = 0; i < o->n && !failed; i++) {
        const struct pg_operation *op = &o->op[i];
        int64_t held = i % 7 == 6 ? hold : 0;
        fprintf(out, "%d %d %d %lld %lld %lld %lld %lld\t", op->symbol, op->kind, op->place, (long long)op->offset,
                (long long)op->size, (long long)op->t_start, (long long)op->t_end, (long long)held);
        pg_phases_hold(ph, held);
        pg_phases_now(ph, c, pg_process_predict(p, c, CANDIDATES), op->t_start, &now), print_phase(out, &now);
        pg_phases_observe(ph, op->kind, op->size, op->t_start, op->t_end);
        pg_process_observe(p, op);
        pg_phases_now(ph, c, pg_process_predict(p, c, CANDIDATES), -1, &now);
        fputc('\t', out), print_phase(out, &now), fputc('\n', out);
    }
    pg_phases_free(ph);
    pg_process_free(p);
    return failed ? -1 : 0;
}

static int write_phases(const char *dir) {
    static struct ops o;
    FILE *out = vector_file(dir, "phases.txt");
    if (!out) return -1;
    int failed = 0;
    file_per_step(&o), failed |= write_phase_stream(out, &o, 1000000, 0);
    file_per_step(&o), failed |= write_phase_stream(out, &o, 100000000, 0); /* one phase: none ends */
    hdf5(&o), failed |= write_phase_stream(out, &o, 1000000, 0);
    particle_ops(&o), failed |= write_phase_stream(out, &o, 1000000, 0);
    alternating(&o), failed |= write_phase_stream(out, &o, 1000000, 0);
    alternating(&o), failed |= write_phase_stream(out, &o, 1000000, 2000000);     /* held within phases */
    noisy_ops(&o, "noisy-1", 1), failed |= write_phase_stream(out, &o, 16384, 0); /* its gaps: under 32,768 ns */
    return fclose(out) != 0 || failed ? -1 : 0;
}

static int cost(long inputs, unsigned noise) {
    static const int32_t body[26] = {0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2};
    struct pg_sequence *s = pg_sequence_new(1 << 16, MAX_SYMBOLS, 24, 1, 4096, NULL, NULL);
    int32_t set[MAX_SYMBOLS];
    unsigned seed = 3;
    long predicted = 0;
    if (!s) return 1;
    for (long i = 0; i < inputs; i++) {
        pg_sequence_input(s, lcg(&seed) % 100 < noise ? (int32_t)(lcg(&seed) % 8) : body[i % 26]);
        predicted += pg_sequence_predicted(s, set, MAX_SYMBOLS);
    }
    pg_sequence_free(s);
    return predicted < 0;
}

int main(int argc, char **argv) {
    static struct stream st;
    if ((argc == 3 || argc == 4) && strcmp(argv[1], "--cost") == 0)
        return cost(atol(argv[2]), argc == 4 ? (unsigned)atoi(argv[3]) : 10);
    if (argc != 2) {
        fprintf(stderr, "usage: ioloom-predict-vectors DIR\n");
        return 2;
    }
    FILE *out = vector_file(argv[1], "sequences.txt");
    if (!out) return 1;
    FILE *folds = vector_file(argv[1], "folded.txt");
    if (!folds) return fclose(out), 1;
    int failed = 0;
    textbook(&st), failed |= write_stream(out, &st) | write_fold(folds, &st);
    loop(&st, 0), failed |= write_stream(out, &st) | write_fold(folds, &st);
    loop(&st, 1), failed |= write_stream(out, &st);
    particles(&st), failed |= write_stream(out, &st) | write_fold(folds, &st);
    for (unsigned seed = 1; seed <= 16; seed++) {
        char name[32];
        snprintf(name, sizeof name, "noisy-%u", seed);
        noisy(&st, name, (int)(seed % 2), 1 << 16, 2 + (int)(seed % 4), seed);
        failed |= write_stream(out, &st) | write_fold(folds, &st);
    }
    noisy(&st, "capped", 0, 32, 30, 99), failed |= write_stream(out, &st) | write_fold(folds, &st);
    failed |= write_locals(out);
    failed |= fclose(out) != 0;
    failed |= fclose(folds) != 0;
    return write_processes(argv[1]) || write_phases(argv[1]) || failed ? 1 : 0;
}
