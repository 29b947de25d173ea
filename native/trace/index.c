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
    EVENTS_BODY_OVERRUN,    /* a column body runs past the payload, is empty, or ends inside a varint */
    EVENTS_NO_EVENTS,
    EVENTS_BAD_VARINT,      /* a header varint runs past the payload or over 10 bytes */
};

/* A row: the chunk's byte offset, type, payload length, status; for an EVENTS chunk, then its tid, event count,
 * t_base and per stored column (mode, body start, body end, event count), offsets into the file. */
enum { ROW_OFFSET, ROW_TYPE, ROW_LENGTH, ROW_STATUS, ROW_TID, ROW_COUNT, ROW_T_BASE, ROW_DIRECTORY,
       ROW_FIELDS = ROW_DIRECTORY + 4 * IOLOOM_COLUMNS };

enum { BYTES_PER_PART = 1 << 22 }; /* less than this is checked faster than a thread starts */

static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Parses the payload of an EVENTS chunk, data[body, body + length), into its row; returns its status. */
static int parse_events(const uint8_t *data, size_t body, size_t length, int64_t *row) {
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
    return count == 0 ? EVENTS_NO_EVENTS : CHUNK_OK;
}

/* Rows [first, last) of one call: one thread's share. */
struct rows_part {
    const uint8_t *data;
    int64_t *rows;
    size_t first, last;
};

static void *check_rows(void *arg) {
    struct rows_part *part = arg;
    for (size_t i = part->first; i < part->last; i++) {
        int64_t *row = part->rows + ROW_FIELDS * i;
        if (row[ROW_STATUS] != CHUNK_OK) continue;
        size_t body = (size_t)row[ROW_OFFSET] + IOLOOM_CHUNK_HEADER_BYTES, length = (size_t)row[ROW_LENGTH];
        if (ioloom_crc32(part->data + body, length) != get_u32(part->data + body - 4))
            row[ROW_STATUS] = CHUNK_CHECKSUM;
        else if (row[ROW_TYPE] == IOLOOM_CHUNK_EVENTS)
            row[ROW_STATUS] = parse_events(part->data, body, length, row);
    }
    return NULL;
}

/* Indexes the chunks of the stream file data[0, len) that start at byte `first` and before byte `limit`, at most
 * `room` of them, into rows (room x ROW_FIELDS int64). The next call goes on from the end of the last row's
 * chunk; a truncated chunk is the last row of the file. Up to `threads` threads check the checksums. Returns how
 * many rows were written. */
IOLOOM_EXPORT int64_t ioloom_index_chunks(const uint8_t *data, size_t len, size_t first, size_t limit,
                                         int64_t *rows, size_t room, int threads) {
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
        part[j] = (struct rows_part){data, rows, i, i};
        size_t share = first + bytes / parts * (j + 1);
        while (i < n && (j == parts - 1 || (size_t)rows[ROW_FIELDS * i + ROW_OFFSET] < share)) i++;
        part[j].last = i;
    }
    ioloom_run_parts(check_rows, part, sizeof *part, parts);
    return (int64_t)n;
}
