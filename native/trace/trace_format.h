/* The on-disk trace format (docs/trace-format.md): constants and the chunk encoder. The encoder is pure
 * (memory in, memory out) so that the tracer and the test-vector generator run exactly the same code. */
#ifndef IOLOOM_TRACE_FORMAT_H
#define IOLOOM_TRACE_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#define IOLOOM_FORMAT_MAGIC "IOLOOMTR"
#define IOLOOM_FORMAT_MAJOR 3
#define IOLOOM_FORMAT_MINOR 2
#define IOLOOM_HEADER_BYTES 16
#define IOLOOM_CHUNK_HEADER_BYTES 12 /* u32 type, u32 payload length, u32 CRC-32 chained (ioloom_chain_chunk) */

enum ioloom_chunk_type {
    IOLOOM_CHUNK_INFO = 1,
    IOLOOM_CHUNK_OPS = 2,
    IOLOOM_CHUNK_FILES = 3,
    IOLOOM_CHUNK_EVENTS = 4,
    IOLOOM_CHUNK_FOLDED = 5,     /* from 3.1: the events of a buffer folded (fold.h) */
    IOLOOM_CHUNK_FILE_DELTAS = 6 /* from 3.2: FILES entries, each as its changes from the one before */
};

/* How one column of an EVENTS chunk is stored. */
enum ioloom_column_mode { IOLOOM_COL_CONST = 0, IOLOOM_COL_VARINT = 1, IOLOOM_COL_RUNS = 2 };

/* The columns of an EVENTS chunk, in storage order; see docs/trace-format.md for each transform. */
enum ioloom_column {
    IOLOOM_COL_GAP,
    IOLOOM_COL_DURATION,
    IOLOOM_COL_OP,
    IOLOOM_COL_LAYER,
    IOLOOM_COL_FILE,
    IOLOOM_COL_HANDLE,
    IOLOOM_COL_OFFSET_DELTA,
    IOLOOM_COL_REQ,
    IOLOOM_COL_RET_MINUS_REQ,
    IOLOOM_COL_ERRNO,
    IOLOOM_COL_AUX,
    IOLOOM_COL_CALL_ID,
    IOLOOM_COL_PARENT,
    IOLOOM_COL_COLL_SEQ,
    IOLOOM_COLUMNS
};

/* One event as the writer buffers it: the wrapper's fields plus what the writer adds (the cross-layer link).
 * Buffers hold whole rows, so recording an event is one run of stores into one place; the encoder (off the
 * program's thread) pays for reading them column by column. */
struct ioloom_raw_event {
    uint64_t t_start, t_end;
    int64_t offset, req_bytes, ret_bytes, handle, aux, coll_seq, call_id, parent;
    int32_t file_id, err;
    uint16_t op;
    uint8_t layer;
    uint8_t ticks; /* writer only: t_start/t_end are TSC ticks, converted to ns as they are encoded */
};

/* CRC-32 (IEEE, zlib's) of data[0, len); _update goes on from the CRC of what came before (zlib's crc32(crc, ...)). */
uint32_t ioloom_crc32(const uint8_t *data, size_t len);
uint32_t ioloom_crc32_update(uint32_t crc, const uint8_t *data, size_t len);

/* How the encoder turns the times of rows into the times it writes: TSC tick times (rows whose `ticks` is set) into
 * CLOCK_MONOTONIC ns, from_ns + (ticks - from_ticks) x ns_per_tick, through int64_t and double (the writer's rate,
 * ticks_clock); then every time rounded down to a multiple of `quantum` ns (a folded trace's declared resolution,
 * IOLOOM_FOLD_QUANTUM_NS; 1: exact), so that every chunk of a stream rounds alike. */
struct ioloom_tick_clock {
    uint64_t from_ticks, from_ns;
    double ns_per_tick;
    uint64_t quantum;
};

/* A tick count converted to ns by `clock` (not rounded). */
static inline uint64_t ioloom_ticks_ns(const struct ioloom_tick_clock *clock, uint64_t t) {
    /* through int64_t: converting a double to uint64_t costs a comparison and a branch more */
    return clock->from_ns + (uint64_t)(int64_t)((double)(int64_t)(t - clock->from_ticks) * clock->ns_per_tick);
}

/* A row time in ns: as it is, or converted by `clock` when it is a tick count (not rounded: the writer's anchor). */
static inline uint64_t ioloom_row_ns(const struct ioloom_tick_clock *clock, const struct ioloom_raw_event *row,
                                     uint64_t t) {
    return clock && row->ticks ? ioloom_ticks_ns(clock, t) : t;
}

/* ns rounded down to a multiple of q (q >= 1). */
static inline uint64_t ioloom_round_down(uint64_t ns, uint64_t q) { return ns - ns % q; }

/* The clock's quantum (1 without a clock). */
static inline uint64_t ioloom_quantum(const struct ioloom_tick_clock *clock) {
    return clock && clock->quantum > 1 ? clock->quantum : 1;
}

/* A row time as the encoders write it: in ns (ioloom_row_ns), rounded down to the clock's quantum. */
static inline uint64_t ioloom_row_time(const struct ioloom_tick_clock *clock, const struct ioloom_raw_event *row,
                                       uint64_t t) {
    return ioloom_round_down(ioloom_row_ns(clock, row, t), ioloom_quantum(clock));
}

/* The most bytes ioloom_encode_events() writes for n events (every value a 10-byte varint). */
size_t ioloom_events_bound(size_t n);

/* Encodes a complete chunk of the n rows ev[0], ev[stride], ..., ev[(n - 1) * stride] of thread `tid` (header +
 * payload, sealed: its checksum is chained when it is written) into `out`, which must hold ioloom_events_bound(n)
 * bytes; `scratch` must hold n int64 values. The times of rows whose `ticks` is set are converted to ns by `clock`
 * as they are encoded, and every time rounded down to its quantum (NULL: every time is ns already, exact). Returns
 * the chunk's size. */
size_t ioloom_encode_events(uint8_t *out, int64_t *scratch, uint32_t tid, const struct ioloom_raw_event *ev,
                            size_t stride, size_t n, const struct ioloom_tick_clock *clock);

/* Writes a chunk header's type and length for `payload_len` bytes of payload that already follow it in memory. */
void ioloom_seal_chunk(uint8_t *chunk, uint32_t type, uint32_t payload_len);

/* Writes a sealed chunk's checksum, chained: the CRC-32 of its type, length and payload, going on from `previous`,
 * the checksum of the chunk written before it in the stream (0 for the first). Returns it. */
uint32_t ioloom_chain_chunk(uint8_t *chunk, uint32_t previous);

/* ioloom_chain_chunk for a chunk of a trace stream, whose chain (from format 3.0 on) also goes through the stream's
 * file header: each chunk goes on from crc32(header, previous), so that a changed version or header size fails
 * every chunk's checksum (3.0 reads call ids as differences: read as 2.0 they would be wrong). */
uint32_t ioloom_chain_stream_chunk(uint8_t *chunk, uint32_t previous);

/* The 16-byte file header. */
void ioloom_file_header(uint8_t out[IOLOOM_HEADER_BYTES]);

/* Small appenders for INFO, OPS and FILES payloads; each returns the new end. */
uint8_t *ioloom_put_varint(uint8_t *p, uint64_t v);
uint8_t *ioloom_put_cstr(uint8_t *p, const char *s); /* the string and its NUL */

/* A file table entry, as FILES and FILE_DELTAS chunks store it. */
struct ioloom_file_ref {
    int64_t id;
    uint64_t dev, ino;
    const char *path;
};
/* The entry before the first of a FILE_DELTAS chunk. */
#define IOLOOM_FILE_REF_START ((struct ioloom_file_ref){-1, 0, 0, ""})
/* The most bytes an entry of a FILES or FILE_DELTAS chunk takes beside its path and NUL. */
#define IOLOOM_FILE_ENTRY_BYTES 50
/* Appends a FILES entry (id, dev, ino, path). */
uint8_t *ioloom_put_file(uint8_t *p, const struct ioloom_file_ref *entry);
/* Appends a FILE_DELTAS entry: `entry` as its changes from `previous` (the chunk's entry before, or
 * IOLOOM_FILE_REF_START). */
uint8_t *ioloom_put_file_delta(uint8_t *p, const struct ioloom_file_ref *previous, const struct ioloom_file_ref *entry);

/* Shared by the encoders (EVENTS, FOLDED): a zigzag value, the bytes a varint takes, and a column of v[0, n) in the
 * constant (one value) or runs mode (`runs` runs taking `run_bytes`): mode byte, body length, body. */
static inline uint64_t ioloom_zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static inline size_t ioloom_varint_size(uint64_t v) { return (size_t)(70 - __builtin_clzll(v | 1)) / 7; }
uint8_t *ioloom_put_const_column(uint8_t *p, int64_t value);
uint8_t *ioloom_put_runs(uint8_t *p, const int64_t *v, size_t n, size_t runs, size_t run_bytes);

#endif
