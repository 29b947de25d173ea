/* A test-only fault for libioloom-async's HDF5 stores (tests/test_async_writers.py), preloaded into an MPICH job:
 * on the rank $HDF5_FAULT_RANK (PMI_RANK, which MPICH's launcher sets), the $HDF5_FAULT_CALL'th call of H5Dcreate2
 * (1 the first; "N+": that one and every later one) fails as HDF5 reports a failure, H5I_INVALID_HID, without
 * creating anything. Every other call is HDF5's. Nothing else makes one server's creation fail on purpose.
 * Threads may create datasets at once: the count is atomic, so each call has a number of its own. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <hdf5.h>

typedef hid_t create_fn(hid_t, const char *, hid_t, hid_t, hid_t, hid_t, hid_t);

/* Whether this call (counted from 1) is one that fails. */
static int fails(long call) {
    const char *rank = getenv("PMI_RANK"), *wanted = getenv("HDF5_FAULT_RANK"), *at = getenv("HDF5_FAULT_CALL");
    if (!rank || !wanted || !at || strcmp(rank, wanted) != 0) return 0;
    char *end;
    long first = strtol(at, &end, 10);
    return *end == '+' ? call >= first : call == first;
}

hid_t H5Dcreate2(hid_t loc, const char *name, hid_t type, hid_t space, hid_t lcpl, hid_t dcpl, hid_t dapl) {
    static long calls;
    if (fails(__atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED))) return H5I_INVALID_HID;
    return ((create_fn *)dlsym(RTLD_NEXT, "H5Dcreate2"))(loc, name, type, space, lcpl, dcpl, dapl);
}
