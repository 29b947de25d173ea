/* Chunk encoding. EVENTS chunks are column-major: each column is delta- or difference-transformed so that
 * regular loops become runs of one value, then stored as a constant, as run-length pairs or as plain
 * varints, whichever is smallest. Column-major storage is what lets the Python reader decode with a few
 * vectorised numpy passes per column instead of a loop per event. */
#include <stddef.h>
#include <string.h>

#include "trace_format.h"

/* The most bytes a varint takes: a uint64_t's 64 bits at 7 a byte. */
#define VARINT_MAX_BYTES 10

/* A LEB128 varint. Values of one to three bytes (gaps and durations up to a millisecond, most other numbers) take
 * the short paths. */
static inline uint8_t *put_varint(uint8_t *p, uint64_t v) {
    if (v < 0x80) {
        *p = (uint8_t)v;
        return p + 1;
    }
    if (v < 0x4000) {
        p[0] = (uint8_t)(v | 0x80);
        p[1] = (uint8_t)(v >> 7);
        return p + 2;
    }
    if (v < 0x200000) {
        p[0] = (uint8_t)(v | 0x80);
        p[1] = (uint8_t)(v >> 7 | 0x80);
        p[2] = (uint8_t)(v >> 14);
        return p + 3;
    }
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

uint8_t *ioloom_put_varint(uint8_t *p, uint64_t v) { return put_varint(p, v); }

uint8_t *ioloom_put_cstr(uint8_t *p, const char *s) {
    size_t len = strlen(s) + 1;
    memcpy(p, s, len);
    return p + len;
}

uint8_t *ioloom_put_file(uint8_t *p, const struct ioloom_file_ref *entry) {
    p = put_varint(put_varint(put_varint(p, (uint64_t)entry->id), entry->dev), entry->ino);
    return ioloom_put_cstr(p, entry->path);
}

/* The bytes a and b share at their starts (below `most`). */
static size_t shared_head(const char *a, const char *b, size_t most) {
    size_t k = 0;
    while (k < most && a[k] == b[k]) k++;
    return k;
}

/* The bytes a[0, a_len) and b[0, b_len) share at their ends (below `most`). */
static size_t shared_tail(const char *a, size_t a_len, const char *b, size_t b_len, size_t most) {
    size_t k = 0;
    while (k < most && a[a_len - 1 - k] == b[b_len - 1 - k]) k++;
    return k;
}

uint8_t *ioloom_put_file_delta(uint8_t *p, const struct ioloom_file_ref *previous,
                               const struct ioloom_file_ref *entry) {
    size_t before = strlen(previous->path), len = strlen(entry->path);
    size_t head = shared_head(previous->path, entry->path, before < len ? before : len);
    size_t rest = (before < len ? before : len) - head;
    size_t tail = shared_tail(previous->path, before, entry->path, len, rest);
    p = put_varint(p, ioloom_zigzag((int64_t)((uint64_t)entry->id - (uint64_t)previous->id - 1)));
    p = put_varint(p, ioloom_zigzag((int64_t)(entry->dev - previous->dev)));
    p = put_varint(p, ioloom_zigzag((int64_t)(entry->ino - previous->ino)));
    p = put_varint(put_varint(p, head), tail);
    memcpy(p, entry->path + head, len - head - tail);
    p += len - head - tail;
    *p++ = 0;
    return p;
}

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* table[k][b] is the CRC of byte b followed by k zero bytes. Built by build_tables, before any use. */
static uint32_t crc_table[8][256];

static void build_crc_table(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int k = 1; k < 8; k++)
            crc_table[k][i] = (crc_table[k - 1][i] >> 8) ^ crc_table[0][crc_table[k - 1][i] & 0xFF];
}

uint32_t ioloom_crc32(const uint8_t *data, size_t len) { return ioloom_crc32_update(0, data, len); }

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

/* The same CRC-32 by carry-less multiplication, for the whole 16-byte blocks of len >= 64 bytes: Intel's "Fast CRC
 * Computation for Generic Polynomials Using PCLMULQDQ Instruction" (2009), bit-reflected, with its constants for
 * this polynomial, as zlib's crc32_simd.c: four 128-bit lanes folded 64 bytes at a time, folded into one, then
 * reduced to 32 bits (Barrett). crc and the result are the inverted running value. */
__attribute__((target("pclmul,sse4.1"))) static uint32_t crc32_folded(uint32_t crc, const uint8_t *buf, size_t len) {
    const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596, 0x0154442bd4), k3k4 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0);
    const __m128i k5k0 = _mm_set_epi64x(0, 0x0163cd6124), poly = _mm_set_epi64x(0x01f7011641, 0x01db710641);
    __m128i x[4];
    for (int k = 0; k < 4; k++) x[k] = _mm_loadu_si128((const __m128i *)(buf + 16 * k));
    x[0] = _mm_xor_si128(x[0], _mm_cvtsi32_si128((int)crc));
    for (buf += 64, len -= 64; len >= 64; buf += 64, len -= 64)
        for (int k = 0; k < 4; k++)
            x[k] = _mm_xor_si128(
                _mm_xor_si128(_mm_clmulepi64_si128(x[k], k1k2, 0x00), _mm_clmulepi64_si128(x[k], k1k2, 0x11)),
                _mm_loadu_si128((const __m128i *)(buf + 16 * k)));
    __m128i folded = x[0];
    for (int k = 1; k < 4; k++)
        folded = _mm_xor_si128(
            _mm_xor_si128(_mm_clmulepi64_si128(folded, k3k4, 0x00), _mm_clmulepi64_si128(folded, k3k4, 0x11)), x[k]);
    for (; len >= 16; buf += 16, len -= 16)
        folded = _mm_xor_si128(
            _mm_xor_si128(_mm_clmulepi64_si128(folded, k3k4, 0x00), _mm_clmulepi64_si128(folded, k3k4, 0x11)),
            _mm_loadu_si128((const __m128i *)buf));
    const __m128i low32 = _mm_setr_epi32(~0, 0, ~0, 0);
    folded = _mm_xor_si128(_mm_srli_si128(folded, 8), _mm_clmulepi64_si128(folded, k3k4, 0x10)); /* to 64 bits */
    folded = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(folded, low32), k5k0, 0x00), _mm_srli_si128(folded, 4));
    __m128i q = _mm_clmulepi64_si128(_mm_and_si128(folded, low32), poly, 0x10);
    q = _mm_clmulepi64_si128(_mm_and_si128(q, low32), poly, 0x00);
    return (uint32_t)_mm_extract_epi32(_mm_xor_si128(folded, q), 1);
}

/* 1 when the CPU has PCLMULQDQ and SSE4.1; asked once (idempotent, no lock, as the answer is one atomic int). */
static int can_fold(void) {
    static int known; /* 0 not asked yet, 1 no, 2 yes */
    int answer = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (!answer) {
        unsigned a, b, c = 0, d;
        answer = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_PCLMUL) && (c & bit_SSE4_1) ? 2 : 1;
        __atomic_store_n(&known, answer, __ATOMIC_RELAXED);
    }
    return answer == 2;
}
#endif

uint32_t ioloom_crc32_update(uint32_t crc, const uint8_t *data, size_t len) {
    /* CRC-32 (IEEE, as zlib's crc32), eight bytes per step ("slicing-by-8"). */
    const uint32_t (*table)[256] = crc_table;
    crc = ~crc;
#if defined(__x86_64__)
    if (len >= 64 && can_fold()) {
        size_t blocks = len & ~(size_t)15;
        crc = crc32_folded(crc, data, blocks);
        data += blocks;
        len -= blocks;
    }
#endif
    for (; len >= 8; len -= 8, data += 8) {
        uint32_t low =
            crc ^ ((uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 24);
        uint32_t high = (uint32_t)data[4] | (uint32_t)data[5] << 8 | (uint32_t)data[6] << 16 | (uint32_t)data[7] << 24;
        crc = table[7][low & 0xFF] ^ table[6][low >> 8 & 0xFF] ^ table[5][low >> 16 & 0xFF] ^ table[4][low >> 24] ^
              table[3][high & 0xFF] ^ table[2][high >> 8 & 0xFF] ^ table[1][high >> 16 & 0xFF] ^ table[0][high >> 24];
    }
    while (len--) crc = table[0][(crc ^ *data++) & 0xFF] ^ (crc >> 8);
    return crc ^ 0xFFFFFFFFu;
}

void ioloom_seal_chunk(uint8_t *chunk, uint32_t type, uint32_t payload_len) {
    put_u32(chunk, type);
    put_u32(chunk + 4, payload_len);
}

uint32_t ioloom_chain_chunk(uint8_t *chunk, uint32_t previous) {
    uint32_t payload_len =
        (uint32_t)chunk[4] | (uint32_t)chunk[5] << 8 | (uint32_t)chunk[6] << 16 | (uint32_t)chunk[7] << 24;
    /* type and length under the checksum (a flipped type is damage, not another chunk), and the previous chunk's
     * checksum under it too (a chunk removed, repeated or moved breaks the chain at the next one) */
    uint32_t crc =
        ioloom_crc32_update(ioloom_crc32_update(previous, chunk, 8), chunk + IOLOOM_CHUNK_HEADER_BYTES, payload_len);
    put_u32(chunk + 8, crc);
    return crc;
}

uint32_t ioloom_chain_stream_chunk(uint8_t *chunk, uint32_t previous) {
    uint8_t header[IOLOOM_HEADER_BYTES];
    ioloom_file_header(header);
    return ioloom_chain_chunk(chunk, ioloom_crc32_update(previous, header, sizeof header));
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
    /* chunk header, 3 varints of chunk header fields, then per column: mode, length varint, and at worst n
     * values of VARINT_MAX_BYTES each: the column is written plain first, and runs replace it only when smaller. */
    return IOLOOM_CHUNK_HEADER_BYTES + 3 * VARINT_MAX_BYTES +
           IOLOOM_COLUMNS * (1 + VARINT_MAX_BYTES + VARINT_MAX_BYTES * n);
}

/* Row k of the rows being encoded: every stride-th row of the buffer from ev on (the rows of one operation of a
 * buffer whose operations alternate, read in place; ioloom_encode_events). */
#define ROW(k) ev[(k) * stride]

/* What the time columns are counted from: the chunk's t_base (ns) and the clock converting tick times (NULL: none). */
struct chunk_times {
    uint64_t base;
    const struct ioloom_tick_clock *clock;
};
/* Row k's start and end in ns. */
#define ROW_START(k) ioloom_row_time(tm->clock, &ROW(k), ROW(k).t_start)
#define ROW_END(k) ioloom_row_time(tm->clock, &ROW(k), ROW(k).t_end)

/* Every column: its stored (pre-zigzag) value for row 0 and for row i > 0 of rows ev[0..n), each read as int64_t;
 * the difference columns (stored as the change of a field from the row before) listed apart, as (column, field).
 * Differences are taken unsigned (they wrap, as the readers' sums do: no signed overflow). */
#define MINUS(a, b) ((uint64_t)(a) - (uint64_t)(b))
#define EACH_VALUE_COLUMN(X)                                                                                          \
    X(IOLOOM_COL_GAP, ROW_START(0) - tm->base, ROW_START(i) - ROW_END(i - 1))                                         \
    X(IOLOOM_COL_DURATION, ROW_END(0) - ROW_START(0), ROW_END(i) - ROW_START(i))                                      \
    X(IOLOOM_COL_OP, ROW(0).op, ROW(i).op)                                                                            \
    X(IOLOOM_COL_LAYER, ROW(0).layer, ROW(i).layer)                                                                   \
    X(IOLOOM_COL_FILE, ROW(0).file_id, ROW(i).file_id)                                                                \
    X(IOLOOM_COL_HANDLE, ROW(0).handle, ROW(i).handle)                                                                \
    X(IOLOOM_COL_RET_MINUS_REQ, MINUS(ROW(0).ret_bytes, ROW(0).req_bytes), MINUS(ROW(i).ret_bytes, ROW(i).req_bytes)) \
    X(IOLOOM_COL_ERRNO, ROW(0).err, ROW(i).err)
/* D(X, column, field) for each difference column (D passes X on: EACH_COLUMN) */
#define EACH_DIFFERENCE_COLUMN(D, X)      \
    D(X, IOLOOM_COL_OFFSET_DELTA, offset) \
    D(X, IOLOOM_COL_REQ, req_bytes)       \
    D(X, IOLOOM_COL_AUX, aux)             \
    D(X, IOLOOM_COL_CALL_ID, call_id)     \
    D(X, IOLOOM_COL_PARENT, parent)       \
    D(X, IOLOOM_COL_COLL_SEQ, coll_seq)
#define DIFFERENCE_COLUMN(X, column, field) X(column, ROW(0).field, MINUS(ROW(i).field, ROW(i - 1).field))
#define EACH_COLUMN(X) EACH_VALUE_COLUMN(X) EACH_DIFFERENCE_COLUMN(DIFFERENCE_COLUMN, X)

/* Four adjacent 64-bit fields of a row in one vector, or two (the vector extension of GCC and Clang: one AVX2
 * register where the survey is compiled for AVX2, two SSE2 registers otherwise on x86-64, the machine's vectors or
 * scalars elsewhere). */
typedef uint64_t lanes_t __attribute__((vector_size(32)));
typedef uint64_t upair_t __attribute__((vector_size(16)));
/* the fields the survey loads as (offset, req, ret, handle), (aux, coll_seq, call_id, parent) */
_Static_assert(offsetof(struct ioloom_raw_event, req_bytes) == offsetof(struct ioloom_raw_event, offset) + 8, "lanes");
_Static_assert(offsetof(struct ioloom_raw_event, ret_bytes) == offsetof(struct ioloom_raw_event, offset) + 16, "lanes");
_Static_assert(offsetof(struct ioloom_raw_event, handle) == offsetof(struct ioloom_raw_event, offset) + 24, "lanes");
_Static_assert(offsetof(struct ioloom_raw_event, coll_seq) == offsetof(struct ioloom_raw_event, aux) + 8, "lanes");
_Static_assert(offsetof(struct ioloom_raw_event, call_id) == offsetof(struct ioloom_raw_event, aux) + 16, "lanes");
_Static_assert(offsetof(struct ioloom_raw_event, parent) == offsetof(struct ioloom_raw_event, aux) + 24, "lanes");
/* (file, errno) and (op, layer, ticks) as two little-endian words, the padding after ticks masked off (ticks is
 * compared for time_columns_pass alone: survey_end leaves it out) */
#define PACKED_MASK ((upair_t){~0ull, 0xffffffffull})
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the survey reads the 32-bit and 16-bit fields as words");
_Static_assert(offsetof(struct ioloom_raw_event, err) == offsetof(struct ioloom_raw_event, file_id) + 4, "pair");
_Static_assert(offsetof(struct ioloom_raw_event, op) == offsetof(struct ioloom_raw_event, file_id) + 8, "pair");
_Static_assert(offsetof(struct ioloom_raw_event, layer) == offsetof(struct ioloom_raw_event, op) + 2, "pair");
_Static_assert(offsetof(struct ioloom_raw_event, ticks) == offsetof(struct ioloom_raw_event, layer) + 1, "pair");
_Static_assert(sizeof(struct ioloom_raw_event) >= offsetof(struct ioloom_raw_event, file_id) + 16, "pair");

/* The two 64-bit fields from `two` on. -fno-builtin: memcpy itself would be a call. */
static inline upair_t pair_at(const void *two) {
    upair_t v;
    __builtin_memcpy(&v, two, sizeof v);
    return v;
}

/* The row's values of the survey's lanes (survey_lanes): (offset, req, ret - req, handle) and (aux, coll_seq,
 * call_id, parent) into q[0], q[1], and (file, errno), (op, layer, ticks) into *packed. -fno-builtin: memcpy itself
 * would be a call. */
static inline __attribute__((always_inline)) void row_lanes(const struct ioloom_raw_event *row, lanes_t q[2],
                                                            upair_t *packed) {
    __builtin_memcpy(&q[0], &row->offset, sizeof q[0]);
    q[0] -= (lanes_t){0, 0, (uint64_t)row->req_bytes, 0}; /* ret - req */
    __builtin_memcpy(&q[1], &row->aux, sizeof q[1]);
    __builtin_memcpy(packed, &row->file_id, sizeof *packed);
    *packed &= PACKED_MASK;
}

/* Each lane of the survey: its column (a difference column, stored as the change from the row before, counts up by
 * a step; the others are compared with row 0's value: their step is 0). */
static const struct {
    int col, quad, lane;
} survey_lanes[8] = {{IOLOOM_COL_OFFSET_DELTA, 0, 0}, {IOLOOM_COL_REQ, 0, 1},   {IOLOOM_COL_RET_MINUS_REQ, 0, 2},
                     {IOLOOM_COL_HANDLE, 0, 3},       {IOLOOM_COL_AUX, 1, 0},   {IOLOOM_COL_COLL_SEQ, 1, 1},
                     {IOLOOM_COL_CALL_ID, 1, 2},      {IOLOOM_COL_PARENT, 1, 3}};

/* Whether column `col` is a difference column (EACH_DIFFERENCE_COLUMN). */
static int is_difference_column(int col) {
#define IS_DIFFERENCE(unused, column, field) \
    case column:                             \
        return 1;
    switch (col) { EACH_DIFFERENCE_COLUMN(IS_DIFFERENCE, ) }
#undef IS_DIFFERENCE
    return 0;
}

/* Which columns but the times (time_column sees to them) hold the same value in every row, found in the time
 * columns' pass over the rows (survey_row): most columns of a loop are constant, and one pass finds them all, where
 * a pass per column would read every row twelve times (the encoder thread's memory traffic slows the program's
 * thread). The columns are compared four at a time (survey_lanes), each row against row 0's value plus i steps.
 * The step of a difference column (offset, req, aux, coll_seq, call_id, parent) is its value in row 1: a column whose
 * rows after the first all hold its step (a field that stays or counts up) is constant when row 0 holds the step
 * too, else steady: two runs, written without a pass of their own (put_steady_column). The others' step is 0. The
 * packed (file, errno), (op, layer, ticks) are compared with row 0's. */
struct column_survey {
    /* row i's lanes should be row 0's plus i steps (counted unsigned: they wrap, as the reader's sums do) */
    lanes_t expected[2], step[2], unsteady[2];
    upair_t first_packed, differs;
};

/* What a pass of the survey changes as it goes, in registers: row 0's lanes plus i steps and the bits of rows that
 * were not, each quad of lanes whole where the pass is compiled for AVX2 (a register each), else as two pairs
 * (without AVX2 the compiler keeps 32-byte vectors in memory); the steps apart, ret - req's and handle's zeros seen.
 * Small arrays of small structs, which the compiler takes apart into registers (a larger one stays in memory). */
struct quad_run {
    lanes_t expected, unsteady;
};
struct pair_run {
    upair_t expected, unsteady;
};
struct survey_run {
    struct quad_run *quads; /* wide */
    lanes_t *quad_steps;
    struct pair_run *pairs; /* not wide: quad k's halves at 2k, 2k + 1 */
    upair_t *pair_steps;
    upair_t differs, first_packed;
};

/* The pass's running survey from s (wide: by quads). */
static inline __attribute__((always_inline)) void run_start(struct survey_run *r, const struct column_survey *s,
                                                            int wide) {
    r->differs = s->differs, r->first_packed = s->first_packed;
    for (int k = 0; k < 2 && wide; k++) r->quads[k] = (struct quad_run){s->expected[k], s->unsteady[k]};
    if (wide) r->quad_steps[0] = (lanes_t){s->step[0][0], s->step[0][1], 0, 0}, r->quad_steps[1] = s->step[1];
    for (int h = 0; h < 4 && !wide; h++) {
        const int q = h / 2, lane = h % 2 * 2;
        r->pairs[h] = (struct pair_run){{s->expected[q][lane], s->expected[q][lane + 1]},
                                        {s->unsteady[q][lane], s->unsteady[q][lane + 1]}};
        r->pair_steps[h] = h == 1 ? (upair_t){0, 0} : (upair_t){s->step[q][lane], s->step[q][lane + 1]};
    }
}

/* The pass's running survey back into s. */
static inline __attribute__((always_inline)) void run_end(const struct survey_run *r, struct column_survey *s,
                                                          int wide) {
    s->differs = r->differs;
    for (int k = 0; k < 2 && wide; k++) s->expected[k] = r->quads[k].expected, s->unsteady[k] = r->quads[k].unsteady;
    for (int h = 0; h < 4 && !wide; h++) {
        const int q = h / 2, lane = h % 2 * 2;
        s->expected[q][lane] = r->pairs[h].expected[0], s->expected[q][lane + 1] = r->pairs[h].expected[1];
        s->unsteady[q][lane] = r->pairs[h].unsteady[0], s->unsteady[q][lane + 1] = r->pairs[h].unsteady[1];
    }
}

/* Row 0's value of every column into first[], and the survey of the n rows started. */
static void survey_start(struct column_survey *s, const struct ioloom_raw_event *ev, size_t stride, size_t n,
                         const struct chunk_times *tm, int64_t *first) {
#define FIRST(col, first_value, value) first[col] = (int64_t)(first_value);
    EACH_COLUMN(FIRST)
#undef FIRST
    *s = (struct column_survey){0};
    row_lanes(&ROW(0), s->expected, &s->first_packed);
    if (n < 2) return; /* one row: no step (every column constant) */
    lanes_t second[2];
    upair_t packed;
    row_lanes(&ROW(1), second, &packed);
    for (int k = 0; k < 2; k++) s->step[k] = second[k] - s->expected[k];
    s->step[0] &= (lanes_t){~0ull, ~0ull, 0, 0}; /* ret - req and handle: compared with row 0's */
}

/* Row i (> 0) compared with row 0's values and the steps. */
static inline __attribute__((always_inline)) void survey_row(struct survey_run *r, const struct ioloom_raw_event *row,
                                                             int wide) {
    lanes_t q[2];
    upair_t packed, halves[4];
    if (wide) {
        row_lanes(row, q, &packed);
#pragma GCC unroll 2
        for (int k = 0; k < 2; k++) r->quads[k].unsteady |= q[k] ^ (r->quads[k].expected += r->quad_steps[k]);
    } else { /* row_lanes as pairs */
        halves[0] = pair_at(&row->offset);
        halves[1] = pair_at(&row->ret_bytes) - (upair_t){(uint64_t)row->req_bytes, 0};
        halves[2] = pair_at(&row->aux);
        halves[3] = pair_at(&row->call_id);
        packed = pair_at(&row->file_id) & PACKED_MASK;
#pragma GCC unroll 4 /* the halves stay in registers */
        for (int h = 0; h < 4; h++) {
            if (h != 1) r->pairs[h].expected += r->pair_steps[h]; /* ret - req and handle: no step, no add */
            r->pairs[h].unsteady |= halves[h] ^ r->pairs[h].expected;
        }
    }
    r->differs |= packed ^ r->first_packed;
}

/* A bit for each column but the times whose value is not the same in every row of the survey, and in *steady for
 * each that varies steadily. */
static uint32_t survey_end(const struct column_survey *s, const int64_t *first, uint32_t *steady) {
    const struct {
        int col, half;
        uint64_t mask;
    } packed[4] = {{IOLOOM_COL_FILE, 0, 0xffffffffull},
                   {IOLOOM_COL_ERRNO, 0, 0xffffffffull << 32},
                   {IOLOOM_COL_OP, 1, 0xffffull},
                   {IOLOOM_COL_LAYER, 1, 0xffull << 16}};
    uint32_t varying = 0;
    for (int k = 0; k < 4; k++)
        varying |= (uint32_t)((s->differs[packed[k].half] & packed[k].mask) != 0) << packed[k].col;
    for (int k = 0; k < 8; k++) {
        const int col = survey_lanes[k].col, q = survey_lanes[k].quad, lane = survey_lanes[k].lane;
        int stays = s->unsteady[q][lane] == 0;
        /* a difference column whose rows all hold the step, row 0 too, is constant */
        int constant = stays && (!is_difference_column(col) || (uint64_t)first[col] == s->step[q][lane]);
        *steady |= (uint32_t)(stays && !constant) << col;
        varying |= (uint32_t)!constant << col;
    }
    return varying;
}

/* One pass over the rows for column `col`: its values written as plain varints from body on, the number of runs
 * of equal values and the bytes their values take. Returns the end of the plain body. */
static uint8_t *plain_body(int col, const struct ioloom_raw_event *ev, size_t stride, size_t n,
                           const struct chunk_times *tm, uint8_t *body, size_t *runs, size_t *run_values) {
    uint8_t *end = body;
    size_t count = 1, sizes = 0;
#define WRITE(column, first_expr, expr)                               \
    case column: {                                                    \
        int64_t previous = (int64_t)(first_expr);                     \
        end = put_varint(end, ioloom_zigzag(previous));               \
        sizes = (size_t)(end - body);                                 \
        for (size_t i = 1; i < n; i++) {                              \
            int64_t x = (int64_t)(expr);                              \
            uint8_t *at = end;                                        \
            end = put_varint(end, ioloom_zigzag(x));                  \
            size_t starts = x != previous; /* a new run: its value */ \
            count += starts;                                          \
            sizes += (size_t)(end - at) & -starts;                    \
            previous = x;                                             \
        }                                                             \
        break;                                                        \
    }
    switch (col) { EACH_COLUMN(WRITE) }
#undef WRITE
    *runs = count;
    *run_values = sizes;
    return end;
}

/* Column `col`'s values into v[0..n). */
static void column_values(int col, const struct ioloom_raw_event *ev, size_t stride, size_t n,
                          const struct chunk_times *tm, int64_t *v) {
#define VALUES(column, first_expr, expr)                       \
    case column: {                                             \
        v[0] = (int64_t)(first_expr);                          \
        for (size_t i = 1; i < n; i++) v[i] = (int64_t)(expr); \
        break;                                                 \
    }
    switch (col) { EACH_COLUMN(VALUES) }
#undef VALUES
}

/* The bytes the run lengths of v[0..n) take. */
static size_t run_lengths_size(const int64_t *v, size_t n) {
    size_t bytes = 0, run_start = 0;
    for (size_t i = 1; i < n; i++)
        if (v[i] != v[i - 1]) {
            bytes += ioloom_varint_size(i - run_start);
            run_start = i;
        }
    return bytes + ioloom_varint_size(n - run_start);
}

/* Appends a constant column: mode byte, body length, the value. */
uint8_t *ioloom_put_const_column(uint8_t *p, int64_t value) {
    *p++ = IOLOOM_COL_CONST;
    p = put_varint(p, ioloom_varint_size(ioloom_zigzag(value)));
    return put_varint(p, ioloom_zigzag(value));
}

/* Appends the RUNS mode of a column (mode byte, body length, body) whose body takes run_bytes: the count, every
 * run's value, then every run's length. */
static uint8_t *put_runs_header(uint8_t *p, size_t run_bytes, size_t runs) {
    *p++ = IOLOOM_COL_RUNS;
    p = put_varint(p, run_bytes);
    return put_varint(p, runs);
}

/* The bytes of column `col` in the runs mode when that is smaller than `plain` bytes (its values then in v), else 0.
 * A run length takes a byte at least: columns that vary from row to row (times) lose to plain without sizing
 * their lengths or looking at their values again. */
static size_t smaller_runs(int col, const struct ioloom_raw_event *ev, size_t stride, size_t n,
                           const struct chunk_times *tm, int64_t *v, size_t runs, size_t run_values, size_t plain) {
    size_t run_bytes = ioloom_varint_size(runs) + run_values + runs;
    if (run_bytes >= plain) return 0;
    column_values(col, ev, stride, n, tm, v);
    run_bytes += run_lengths_size(v, n) - runs;
    return run_bytes < plain ? run_bytes : 0;
}

/* Appends the runs mode of v[0..n) (mode byte, body length, body), `runs` runs taking run_bytes: all run values
 * first, then all lengths, so that each half decodes as one varint array. */
uint8_t *ioloom_put_runs(uint8_t *p, const int64_t *v, size_t n, size_t runs, size_t run_bytes) {
    p = put_runs_header(p, run_bytes, runs);
    for (size_t i = 0; i < n; i++)
        if (i == 0 || v[i] != v[i - 1]) p = put_varint(p, ioloom_zigzag(v[i]));
    size_t run_start = 0;
    for (size_t i = 1; i <= n; i++)
        if (i == n || v[i] != v[i - 1]) {
            p = put_varint(p, i - run_start);
            run_start = i;
        }
    return p;
}

/* Appends the plain mode (mode byte, body length) of the `plain` bytes at body, moved in after them. */
static uint8_t *put_plain(uint8_t *p, const uint8_t *body, size_t plain) {
    *p++ = IOLOOM_COL_VARINT;
    p = put_varint(p, plain);
    memmove(p, body, plain);
    return p + plain;
}

/* Appends column `col`, which varies, in the smaller of the runs and plain modes (mode byte, body length, body);
 * v is scratch for n values. */
static uint8_t *put_varying_column(uint8_t *p, int col, const struct ioloom_raw_event *ev, size_t stride, size_t n,
                                   const struct chunk_times *tm, int64_t *v) {
    size_t runs, run_values;
    /* the plain body goes past room for its mode and length */
    uint8_t *body = p + 1 + VARINT_MAX_BYTES, *end = plain_body(col, ev, stride, n, tm, body, &runs, &run_values);
    size_t plain = (size_t)(end - body), run_bytes = smaller_runs(col, ev, stride, n, tm, v, runs, run_values, plain);
    return run_bytes ? ioloom_put_runs(p, v, n, runs, run_bytes) : put_plain(p, body, plain);
}

/* Row 0's field of difference column `col` (stored as the change from the row before), NULL for the others. */
static const int64_t *difference_field(int col, const struct ioloom_raw_event *ev) {
#define FIELD(unused, column, field) \
    case column:                     \
        return &ev->field;
    switch (col) { EACH_DIFFERENCE_COLUMN(FIELD, ) }
#undef FIELD
    return NULL;
}

/* Whether the field f[0], f[s], ... changes by `change` at each of rows 1 to 4 (f: the row before them). */
static inline int four_change_by(const int64_t *f, size_t s, uint64_t change) {
    return ((MINUS(f[s], f[0]) ^ change) | (MINUS(f[2 * s], f[s]) ^ change) | (MINUS(f[3 * s], f[2 * s]) ^ change) |
            (MINUS(f[4 * s], f[3 * s]) ^ change)) == 0;
}

/* A row is a whole number of int64s, so that a field of row i is f[i * s] with s = sizeof row / sizeof *f. */
_Static_assert(sizeof(struct ioloom_raw_event) % sizeof(int64_t) == 0, "rows are whole int64s");

/* few_runs of a difference column, whose field is f[0], f[s], ... (every s-th int64 from row 0's): in a function of
 * its own, small enough for its loop to stay in registers, and four rows at a time while they change alike. */
static size_t few_runs_of_differences(const int64_t *f, size_t s, size_t n, int64_t *v) {
    size_t few = n / 8, runs = 1;
    int64_t previous = v[0] = f[0];
    v[few] = 0;
    for (size_t i = 1; i < n; i++) {
        for (; i + 4 <= n && four_change_by(f + (i - 1) * s, s, (uint64_t)previous); i += 4) {
        }
        if (i == n) break;
        int64_t x = (int64_t)MINUS(f[i * s], f[(i - 1) * s]);
        if (__builtin_expect(x == previous, 1)) continue;
        if (runs == few) return 0;
        v[runs] = previous = x;
        v[few + runs++] = (int64_t)i;
    }
    return runs;
}

/* The runs of column `col` in one pass that stops as soon as there are more than n / 8 of them: their count (0
 * when there were more), run k's value in v[k] and its first row in v[n / 8 + k]. A difference column's in
 * few_runs_of_differences, the others' here. */
static size_t few_runs(int col, const struct ioloom_raw_event *ev, size_t stride, size_t n,
                       const struct chunk_times *tm, int64_t *v) {
    size_t few = n / 8, runs = 1;
    if (!few) return 0;
    const int64_t *field = difference_field(col, ev);
    if (field) return few_runs_of_differences(field, stride * (sizeof *ev / sizeof *field), n, v);
#define RUNS(column, first_expr, expr)                        \
    case column: {                                            \
        int64_t previous = v[0] = (int64_t)(first_expr);      \
        v[few] = 0;                                           \
        for (size_t i = 1; i < n; i++) {                      \
            int64_t x = (int64_t)(expr);                      \
            if (__builtin_expect(x == previous, 1)) continue; \
            if (runs == few) return 0;                        \
            v[runs] = previous = x;                           \
            v[few + runs++] = (int64_t)i;                     \
        }                                                     \
        break;                                                \
    }
    switch (col) { EACH_VALUE_COLUMN(RUNS) }
#undef RUNS
    return runs;
}

/* The length of run k of the `runs` found by few_runs. */
static size_t run_length(const int64_t *v, size_t n, size_t k, size_t runs) {
    size_t few = n / 8;
    return (k + 1 < runs ? (size_t)v[few + k + 1] : n) - (size_t)v[few + k];
}

/* Appends column `col`, which varies. When it has few runs that take fewer bytes than it has rows, the runs mode
 * is the smaller (a plain varint takes a byte at least) and is written from the runs alone, without the plain
 * body's pass over the rows; otherwise both modes are sized (put_varying_column). Same bytes either way. */
static uint8_t *put_column(uint8_t *p, int col, const struct ioloom_raw_event *ev, size_t stride, size_t n,
                           const struct chunk_times *tm, int64_t *v) {
    size_t runs = few_runs(col, ev, stride, n, tm, v), run_bytes = ioloom_varint_size(runs);
    for (size_t k = 0; k < runs; k++)
        run_bytes += ioloom_varint_size(ioloom_zigzag(v[k])) + ioloom_varint_size(run_length(v, n, k, runs));
    if (!runs || run_bytes >= n) return put_varying_column(p, col, ev, stride, n, tm, v);
    p = put_runs_header(p, run_bytes, runs);
    for (size_t k = 0; k < runs; k++) p = put_varint(p, ioloom_zigzag(v[k]));
    for (size_t k = 0; k < runs; k++) p = put_varint(p, run_length(v, n, k, runs));
    return p;
}

/* Appends column `col`, which varies and whose rows after the first all hold `step` (steady in the survey):
 * two runs, written without a pass over the rows when they take fewer bytes than the
 * column has rows (a plain varint takes a byte at least), as put_column would find them; put_column otherwise.
 * Same bytes either way. */
static uint8_t *put_steady_column(uint8_t *p, int col, const struct ioloom_raw_event *ev, size_t stride, size_t n,
                                  const struct chunk_times *tm, int64_t *v, int64_t first, int64_t step) {
    size_t run_bytes = ioloom_varint_size(2) + ioloom_varint_size(ioloom_zigzag(first)) +
                       ioloom_varint_size(ioloom_zigzag(step)) + ioloom_varint_size(1) + ioloom_varint_size(n - 1);
    if (run_bytes >= n) return put_column(p, col, ev, stride, n, tm, v);
    p = put_varint(put_varint(put_runs_header(p, run_bytes, 2), ioloom_zigzag(first)), ioloom_zigzag(step));
    return put_varint(put_varint(p, 1), n - 1);
}

/* A time column being written plain: its body, first value, and the rows equal to the one before and the bytes
 * they take (times rarely repeat: counted on a branch that is almost never taken). */
struct time_body {
    uint8_t *body, *end;
    int64_t first, previous;
    size_t repeats, repeat_bytes;
};

static inline void time_start(struct time_body *t, uint8_t *body, int64_t first) {
    *t = (struct time_body){body, put_varint(body, ioloom_zigzag(first)), first, first, 0, 0};
}

static inline void time_add(struct time_body *t, int64_t x) {
    uint8_t *at = t->end;
    t->end = put_varint(at, ioloom_zigzag(x));
    if (__builtin_expect(x == t->previous, 0)) {
        t->repeats++;
        t->repeat_bytes += (size_t)(t->end - at);
    }
    t->previous = x;
}

/* Appends time column `col` from its plain body: constant, runs (when smaller) or plain, as put_column would. */
static uint8_t *put_time_column(uint8_t *p, int col, const struct time_body *t, const struct ioloom_raw_event *ev,
                                size_t stride, size_t n, const struct chunk_times *tm, int64_t *v) {
    size_t runs = n - t->repeats, plain = (size_t)(t->end - t->body);
    if (runs == 1) return ioloom_put_const_column(p, t->first);
    size_t run_bytes = smaller_runs(col, ev, stride, n, tm, v, runs, plain - t->repeat_bytes, plain);
    return run_bytes ? ioloom_put_runs(p, v, n, runs, run_bytes) : put_plain(p, t->body, plain);
}

/* How time_pass reads a row's times: as they are (ns), converted from ticks (every row's a tick count), or each as
 * its row says (ioloom_row_ns); the last one also rounded to the clock's quantum. */
enum time_reading { AS_NS, FROM_TICKS, AS_ROW_SAYS, AS_ROW_SAYS_ROUNDED };

/* A row's times added to the two bodies: its gap from *end (the row before's end, then this row's) and duration. */
static inline __attribute__((always_inline)) void time_row(struct time_body *g, struct time_body *d, uint64_t *end,
                                                           uint64_t start, uint64_t row_end) {
    time_add(g, (int64_t)(start - *end));
    *end = row_end;
    time_add(d, (int64_t)(row_end - start));
}

#if defined(__x86_64__)
static size_t time_quads(struct time_body *gap, struct time_body *duration, struct survey_run *run,
                         const struct ioloom_raw_event *ev, size_t stride, size_t n,
                         const struct ioloom_tick_clock *ticks, uint64_t *end);
#endif

/* The pass over the rows of put_time_columns, reading times as `reading` says, a constant where it is inlined: a
 * conversion without a test of each row's `ticks` where every row holds ticks, a division only where there is a
 * quantum. */
static inline __attribute__((always_inline)) void time_pass(struct time_body *gap, struct time_body *duration,
                                                            struct column_survey *survey,
                                                            const struct ioloom_raw_event *ev, size_t stride, size_t n,
                                                            const struct ioloom_tick_clock *clock,
                                                            enum time_reading reading, int wide) {
    /* a copy the body's byte stores cannot alias: its fields stay in registers */
    const struct ioloom_tick_clock by = reading == FROM_TICKS ? *clock : (struct ioloom_tick_clock){0};
#define TIME(k, t)                                               \
    (reading == AS_NS         ? (t)                              \
     : reading == FROM_TICKS  ? ioloom_ticks_ns(&by, t)          \
     : reading == AS_ROW_SAYS ? ioloom_row_ns(clock, &ROW(k), t) \
                              : ioloom_row_time(clock, &ROW(k), t))
    /* copies too: the bodies' byte stores could alias the callers' */
    struct time_body g = *gap, d = *duration;
    struct quad_run quads[2];
    lanes_t quad_steps[2];
    struct pair_run pairs[4];
    upair_t pair_steps[4];
    struct survey_run run = {quads, quad_steps, pairs, pair_steps, {0, 0}, {0, 0}};
    run_start(&run, survey, wide);
    uint64_t end = TIME(0, ROW(0).t_end);
    size_t i = 1;
#if defined(__x86_64__)
    if (wide && (reading == AS_NS || reading == FROM_TICKS)) /* four rows at a time, then the rest here */
        i = time_quads(&g, &d, &run, ev, stride, n, reading == FROM_TICKS ? &by : NULL, &end);
#endif
    for (; i < n; i++) {
        survey_row(&run, &ROW(i), wide);
        time_row(&g, &d, &end, TIME(i, ROW(i).t_start), TIME(i, ROW(i).t_end));
    }
#undef TIME
    *gap = g, *duration = d;
    run_end(&run, survey, wide);
}

#if defined(__x86_64__)
/* ---- the time columns four rows at a time (AVX2) ----
 * The times of rows i to i + 3 are converted in two vectors (starts, ends), their gaps and durations taken, their
 * repeats tested and their zigzag values written as varints four at a time: each value spread to 7 bits a byte in its
 * 32-bit lane, the lanes packed by one byte shuffle picked by the four lengths; the repeats counted per lane. The
 * same bytes as the row-by-row pass (tests/programs/encode_paths.c compares them): a quad with a time out of the
 * exact range of the conversion (ticks_ns_four) or a value of more than four bytes is done row by row. */

/* Per lengths of four varints of 1-4 bytes (less one, two bits each, lane k at bit 2k): the byte shuffle packing
 * them from their 32-bit lanes, the continuation bits of the packed bytes, and their total length. */
static uint8_t pack_shuffle[256][16] __attribute__((aligned(16))), pack_more[256][16] __attribute__((aligned(16)));
static uint8_t pack_bytes[256];

/* Built by build_tables, before any use. */
static void build_pack_tables(void) {
    for (unsigned lengths = 0; lengths < 256; lengths++) {
        unsigned j = 0;
        for (unsigned k = 0; k < 4; k++) {
            unsigned len = (lengths >> 2 * k & 3) + 1;
            for (unsigned b = 0; b < len; b++, j++) {
                pack_shuffle[lengths][j] = (uint8_t)(4 * k + b);
                pack_more[lengths][j] = b + 1 < len ? 0x80 : 0;
            }
        }
        pack_bytes[lengths] = (uint8_t)j;
        for (; j < 16; j++) pack_shuffle[lengths][j] = 0x80, pack_more[lengths][j] = 0; /* zeros past the end */
    }
}

/* A row's t_start (low lane) and t_end (high lane), read as one 16-byte load: t_end follows t_start. */
_Static_assert(offsetof(struct ioloom_raw_event, t_end) == offsetof(struct ioloom_raw_event, t_start) + 8, "times");
__attribute__((target("avx2"))) static inline __m128i load_times(const struct ioloom_raw_event *row) {
    return _mm_loadu_si128((const __m128i *)&row->t_start);
}

/* The four lanes of a movemask, each bit k moved to bit 2k. */
static const uint8_t spread_lanes[16] = {0, 1, 4, 5, 16, 17, 20, 21, 64, 65, 68, 69, 80, 81, 84, 85};

/* Each lane's value before it: lane k - 1's of x, lane 0's the last lane of `before`. */
__attribute__((target("avx2"))) static inline __m256i lanes_before(__m256i x, __m256i before) {
    const int rotate = _MM_SHUFFLE(2, 1, 0, 3);
    return _mm256_blend_epi32(_mm256_permute4x64_epi64(x, rotate), _mm256_permute4x64_epi64(before, rotate), 0x03);
}

/* Appends the varints of the four zigzag values v (each below 2^28: at most four bytes) as put_varint would, with
 * one 16-byte store, bytes past the varints zero. *bytes: each lane's length in bytes. The store stays in the body:
 * a time body has room for VARINT_MAX_BYTES a row (put_time_columns), the rows before these took at most that each,
 * so from p on these four rows' room is left, which the store does not overrun (the assertion). */
_Static_assert(sizeof(__m128i) <= 4 * VARINT_MAX_BYTES, "put_four_varints' store stays in its four rows' room");
__attribute__((target("avx2"))) static inline uint8_t *put_four_varints(uint8_t *p, __m256i v, __m256i *bytes) {
    __m256i w = _mm256_add_epi64(v, _mm256_andnot_si256(_mm256_set1_epi64x(0x7f), v)); /* bits 7 and up, up one */
    w = _mm256_add_epi64(w, _mm256_andnot_si256(_mm256_set1_epi64x(0x7fff), w));
    w = _mm256_add_epi64(w, _mm256_andnot_si256(_mm256_set1_epi64x(0x7fffff), w));
    unsigned lengths = 0;
    *bytes = _mm256_set1_epi64x(1);
    for (int k = 1; k < 4; k++) { /* lanes of more than k bytes */
        __m256i longer = _mm256_cmpgt_epi64(v, _mm256_set1_epi64x((1ll << 7 * k) - 1));
        *bytes = _mm256_sub_epi64(*bytes, longer);
        lengths += spread_lanes[_mm256_movemask_pd(_mm256_castsi256_pd(longer))];
    }
    __m128i lanes = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(w, _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0)));
    __m128i packed = _mm_or_si128(_mm_shuffle_epi8(lanes, _mm_load_si128((const __m128i *)pack_shuffle[lengths])),
                                  _mm_load_si128((const __m128i *)pack_more[lengths]));
    _mm_storeu_si128((__m128i *)p, packed);
    return p + pack_bytes[lengths];
}

/* A time column's part of the quads: its last four values (lane 3 the latest) and, per lane, the repeats counted
 * and the bytes they took (summed into the body at the end). */
struct quad_body {
    __m256i last, repeats, repeat_bytes;
};

/* A time column's quads starting after its body's last value, nothing counted yet. */
__attribute__((target("avx2"))) static inline struct quad_body quads_after(const struct time_body *t) {
    return (struct quad_body){_mm256_set1_epi64x(t->previous), _mm256_setzero_si256(), _mm256_setzero_si256()};
}

/* Appends the four values x of a time column whose zigzag values are v, counting those equal to the value before. */
__attribute__((target("avx2"))) static inline uint8_t *put_quad(uint8_t *p, struct quad_body *q, __m256i x, __m256i v) {
    __m256i bytes, repeated = _mm256_cmpeq_epi64(x, lanes_before(x, q->last));
    p = put_four_varints(p, v, &bytes);
    q->repeats = _mm256_sub_epi64(q->repeats, repeated);
    q->repeat_bytes = _mm256_add_epi64(q->repeat_bytes, _mm256_and_si256(bytes, repeated));
    q->last = x;
    return p;
}

/* The exact range of the vector conversions: |x| < 2^51. x + 2^52 + 2^51 as a double's bits is that double. */
#define EXACT_BITS 51
#define MAGIC_BITS 0x4338000000000000ll
#define MAGIC_DOUBLE 6755399441055744.0

/* Four tick counts t in ns, as ioloom_ticks_ns: through int64_t and double, the product truncated. Lanes whose
 * count from the clock's or whose product is not below 2^51 in magnitude (where the conversions are exact) set
 * their bits in *out. */
__attribute__((target("avx2"))) static inline __m256i ticks_ns_four(const struct ioloom_tick_clock *c, __m256i t,
                                                                    __m256i *out) {
    __m256i x = _mm256_sub_epi64(t, _mm256_set1_epi64x((long long)c->from_ticks));
    *out = _mm256_or_si256(
        *out, _mm256_srli_epi64(_mm256_add_epi64(x, _mm256_set1_epi64x(1ll << EXACT_BITS)), EXACT_BITS + 1));
    __m256d magic = _mm256_set1_pd(MAGIC_DOUBLE);
    __m256d ticks = _mm256_sub_pd(_mm256_castsi256_pd(_mm256_add_epi64(x, _mm256_set1_epi64x(MAGIC_BITS))), magic);
    __m256d ns =
        _mm256_round_pd(_mm256_mul_pd(ticks, _mm256_set1_pd(c->ns_per_tick)), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m256d size = _mm256_andnot_pd(_mm256_set1_pd(-0.0), ns);
    *out = _mm256_or_si256(*out, _mm256_castpd_si256(_mm256_cmp_pd(size, _mm256_set1_pd(0x1p51), _CMP_NLT_UQ)));
    __m256i whole = _mm256_sub_epi64(_mm256_castpd_si256(_mm256_add_pd(ns, magic)), _mm256_set1_epi64x(MAGIC_BITS));
    return _mm256_add_epi64(whole, _mm256_set1_epi64x((long long)c->from_ns));
}

/* The zigzag values of four int64s. */
__attribute__((target("avx2"))) static inline __m256i zigzag_four(__m256i x) {
    return _mm256_xor_si256(_mm256_add_epi64(x, x), _mm256_cmpgt_epi64(_mm256_setzero_si256(), x));
}

/* Lane 3 of x. */
__attribute__((target("avx2"))) static inline int64_t last_lane(__m256i x) { return _mm256_extract_epi64(x, 3); }

/* A quad_body's counts into its time body, and its last value. */
__attribute__((target("avx2"))) static void end_quads(struct time_body *t, const struct quad_body *q) {
    int64_t repeats[4], bytes[4];
    _mm256_storeu_si256((__m256i *)repeats, q->repeats);
    _mm256_storeu_si256((__m256i *)bytes, q->repeat_bytes);
    for (int k = 0; k < 4; k++) t->repeats += (size_t)repeats[k], t->repeat_bytes += (size_t)bytes[k];
    t->previous = last_lane(q->last);
}

/* The rows [1, n) of time_pass four at a time (with the survey), as far as whole quads go: the times as ns (ticks
 * NULL) or converted by `ticks`. Returns the first row not done; *end is the last done row's end. */
__attribute__((target("avx2"))) static size_t time_quads(struct time_body *gap, struct time_body *duration,
                                                         struct survey_run *run, const struct ioloom_raw_event *ev,
                                                         size_t stride, size_t n, const struct ioloom_tick_clock *ticks,
                                                         uint64_t *end) {
    /* copies in registers: the bodies' byte stores could alias the callers' */
    struct time_body g = *gap, d = *duration;
    struct quad_run quads[2] = {run->quads[0], run->quads[1]};
    lanes_t quad_steps[2] = {run->quad_steps[0], run->quad_steps[1]};
    struct survey_run r = {quads, quad_steps, NULL, NULL, run->differs, run->first_packed};
    const struct ioloom_tick_clock by = ticks ? *ticks : (struct ioloom_tick_clock){0};
    struct quad_body gq = quads_after(&g), dq = quads_after(&d);
    __m256i ends_before = _mm256_set1_epi64x((long long)*end);
    size_t i = 1;
    for (const size_t s = stride; i + 4 <= n; i += 4) {
        const struct ioloom_raw_event *row = &ROW(i);
        for (int k = 0; k < 4; k++) survey_row(&r, row + k * s, 1);
        __m256i even = _mm256_inserti128_si256(_mm256_castsi128_si256(load_times(row)), load_times(row + 2 * s), 1);
        __m256i odd = _mm256_inserti128_si256(_mm256_castsi128_si256(load_times(row + s)), load_times(row + 3 * s), 1);
        __m256i starts = _mm256_unpacklo_epi64(even, odd), ends = _mm256_unpackhi_epi64(even, odd);
        __m256i out = _mm256_setzero_si256(); /* lanes the quad cannot take */
        if (ticks) starts = ticks_ns_four(&by, starts, &out), ends = ticks_ns_four(&by, ends, &out);
        __m256i gaps = _mm256_sub_epi64(starts, lanes_before(ends, ends_before));
        __m256i durations = _mm256_sub_epi64(ends, starts);
        __m256i gap_values = zigzag_four(gaps), duration_values = zigzag_four(durations);
        out = _mm256_or_si256(out, _mm256_srli_epi64(_mm256_or_si256(gap_values, duration_values), 28));
        if (__builtin_expect(!_mm256_testz_si256(out, out), 0)) { /* these four row by row */
            end_quads(&g, &gq), end_quads(&d, &dq);
            *end = (uint64_t)last_lane(ends_before);
            for (int k = 0; k < 4; k++) {
                const struct ioloom_raw_event *one = row + k * s;
                time_row(&g, &d, end, ticks ? ioloom_ticks_ns(&by, one->t_start) : one->t_start,
                         ticks ? ioloom_ticks_ns(&by, one->t_end) : one->t_end);
            }
            gq = quads_after(&g), dq = quads_after(&d);
            ends_before = _mm256_set1_epi64x((long long)*end);
            continue;
        }
        g.end = put_quad(g.end, &gq, gaps, gap_values);
        d.end = put_quad(d.end, &dq, durations, duration_values);
        ends_before = ends;
    }
    end_quads(&g, &gq), end_quads(&d, &dq);
    *end = (uint64_t)last_lane(ends_before);
    *gap = g, *duration = d;
    run->quads[0] = quads[0], run->quads[1] = quads[1], run->differs = r.differs;
    return i;
}
#endif

/* The CRC table and the varint packing tables, built once as the library (or program) is loaded, before its other
 * constructors run (priority 101, the first not reserved: the tracer's start writes a checksummed chunk), so before
 * any thread can read them: no lock, which a signal handler flushing the trace could wait on while its own thread
 * holds it (pthread_once's included), and no test on use. */
__attribute__((constructor(101))) static void build_tables(void) {
    build_crc_table();
#if defined(__x86_64__)
    build_pack_tables();
#endif
}

/* Whether the survey saw rows whose `ticks` is not row 0's (a chunk of tick times and ns times: rows of
 * ioloom_record among a thread's). */
static int ticks_differ(const struct column_survey *s) { return (s->differs[1] >> 24 & 0xff) != 0; }

/* The time pass over the rows (and the survey of the other columns), reading the times as row 0 says for every row
 * (each row's `ticks` tested only when the pass found rows that differ from row 0: then the pass runs again).
 * Inlined in time_columns_pass, compiled once for any CPU and once for AVX2 (the survey's lanes a register each). */
static inline __attribute__((always_inline)) void time_columns_body(struct time_body *gap, struct time_body *duration,
                                                                    struct column_survey *survey,
                                                                    const struct ioloom_raw_event *ev, size_t stride,
                                                                    size_t n, const struct ioloom_tick_clock *clock,
                                                                    int wide) {
    if (ioloom_quantum(clock) > 1) {
        time_pass(gap, duration, survey, ev, stride, n, clock, AS_ROW_SAYS_ROUNDED, wide);
        return;
    }
    const struct time_body gap_start = *gap, duration_start = *duration;
    const struct column_survey survey_start = *survey;
    if (clock && ROW(0).ticks)
        time_pass(gap, duration, survey, ev, stride, n, clock, FROM_TICKS, wide);
    else
        time_pass(gap, duration, survey, ev, stride, n, clock, AS_NS, wide);
    if (!clock || !ticks_differ(survey)) return;
    *gap = gap_start, *duration = duration_start, *survey = survey_start;
    time_pass(gap, duration, survey, ev, stride, n, clock, AS_ROW_SAYS, wide);
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) static void time_columns_avx2(struct time_body *gap, struct time_body *duration,
                                                              struct column_survey *survey,
                                                              const struct ioloom_raw_event *ev, size_t stride,
                                                              size_t n, const struct ioloom_tick_clock *clock) {
    time_columns_body(gap, duration, survey, ev, stride, n, clock, 1);
}

/* Whether the CPU has AVX2: 0 not asked yet, 1 no, 2 yes (can_avx2). tests/programs/encode_paths.c, which includes
 * this file, sets it to 1 to run the survey without AVX2 on a CPU that has it. */
static int avx2_known;

/* 1 when the CPU has AVX2 and the system saves its registers; asked once (idempotent, no lock: see can_fold). */
static int can_avx2(void) {
    int answer = __atomic_load_n(&avx2_known, __ATOMIC_RELAXED);
    if (!answer) {
        unsigned a, b, c = 0, d, xcr0 = 0, high;
        int saved = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_OSXSAVE);
        if (saved) __asm__("xgetbv" : "=a"(xcr0), "=d"(high) : "c"(0)); /* XCR0: the XMM and YMM state is saved */
        answer = saved && (xcr0 & 6) == 6 && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_AVX2) ? 2 : 1;
        __atomic_store_n(&avx2_known, answer, __ATOMIC_RELAXED);
    }
    return answer == 2;
}
#endif

/* time_columns_body, for AVX2 when the CPU has it. */
static void time_columns_pass(struct time_body *gap, struct time_body *duration, struct column_survey *survey,
                              const struct ioloom_raw_event *ev, size_t stride, size_t n,
                              const struct ioloom_tick_clock *clock) {
#if defined(__x86_64__)
    if (can_avx2()) {
        time_columns_avx2(gap, duration, survey, ev, stride, n, clock);
        return;
    }
#endif
    time_columns_body(gap, duration, survey, ev, stride, n, clock, 0);
}

/* Appends the two time columns (gap, duration), both written in one pass over the rows, which also surveys the other
 * columns (`survey`, started): the gap's body goes where it will stay but for its mode and length, the duration's
 * past it (each has room for VARINT_MAX_BYTES a row), both are moved into place after. v is scratch for n values. */
static uint8_t *put_time_columns(uint8_t *p, const struct ioloom_raw_event *ev, size_t stride, size_t n,
                                 const struct chunk_times *tm, int64_t *v, struct column_survey *survey) {
    struct time_body gap, duration;
    time_start(&gap, p + 1 + VARINT_MAX_BYTES, (int64_t)(ROW_START(0) - tm->base));
    time_start(&duration, p + 2 * (1 + VARINT_MAX_BYTES) + VARINT_MAX_BYTES * n, (int64_t)(ROW_END(0) - ROW_START(0)));
    time_columns_pass(&gap, &duration, survey, ev, stride, n, tm->clock);
    p = put_time_column(p, IOLOOM_COL_GAP, &gap, ev, stride, n, tm, v);
    return put_time_column(p, IOLOOM_COL_DURATION, &duration, ev, stride, n, tm, v);
}

/* Column `col`'s value stored for row 1 (n > 1). */
static int64_t second_value(int col, const struct ioloom_raw_event *ev, size_t stride, const struct chunk_times *tm) {
    const size_t i = 1;
#define SECOND(column, first_expr, expr) \
    case column:                         \
        return (int64_t)(expr);
    switch (col) { EACH_COLUMN(SECOND) }
#undef SECOND
    return 0;
}

size_t ioloom_encode_events(uint8_t *out, int64_t *scratch, uint32_t tid, const struct ioloom_raw_event *ev,
                            size_t stride, size_t n, const struct ioloom_tick_clock *clock) {
    const struct chunk_times times = {ioloom_row_time(clock, &ROW(0), ROW(0).t_start), clock}, *tm = &times;
    uint8_t *p = out + IOLOOM_CHUNK_HEADER_BYTES;
    p = put_varint(p, tid);
    p = put_varint(p, n);
    p = put_varint(p, tm->base);
    int64_t first[IOLOOM_COLUMNS];
    struct column_survey survey;
    survey_start(&survey, ev, stride, n, tm, first);
    _Static_assert(IOLOOM_COL_GAP == 0 && IOLOOM_COL_DURATION == 1, "the time columns come first");
    p = put_time_columns(p, ev, stride, n, tm, scratch, &survey);
    uint32_t steady = 0, varying = n > 1 ? survey_end(&survey, first, &steady) : 0; /* one row: all constant */
    for (int col = IOLOOM_COL_DURATION + 1; col < IOLOOM_COLUMNS; col++)
        p = !(varying >> col & 1) ? ioloom_put_const_column(p, first[col])
            : steady >> col & 1
                ? put_steady_column(p, col, ev, stride, n, tm, scratch, first[col], second_value(col, ev, stride, tm))
                : put_column(p, col, ev, stride, n, tm, scratch);
    uint32_t payload = (uint32_t)(p - out - IOLOOM_CHUNK_HEADER_BYTES);
    ioloom_seal_chunk(out, IOLOOM_CHUNK_EVENTS, payload);
    return (size_t)(p - out);
}
