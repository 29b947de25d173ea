/* libioloom-async's events in ioloom's trace (docs/async.md "Traced"): when libioloom-trace.so is loaded and its
 * async layer is on, each client call and each store of a block on the writer side is an event of layer async
 * (ioloom_ops.h's IOLOOM_ASYNC_OPS). A store's parent is the call_id of the client call that gave its block. */
#ifndef IOLOOM_ASYNC_TRACE_H
#define IOLOOM_ASYNC_TRACE_H

#include <stddef.h>
#include <stdint.h>

/* The slot of an end of iteration's key, above every variable's (a configuration has fewer variables). */
#define ASYNC_TRACE_END_SLOT 4095
/* A client call that started at `start` (async_now) and succeeded: `slot` is its variable, ASYNC_TRACE_END_SLOT
 * (end of iteration: tied to the writer side's), or -1 (signal: not tied); `iteration` the client's iteration it
 * belongs to. */
void async_trace_call(int op, double start, int64_t iteration, int slot, size_t nbytes);
/* The writer side's store of block `block` (the client) of `variable` at `iteration`: _begin makes its key the
 * tracer's current call on this thread, so that the writer's own POSIX calls during the store have it as parent,
 * and returns the call it replaced; async_trace_store (started at `start`) records the store and restores it. */
int64_t async_trace_store_begin(int block, int64_t iteration, int variable);
void async_trace_store(double start, int64_t replaced, int block, int64_t iteration, int variable, size_t nbytes);
/* A collective store's iteration (started at `start`): one store per piece, each over the whole collective write;
 * the MPI-IO calls under it are not any one store's children. */
struct async_piece;
void async_trace_stores(double start, const struct async_piece *pieces, int n, int64_t iteration);
/* The writer side is done with `block`'s (the client's) iteration, from `start`: its blocks written, and made
 * durable (writer.fsync) or written together (hdf5-shared) by then. Its parent is the client's end of iteration. */
void async_trace_writer_iteration(double start, int block, int64_t iteration);
/* A plugin ran from `start` on the writer side, for `block` (-1: a node-scope plugin, for all the server's
 * clients) at `iteration`, with `nbytes` of blocks. */
void async_trace_plugin(double start, int block, int64_t iteration, size_t nbytes);

#endif
