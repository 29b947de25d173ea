/* ioloom-bench: an IOR-like MPI benchmark of the documents' access patterns.
 *
 * One program, small files with one job each:
 *   options.c   command line (IOR's letters where the meaning is the same)
 *   validate.c  impossible parameters refused before any I/O; ownership.c: never replacing user data
 *   pattern.c   which file and offset each transfer of each rank goes to
 *   fill.c      the byte pattern written and the check of every byte read
 *   backend_*.c POSIX, MPI-IO (independent or collective) and HDF5 behind one small interface
 *   phase.c     one timed open/data/sync/close phase of one repetition
 *   report.c    reduction over ranks and repetitions, JSON and the text table
 *   kernel_*.c  FLASH-IO-like (HDF5), BT-IO-like (3-D subarray view) and RIOT's overhead mode
 */
#ifndef IOLOOM_BENCH_H
#define IOLOOM_BENCH_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#define BENCH_MAX_HINTS 32
#define BENCH_EXIT_USAGE 2  /* bad parameters, refused before any I/O */
#define BENCH_EXIT_VERIFY 3 /* --verify found bytes that differ from the pattern */
#define BENCH_EXIT_IO 4     /* an I/O call failed */

enum bench_api { API_POSIX, API_MPIIO, API_HDF5 };
enum bench_pattern {
    PATTERN_STRIDED,    /* one shared file, segment s holds one block of every rank: (s*N + r)*B (IOR's layout) */
    PATTERN_CONTIGUOUS, /* one shared file, rank r owns one contiguous region of S blocks: (r*S + s)*B */
    PATTERN_FPP,        /* one file per process (IOR -F; Boito's MFWA) */
    PATTERN_NFILES,     /* many small files per process: one file per segment (1-N) */
};
enum bench_kernel { KERNEL_NONE, KERNEL_FLASH, KERNEL_BTIO, KERNEL_RIOT };

struct bench_hint {
    char key[128];
    char value[128];
};

struct bench_options {
    enum bench_api api;
    enum bench_pattern pattern;
    enum bench_kernel kernel;
    int collective;           /* -c: collective MPI-IO/HDF5 data calls */
    uint64_t block_size;      /* -b: bytes each rank writes per segment */
    uint64_t transfer_size;   /* -t: bytes per data call */
    uint64_t segment_count;   /* -s */
    int write, read;          /* -w, -r */
    int fsync;                /* -e: fsync (MPI_File_sync, H5Fflush) before close */
    int random;               /* -z: each rank visits its transfers in a shuffled order (IOR's random offsets) */
    int reorder;              /* -C: read the data of a rank on another (emulated) node */
    int node_offset;          /* -Q: how many nodes away -C reads (IOR's taskPerNodeOffset), default 1 */
    int ranks_per_node;       /* emulated ranks per node, consecutive ranks (default: the real count here) */
    int node_ranks;           /* ranks really on rank 0's node */
    int node_cpus;            /* CPUs those ranks may run on (the union of their affinity masks) */
    int oversubscribed;       /* some node has more ranks than CPUs: their data calls cannot all run at once */
    int ranks_per_node_given; /* --ranks-per-node was given: emulate nodes */
    int emulated_nodes;       /* derived: with -c, aggregators asked for as on this many nodes (0: none) */
    int shift;                /* derived: -C reads rank (r + shift) % N, shift = node_offset * ranks_per_node */
    int repetitions;          /* -i */
    int reads;                /* --reads: read phases per repetition */
    double delay_s;           /* -d: idle seconds before each phase (IOR's interTestDelay) */
    int verbose;              /* -v: the text report also lists every rank's times */
    double wait_ms;           /* --wait: idle time between two data calls (Boito's TMP) */
    int verify;               /* --verify: check every byte read */
    int check;                /* IOR's -R or -W: a read phase with --verify */
    int keep;                 /* -k: keep the files */
    int json;                 /* --json */
    char path[4096];          /* -o: test file name (directory + base name), after --dir is applied */
    char dir[4096];           /* --dir: the directory a relative -o is taken in */
    struct bench_hint hints[BENCH_MAX_HINTS];
    int nhints;
    /* kernels */
    int cells;     /* FLASH: cells per side per process; BT: global grid points per side */
    int variables; /* FLASH checkpoint variables */
    int blocks;    /* FLASH blocks per process */
    int steps;     /* BT: time steps written; RIOT: operations per function */
};

/* Parses argv (every rank gets the same argv, so every rank reaches the same verdict) and checks the
 * target directory on rank 0. Returns 0, or BENCH_EXIT_USAGE after rank 0 printed what to change. */
int bench_parse_options(int argc, char **argv, struct bench_options *o, MPI_Comm comm);
/* Checks what the options mean together and, on rank 0, the file system (validate.c); 0 or BENCH_EXIT_USAGE. */
int bench_validate_options(struct bench_options *o, int nranks, MPI_Comm comm);
/* Rank 0 prints "ioloom-bench: <message>" and that nothing was written; returns BENCH_EXIT_USAGE. */
int bench_refuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int bench_is_root(void);
const char *bench_api_name(enum bench_api api);
const char *bench_pattern_name(enum bench_pattern p);
const char *bench_kernel_name(enum bench_kernel k);

/* Where transfer t of segment s goes for the data of rank `owner`. */
struct bench_place {
    int file_index;  /* which file: 0 for a shared file, else owner (FPP) or owner*S + s (NFILES) */
    uint64_t offset; /* byte offset in that file */
};
struct bench_place bench_place(const struct bench_options *o, int nranks, int owner, uint64_t segment,
                               uint64_t transfer);
/* File name of file `file_index` ("<path>", "<path>.00000003", "<path>.00000003.00000012"). */
void bench_file_name(const struct bench_options *o, int file_index, char *out, size_t outlen);
/* Size every file of the pattern should have after a complete write phase. */
uint64_t bench_file_size(const struct bench_options *o, int nranks);
int bench_file_count(const struct bench_options *o, int nranks);
/* Whether files are shared by all ranks (opened on MPI_COMM_WORLD) or private (MPI_COMM_SELF). */
int bench_shared_file(const struct bench_options *o);

/* The data pattern: each 8-byte word of a file holds its own offset and the rank that wrote it, so a
 * misplaced, stale or corrupted byte is found and its offset told. docs/bench.md defines it. */
void bench_fill(unsigned char *buf, size_t len, uint64_t offset, int writer);
/* Counts the bytes of a buffer read from `name` at `offset` that differ from `owner`'s pattern, and reports
 * the first few (offset, byte read, byte expected) on stderr. */
uint64_t bench_verify(const unsigned char *buf, size_t len, uint64_t offset, int owner, const char *name,
                      uint64_t errors_so_far);

/* A backend opens one file, moves transfers at offsets, syncs and closes. */
struct bench_file;
struct bench_backend {
    const char *name;
    /* Opens `name` on `comm` (collective over comm) for writing or reading. extent: the file size the
     * pattern needs (HDF5 creates its dataset with it). Returns NULL after printing why. */
    struct bench_file *(*open)(const struct bench_options *o, const char *name, MPI_Comm comm, int writing,
                               uint64_t extent);
    int (*transfer)(struct bench_file *f, void *buf, size_t len, uint64_t offset, int writing);
    int (*sync)(struct bench_file *f);
    int (*close)(struct bench_file *f);
    /* The hints in effect after open (MPI_File_get_info), MPI_INFO_NULL for POSIX. Caller frees. */
    MPI_Info (*info)(struct bench_file *f);
};
const struct bench_backend *bench_backend(enum bench_api api);
extern const struct bench_backend bench_posix_backend, bench_mpiio_backend, bench_hdf5_backend;
/* The options' hints as an MPI_Info (MPI_INFO_NULL when there are none). Caller frees. */
MPI_Info bench_hints_info(const struct bench_options *o);

/* Per-rank times of one phase, seconds. */
struct bench_times {
    double start;                /* bench_now() when the phase began, after the common barrier */
    double data_begin, data_end; /* bench_now() at the start of the first data call and the end of the last */
    double open, data, sync, close;
    double wait;  /* idle time asked for with --wait */
    double prep;  /* filling buffers with the pattern and checking them: the benchmark's work, not I/O */
    double total; /* open to close, this rank */
    double end;   /* when its close returned (bench_wallclock); start = end - total */
    uint64_t bytes;
    uint64_t calls;  /* data calls: data / calls is the time per call (RIOT's overhead measure) */
    uint64_t errors; /* bytes that failed --verify */
};
enum bench_phase_kind { PHASE_WRITE, PHASE_READ };
/* Runs one phase (every rank); an I/O call that fails aborts the run (MPI_Abort, exit BENCH_EXIT_IO).
 * *hints_after_open, when given and still MPI_INFO_NULL, receives the first file's hints (caller frees). */
void bench_run_phase(const struct bench_options *o, enum bench_phase_kind kind, MPI_Comm comm,
                     struct bench_times *times, MPI_Info *hints_after_open);
/* Removes the pattern's files (rank 0 for shared ones, each rank its own). */
void bench_remove_files(const struct bench_options *o, MPI_Comm comm);

/* Report: a phase gathered over ranks, printed as JSON or text by rank 0. */
struct bench_report;
struct bench_report *bench_report_new(const struct bench_options *o, MPI_Comm comm);
/* Gathers one rank's times (collective) and records them under `op` for repetition `rep`. */
void bench_report_add(struct bench_report *r, const char *op, int rep, const struct bench_times *t);
void bench_report_hints(struct bench_report *r, MPI_Info info);
void bench_report_param(struct bench_report *r, const char *key, double value);
/* Bytes that failed --verify over the phases added so far, on every rank (collective). */
uint64_t bench_report_errors(struct bench_report *r);
/* Prints (rank 0) and frees. Returns the total verify errors over all phases. */
uint64_t bench_report_finish(struct bench_report *r);

/* Kernels: each runs its phases, adding them to the report; return 0 or an exit code. */
int bench_kernel_flash(const struct bench_options *o, MPI_Comm comm, struct bench_report *r);
int bench_kernel_btio(const struct bench_options *o, MPI_Comm comm, struct bench_report *r);
int bench_kernel_riot(const struct bench_options *o, MPI_Comm comm, struct bench_report *r);
/* Rank 0, before a run that writes: 0 when every file the run would replace is absent, empty or one that
 * ioloom-bench wrote; else it says which and returns BENCH_EXIT_USAGE. */
int bench_check_replaceable(const struct bench_options *o, int nranks);

/* "<path>.<suffix>": the files of the kernels. */
#define BENCH_BTIO_SUFFIX "btio"
#define BENCH_RIOT_SUFFIX "riot"
#define BENCH_FLASH_FILES 3
extern const char *const bench_flash_suffixes[BENCH_FLASH_FILES]; /* checkpoint, plot_cnt, plot_crn */
void bench_kernel_file(const struct bench_options *o, const char *suffix, char *out, size_t outlen);
/* Rank 0 removes a kernel's file when every rank is done with it (collective). */
void bench_kernel_remove(MPI_Comm comm, const char *name);
/* bench_phase_begin, then a timed MPI_File_open with the hints (recorded in the report): zeroes *t and sets t->open.
 * bench_kernel_close syncs (-e, when writing), closes and sets the rest of *t. Both abort the run on failure. */
void bench_kernel_open(const struct bench_options *o, MPI_Comm comm, const char *name, int writing,
                       struct bench_report *r, MPI_File *fh, struct bench_times *t);
void bench_kernel_close(const struct bench_options *o, MPI_File *fh, int writing, struct bench_times *t);

/* Timing helpers shared by phases and kernels. */
double bench_now(void);
/* Wall-clock seconds (CLOCK_REALTIME) from rank 0's second at the start (bench_wallclock_start, collective):
 * one clock for every process of a node, NTP's across nodes. MPI_Wtime's origin differs between processes, so it
 * cannot place ranks' phases against each other; the barrier-relative times cannot either when ranks leave the
 * barrier apart (more ranks than CPUs). */
double bench_wallclock(void);
void bench_wallclock_start(MPI_Comm comm);
/* The start of a phase: -d's idle delay, then the common barrier; returns bench_now() after it. */
double bench_phase_begin(const struct bench_options *o, MPI_Comm comm);
/* One data call ran from `begin` to `end` (bench_now) and moved `bytes`: counted in *t and its data window. */
void bench_count_call(struct bench_times *t, double begin, double end, uint64_t bytes);
/* Whether the files of a run stay after it: -k, or --verify found bytes that differ (kept as evidence, with a
 * note naming `what`). Collective. */
int bench_files_stay(const struct bench_options *o, struct bench_report *r, const char *what);
/* A remark on the run (every rank may call it; rank 0's are printed): in the text report and JSON "notes". */
void bench_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The notes so far and their count. */
const char *bench_note_text(int i);
int bench_note_count(void);
void bench_sleep_ms(double ms);
/* Prints "ioloom-bench: <message>" on stderr with the rank. */
void bench_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* After a failed I/O call (already reported): aborts the whole run with BENCH_EXIT_IO. A failed call leaves no
 * figure to give, and returning instead would leave the other ranks waiting in the next collective call. */
void bench_abort_io(void) __attribute__((noreturn));
/* malloc, or abort the run the same way: a rank without its buffer cannot take part in collective calls. */
void *bench_alloc(size_t bytes);
/* Removes a file of the run; says so when it exists and cannot be removed (a stale file stays behind). */
void bench_unlink(const char *name);

#endif
