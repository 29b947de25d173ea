/* MPI_Wait, MPI_Waitall, MPI_Waitany, MPI_Waitsome, MPI_Test, MPI_Testall, MPI_Testany, MPI_Testsome: when
 * they complete a non-blocking MPI-IO request, record a completion event with the status's bytes (see
 * mpiio.h). They are called for every kind of request, very often in communication-heavy programs, so when
 * no MPI-IO request is in flight they cost one load and a call through. */
#include <stdlib.h>

#include "mpiio.h"

/* One completing call in progress: copies of its request handles (MPI sets completed ones to
 * MPI_REQUEST_NULL), statuses of our own when the caller ignores them, and its cross-layer window, which
 * the first completion recorded takes over; any further completions get their own. */
struct completion {
    struct mpiio_call call;
    int recorded;
    int count;
    MPI_Request *saved;
    MPI_Status *statuses;
    MPI_Request small_saved[8];
    MPI_Status small_statuses[8];
};

static int any_file_request(int count, const MPI_Request *requests) {
    struct mpiio_pending ignored;
    for (int i = 0; i < count; i++)
        if (requests[i] != MPI_REQUEST_NULL && mpiio_request_peek(requests[i], &ignored)) return 1;
    return 0;
}

/* 0: no MPI-IO request among them, call through untraced. 1: traced; completion_end() must follow. */
static int completion_begin(struct completion *c, enum ioloom_op op, int count, const MPI_Request *requests) {
    if (IOLOOM_LIKELY(!mpiio_requests_pending()) || count <= 0 || !any_file_request(count, requests)) return 0;
    if (!mpiio_enter()) return 0;
    c->count = count;
    c->recorded = 0;
    c->saved = count <= 8 ? c->small_saved : malloc(sizeof *c->saved * (size_t)count);
    c->statuses = count <= 8 ? c->small_statuses : malloc(sizeof *c->statuses * (size_t)count);
    if (!c->saved || !c->statuses) {
        if (c->saved != c->small_saved) free(c->saved);
        if (c->statuses != c->small_statuses) free(c->statuses);
        mpiio_leave();
        return 0;
    }
    for (int i = 0; i < count; i++) c->saved[i] = requests[i];
    mpiio_call_start(&c->call, op, NULL);
    return 1;
}

/* The statuses array to pass down: the caller's, or ours when it passed MPI_STATUSES_IGNORE. */
static MPI_Status *completion_statuses(struct completion *c, MPI_Status *user) {
    return user == MPI_STATUSES_IGNORE ? c->statuses : user;
}

static void completion_record(struct completion *c, int index, const MPI_Status *status) {
    struct mpiio_pending pending;
    if (index < 0 || index >= c->count || !mpiio_request_take(c->saved[index], &pending)) return;
    if (c->recorded++ == 0) {
        mpiio_complete(&c->call, &pending, status);
        return;
    }
    struct mpiio_call more;
    mpiio_call_start(&more, (enum ioloom_op)c->call.row.op, NULL);
    more.row.t_start = c->call.row.t_start;
    mpiio_complete(&more, &pending, status);
}

static void completion_end(struct completion *c) {
    if (!c->recorded) mpiio_call_drop(&c->call); /* completed nothing of ours (a test that found nothing ready) */
    if (c->saved != c->small_saved) free(c->saved);
    if (c->statuses != c->small_statuses) free(c->statuses);
    mpiio_leave();
}

static int traced_MPI_Wait(__typeof__(&PMPI_Wait) next, MPI_Request *request, MPI_Status *status) {
    struct completion c;
    if (!completion_begin(&c, IOLOOM_OP_MPI_Wait, 1, request)) return next(request, status);
    status = mpiio_status(status, c.statuses);
    int rc = next(request, status);
    if (rc == MPI_SUCCESS) completion_record(&c, 0, status);
    completion_end(&c);
    return rc;
}
MPIIO_BOTH_NAMES(MPI_Wait, (MPI_Request * request, MPI_Status *status), (request, status))

static int traced_MPI_Test(__typeof__(&PMPI_Test) next, MPI_Request *request, int *flag, MPI_Status *status) {
    struct completion c;
    if (!completion_begin(&c, IOLOOM_OP_MPI_Test, 1, request)) return next(request, flag, status);
    status = mpiio_status(status, c.statuses);
    int rc = next(request, flag, status);
    if (rc == MPI_SUCCESS && *flag) completion_record(&c, 0, status);
    completion_end(&c);
    return rc;
}
MPIIO_BOTH_NAMES(MPI_Test, (MPI_Request * request, int *flag, MPI_Status *status), (request, flag, status))

static void record_all(struct completion *c, const MPI_Status *statuses) {
    for (int i = 0; i < c->count; i++) completion_record(c, i, &statuses[i]);
}

static int traced_MPI_Waitall(__typeof__(&PMPI_Waitall) next, int count, MPI_Request requests[],
                              MPI_Status statuses[]) {
    struct completion c;
    if (!completion_begin(&c, IOLOOM_OP_MPI_Waitall, count, requests)) return next(count, requests, statuses);
    statuses = completion_statuses(&c, statuses);
    int rc = next(count, requests, statuses);
    if (rc == MPI_SUCCESS) record_all(&c, statuses);
    completion_end(&c);
    return rc;
}
MPIIO_BOTH_NAMES(MPI_Waitall, (int count, MPI_Request requests[], MPI_Status statuses[]), (count, requests, statuses))

static int traced_MPI_Testall(__typeof__(&PMPI_Testall) next, int count, MPI_Request requests[], int *flag,
                              MPI_Status statuses[]) {
    struct completion c;
    if (!completion_begin(&c, IOLOOM_OP_MPI_Testall, count, requests)) return next(count, requests, flag, statuses);
    statuses = completion_statuses(&c, statuses);
    int rc = next(count, requests, flag, statuses);
    if (rc == MPI_SUCCESS && *flag) record_all(&c, statuses);
    completion_end(&c);
    return rc;
}
MPIIO_BOTH_NAMES(MPI_Testall, (int count, MPI_Request requests[], int *flag, MPI_Status statuses[]),
                 (count, requests, flag, statuses))

static int traced_MPI_Waitany(__typeof__(&PMPI_Waitany) next, int count, MPI_Request requests[], int *index,
                              MPI_Status *status) {
    struct completion c;
    if (!completion_begin(&c, IOLOOM_OP_MPI_Waitany, count, requests)) return next(count, requests, index, status);
    status = mpiio_status(status, c.statuses);
    int rc = next(count, requests, index, status);
    if (rc == MPI_SUCCESS && *index != MPI_UNDEFINED) completion_record(&c, *index, status);
    completion_end(&c);
    return rc;
}
MPIIO_BOTH_NAMES(MPI_Waitany, (int count, MPI_Request requests[], int *index, MPI_Status *status),
                 (count, requests, index, status))

static int traced_MPI_Testany(__typeof__(&PMPI_Testany) next, int count, MPI_Request requests[], int *index, int *flag,
                              MPI_Status *status) {
    struct completion c;
    if (!completion_begin(&c, IOLOOM_OP_MPI_Testany, count, requests))
        return next(count, requests, index, flag, status);
    status = mpiio_status(status, c.statuses);
    int rc = next(count, requests, index, flag, status);
    if (rc == MPI_SUCCESS && *flag && *index != MPI_UNDEFINED) completion_record(&c, *index, status);
    completion_end(&c);
    return rc;
}
MPIIO_BOTH_NAMES(MPI_Testany, (int count, MPI_Request requests[], int *index, int *flag, MPI_Status *status),
                 (count, requests, index, flag, status))

static void record_some(struct completion *c, int outcount, const int indices[], const MPI_Status statuses[]) {
    for (int i = 0; i < outcount; i++) completion_record(c, indices[i], &statuses[i]);
}

/* MPI_Waitsome and MPI_Testsome have one signature and one meaning of their results. */
#define MPIIO_SOME(NAME)                                                                                               \
    static int traced_##NAME(__typeof__(&P##NAME) next, int incount, MPI_Request requests[], int *outcount,            \
                             int indices[], MPI_Status statuses[]) {                                                   \
        struct completion c;                                                                                           \
        if (!completion_begin(&c, IOLOOM_OP_##NAME, incount, requests))                                                \
            return next(incount, requests, outcount, indices, statuses);                                               \
        statuses = completion_statuses(&c, statuses);                                                                  \
        int rc = next(incount, requests, outcount, indices, statuses);                                                 \
        if (rc == MPI_SUCCESS && *outcount != MPI_UNDEFINED) record_some(&c, *outcount, indices, statuses);            \
        completion_end(&c);                                                                                            \
        return rc;                                                                                                     \
    }                                                                                                                  \
    MPIIO_BOTH_NAMES(NAME, (int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[]), \
                     (incount, requests, outcount, indices, statuses))

MPIIO_SOME(MPI_Waitsome)
MPIIO_SOME(MPI_Testsome)

/* A freed MPI-IO request completes unobserved: forget it, so that its handle, once reused, is not taken for it. */
static int traced_MPI_Request_free(__typeof__(&PMPI_Request_free) next, MPI_Request *request) {
    struct mpiio_pending forgotten;
    if (IOLOOM_UNLIKELY(mpiio_requests_pending()) && *request != MPI_REQUEST_NULL)
        mpiio_request_take(*request, &forgotten);
    return next(request);
}
MPIIO_BOTH_NAMES(MPI_Request_free, (MPI_Request * request), (request))
