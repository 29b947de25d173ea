/* ioloom-predict-vectors DIR: writes DIR/sequences.txt, the shared test vectors of the predictor's grammar (docs/
 * predict.md): streams of symbols fed to the C grammar, sequence and local model, with what each predicted after
 * every input. tests/test_predict_vectors.py holds the Python model to the same predictions, and this program's
 * output to the committed copy (tests/vectors/predict/).
 * ioloom-predict-vectors --cost N [PERCENT]: feeds N inputs of a loop (open, 24 writes, close; PERCENT of the
 * inputs, default 10, random) to a sequence and asks its prediction after each, printing nothing: run under
 * callgrind with two values of N, the difference of the instruction counts over that of N is the cost of one
 * input and one prediction. */
#include "grammar.h"

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
    struct pg_sequence *s = pg_sequence_new(st->cap, MAX_SYMBOLS, 24, st->runs, 4096);
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

/* A local model over sizes: one value, a local grammar, then past the limit its mean. */
static int write_local(FILE *out) {
    static const int64_t values[] = {4096, 4096, 512, 4096, 4096, 512, 4096, 4096, 512, 7, 8, 9, 10, 11, 4096};
    struct pg_local *m = pg_local_new(4, PG_MEAN, 1, 4096);
    if (!m) return -1;
    fprintf(out, "local limit 4 fallback mean runs 1\n");
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        pg_local_observe(m, values[i]);
        fprintf(out, "%lld\t%lld\n", (long long)values[i], (long long)pg_local_predict(m));
    }
    pg_local_free(m);
    return 0;
}

static int cost(long inputs, unsigned noise) {
    static const int32_t body[26] = {0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2};
    struct pg_sequence *s = pg_sequence_new(1 << 16, MAX_SYMBOLS, 24, 1, 4096);
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
    char path[4096];
    if ((argc == 3 || argc == 4) && strcmp(argv[1], "--cost") == 0)
        return cost(atol(argv[2]), argc == 4 ? (unsigned)atoi(argv[3]) : 10);
    if (argc != 2) {
        fprintf(stderr, "usage: ioloom-predict-vectors DIR\n");
        return 2;
    }
    snprintf(path, sizeof path, "%s/sequences.txt", argv[1]);
    FILE *out = fopen(path, "w");
    if (!out) {
        perror(path);
        return 1;
    }
    int failed = 0;
    textbook(&st), failed |= write_stream(out, &st);
    loop(&st, 0), failed |= write_stream(out, &st);
    loop(&st, 1), failed |= write_stream(out, &st);
    particles(&st), failed |= write_stream(out, &st);
    for (unsigned seed = 1; seed <= 16; seed++) {
        char name[32];
        snprintf(name, sizeof name, "noisy-%u", seed);
        noisy(&st, name, (int)(seed % 2), 1 << 16, 2 + (int)(seed % 4), seed), failed |= write_stream(out, &st);
    }
    noisy(&st, "capped", 0, 32, 30, 99), failed |= write_stream(out, &st);
    failed |= write_local(out);
    return fclose(out) != 0 || failed ? 1 : 0;
}
