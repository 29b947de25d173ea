/* The encoder's AVX2 paths against the others (tests/test_trace_encoder.py): random chunks encoded as on a CPU with
 * AVX2 (the AVX2 survey and time_quads, the time columns four rows at a time) and as on one without (avx2_known set
 * to 1: the other survey, the time columns row by row) must give the same bytes. Each chunk has 1 to 5,000 rows (a
 * third of them 1 to 8), read with stride 1 or 2, each column of it the same, counting up, in a few runs or at
 * random, offsets that run on and sometimes jump, tick times, ns times or both, with or without a tick clock (exact,
 * exact with ticks longer than a ns, or rounding to a quantum); the padding of every row random. For time_quads'
 * range checks and varints, times start anywhere, near the tick clocks' origin (before or after it) or just short of
 * 2^51 ticks or ns after it (where converting four at once stops being exact), and gaps and durations go up to 2^30
 * (varints of one to five bytes). The last row read ends where a PROT_NONE page starts: a read past it faults. Built
 * with the encoder's own source (trace_format.c, included).
 * Usage: encode_paths SEED CHUNKS. Prints one line; exit 0 when every chunk gave the same bytes both ways, 1 when
 * one did not (its number, rows and stride printed), 77 when the CPU has no AVX2 (one path only). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "trace_format.c"

#define MAX_ROWS 5000
#define FIELDS 8 /* the int64_t fields from offset to parent, in a row one after another */

_Static_assert(offsetof(struct ioloom_raw_event, parent) == offsetof(struct ioloom_raw_event, offset) + 56, "fields");

static uint64_t state; /* xorshift64, seeded from the command line */

static uint64_t next(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

static uint64_t below(uint64_t k) { return next() % k; }

/* How a column goes through a chunk. */
enum pattern { SAME, COUNTING, FEW_RUNS, RANDOM };

/* What a chunk's rows are made of: each field's pattern and step, whether offsets jump, which rows hold ticks. */
struct plan {
    enum pattern field[FIELDS], small[4], gap, duration; /* small: file, errno, op, layer */
    int64_t step[FIELDS];
    int jumps, ticks; /* ticks: 0 none, 1 every row, 2 some rows */
    int long_times;   /* gaps and durations up to 2^30 ticks or ns: varints of every length up to five bytes */
};

static struct plan random_plan(void) {
    struct plan p = {
        .gap = below(4), .duration = below(4), .jumps = below(2), .ticks = below(3), .long_times = below(2)};
    for (int k = 0; k < FIELDS; k++) p.field[k] = below(4), p.step[k] = below(3) ? (int64_t)below(9) - 4 : 4096;
    for (int k = 0; k < 4; k++) p.small[k] = below(4) % 3 == 1 ? SAME : below(4);
    return p;
}

/* A value after `previous` under pattern `p`. */
static int64_t vary(enum pattern p, int64_t previous, int64_t step, int64_t domain) {
    switch (p) {
        case SAME:
            return previous;
        case COUNTING:
            return (int64_t)((uint64_t)previous + (uint64_t)step);
        case FEW_RUNS:
            return below(100) ? previous : (int64_t)below((uint64_t)domain);
        default: /* now and then any 64 bits: varints of every length, negative values */
            return below(8) ? (int64_t)below((uint64_t)domain) : (int64_t)next();
    }
}

/* A row's int64_t fields (f: from its offset on, as an array) from the row before's. */
static void int_fields(int64_t *f, const int64_t *before, const struct plan *p) {
    for (int k = 0; k < FIELDS; k++) f[k] = vary(p->field[k], before[k], p->step[k], k == 0 ? 1 << 30 : 1 << 16);
    if (p->field[0] == COUNTING) f[0] = (int64_t)((uint64_t)before[0] + (uint64_t)before[1]); /* offsets run on */
    if (p->jumps && !below(16)) f[0] = (int64_t)(next() >> 20);
    if (p->field[2] == SAME) f[2] = f[1]; /* ret == req */
    if (p->field[2] == FEW_RUNS) f[2] = below(50) ? f[1] : -1;
}

/* Row r after row `before`, its times after *now. */
static void fill_row(struct ioloom_raw_event *r, const struct ioloom_raw_event *before, const struct plan *p,
                     uint64_t *now) {
    int_fields(&r->offset, &before->offset, p);
    r->file_id = (int32_t)vary(p->small[0], before->file_id, 1, 5);
    r->err = (int32_t)vary(p->small[1], before->err, 1, 40);
    r->op = (uint16_t)vary(p->small[2], before->op, 1, 30);
    r->layer = (uint8_t)vary(p->small[3], before->layer, 1, 6);
    r->ticks = p->ticks == 1 || (p->ticks == 2 && below(8));
    int64_t domain = p->long_times ? 1 << 30 : 100000;
    r->t_start = *now += (uint64_t)vary(p->gap, 100, 50, domain);
    r->t_end = *now += (uint64_t)vary(p->duration, 2000, 3, domain);
}

#define FROM_TICKS 900000 /* the tick clocks' origin (random_clock) */
#define SLOW_NS_PER_TICK 2.6177

/* Where a chunk's times start: anywhere, near the tick clocks' origin (before it or after), or just short of where
 * converting four ticks at once stops being exact: 2^51 ticks after the origin, or 2^51 ns for the clock whose ticks
 * are longer than a ns (a chunk that crosses it). */
static uint64_t random_start(void) {
    uint64_t k = below(4), edge = k == 2 ? 1ull << 51 : (uint64_t)(0x1p51 / SLOW_NS_PER_TICK);
    return k == 0 ? next() >> 4 : k == 1 ? FROM_TICKS - (1 << 20) + below(1 << 22) : FROM_TICKS + edge - below(1 << 22);
}

/* The n rows of a chunk, every stride-th row from the one returned on, the last one ending at `end`. */
static struct ioloom_raw_event *random_rows(uint8_t *end, size_t stride, size_t n, const struct plan *p) {
    struct ioloom_raw_event *ev = (struct ioloom_raw_event *)end - ((n - 1) * stride + 1), start = {0};
    for (uint8_t *b = (uint8_t *)ev; b < end; b++) *b = (uint8_t)next(); /* padding and the rows between */
    uint64_t now = random_start();
    start.offset = (int64_t)below(1 << 20), start.req_bytes = (int64_t)below(1 << 17);
    for (size_t i = 0; i < n; i++) fill_row(&ev[i * stride], i ? &ev[(i - 1) * stride] : &start, p, &now);
    return ev;
}

/* The clock a chunk is encoded with: none (ns times only), exact, exact with ticks longer than a ns (products
 * past 2^51 before counts are), or rounding to 1 us. */
static const struct ioloom_tick_clock *random_clock(const struct plan *p) {
    static const struct ioloom_tick_clock
        exact = {.from_ticks = FROM_TICKS, .from_ns = 5000000, .ns_per_tick = 0.3851, .quantum = 1},
        slow = {.from_ticks = FROM_TICKS, .from_ns = 5000000, .ns_per_tick = SLOW_NS_PER_TICK, .quantum = 1},
        rounding = {.from_ticks = FROM_TICKS, .from_ns = 5000000, .ns_per_tick = 0.3851, .quantum = 1000};
    int k = (int)below(4);
    return k == 1 ? &exact : k == 2 ? &slow : k == 3 || p->ticks ? &rounding : NULL;
}

/* The rows encoded with the survey `known` says (1: without AVX2, 2: with it) into out; its length. */
static size_t encode(int known, uint8_t *out, const struct ioloom_raw_event *ev, size_t stride, size_t n,
                     const struct ioloom_tick_clock *clock) {
    static int64_t scratch[MAX_ROWS];
    avx2_known = known;
    return ioloom_encode_events(out, scratch, 7, ev, stride, n, clock);
}

/* A chunk's number of rows: a third 1 to 8, a third 9 to 100, a third up to MAX_ROWS. */
static size_t random_rows_count(void) {
    uint64_t k = below(3);
    return k == 0 ? 1 + below(8) : k == 1 ? 9 + below(92) : 1 + below(MAX_ROWS);
}

int main(int argc, char **argv) {
    if (argc != 3) return fprintf(stderr, "usage: encode_paths SEED CHUNKS\n"), 2;
    if (!can_avx2()) return puts("this CPU has no AVX2: one encoder path only"), 77;
    state = strtoull(argv[1], NULL, 10) | 1;
    long chunks = strtol(argv[2], NULL, 10), page = sysconf(_SC_PAGESIZE);
    size_t span = ((2 * MAX_ROWS * sizeof(struct ioloom_raw_event)) / (size_t)page + 1) * (size_t)page;
    uint8_t *region = mmap(NULL, span + (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED || mprotect(region + span, (size_t)page, PROT_NONE)) return perror("mmap"), 2;
    uint8_t *a = malloc(ioloom_events_bound(MAX_ROWS)), *b = malloc(ioloom_events_bound(MAX_ROWS));
    size_t rows = 0;
    for (long c = 0; c < chunks; c++) {
        size_t n = random_rows_count(), stride = 1 + below(2);
        struct plan p = random_plan();
        const struct ioloom_raw_event *ev = random_rows(region + span, stride, n, &p);
        const struct ioloom_tick_clock *clock = random_clock(&p);
        size_t len_a = encode(1, a, ev, stride, n, clock), len_b = encode(2, b, ev, stride, n, clock);
        if (len_a != len_b || memcmp(a, b, len_a))
            return printf("chunk %ld (%zu rows, stride %zu): DIFFERENT bytes\n", c, n, stride), 1;
        rows += n;
    }
    printf("%ld chunks, %zu rows: the same bytes with and without AVX2\n", chunks, rows);
    return 0;
}
