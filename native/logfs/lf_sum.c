/* lf_sum64 (see lf_format.h): four independent lanes so the compiler vectorises the loop and the checksum
 * costs little next to the copy of the data into the page cache. */
#include <string.h>

#include "lf_format.h"

static inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

uint64_t lf_sum64(const void *data, size_t n) {
    const unsigned char *p = data;
    size_t blocks = n / 32, tail = n % 32;
    uint64_t a[4] = {0}, b[4] = {0};
    /* b_j = sum (m - i) w_ij is the running sum of the running sums a_j. */
    for (size_t i = 0; i < blocks; i++, p += 32) {
        uint64_t w[4];
        memcpy(w, p, 32);
        for (int j = 0; j < 4; j++) { a[j] += w[j]; b[j] += a[j]; }
    }
    if (tail) {
        uint64_t w[4] = {0};
        memcpy(w, p, tail);
        for (int j = 0; j < 4; j++) { a[j] += w[j]; b[j] += a[j]; }
    }
    uint64_t mix = 0;
    for (int j = 0; j < 4; j++) mix += a[j] * (uint64_t)(2 * j + 1) + rotl(b[j], 17 + j);
    return (uint64_t)n ^ mix;
}
