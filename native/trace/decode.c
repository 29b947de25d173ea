/* The trace reader's one loop that numpy cannot vectorise well: LEB128 varints of mixed lengths. Loaded by
 * python/ioloom/trace/varint.py through ctypes when built (the reader falls back to numpy otherwise). */
#include <stddef.h>
#include <stdint.h>

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
