/* The MPI process: MPI_Init, MPI_Init_thread and MPI_Finalize. After init, the rank and the MPI library's
 * identity; at init and again at finalize, the offset of this process's clock to rank 0's, measured by
 * message exchange, so the reader can align all ranks on one time line and correct drift between the two
 * measurements. These run whatever IOLOOM_LAYERS says: they describe the process, not its I/O. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "mpiio.h"

/* Clock offsets to rank 0. Processes of one node read one kernel clock (CLOCK_MONOTONIC is system-wide),
 * so only one process per node, its leader, measures against rank 0 and passes the result to the others:
 * O(nodes) exchanges, and ranks on rank 0's node get offset 0 exactly. IOLOOM_CLOCK_SYNC=every-rank makes
 * every rank measure (to check the estimator where the true offset is known to be 0). */
#define CLOCK_TAG 7177
#define CLOCK_MIN_ROUNDS 8      /* ping-pongs per measurement, at least ... */
#define CLOCK_MAX_ROUNDS 64     /* ... and at most, until one round trip is fast: */
#define CLOCK_GOOD_RTT_NS 50000 /* a sample this tight bounds the error to 25 us */
#define CLOCK_DONE (-1)

struct clock_sync {
    MPI_Comm leaders; /* one process per node (or every rank), rank 0 first; MPI_COMM_NULL if not a member */
    MPI_Comm node;    /* the processes sharing this node's clock, leader first */
};
static struct clock_sync clock_sync = {MPI_COMM_NULL, MPI_COMM_NULL};

/* A measurement: at local time `at`, rank 0's clock read `at + offset`, within +- error. */
struct clock_sample {
    int64_t at, offset, error;
};

/* Rank 0 answers each leader in turn with its clock reading, until the leader says it is done. */
static void serve_clock(int nleaders) {
    for (int peer = 1; peer < nleaders; peer++)
        for (;;) {
            int64_t message;
            PMPI_Recv(&message, 1, MPI_INT64_T, peer, CLOCK_TAG, clock_sync.leaders, MPI_STATUS_IGNORE);
            if (message == CLOCK_DONE) break;
            message = (int64_t)ioloom_now_ns();
            PMPI_Send(&message, 1, MPI_INT64_T, peer, CLOCK_TAG, clock_sync.leaders);
        }
}

/* A leader: offset = rank 0's reading minus our midpoint, from the round trip with the smallest RTT (delays
 * only ever lengthen one); the error is half that RTT, since rank 0 read its clock somewhere inside it. */
static struct clock_sample ask_clock(void) {
    struct clock_sample best = {0, 0, INT64_MAX};
    for (int round = 0; round < CLOCK_MAX_ROUNDS; round++) {
        if (round >= CLOCK_MIN_ROUNDS && best.error * 2 <= CLOCK_GOOD_RTT_NS) break;
        int64_t sent = (int64_t)ioloom_now_ns(), theirs = 0;
        PMPI_Send(&sent, 1, MPI_INT64_T, 0, CLOCK_TAG, clock_sync.leaders);
        PMPI_Recv(&theirs, 1, MPI_INT64_T, 0, CLOCK_TAG, clock_sync.leaders, MPI_STATUS_IGNORE);
        int64_t rtt = (int64_t)ioloom_now_ns() - sent;
        if (rtt / 2 < best.error) best = (struct clock_sample){sent + rtt / 2, theirs - (sent + rtt / 2), rtt / 2};
    }
    int64_t done = CLOCK_DONE;
    PMPI_Send(&done, 1, MPI_INT64_T, 0, CLOCK_TAG, clock_sync.leaders);
    return best;
}

static void setup_clock_sync(void) {
    int rank = 0, node_rank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (strcmp(ioloom_env_str("IOLOOM_CLOCK_SYNC", "node"), "every-rank") == 0)
        PMPI_Comm_split(MPI_COMM_WORLD, rank, 0, &clock_sync.node); /* a node of one: every rank leads */
    else
        PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &clock_sync.node);
    PMPI_Comm_rank(clock_sync.node, &node_rank);
    PMPI_Comm_split(MPI_COMM_WORLD, node_rank == 0 ? 0 : MPI_UNDEFINED, rank, &clock_sync.leaders);
}

static void measure_clock(int phase) {
    struct clock_sample sample = {(int64_t)ioloom_now_ns(), 0, 0};
    if (clock_sync.leaders != MPI_COMM_NULL) {
        int leader = 0, nleaders = 1;
        PMPI_Comm_rank(clock_sync.leaders, &leader);
        PMPI_Comm_size(clock_sync.leaders, &nleaders);
        if (leader == 0)
            serve_clock(nleaders);
        else
            sample = ask_clock();
    }
    PMPI_Bcast(&sample, 3, MPI_INT64_T, 0, clock_sync.node);
    ioloom_set_clock(phase, (uint64_t)sample.at, sample.offset, sample.error);
}

static void free_clock_sync(void) {
    if (clock_sync.leaders != MPI_COMM_NULL) PMPI_Comm_free(&clock_sync.leaders);
    PMPI_Comm_free(&clock_sync.node);
}

/* Does this line of the library's version text say how the library was built: its configure line or a compiler's
 * flags ("MPICH configure: ...", "MPICH CC: ...", most of MPICH's 2 KB)? */
static int says_how_built(const char *line, size_t len) {
    static const char *const labels[] = {" configure", " CC", " CXX", " F77", " FC"};
    const char *colon = memchr(line, ':', len);
    for (size_t i = 0; colon && i < sizeof labels / sizeof labels[0]; i++) {
        size_t n = strlen(labels[i]);
        if ((size_t)(colon - line) >= n && memcmp(colon - n, labels[i], n) == 0) return 1;
    }
    return 0;
}

/* note.mpi.library: MPI_Get_library_version's text (its version, date, ABI, device), without the lines that say how
 * the library was built: every rank writes it into its stream. */
static void note_library(void) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = "", kept[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int length = 0;
    size_t at = 0;
    PMPI_Get_library_version(version, &length);
    for (const char *line = version; *line;) {
        size_t len = strcspn(line, "\n");
        if (!says_how_built(line, len)) at += (size_t)sprintf(kept + at, "%s%.*s", at ? "\n" : "", (int)len, line);
        line += len + (line[len] == '\n');
    }
    ioloom_note("mpi.library", kept);
    ioloom_note("mpi.impl", IOLOOM_MPI_IMPL);
}

static void record_process_event(enum ioloom_op op, uint64_t t_start, int rc, int64_t aux) {
    struct ioloom_event ev = {.t_start = t_start,
                              .t_end = ioloom_now_ns(),
                              .offset = -1,
                              .req_bytes = -1,
                              .ret_bytes = rc == MPI_SUCCESS ? 0 : -1,
                              .handle = -1,
                              .aux = aux,
                              .coll_seq = -1,
                              .file_id = -1,
                              .err = rc,
                              .op = (uint16_t)op,
                              .layer = IOLOOM_PROCESS};
    ioloom_record(&ev);
}

/* After a successful init: who we are, what MPI this is, where our clock stands. */
static void after_init(void) {
    int rank = 0, nranks = 1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &nranks);
    ioloom_set_rank(rank, nranks);
    note_library();
    setup_clock_sync();
    measure_clock(0);
}

static int traced_MPI_Init(__typeof__(&PMPI_Init) next, int *argc, char ***argv) {
    if (mpiio_depth) return next(argc, argv);
    mpiio_depth++;
    uint64_t t_start = ioloom_now_ns();
    int rc = next(argc, argv);
    int saved_errno = errno; /* our exchanges and notes must not change what the program sees */
    if (rc == MPI_SUCCESS) after_init();
    record_process_event(IOLOOM_OP_MPI_Init, t_start, rc, -1);
    mpiio_depth--;
    errno = saved_errno;
    return rc;
}
MPIIO_BOTH_NAMES(MPI_Init, (int *argc, char ***argv), (argc, argv))

/* aux = the thread support level provided. */
static int traced_MPI_Init_thread(__typeof__(&PMPI_Init_thread) next, int *argc, char ***argv, int required,
                                  int *provided) {
    if (mpiio_depth) return next(argc, argv, required, provided);
    mpiio_depth++;
    uint64_t t_start = ioloom_now_ns();
    int rc = next(argc, argv, required, provided);
    int saved_errno = errno; /* our exchanges and notes must not change what the program sees */
    if (rc == MPI_SUCCESS) after_init();
    if (rc == MPI_SUCCESS && *provided == MPI_THREAD_MULTIPLE) mpiio_pointer_followed = 0;
    record_process_event(IOLOOM_OP_MPI_Init_thread, t_start, rc, rc == MPI_SUCCESS ? *provided : -1);
    mpiio_depth--;
    errno = saved_errno;
    return rc;
}
MPIIO_BOTH_NAMES(MPI_Init_thread, (int *argc, char ***argv, int required, int *provided),
                 (argc, argv, required, provided))

static int traced_MPI_Finalize(__typeof__(&PMPI_Finalize) next) {
    if (mpiio_depth) return next();
    mpiio_depth++;
    if (clock_sync.node != MPI_COMM_NULL) {
        measure_clock(1);
        free_clock_sync();
    }
    uint64_t t_start = ioloom_now_ns();
    int rc = next();
    record_process_event(IOLOOM_OP_MPI_Finalize, t_start, rc, -1);
    mpiio_depth--;
    return rc;
}
/* By hand: MPIIO_BOTH_NAMES cannot pass an empty argument list. */
IOLOOM_EXPORT int MPI_Finalize(void) { return traced_MPI_Finalize(IOLOOM_NEXT(MPI_Finalize)); }
IOLOOM_EXPORT int PMPI_Finalize(void) { return traced_MPI_Finalize(IOLOOM_NEXT(PMPI_Finalize)); }
