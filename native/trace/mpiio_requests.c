/* Pending non-blocking MPI-IO requests: MPI_Request -> what the completion event needs. A request handle
 * is a pointer in Open MPI and an int in MPICH; either fits the 64-bit key. */
#include <string.h>

#include "mpiio.h"
#include "key_table.h"

#define MPIIO_MAX_REQUESTS 4096 /* in flight at once per process; beyond it completions are counted lost */

static struct mpiio_pending pendings[MPIIO_MAX_REQUESTS];
static struct key_table request_slots = KEY_TABLE(MPIIO_MAX_REQUESTS);
static uint64_t requests_lost;

static uint64_t request_key(MPI_Request request) {
    uint64_t key = 0;
    memcpy(&key, &request, sizeof request < sizeof key ? sizeof request : sizeof key);
    return key;
}

void mpiio_request_add(MPI_Request request, const struct mpiio_pending *pending) {
    long slot = key_table_reserve(&request_slots, request_key(request));
    if (slot < 0) {
        /* Say so in the trace (once per thousand, not once per request) rather than block the program. */
        if (__atomic_add_fetch(&requests_lost, 1, __ATOMIC_RELAXED) % 1000 == 1)
            ioloom_note("mpiio.requests_untracked",
                        "completions of some non-blocking MPI-IO requests not recorded: more than 4096 in flight");
        return;
    }
    pendings[slot] = *pending;
    key_table_publish(&request_slots, slot);
}

static long pending_slot(MPI_Request request, struct mpiio_pending *pending) {
    long slot = key_table_find(&request_slots, request_key(request));
    if (slot >= 0) *pending = pendings[slot];
    return slot;
}

int mpiio_request_peek(MPI_Request request, struct mpiio_pending *pending) {
    return pending_slot(request, pending) >= 0;
}

int mpiio_request_take(MPI_Request request, struct mpiio_pending *pending) {
    long slot = pending_slot(request, pending);
    if (slot < 0) return 0;
    key_table_remove(&request_slots, slot);
    return 1;
}

int mpiio_requests_pending(void) { return __atomic_load_n(&request_slots.used, __ATOMIC_RELAXED) != 0; }
