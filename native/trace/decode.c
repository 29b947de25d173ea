/* The trace reader's loops that numpy cannot vectorise well: LEB128 varints of mixed lengths, and whole columns
 * (all chunks of a stream, runs expanded, signs restored) in one call per column. Loaded by
 * python/ioloom/trace/varint.py through ctypes when built (the reader falls back to numpy otherwise). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "ioloom_core.h"

/* Decodes every varint of buf[0, len) into out (room for `room` values). Returns how many, or -1 if buf ends
 * inside a varint, a varint is longer than 10 bytes, or out is too small. */
IOLOOM_EXPORT int64_t ioloom_decode_varints(const uint8_t *buf, size_t len, uint64_t *out, size_t room) {
    size_t count = 0, i = 0;
    while (i < len) {
        if (count == room) return -1;
        uint64_t value = buf[i] & 0x7F;
        unsigned shift = 7;
        while (buf[i++] & 0x80) {
            if (i == len || shift > 63) return -1;
            value |= (uint64_t)(buf[i] & 0x7F) << shift;
            shift += 7;
        }
        out[count++] = value;
    }
    return (int64_t)count;
}

/* One varint at *p (before end); advances *p. 0 on success, -1 when it runs past end or over 10 bytes. */
static inline int next_varint(const uint8_t **p, const uint8_t *end, uint64_t *value) {
    uint64_t v = 0;
    for (unsigned shift = 0; *p < end && shift < 70; shift += 7) {
        uint8_t byte = *(*p)++;
        v |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80) {
            *value = v;
            return 0;
        }
    }
    return -1;
}

static inline int64_t unzigzag(uint64_t u) { return (int64_t)(u >> 1) ^ -(int64_t)(u & 1); }

/* Decodes one column body of `count` events stored in `mode` (docs/trace-format.md) into out[0, count):
 * the values with their signs back and runs expanded. 0 on success, -1 when the body does not hold exactly
 * `count` events. */
static int decode_column_body(const uint8_t *p, const uint8_t *end, int64_t mode, int64_t count, int64_t *out) {
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

/* Decodes one stored column of a whole stream in one call: for each of the n chunks, directory[4k..4k+3] is
 * (mode, body start, body end, events) with offsets into data. Value i (counting from the first chunk) lands
 * in out[i], or in out[positions[i]] when positions is given (a permutation of [0, room) putting the stream in
 * time order: decoding and reordering in one pass over memory). Returns how many values, -(1 + k) when chunk
 * k's body is malformed, or -(1 + n) when memory runs out. */
IOLOOM_EXPORT int64_t ioloom_decode_column(const uint8_t *data, size_t len, const int64_t *directory, size_t n,
                                          int64_t *out, size_t room, const int32_t *positions) {
    int64_t *chunk_values = NULL; /* one chunk's values before they are scattered */
    if (positions) {
        int64_t most = 0;
        for (size_t k = 0; k < n; k++) most = directory[4 * k + 3] > most ? directory[4 * k + 3] : most;
        if (most > (int64_t)room || !(chunk_values = malloc(((size_t)most + 1) * sizeof *chunk_values)))
            return -(int64_t)(n + 1);
    }
    size_t filled = 0;
    int64_t result = 0;
    for (size_t k = 0; k < n && !result; k++) {
        const int64_t *chunk = directory + 4 * k;
        int64_t start = chunk[1], end = chunk[2], count = chunk[3];
        int64_t *values = positions ? chunk_values : out + filled;
        if (start < 0 || end < start || (size_t)end > len || count < 0 || (size_t)count > room - filled ||
            decode_column_body(data + start, data + end, chunk[0], count, values)) {
            result = -(int64_t)(k + 1);
            break;
        }
        if (positions)
            for (int64_t i = 0; i < count; i++) out[positions[filled + (size_t)i]] = values[i];
        filled += (size_t)count;
    }
    free(chunk_values);
    return result ? result : (int64_t)filled;
}

/* out[i] = values[order[i]] for i < n, for elements of `width` bytes (1, 2, 4 or 8): putting a stream's columns
 * in time order. The order is nearly the identity (only late MPI-IO events move), so this runs at memory
 * speed, where numpy's general take checks every index. Every order[i] must be below the length of values.
 * Returns 0, or -1 for an unsupported width. */
IOLOOM_EXPORT int ioloom_gather(const void *values, const int32_t *order, size_t n, size_t width, void *out) {
#define GATHER(type)                                                                   \
    for (size_t i = 0; i < n; i++) ((type *)out)[i] = ((const type *)values)[order[i]]; \
    return 0
    switch (width) {
    case 1: GATHER(uint8_t);
    case 2: GATHER(uint16_t);
    case 4: GATHER(uint32_t);
    case 8: GATHER(uint64_t);
    default: return -1;
    }
#undef GATHER
}
