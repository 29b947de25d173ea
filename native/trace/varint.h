/* Reading LEB128 varints, zigzag signs and column bodies (docs/trace-format.md), shared by the reader's decoder,
 * indexer and unfolding (fold.c). */
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

/* Decodes one column body of `count` events stored in `mode` (docs/trace-format.md: the EVENTS chunk's modes 0-2,
 * which the FOLDED chunk's time columns use too) into out[0, count): the values with their signs back and runs
 * expanded. 0 on success, -1 when the body does not hold exactly `count` events. */
static inline int ioloom_column_body(const uint8_t *p, const uint8_t *end, int64_t mode, int64_t count, int64_t *out) {
    uint64_t u, runs, length;
    if (mode == 0) { /* constant: one value for every event */
        if (next_varint(&p, end, &u)) return -1;
        int64_t value = unzigzag(u);
        for (int64_t i = 0; i < count; i++) out[i] = value;
    } else if (mode == 1) { /* one varint per event */
        for (int64_t i = 0; i < count; i++) {
            if (next_varint(&p, end, &u)) return -1;
            out[i] = unzigzag(u);
        }
    } else if (mode == 2) { /* run count, all run values, then all run lengths */
        if (next_varint(&p, end, &runs) || runs > (uint64_t)count) return -1;
        const uint8_t *lengths = p;
        for (uint64_t r = 0; r < runs; r++) /* skip the values to find the lengths */
            if (next_varint(&lengths, end, &u)) return -1;
        int64_t filled = 0;
        for (uint64_t r = 0; r < runs; r++) {
            next_varint(&p, end, &u);
            if (next_varint(&lengths, end, &length) || length > (uint64_t)(count - filled)) return -1;
            int64_t value = unzigzag(u);
            for (uint64_t i = 0; i < length; i++) out[filled + (int64_t)i] = value;
            filled += (int64_t)length;
        }
        p = lengths;
        if (filled != count) return -1;
    } else {
        return -1;
    }
    return p == end ? 0 : -1;
}

#endif
