/* ioloom-predict-oom: the predictor where memory runs out, built with a grammar whose rewrites outgrow their
 * reserved nodes at once (PG_SLACK 2), so that a rewrite, not only the start of an input, meets the refusal
 * (tests/test_predict_memory.py). It feeds a process model noisy operations (many symbols, sizes and offsets:
 * local models without end), asking its candidates before each, and prints one line of counts; it must end,
 * never abort.
 *   ioloom-predict-oom budget BYTES OPS: under a memory budget of BYTES (memory.h);
 *   ioloom-predict-oom rlimit MIB OPS: with no budget, under an address-space limit MIB above what the process
 *     maps at start (setrlimit): malloc itself fails. */
#include "grammar.h"
#include "process.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

enum { SYMBOLS = 512, KEYS = 16, CANDIDATES = 64 };

static unsigned lcg(unsigned *state) {
    *state = *state * 1103515245u + 12345u;
    return (*state >> 16) & 0x7fff;
}

static struct pg_operation noisy_op(unsigned *seed, int64_t now) {
    int32_t symbol = (int32_t)(lcg(seed) % SYMBOLS);
    enum pg_kind kind = (enum pg_kind)(symbol % 4);
    int64_t offset = kind == PG_OPEN || kind == PG_CLOSE ? -1 : (int64_t)lcg(seed) * 512;
    int64_t size = kind == PG_OPEN || kind == PG_CLOSE ? 0 : 1 + lcg(seed) % 100000;
    return (struct pg_operation){symbol, symbol % KEYS, kind, offset, size, now, now + 1000, -1};
}

/* Bytes the process maps now (/proc/self/statm's first field, in pages). */
static size_t mapped(void) {
    unsigned long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%lu", &pages) != 1) pages = 0;
    if (f) fclose(f);
    return pages * 4096;
}

/* ops operations under a budget of `bytes` (0: none) and, with limit_mib, an address-space limit. */
static int feed(size_t bytes, long ops, size_t limit_mib) {
    struct pg_options o = {1 << 16, 24, 512, 64, 64, 1000000, SYMBOLS, KEYS, 4096, bytes};
    struct pg_process *p = pg_process_new(&o);
    struct pg_candidate c[CANDIDATES];
    struct rlimit limit = {mapped() + (limit_mib << 20), RLIM_INFINITY};
    unsigned seed = 1;
    long predicted = 0;
    if (!p) return printf("no model (the budget is under its tables)\n"), 0;
    if (limit_mib && setrlimit(RLIMIT_AS, &limit) != 0) return perror("ioloom-predict-oom: setrlimit"), 1;
    const struct pg_memory *m = pg_process_memory(p), *fixed = pg_process_fixed_memory(p);
    for (long i = 0; i < ops; i++) {
        predicted += pg_process_predict(p, c, CANDIDATES);
        struct pg_operation op = noisy_op(&seed, i * 3000);
        pg_process_observe(p, &op);
        if (bytes && m->used > bytes) return printf("over the budget: %zu bytes used of %zu\n", m->used, bytes), 1;
    }
    const struct pg_grammar *g = pg_sequence_grammar(pg_process_sequence(p));
    printf("ops %ld cap %zu peak %zu refused %lld stopped %lld main_refused %lld main_stopped %lld main_past_cap %lld "
           "predicted %ld\n",
           ops, bytes, m->peak, (long long)m->refused, (long long)m->stopped, (long long)fixed->refused,
           (long long)fixed->stopped, (long long)pg_grammar_past_cap(g), predicted);
    pg_process_free(p);
    return 0;
}

int main(int argc, char **argv) {
    int budget = argc == 4 && strcmp(argv[1], "budget") == 0, rlimit = argc == 4 && strcmp(argv[1], "rlimit") == 0;
    if (budget || rlimit) {
        size_t n = strtoull(argv[2], NULL, 10);
        return feed(budget ? n : 0, atol(argv[3]), rlimit ? n : 0);
    }
    fprintf(stderr, "usage: ioloom-predict-oom budget BYTES OPS | rlimit MIB OPS\n");
    return 2;
}
