/* Reading LEB128 varints and zigzag signs (docs/trace-format.md), shared by the reader's decoder and indexer. */
#ifndef IOLOOM_VARINT_H
#define IOLOOM_VARINT_H

#include <stdint.h>

/* One varint at *p (before end); advances *p. 0 on success, -1 when it runs past end, over 10 bytes or over 64
 * bits (a tenth byte above 1). Values of
 * one and two bytes (most gaps, durations and small numbers) take the short paths. */
static inline int next_varint(const uint8_t **p, const uint8_t *end, uint64_t *value) {
    const uint8_t *q = *p;
    if (q < end && q[0] < 0x80) {
        *value = q[0];
        *p = q + 1;
        return 0;
    }
    if (end - q >= 2 && q[1] < 0x80) {
        *value = (uint64_t)(q[0] & 0x7F) | (uint64_t)q[1] << 7;
        *p = q + 2;
        return 0;
    }
    uint64_t v = 0;
    for (unsigned shift = 0; q < end && shift < 70; shift += 7) {
        uint8_t byte = *q++;
        if (shift == 63 && byte > 1) return -1; /* over 64 bits */
        v |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80) {
            *value = v;
            *p = q;
            return 0;
        }
    }
    return -1;
}

static inline int64_t unzigzag(uint64_t u) { return (int64_t)(u >> 1) ^ -(int64_t)(u & 1); }

#endif
