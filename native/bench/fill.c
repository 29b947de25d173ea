/* The data pattern. Word w (8 bytes, little-endian) of a file holds
 *     ((offset_of_word / 8) | (writer + 1) << 44) XOR 0x5a5a0000a5a50000
 * where writer is the rank whose data it is. Any byte changed, shifted or left from another rank or run is
 * detected and its file offset is known; filling costs about a memcpy, so it does not distort the timing.
 * The same definition lives in python/ioloom/bench/pattern (tests) and docs/bench.md. */
#include "bench.h"

#include <string.h>

#define MAX_ERRORS_SHOWN 10 /* per rank and phase: enough to see the shape of the damage */

#define SALT 0x5a5a0000a5a50000ull
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the pattern is defined little-endian");

static inline uint64_t word_at(uint64_t word_index, int writer) {
    return (word_index | ((uint64_t)(writer + 1) << 44)) ^ SALT;
}

static unsigned char expected_byte(uint64_t offset, int writer) {
    return (unsigned char)(word_at(offset >> 3, writer) >> ((offset & 7) * 8));
}

void bench_fill(unsigned char *buf, size_t len, uint64_t offset, int writer) {
    size_t i = 0;
    for (; i < len && ((offset + i) & 7); i++) buf[i] = expected_byte(offset + i, writer);
    uint64_t w = (offset + i) >> 3;
    for (; i + 8 <= len; i += 8, w++) {
        uint64_t v = word_at(w, writer);
        memcpy(buf + i, &v, 8);
    }
    for (; i < len; i++) buf[i] = expected_byte(offset + i, writer);
}

/* The index of the first byte that differs from the pattern, or -1 when all match. */
static long first_mismatch(const unsigned char *buf, size_t len, uint64_t offset, int writer) {
    size_t i = 0;
    for (; i < len && ((offset + i) & 7); i++)
        if (buf[i] != expected_byte(offset + i, writer)) return (long)i;
    uint64_t w = (offset + i) >> 3;
    for (; i + 8 <= len; i += 8, w++) {
        uint64_t v = word_at(w, writer), got;
        memcpy(&got, buf + i, 8);
        if (got != v) break; /* the byte loop below finds which byte */
    }
    for (; i < len; i++)
        if (buf[i] != expected_byte(offset + i, writer)) return (long)i;
    return -1;
}

/* Checks a buffer just read; counts and reports (the first few) bytes that differ from the pattern. */
uint64_t bench_verify(const unsigned char *buf, size_t len, uint64_t offset, int owner, const char *name,
                      uint64_t errors_so_far) {
    uint64_t errors = 0;
    size_t pos = 0;
    long k;
    while (pos < len && (k = first_mismatch(buf + pos, len - pos, offset + pos, owner)) >= 0) {
        uint64_t at = offset + pos + (uint64_t)k;
        if (errors_so_far + errors < MAX_ERRORS_SHOWN)
            bench_error("verify: %s offset %llu: read 0x%02x, expected 0x%02x (data of rank %d)", name,
                        (unsigned long long)at, buf[pos + (size_t)k], expected_byte(at, owner), owner);
        errors++;
        pos += (size_t)k + 1;
    }
    return errors;
}
