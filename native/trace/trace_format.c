/* Chunk encoding. EVENTS chunks are column-major: each column is delta- or difference-transformed so that
 * regular loops become runs of one value, then stored as a constant, as run-length pairs or as plain
 * varints, whichever is smallest. Column-major storage is what lets the Python reader decode with a few
 * vectorised numpy passes per column instead of a loop per event. */
#include <string.h>

#include "trace_format.h"

uint8_t *ioloom_put_varint(uint8_t *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

uint8_t *ioloom_put_cstr(uint8_t *p, const char *s) {
    size_t len = strlen(s) + 1;
    memcpy(p, s, len);
    return p + len;
}

static inline uint64_t zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

static size_t varint_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) { v >>= 7; n++; }
    return n;
}

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

uint32_t ioloom_crc32(const uint8_t *data, size_t len) {
    /* CRC-32 (IEEE, as zlib), table built on first use: the reader checks it with zlib.crc32. */
    static uint32_t table[256];
    static int ready;
    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < len; i++) crc = table[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
    return crc ^ 0xFFFFFFFFu;
}

void ioloom_seal_chunk(uint8_t *chunk, uint32_t type, uint32_t payload_len) {
    put_u32(chunk, type);
    put_u32(chunk + 4, payload_len);
    put_u32(chunk + 8, ioloom_crc32(chunk + IOLOOM_CHUNK_HEADER_BYTES, payload_len));
}

void ioloom_file_header(uint8_t out[IOLOOM_HEADER_BYTES]) {
    memcpy(out, IOLOOM_FORMAT_MAGIC, 8);
    out[8] = IOLOOM_FORMAT_MAJOR & 0xFF;
    out[9] = IOLOOM_FORMAT_MAJOR >> 8;
    out[10] = IOLOOM_FORMAT_MINOR & 0xFF;
    out[11] = IOLOOM_FORMAT_MINOR >> 8;
    put_u32(out + 12, IOLOOM_HEADER_BYTES);
}

size_t ioloom_events_bound(size_t n) {
    /* chunk header, 3 varints of chunk header fields, then per column: mode, length varint, and at worst
     * n values plus n run lengths of 10 bytes each (runs of length 1 are never chosen, but bound them). */
    return IOLOOM_CHUNK_HEADER_BYTES + 30 + IOLOOM_COLUMNS * (1 + 10 + 10 + 20 * n);
}

/* The stored (pre-zigzag) value of column `col` for events[i]. */
static int64_t column_value(int col, const struct ioloom_raw_event *ev, size_t i, uint64_t t_base) {
    const struct ioloom_raw_event *e = &ev[i];
    switch (col) {
    case IOLOOM_COL_GAP: return (int64_t)(e->t_start - (i ? ev[i - 1].t_end : t_base));
    case IOLOOM_COL_DURATION: return (int64_t)(e->t_end - e->t_start);
    case IOLOOM_COL_OP: return e->op;
    case IOLOOM_COL_LAYER: return e->layer;
    case IOLOOM_COL_FILE: return e->file_id;
    case IOLOOM_COL_HANDLE: return e->handle;
    case IOLOOM_COL_OFFSET_DELTA: return e->offset - (i ? ev[i - 1].offset : 0);
    case IOLOOM_COL_REQ: return e->req_bytes;
    case IOLOOM_COL_RET_MINUS_REQ: return e->ret_bytes - e->req_bytes;
    case IOLOOM_COL_ERRNO: return e->err;
    case IOLOOM_COL_AUX: return e->aux;
    case IOLOOM_COL_CALL_ID: return e->call_id;
    case IOLOOM_COL_PARENT: return e->parent;
    default: return e->coll_seq;
    }
}

/* Appends one column (mode byte, byte length, body), choosing the smallest of the three modes. */
static uint8_t *put_column(uint8_t *p, const int64_t *v, size_t n) {
    size_t plain = 0, runs = 0, run_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        plain += varint_size(zigzag(v[i]));
        if (i == 0 || v[i] != v[i - 1]) {
            size_t len = 1;
            while (i + len < n && v[i + len] == v[i]) len++;
            runs++;
            run_bytes += varint_size(zigzag(v[i])) + varint_size(len);
        }
    }
    uint8_t *body;
    if (runs == 1) {
        *p++ = IOLOOM_COL_CONST;
        p = ioloom_put_varint(p, varint_size(zigzag(v[0])));
        return ioloom_put_varint(p, zigzag(v[0]));
    }
    if (run_bytes + varint_size(runs) < plain) {
        *p++ = IOLOOM_COL_RUNS;
        p = ioloom_put_varint(p, run_bytes + varint_size(runs));
        body = ioloom_put_varint(p, runs);
        /* all run values first, then all lengths: each half decodes as one varint array */
        for (size_t i = 0; i < n; i++)
            if (i == 0 || v[i] != v[i - 1]) body = ioloom_put_varint(body, zigzag(v[i]));
        for (size_t i = 0; i < n;) {
            size_t len = 1;
            while (i + len < n && v[i + len] == v[i]) len++;
            body = ioloom_put_varint(body, len);
            i += len;
        }
        return body;
    }
    *p++ = IOLOOM_COL_VARINT;
    p = ioloom_put_varint(p, plain);
    for (size_t i = 0; i < n; i++) p = ioloom_put_varint(p, zigzag(v[i]));
    return p;
}

size_t ioloom_encode_events(uint8_t *out, int64_t *scratch, uint32_t tid, const struct ioloom_raw_event *ev,
                            size_t n) {
    uint64_t t_base = ev[0].t_start;
    uint8_t *p = out + IOLOOM_CHUNK_HEADER_BYTES;
    p = ioloom_put_varint(p, tid);
    p = ioloom_put_varint(p, n);
    p = ioloom_put_varint(p, t_base);
    for (int col = 0; col < IOLOOM_COLUMNS; col++) {
        for (size_t i = 0; i < n; i++) scratch[i] = column_value(col, ev, i, t_base);
        p = put_column(p, scratch, n);
    }
    uint32_t payload = (uint32_t)(p - out - IOLOOM_CHUNK_HEADER_BYTES);
    ioloom_seal_chunk(out, IOLOOM_CHUNK_EVENTS, payload);
    return (size_t)(p - out);
}
