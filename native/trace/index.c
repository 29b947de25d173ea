/* The chunk index of a stream file (docs/trace-format.md, "Chunks"): the chunk headers walked in one pass, then
 * the checksums checked and the EVENTS chunks' column directories parsed, shared among threads. This is what
 * python/ioloom/trace/stream_file.py needs to decode events without a Python step per chunk (it does the same
 * in Python when this library is not built, and turns the statuses into its problem messages). */
#include <stddef.h>
#include <stdint.h>

#include "ioloom_core.h"
#include "parallel.h"
#include "trace_format.h"
#include "varint.h"

/* What is wrong with a chunk (its row's status). */
enum chunk_status {
    CHUNK_OK,
    CHUNK_CHECKSUM,         /* the payload fails its CRC: skipped */
    CHUNK_TRUNCATED_HEADER, /* the file ends inside a chunk header: the last row */
    CHUNK_TRUNCATED_BODY,   /* the file ends inside a chunk's payload: the last row */
    EVENTS_FEW_COLUMNS,     /* an EVENTS payload ends before its last column */
    EVENTS_UNKNOWN_MODE,
    EVENTS_BODY_OVERRUN, /* a column body runs past the payload, is empty, or ends inside a varint */
    EVENTS_NO_EVENTS,
    EVENTS_BAD_VARINT, /* a header varint runs past the payload or over 10 bytes */
    EVENTS_BAD_COLUMN, /* a column body does not hold exactly the chunk's events */
    EVENTS_BAD_VALUE,  /* a value outside its range: thread id, event count, t_base, or a column's (rules) */
};

/* What a chunk must satisfy, given by the reader (its column types bound the values). */
struct ioloom_index_rules {
    int64_t major;               /* the stream's format version: from 2 on, the checksum covers type and length */
    int64_t previous;            /* the checksum stored by the chunk before `first` (0 for the stream's first) */
    int64_t max_events, max_tid; /* per chunk */
    int64_t low[IOLOOM_COLUMNS], high[IOLOOM_COLUMNS]; /* each stored column's values */
};

/* A row: the chunk's byte offset, type, payload length, status; for an EVENTS chunk, then its tid, event count,
 * t_base and per stored column (mode, body start, body end, event count), offsets into the file. */
enum {
    ROW_OFFSET,
    ROW_TYPE,
    ROW_LENGTH,
    ROW_STATUS,
    ROW_TID,
    ROW_COUNT,
    ROW_T_BASE,
    ROW_DIRECTORY,
    ROW_FIELDS = ROW_DIRECTORY + 4 * IOLOOM_COLUMNS
};

enum { BYTES_PER_PART = 1 << 22 }; /* less than this is checked faster than a thread starts */

static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* How many varints [p, end) holds (it ends on a varint's last byte), or -1 when one is over 10 bytes or 64 bits.
 * Only a varint of 5 bytes or more (a value of 2^28 or more) holds an aligned run of 4 continuation bytes: the
 * bytes are looked at one by one only in a body that has one; the others take two loops the compiler vectorises. */
static int64_t count_varints(const uint8_t *p, const uint8_t *end) {
    size_t len = (size_t)(end - p), n = 0, long_ones = 0;
    for (size_t i = 0; i < len; i++) n += p[i] < 0x80;
    for (size_t i = 0; i + 4 <= len; i += 4) long_ones |= (p[i] & p[i + 1] & p[i + 2] & p[i + 3]) >> 7;
    if (!long_ones) return (int64_t)n;
    unsigned run = 0; /* continuation bytes of the varint under way */
    for (; p < end; p++) {
        if (*p & 0x80) {
            if (++run == 10) return -1;
            continue;
        }
        if (run == 9 && *p > 1) return -1;
        run = 0;
    }
    return (int64_t)n;
}

/* 0 when the column body [p, end) holds exactly `count` values in `mode` (the writer's layout), else
 * EVENTS_BAD_COLUMN. The values themselves start at *values, and there are *n of them. */
static int check_layout(const uint8_t *p, const uint8_t *end, int64_t mode, uint64_t count, const uint8_t **values,
                        uint64_t *n) {
    int64_t varints = count_varints(p, end);
    uint64_t runs = 0, length = 0, total = 0;
    *values = p;
    *n = mode == IOLOOM_COL_CONST ? 1 : count;
    if (mode != IOLOOM_COL_RUNS) return varints == (int64_t)*n ? 0 : EVENTS_BAD_COLUMN;
    if (varints < 1 || next_varint(values, end, &runs) || runs > count || (uint64_t)varints != 1 + 2 * runs)
        return EVENTS_BAD_COLUMN;
    *n = runs;
    const uint8_t *lengths = *values;
    for (uint64_t r = 0; r < runs; r++) next_varint(&lengths, end, &length); /* skip the values */
    for (uint64_t r = 0; r < runs; r++) {
        next_varint(&lengths, end, &length);
        if (length > count - total) return EVENTS_BAD_COLUMN;
        total += length;
    }
    return total == count ? 0 : EVENTS_BAD_COLUMN;
}

/* 0 when column `c` of a chunk of `count` events, body [p, end), is well formed and its values are in the
 * column's range; else its status. */
static int check_column(const uint8_t *p, const uint8_t *end, int64_t mode, uint64_t count, int c,
                        const struct ioloom_index_rules *rules) {
    const uint8_t *values;
    uint64_t n, u = 0;
    if (check_layout(p, end, mode, count, &values, &n)) return EVENTS_BAD_COLUMN;
    if (rules->low[c] == INT64_MIN && rules->high[c] == INT64_MAX) return 0;
    for (uint64_t i = 0; i < n; i++) {
        next_varint(&values, end, &u);
        if (unzigzag(u) < rules->low[c] || unzigzag(u) > rules->high[c]) return EVENTS_BAD_VALUE;
    }
    return 0;
}

/* Parses the payload of an EVENTS chunk, data[body, body + length), into its row; returns its status. */
static int parse_events(const uint8_t *data, size_t body, size_t length, int64_t *row,
                        const struct ioloom_index_rules *rules) {
    const uint8_t *p = data + body, *end = p + length;
    uint64_t tid, count, t_base, size;
    if (next_varint(&p, end, &tid) || next_varint(&p, end, &count) || next_varint(&p, end, &t_base))
        return EVENTS_BAD_VARINT;
    row[ROW_TID] = (int64_t)tid;
    row[ROW_COUNT] = (int64_t)count;
    row[ROW_T_BASE] = (int64_t)t_base;
    for (int c = 0; c < IOLOOM_COLUMNS; c++) {
        if (p >= end) return EVENTS_FEW_COLUMNS;
        uint8_t mode = *p++;
        if (mode > IOLOOM_COL_RUNS) return EVENTS_UNKNOWN_MODE;
        if (next_varint(&p, end, &size)) return EVENTS_BAD_VARINT;
        if (size == 0 || size > (uint64_t)(end - p) || p[size - 1] >= 0x80) return EVENTS_BODY_OVERRUN;
        int64_t *column = row + ROW_DIRECTORY + 4 * c;
        column[0] = mode;
        column[1] = p - data;
        column[2] = p - data + (int64_t)size;
        column[3] = (int64_t)count;
        p += size;
    }
    if (count == 0) return EVENTS_NO_EVENTS;
    if (tid > (uint64_t)rules->max_tid || count > (uint64_t)rules->max_events || t_base > INT64_MAX)
        return EVENTS_BAD_VALUE;
    for (int c = 0; c < IOLOOM_COLUMNS; c++) {
        const int64_t *column = row + ROW_DIRECTORY + 4 * c;
        int status = check_column(data + column[1], data + column[2], column[0], count, c, rules);
        if (status) return status;
    }
    return CHUNK_OK;
}

/* Rows [first, last) of one call: one thread's share. */
struct rows_part {
    const uint8_t *data;
    int64_t *rows;
    size_t first, last;
    const struct ioloom_index_rules *rules;
};

/* The checksum stored in a chunk's header, data[chunk + 8, chunk + 12), covers its payload; from format 2 on its
 * type and length first, going on from `previous`, the checksum stored by the chunk before it (trace_format.h,
 * ioloom_chain_chunk), and from format 3 on from the stream's file header, data[0, 16), before that
 * (ioloom_chain_stream_chunk). */
static int checksum_holds(const uint8_t *data, size_t chunk, size_t length, int64_t major, uint32_t previous) {
    const uint8_t *body = data + chunk + IOLOOM_CHUNK_HEADER_BYTES;
    if (major >= 3) previous = ioloom_crc32_update(previous, data, IOLOOM_HEADER_BYTES);
    uint32_t crc = major >= 2 ? ioloom_crc32_update(ioloom_crc32_update(previous, data + chunk, 8), body, length)
                              : ioloom_crc32(body, length);
    return crc == get_u32(data + chunk + 8);
}

static void *check_rows(void *arg) {
    struct rows_part *part = arg;
    for (size_t i = part->first; i < part->last; i++) {
        int64_t *row = part->rows + ROW_FIELDS * i;
        if (row[ROW_STATUS] != CHUNK_OK) continue;
        size_t body = (size_t)row[ROW_OFFSET] + IOLOOM_CHUNK_HEADER_BYTES, length = (size_t)row[ROW_LENGTH];
        uint32_t previous =
            i ? get_u32(part->data + part->rows[ROW_FIELDS * (i - 1) + ROW_OFFSET] + 8) : part->rules->previous;
        if (!checksum_holds(part->data, (size_t)row[ROW_OFFSET], length, part->rules->major, previous))
            row[ROW_STATUS] = CHUNK_CHECKSUM;
        else if (row[ROW_TYPE] == IOLOOM_CHUNK_EVENTS)
            row[ROW_STATUS] = parse_events(part->data, body, length, row, part->rules);
    }
    return NULL;
}

/* Indexes the chunks of the stream file data[0, len) that start at byte `first` and before byte `limit`, at most
 * `room` of them, into rows (room x ROW_FIELDS int64). The next call goes on from the end of the last row's
 * chunk; a truncated chunk is the last row of the file. Up to `threads` threads check the checksums and the
 * EVENTS chunks against `rules`. Returns how many rows were written. */
IOLOOM_EXPORT int64_t ioloom_index_chunks(const uint8_t *data, size_t len, size_t first, size_t limit, int64_t *rows,
                                          size_t room, int threads, const struct ioloom_index_rules *rules) {
    size_t n = 0, pos = first;
    for (; n < room && pos < len && pos < limit; n++) { /* the headers, in one pass: each says where the next is */
        int64_t *row = rows + ROW_FIELDS * n;
        row[ROW_OFFSET] = (int64_t)pos;
        row[ROW_TYPE] = row[ROW_LENGTH] = -1;
        if (len - pos < IOLOOM_CHUNK_HEADER_BYTES) {
            row[ROW_STATUS] = CHUNK_TRUNCATED_HEADER;
            n++;
            break;
        }
        row[ROW_TYPE] = get_u32(data + pos);
        row[ROW_LENGTH] = get_u32(data + pos + 4);
        size_t body = pos + IOLOOM_CHUNK_HEADER_BYTES;
        row[ROW_STATUS] = (size_t)row[ROW_LENGTH] > len - body ? CHUNK_TRUNCATED_BODY : CHUNK_OK;
        if (row[ROW_STATUS] != CHUNK_OK) {
            n++;
            break;
        }
        pos = body + (size_t)row[ROW_LENGTH];
    }
    size_t bytes = n ? pos - first : 0;
    size_t parts = ioloom_part_count(bytes, BYTES_PER_PART, threads);
    struct rows_part part[IOLOOM_MAX_PARTS];
    size_t i = 0;
    for (size_t j = 0; j < parts; j++) { /* row boundaries nearest to equal shares of the bytes */
        part[j] = (struct rows_part){data, rows, i, i, rules};
        size_t share = first + bytes / parts * (j + 1);
        while (i < n && (j == parts - 1 || (size_t)rows[ROW_FIELDS * i + ROW_OFFSET] < share)) i++;
        part[j].last = i;
    }
    ioloom_run_parts(check_rows, part, sizeof *part, parts);
    return (int64_t)n;
}
