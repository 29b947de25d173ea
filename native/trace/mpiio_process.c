/* The MPI process: MPI_Init, MPI_Init_thread and MPI_Finalize. After init, the rank and the MPI library's
 * identity; at init and again at finalize, the offset of this process's clock to rank 0's, measured by
 * message exchange, so the reader can align all ranks on one time line and correct drift between the two
 * measurements. These run whatever IOLOOM_LAYERS says: they describe the process, not its I/O. */
#include <stdio.h>

#include "mpiio.h"

/* Ping-pongs per rank and measurement: the minimum-RTT sample of a few is close to the true one, because
 * delays only ever add to an RTT. */
#define CLOCK_ROUNDS 10
#define CLOCK_TAG 7177

/* Our own communicator, so the exchange can never match one of the program's messages. */
static MPI_Comm clock_comm = MPI_COMM_NULL;

/* Rank 0 answers each other rank in turn with its clock reading. */
static void serve_clock(int nranks) {
    for (int peer = 1; peer < nranks; peer++)
        for (int round = 0; round < CLOCK_ROUNDS; round++) {
            uint64_t now;
            PMPI_Recv(&now, 1, MPI_UINT64_T, peer, CLOCK_TAG, clock_comm, MPI_STATUS_IGNORE);
            now = ioloom_now_ns();
            PMPI_Send(&now, 1, MPI_UINT64_T, peer, CLOCK_TAG, clock_comm);
        }
}

/* Another rank: offset = rank 0's reading minus our midpoint, from the round with the smallest RTT; the
 * error is half that RTT (rank 0 read its clock somewhere inside it). */
static void ask_clock(int phase) {
    int64_t best_rtt = INT64_MAX, offset = 0;
    uint64_t at = 0;
    for (int round = 0; round < CLOCK_ROUNDS; round++) {
        uint64_t sent = ioloom_now_ns(), theirs = 0;
        PMPI_Send(&sent, 1, MPI_UINT64_T, 0, CLOCK_TAG, clock_comm);
        PMPI_Recv(&theirs, 1, MPI_UINT64_T, 0, CLOCK_TAG, clock_comm, MPI_STATUS_IGNORE);
        uint64_t received = ioloom_now_ns();
        int64_t rtt = (int64_t)(received - sent);
        if (rtt < best_rtt) {
            best_rtt = rtt;
            at = sent + (uint64_t)rtt / 2;
            offset = (int64_t)(theirs - at);
        }
    }
    ioloom_set_clock(phase, at, offset, best_rtt / 2);
}

static void measure_clock(int phase) {
    int rank = 0, nranks = 1;
    PMPI_Comm_rank(clock_comm, &rank);
    PMPI_Comm_size(clock_comm, &nranks);
    if (rank == 0) {
        ioloom_set_clock(phase, ioloom_now_ns(), 0, 0);
        serve_clock(nranks);
    } else {
        ask_clock(phase);
    }
}

static void note_library(void) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int length = 0;
    PMPI_Get_library_version(version, &length);
    ioloom_note("mpi.library", version);
    ioloom_note("mpi.impl", IOLOOM_MPI_IMPL);
}

static void record_process_event(enum ioloom_op op, uint64_t t_start, int rc, int64_t aux) {
    struct ioloom_event ev = {.t_start = t_start, .t_end = ioloom_now_ns(), .offset = -1, .req_bytes = -1,
                              .ret_bytes = rc == MPI_SUCCESS ? 0 : -1, .handle = -1, .aux = aux,
                              .coll_seq = -1, .file_id = -1, .err = rc, .op = (uint16_t)op,
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
    if (PMPI_Comm_dup(MPI_COMM_WORLD, &clock_comm) == MPI_SUCCESS)
        measure_clock(0);
}

static int traced_MPI_Init(__typeof__(&PMPI_Init) next, int *argc, char ***argv) {
    if (mpiio_depth)
        return next(argc, argv);
    mpiio_depth++;
    uint64_t t_start = ioloom_now_ns();
    int rc = next(argc, argv);
    if (rc == MPI_SUCCESS)
        after_init();
    record_process_event(IOLOOM_OP_MPI_Init, t_start, rc, -1);
    mpiio_depth--;
    return rc;
}
MPIIO_BOTH_NAMES(MPI_Init, (int *argc, char ***argv), (argc, argv))

/* aux = the thread support level provided. */
static int traced_MPI_Init_thread(__typeof__(&PMPI_Init_thread) next, int *argc, char ***argv, int required,
                                  int *provided) {
    if (mpiio_depth)
        return next(argc, argv, required, provided);
    mpiio_depth++;
    uint64_t t_start = ioloom_now_ns();
    int rc = next(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        after_init();
    record_process_event(IOLOOM_OP_MPI_Init_thread, t_start, rc, rc == MPI_SUCCESS ? *provided : -1);
    mpiio_depth--;
    return rc;
}
MPIIO_BOTH_NAMES(MPI_Init_thread, (int *argc, char ***argv, int required, int *provided),
                 (argc, argv, required, provided))

static int traced_MPI_Finalize(__typeof__(&PMPI_Finalize) next) {
    if (mpiio_depth)
        return next();
    mpiio_depth++;
    if (clock_comm != MPI_COMM_NULL) {
        measure_clock(1);
        PMPI_Comm_free(&clock_comm);
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
