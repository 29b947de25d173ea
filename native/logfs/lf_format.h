/* The on-disk format of a logfs container (docs/logfs-format.md is the specification; keep them in step).
 *
 * A logical file is a directory (the container) holding:
 *   ioloom-logfs.meta   text: format version, chunk size, file mode, the container's directory on every backend
 *   log.<group>         data log shared by one writer group (a rank, a node, or K ranks): nothing but the data
 *                       of the writes, back to back in chunks the writer reserved (a 64 KiB write is one
 *                       pwrite of exactly 64 KiB: no header page beside it, see lf_write.c)
 *   records.<group>     record journal of that group: a struct lf_record per regular run of writes (one write,
 *                       or equal writes evenly spaced in the file and the log), appended in batches, so the
 *                       index can be rebuilt after a crash (`ioloom container recover`)
 *   index.<group>       index journal of that group: blocks (struct lf_block + entries) appended at sync points
 * Logs and indexes of a group live in one of the backend directories (spread by hash), so the namespace
 * combines several file systems. All integers are little-endian. */
#ifndef LF_FORMAT_H
#define LF_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#define LF_VERSION 3        /* what new containers are; readers also read LF_VERSION_OLDEST */
#define LF_VERSION_OLDEST 2 /* version 2: a struct lf_record_v2 per write (written into such containers) */
#define LF_META_NAME "ioloom-logfs.meta"
#define LF_RECORD_MAGIC 0x3352464cu    /* "LFR3" */
#define LF_RECORD_MAGIC_V2 0x3252464cu /* "LFR2" */
#define LF_BLOCK_MAGIC 0x3142494cu     /* "LIB1" */
#define LF_DEFAULT_CHUNK (4u << 20)    /* chunks are multiples of LF_PAGE */
#define LF_PAGE 4096u                  /* what chunks are multiples of, not the kernel's page (write_behind asks it) */
#define LF_RECORD_BATCH 42             /* records a writer keeps before appending them (one write of < 4 KiB) */
#define LF_MAX_SIZE (1ull << 62)       /* no logical or physical byte lies at or past it (writes past it: EFBIG) */

/* CREATE and UNLINK exist for packed files (1-N: many small files in one container, told apart by file_id):
 * CREATE marks a file as existing (an empty file is one), UNLINK removes it (its bytes are gone, as by a truncate
 * to 0, and it does not exist until written or created again). */
enum lf_kind { LF_WRITE = 1, LF_TRUNCATE = 2, LF_CREATE = 3, LF_UNLINK = 4 };
#define LF_PACK_NAME ".ioloom-pack" /* the container that holds a directory's packed files */

/* Describes a run of writes (or one truncate, create, unlink) in the group's record journal, so the index can be
 * rebuilt after a crash: `count` writes of `length` bytes, write i at logical offset + i*stride and at
 * physical + i*pstride in the group's log, as an index entry's records (count = 1: one write). A writer grows its
 * last record while its writes continue the run, until the record is appended (a new chunk, a sync point), so
 * a strided or sequential run costs one record per chunk of data, not one per write. Kept out of the data log: a
 * header beside each write cost a partly written page per write (1.4x the kernel time of a 64 KiB write,
 * measured; docs/logfs-format.md). */
struct lf_record {
    uint32_t magic;      /* LF_RECORD_MAGIC */
    uint16_t kind;       /* enum lf_kind */
    uint16_t version;    /* LF_VERSION */
    uint32_t file_id;    /* 1-N packing: which packed file (fnv1a of its name, never 0); 0 in an ordinary container */
    uint32_t header_sum; /* low 32 bits of lf_sum64 of this record with header_sum = 0 */
    uint64_t offset;     /* logical offset of the first write (truncate: the new size) */
    uint64_t length;     /* data bytes per write (truncate, create, unlink: 0) */
    uint64_t count;      /* writes in the run (1 for the other kinds) */
    uint64_t stride;     /* logical distance between writes (>= length when count > 1) */
    uint64_t physical;   /* where the first write's data is in the group's log */
    uint64_t pstride;    /* log distance between writes (>= length when count > 1) */
    uint64_t stamp;      /* the first write's order key, see lf_entry */
    uint64_t stamp_last; /* the last write's */
    uint64_t writer;     /* writer id */
    uint64_t data_sum;   /* sum (mod 2^64) of lf_sum64 of each write's data */
};

/* Version 2's record: one per write (the fields as in struct lf_record, count 1). Written into version-2
 * containers, which stay version 2. */
struct lf_record_v2 {
    uint32_t magic; /* LF_RECORD_MAGIC_V2 */
    uint16_t kind, version;
    uint32_t file_id, header_sum;
    uint64_t offset, length, stamp, writer, data_sum, physical;
};

/* An index entry: `count` records of `length` bytes, record i at logical offset + i*stride and data at
 * physical + i*pstride in the group's log. count = 1 is a plain write; count > 1 is a pattern (a strided or
 * sequential run stored in 80 bytes however long it is). Entries never span a sync point. */
struct lf_entry {
    uint32_t kind; /* enum lf_kind */
    uint32_t file_id;
    uint64_t offset; /* logical offset of the first record (truncate: the new size) */
    uint64_t length; /* bytes per record */
    uint64_t count;
    uint64_t stride;     /* logical distance between records (>= length, so records never overlap) */
    uint64_t physical;   /* offset of the first record's data in the log */
    uint64_t pstride;    /* physical distance between records */
    uint64_t stamp;      /* stamp of the first record: the entry's place in the total order */
    uint64_t stamp_last; /* stamp of the last record */
    uint64_t data_sum;   /* sum (mod 2^64) of the records' data_sum */
};

/* Header of a block of entries in an index journal. */
struct lf_block {
    uint32_t magic; /* LF_BLOCK_MAGIC */
    uint32_t version;
    uint64_t writer;
    uint32_t count;       /* entries that follow */
    uint32_t header_sum;  /* low 32 bits of lf_sum64 of this header with header_sum = 0 */
    uint64_t entries_sum; /* lf_sum64 of the entries */
};

_Static_assert(sizeof(struct lf_record) == 96, "record layout");
_Static_assert(sizeof(struct lf_record_v2) == 64, "version 2 record layout");
_Static_assert(sizeof(struct lf_entry) == 80, "index entry layout");
_Static_assert(sizeof(struct lf_block) == 32, "block header layout");

/* The checksum: 4-lane Fletcher-style sums over little-endian 64-bit words (the tail zero-padded to a
 * 32-byte block). Lane j: a_j = sum w[4i+j], b_j = sum (m-i) w[4i+j] over the m blocks, mod 2^64;
 * result = n ^ sum_j (a_j * (2j+1) + rotl(b_j, 17+j)). Fast enough to run at memory speed and computable
 * with numpy (python/ioloom/logfs/format.py). */
uint64_t lf_sum64(const void *data, size_t n);

/* Why an index entry is invalid (docs/logfs-format.md, "Valid entries"), or NULL when it is valid: one word,
 * the field at fault ("kind", "count", "length", "stride", "pstride", "offset", "physical"). Readers refuse an
 * index holding an invalid entry, so no entry can divide by zero, overflow, or expand to more records in a window
 * than the window has bytes. tests/vectors/logfs/entries.json holds the cases, for C and Python. */
const char *lf_entry_problem(const struct lf_entry *e);

/* Order of two entries (or records) in the total order: by stamp, then by writer id. */
static inline int lf_key_less(uint64_t stamp_a, uint64_t writer_a, uint64_t stamp_b, uint64_t writer_b) {
    return stamp_a < stamp_b || (stamp_a == stamp_b && writer_a < writer_b);
}

#endif
