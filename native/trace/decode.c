/* The trace reader's loops that numpy cannot vectorise well: LEB128 varints of mixed lengths, and whole columns
 * (all chunks of a stream, runs expanded, signs restored, narrowed or scattered to their rows as they are
 * stored) in one call per column; times and offsets, which numpy would build in a dozen passes, in one. A long
 * column is shared among threads, each decoding whole chunks into its own rows. Loaded by
 * python/ioloom/trace/varint.py through ctypes when built (the reader falls back to numpy otherwise). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "ioloom_core.h"
#include "parallel.h"
#include "trace_format.h"
#include "varint.h"

/* The correction from a process's clock to the trace's: local time t becomes
 * t + int64(offset + (t - origin) * drift) - epoch (an offset alone when drift is 0). */
struct ioloom_clock_line {
    int64_t origin, offset;
    double drift;
    int64_t epoch;
};

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

/* What one call decodes: a column of every chunk (into `out`, or in running sums), or the chunks' times. */
struct job {
    const uint8_t *data;
    size_t len;
    const int64_t *directory; /* per chunk and stored column: (mode, body start, body end, events) */
    int column;
    int running; /* the column's values summed within each chunk (offsets from their deltas) */
    void *out;   /* elements of `width` bytes */
    size_t width;
    const int32_t *positions;
    const int64_t *t_base; /* times: each chunk's base */
    const struct ioloom_clock_line *clock;
    int64_t *start, *end;
    int (*per_chunk)(const struct job *job, int64_t *scratch, size_t k, size_t filled); /* a chunk into its rows */
};

/* Chunks [first, last) of a job: one thread's share. */
struct part {
    const struct job *job;
    size_t first, last;
    size_t filled;    /* values before chunk `first` */
    int64_t *scratch; /* one chunk's values, when they are scattered or narrowed */
    size_t failed;    /* the first malformed chunk, or SIZE_MAX */
};

static const int64_t *chunk_column(const struct job *job, size_t k, int column) {
    return job->directory + 4 * (IOLOOM_COLUMNS * k + (size_t)column);
}

/* Events in chunk k (every column's entry repeats it; the first one's is the one used). */
static int64_t chunk_events(const struct job *job, size_t k) { return chunk_column(job, k, 0)[3]; }

/* Decodes column `column` of chunk k into values; 0, or -1 when its body is malformed. */
static int decode_chunk(const struct job *job, size_t k, int column, int64_t *values) {
    const int64_t *body = chunk_column(job, k, column);
    return body[1] < 0 || body[2] < body[1] || (size_t)body[2] > job->len ||
           ioloom_column_body(job->data + body[1], job->data + body[2], body[0], chunk_events(job, k), values);
}

/* Puts one chunk's `count` values, the first being value `filled` of the column, in their rows of out. */
static void store(const struct job *job, const int64_t *values, size_t filled, int64_t count) {
    const int32_t *rows = job->positions ? job->positions + filled : NULL;
#define STORE(type)                                                                        \
    do {                                                                                   \
        type *out = job->out;                                                              \
        if (rows)                                                                          \
            for (int64_t i = 0; i < count; i++) out[rows[i]] = (type)values[i];            \
        else                                                                               \
            for (int64_t i = 0; i < count; i++) out[filled + (size_t)i] = (type)values[i]; \
    } while (0)
    switch (job->width) {
        case 1:
            STORE(int8_t);
            break;
        case 2:
            STORE(int16_t);
            break;
        case 4:
            STORE(int32_t);
            break;
        default:
            STORE(int64_t);
            break;
    }
#undef STORE
}

/* Chunk k (its values the column's from `filled` on) into its rows of out; 0, or -1 when it is malformed. */
static int decode_column_chunk(const struct job *job, int64_t *scratch, size_t k, size_t filled) {
    int64_t count = chunk_events(job, k);
    int64_t *values = scratch ? scratch : (int64_t *)job->out + filled; /* in place when it can */
    if (decode_chunk(job, k, job->column, values)) return -1;
    for (int64_t i = 1; job->running && i < count; i++) values[i] += values[i - 1];
    if (scratch) store(job, values, filled, count);
    return 0;
}

/* Nanoseconds to add to local time t to get the trace's clock (ioloom_clock_line). Computed as numpy does
 * (python/ioloom/trace/reader.py, clock_correction), so that both give the same times to the nanosecond. */
static inline int64_t clock_shift(const struct ioloom_clock_line *clock, int64_t t) {
    int64_t offset = clock->drift != 0 ? (int64_t)((double)(t - clock->origin) * clock->drift + (double)clock->offset)
                                       : clock->offset;
    return offset - clock->epoch;
}

/* Chunk k's times into start and end from row `filled` on: each event starts `gap` after the previous one
 * ended (the chunk's first: after t_base) and lasts `duration`. 0, or -1 when the chunk is malformed. */
static int decode_times_chunk(const struct job *job, int64_t *scratch, size_t k, size_t filled) {
    (void)scratch;
    int64_t count = chunk_events(job, k);
    int64_t *start = job->start + filled, *end = job->end + filled;
    if (decode_chunk(job, k, IOLOOM_COL_GAP, start) || decode_chunk(job, k, IOLOOM_COL_DURATION, end)) return -1;
    int64_t t = job->t_base[k];
    for (int64_t i = 0; i < count; i++) {
        int64_t begin = t + start[i], shift = clock_shift(job->clock, begin);
        t = begin + end[i];
        start[i] = begin + shift;
        end[i] = t + shift;
    }
    return 0;
}

/* One thread's share: its chunks in order, stopping at the first malformed one. */
static void *decode_part(void *arg) {
    struct part *part = arg;
    size_t filled = part->filled;
    for (size_t k = part->first; k < part->last; filled += (size_t)chunk_events(part->job, k++)) {
        if (part->job->per_chunk(part->job, part->scratch, k, filled)) {
            part->failed = k;
            break;
        }
    }
    return NULL;
}

enum { VALUES_PER_PART = 1 << 18 }; /* fewer values than this are not worth a thread */

/* Decodes the job's n chunks, shared among up to `threads` threads in parts of about equal events
 * (each writes its own rows). The chunks' event counts are checked first: the chunks from the first one that
 * overflows `room` on are not decoded. Returns how many events, -(1 + k) when chunk k is the first malformed
 * one, or -(1 + n) when memory runs out. */
static int64_t run_parts(const struct job *job, size_t n, size_t room, int threads, int scratch) {
    size_t valid = 0, total = 0, most = 0;
    for (; valid < n; valid++) {
        int64_t count = chunk_events(job, valid);
        if (count < 0 || (size_t)count > room - total) break;
        total += (size_t)count;
        most = (size_t)count > most ? (size_t)count : most;
    }
    size_t parts = ioloom_part_count(total, VALUES_PER_PART, threads);
    struct part part[IOLOOM_MAX_PARTS];
    int64_t result = 0;
    size_t k = 0, filled = 0;
    for (size_t j = 0; j < parts; j++) { /* chunk boundaries nearest to equal shares of the events */
        part[j] = (struct part){job, k, k, filled, NULL, SIZE_MAX};
        size_t share = total / parts * (j + 1);
        while (k < valid && (j == parts - 1 || filled < share)) filled += (size_t)chunk_events(job, k++);
        part[j].last = k;
        if (scratch && !(part[j].scratch = malloc((most + 1) * sizeof *part[j].scratch))) result = -(int64_t)(n + 1);
    }
    if (!result) ioloom_run_parts(decode_part, part, sizeof *part, parts);
    for (size_t j = 0; j < parts; j++) {
        if (!result && part[j].failed != SIZE_MAX) result = -(int64_t)(part[j].failed + 1);
        free(part[j].scratch);
    }
    if (!result && valid < n) result = -(int64_t)(valid + 1);
    return result ? result : (int64_t)total;
}

/* Decodes stored column `column` of a stream's n chunks in one call. directory holds per chunk and stored column
 * (mode, body start, body end, events), offsets into data (n x IOLOOM_COLUMNS x 4). Value i (counting from the
 * first chunk) lands in out[i], or in out[positions[i]] when positions is given (a permutation of [0, room)
 * putting the stream in time order: decoding and reordering in one pass over memory). out holds signed integers
 * of `width` bytes (1, 2, 4 or 8): a column stored narrower than int64 is narrowed on the way, not in a pass of
 * its own. With `running`, each chunk's values are summed from its first (offsets from their deltas). Up to
 * `threads` threads share the chunks. Returns how many values, -(1 + k) when chunk k is the first malformed one,
 * or -(1 + n) when memory runs out or the column or width is not supported. */
IOLOOM_EXPORT int64_t ioloom_decode_column(const uint8_t *data, size_t len, const int64_t *directory, size_t n,
                                           int column, int running, void *out, size_t width, size_t room,
                                           const int32_t *positions, int threads) {
    if ((width != 1 && width != 2 && width != 4 && width != 8) || column < 0 || column >= IOLOOM_COLUMNS)
        return -(int64_t)(n + 1);
    struct job job = {data, len,  directory,          column, running, out, width, positions, NULL, NULL,
                      NULL, NULL, decode_column_chunk};
    return run_parts(&job, n, room, threads, positions || width != 8);
}

/* The start and end times of a stream's n chunks (directory as above, t_base[k] each chunk's base) on the
 * trace's clock, in stored order, into start and end (room for `room` events each). Returns as
 * ioloom_decode_column. */
IOLOOM_EXPORT int64_t ioloom_decode_times(const uint8_t *data, size_t len, const int64_t *directory, size_t n,
                                          const int64_t *t_base, const struct ioloom_clock_line *clock, int64_t *start,
                                          int64_t *end, size_t room, int threads) {
    struct job job = {data,  len,   directory, IOLOOM_COL_GAP,    0, NULL, 8, NULL, t_base,
                      clock, start, end,       decode_times_chunk};
    return run_parts(&job, n, room, threads, 0);
}

/* out[i] = values[order[i]] for i < n, for elements of `width` bytes (1, 2, 4 or 8): putting a stream's columns
 * in time order. The order is nearly the identity (only late MPI-IO events move), so this runs at memory
 * speed, where numpy's general take checks every index. Every order[i] must be below the length of values.
 * Returns 0, or -1 for an unsupported width. */
IOLOOM_EXPORT int ioloom_gather(const void *values, const int32_t *order, size_t n, size_t width, void *out) {
#define GATHER(type)                                                                    \
    for (size_t i = 0; i < n; i++) ((type *)out)[i] = ((const type *)values)[order[i]]; \
    return 0
    switch (width) {
        case 1:
            GATHER(uint8_t);
        case 2:
            GATHER(uint16_t);
        case 4:
            GATHER(uint32_t);
        case 8:
            GATHER(uint64_t);
        default:
            return -1;
    }
#undef GATHER
}
