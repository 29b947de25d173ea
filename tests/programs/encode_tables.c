/* The encoder's tables under ThreadSanitizer (tests/test_trace_encoder.py): threads that checksum and encode at once,
 * the first checksum and chunk of the program, must not race on the CRC and varint packing tables (built once as the
 * program loads, not on first use). Built with -fsanitize=thread and the encoder's own source (trace_format.c,
 * included). Usage: encode_tables. Prints one line, exit 0; ThreadSanitizer's report and exit status 66 on a race. */
#include <pthread.h>
#include <stdio.h>

#include "trace_format.c"

#define THREADS 4
#define ROWS 64

static pthread_barrier_t start;

/* One thread's checksum and chunk of ROWS rows, both after every thread has started. */
static void *encode_once(void *arg) {
    static _Thread_local struct ioloom_raw_event ev[ROWS];
    static _Thread_local uint8_t out[4096 * 4];
    static _Thread_local int64_t scratch[ROWS];
    for (int i = 0; i < ROWS; i++) ev[i].t_start = 1000 * (uint64_t)i, ev[i].t_end = 1000 * (uint64_t)i + 7;
    pthread_barrier_wait(&start);
    uint32_t crc = ioloom_crc32((const uint8_t *)ev, sizeof ev);
    size_t len = ioloom_encode_events(out, scratch, 7, ev, 1, ROWS, NULL);
    *(size_t *)arg = len + crc % 2; /* both results used */
    return NULL;
}

int main(void) {
    pthread_t t[THREADS];
    size_t len[THREADS];
    pthread_barrier_init(&start, NULL, THREADS);
    for (int k = 0; k < THREADS; k++) pthread_create(&t[k], NULL, encode_once, &len[k]);
    for (int k = 0; k < THREADS; k++) pthread_join(t[k], NULL);
    printf("%d threads encoded at once\n", THREADS);
    return 0;
}
