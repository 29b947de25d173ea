/* The data pattern. Word w (8 bytes, little-endian) of a file holds
 *     ((offset_of_word / 8) | (writer + 1) << 44) XOR 0x5a5a0000a5a50000
 * where writer is the rank whose data it is. Any byte changed, shifted or left from another rank or run is
 * detected and its file offset is known; filling costs about a memcpy, so it does not distort the timing.
 * The same definition lives in python/ioloom/bench/pattern (tests) and docs/bench.md. */
#include "bench.h"

#include <string.h>

#define SALT 0x5a5a0000a5a50000ull
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the pattern is defined little-endian");

static inline uint64_t word_at(uint64_t word_index, int writer) {
    return (word_index | ((uint64_t)(writer + 1) << 44)) ^ SALT;
}

unsigned char bench_expected_byte(uint64_t offset, int writer) {
    return (unsigned char)(word_at(offset >> 3, writer) >> ((offset & 7) * 8));
}

void bench_fill(unsigned char *buf, size_t len, uint64_t offset, int writer) {
    size_t i = 0;
    for (; i < len && ((offset + i) & 7); i++)
        buf[i] = bench_expected_byte(offset + i, writer);
    uint64_t w = (offset + i) >> 3;
    for (; i + 8 <= len; i += 8, w++) {
        uint64_t v = word_at(w, writer);
        memcpy(buf + i, &v, 8);
    }
    for (; i < len; i++)
        buf[i] = bench_expected_byte(offset + i, writer);
}

long bench_check(const unsigned char *buf, size_t len, uint64_t offset, int writer) {
    size_t i = 0;
    for (; i < len && ((offset + i) & 7); i++)
        if (buf[i] != bench_expected_byte(offset + i, writer))
            return (long)i;
    uint64_t w = (offset + i) >> 3;
    for (; i + 8 <= len; i += 8, w++) {
        uint64_t v = word_at(w, writer), got;
        memcpy(&got, buf + i, 8);
        if (got != v)
            break; /* the byte loop below finds which byte */
    }
    for (; i < len; i++)
        if (buf[i] != bench_expected_byte(offset + i, writer))
            return (long)i;
    return -1;
}
