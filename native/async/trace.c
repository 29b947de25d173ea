/* libioloom-async's events in ioloom's trace (async_trace.h). libioloom-async does not link the tracer: the
 * tracer's ioloom_append_row and ioloom_layer_enabled are looked up once with dlsym, and without them (no tracer
 * loaded, or IOLOOM_LAYERS without async) every call here returns at once. During a store, the tracer's link
 * (ioloom_trace.h, "cross-layer link") names the store's key as the current call, as an MPI-IO wrapper names its
 * own: the writer's POSIX calls are then its children. A client call's call_id and its
 * store's parent are the same key, computed on each side from (client, iteration, variable): no message carries
 * it, and it is unique in the job. A client's end of iteration and the writer side's have the key of the slot
 * after the variables'. */
#include <assert.h>
#include <dlfcn.h>
#include <pthread.h>
#include "async_internal.h"
#include "async_trace.h"
#include "ioloom_ops.h"
#include "ioloom_trace.h"

#define SLOT_BITS 12      /* variables per configuration: below 2^12 - 1 (ASYNC_TRACE_END_SLOT is the last) */
#define CLIENT_BITS 20    /* clients: below 2^20 */
#define ITERATION_BITS 30 /* iterations: modulo 2^30 */

static void (*append_row)(const struct ioloom_raw_event *);
static __thread struct ioloom_link *thread_link; /* the tracer's link of this thread (a TLS symbol: per thread) */
static pthread_once_t looked_up = PTHREAD_ONCE_INIT;

static void look_up(void) {
    int (*layer_enabled)(enum ioloom_layer) = (int (*)(enum ioloom_layer))dlsym(RTLD_DEFAULT, "ioloom_layer_enabled");
    void (*append)(const struct ioloom_raw_event *) =
        (void (*)(const struct ioloom_raw_event *))dlsym(RTLD_DEFAULT, "ioloom_append_row");
    if (layer_enabled && append && layer_enabled(IOLOOM_ASYNC)) append_row = append;
}

static int tracing(void) {
    pthread_once(&looked_up, look_up);
    return append_row != NULL;
}

/* Above the tracer's own call ids (bit 62 set), the same on the client's and the writer's side. */
static int64_t key(int client, int64_t iteration, int slot) {
    assert(slot >= 0 && slot < 1 << SLOT_BITS && client >= 0 && client < 1 << CLIENT_BITS);
    int64_t it = iteration & ((INT64_C(1) << ITERATION_BITS) - 1);
    return INT64_C(1) << 62 | it << (SLOT_BITS + CLIENT_BITS) | (int64_t)client << SLOT_BITS | slot;
}

/* handle: the client (its rank among clients), aux: the iteration. */
static void record(int op, double start, int client, int64_t iteration, size_t nbytes, int64_t call_id,
                   int64_t parent) {
    struct ioloom_raw_event row = {.t_start = (uint64_t)(start * 1e9),
                                   .t_end = (uint64_t)(async_now() * 1e9),
                                   .offset = -1,
                                   .req_bytes = (int64_t)nbytes,
                                   .ret_bytes = (int64_t)nbytes,
                                   .handle = client,
                                   .aux = iteration,
                                   .coll_seq = -1,
                                   .call_id = call_id,
                                   .parent = parent,
                                   .file_id = -1,
                                   .op = (uint16_t)op,
                                   .layer = IOLOOM_ASYNC};
    append_row(&row);
}

void async_trace_call(int op, double start, int64_t iteration, int slot, size_t nbytes) {
    if (!tracing()) return;
    int client = async_g.client_rank;
    record(op, start, client, iteration, nbytes, slot < 0 ? -1 : key(client, iteration, slot), -1);
}

static struct ioloom_link *link_of_thread(void) {
    if (!thread_link) thread_link = (struct ioloom_link *)dlsym(RTLD_DEFAULT, "ioloom_link");
    return thread_link;
}

int64_t async_trace_store_begin(int block, int64_t iteration, int variable) {
    if (!tracing() || !link_of_thread()) return -1;
    int64_t replaced = thread_link->current;
    thread_link->current = key(block, iteration, variable);
    return replaced;
}

void async_trace_stores(double start, const struct async_piece *pieces, int n, int64_t iteration) {
    if (!tracing()) return;
    for (int k = 0; k < n; k++)
        record(IOLOOM_OP_ASYNC_STORE, start, pieces[k].block, iteration, async_layout_of(pieces[k].variable)->bytes, -1,
               key(pieces[k].block, iteration, pieces[k].variable));
}

void async_trace_writer_iteration(double start, int block, int64_t iteration) {
    if (tracing())
        record(IOLOOM_OP_ASYNC_WRITER_ITERATION, start, block, iteration, 0, -1,
               key(block, iteration, ASYNC_TRACE_END_SLOT));
}

void async_trace_plugin(double start, int block, int64_t iteration, size_t nbytes) {
    if (tracing()) record(IOLOOM_OP_ASYNC_PLUGIN, start, block, iteration, nbytes, -1, -1);
}

void async_trace_store(double start, int64_t replaced, int block, int64_t iteration, int variable, size_t nbytes) {
    if (!tracing()) return;
    record(IOLOOM_OP_ASYNC_STORE, start, block, iteration, nbytes, -1, key(block, iteration, variable));
    if (link_of_thread()) thread_link->current = replaced;
}
