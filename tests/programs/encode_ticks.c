/* The encoder's tick conversion (tests/test_trace_encoder.py): rows holding TSC ticks, ns, or both, encoded with a
 * tick clock must give the chunk of the same rows converted beforehand (ioloom_row_ns) and encoded without one, byte
 * for byte. Built with the encoder's own source (trace_format.c, included). Prints one line per case; exit 0 when
 * every case matched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_format.c"

#define ROWS 300

/* Row i of a loop: a write of 4 KiB at the next offset; times in ticks when `ticks`, else in ns. */
static struct ioloom_raw_event row(int i, int ticks) {
    uint64_t start = 1000000 + (uint64_t)i * 7919 + (uint64_t)(i % 7) * 13;
    return (struct ioloom_raw_event){.t_start = start,
                                     .t_end = start + 2500 + (uint64_t)(i % 3),
                                     .offset = 4096 * i,
                                     .req_bytes = 4096,
                                     .ret_bytes = 4096,
                                     .handle = 3,
                                     .aux = -1,
                                     .coll_seq = -1,
                                     .call_id = -1,
                                     .parent = -1,
                                     .file_id = 1,
                                     .op = 5,
                                     .layer = 0,
                                     .ticks = (uint8_t)ticks};
}

/* 1 when the rows encoded by `clock` give the chunk of the same rows converted first. */
static int same_chunk(const struct ioloom_raw_event *ev, size_t stride, size_t n,
                      const struct ioloom_tick_clock *clock) {
    static struct ioloom_raw_event converted[ROWS];
    static int64_t scratch[ROWS];
    for (size_t i = 0; i < n * stride; i++) {
        converted[i] = ev[i];
        converted[i].t_start = ioloom_row_ns(clock, &ev[i], ev[i].t_start);
        converted[i].t_end = ioloom_row_ns(clock, &ev[i], ev[i].t_end);
        converted[i].ticks = 0;
    }
    size_t bound = ioloom_events_bound(n);
    uint8_t *a = calloc(1, bound), *b = calloc(1, bound); /* the checksum is left to ioloom_chain_chunk */
    size_t len_a = ioloom_encode_events(a, scratch, 7, ev, stride, n, clock);
    size_t len_b = ioloom_encode_events(b, scratch, 7, converted, stride, n, NULL);
    int same = len_a == len_b && !memcmp(a, b, len_a);
    free(a);
    free(b);
    return same;
}

int main(void) {
    static struct ioloom_raw_event ev[ROWS];
    const struct ioloom_tick_clock clock = {
        .from_ticks = 900000, .from_ns = 5000000, .ns_per_tick = 0.3851, .quantum = 1};
    const struct {
        const char *name;
        int ns_row; /* the row holding ns (-1: none; ROWS: every row) */
    } cases[] = {{"every row ticks", -1},
                 {"row 0 ns", 0},
                 {"row 6 ns", 6},
                 {"the last even row ns", ROWS - 2},
                 {"every row ns", ROWS}};
    int failed = 0;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        for (int i = 0; i < ROWS; i++) ev[i] = row(i, cases[c].ns_row != i && cases[c].ns_row != ROWS);
        for (size_t stride = 1; stride <= 2; stride++) {
            int same = same_chunk(ev, stride, ROWS / stride, &clock);
            printf("%s, stride %zu: %s\n", cases[c].name, stride, same ? "same" : "DIFFERENT");
            failed += !same;
        }
    }
    return failed != 0;
}
