/* A waiting MPICH rank gives its core away when UCX's progress finds nothing to do.
 *
 * MPICH's ch4:ucx device waits by calling ucp_worker_progress in a loop and never yields (its
 * MPIR_CVAR_POLLS_BEFORE_YIELD belongs to ch3:nemesis): with more ranks than cores, a rank that has work
 * waits for the spinning ones' time slices to end, and every step of a collective costs a scheduler round.
 * Open MPI yields when oversubscribed (mpi_yield_when_idle); this does the same for MPICH, by sleeping rather
 * than by sched_yield: a sleeping rank leaves the run queue, so the rank with work runs at once, where a
 * yielding one stays runnable and comes back after one slice of each other (docs/ARCHITECTURE.md, "Launching
 * MPI", has both measured). A progress call that completed nothing is followed by the shortest sleep the
 * timer grants; one that did anything returns at once. The program's results are unchanged: only when the
 * waiting rank runs. Preloaded by ioloom into oversubscribed MPICH launches only. */
#include <dlfcn.h>
#include <time.h>

typedef unsigned (*progress_fn)(void *worker);

/* The library's own ucp_worker_progress (libucp), found at the first call: a program calling this has libucp
 * loaded. Two threads racing here store the same pointer. */
static progress_fn real_progress(void) {
    static progress_fn real;
    progress_fn fn = __atomic_load_n(&real, __ATOMIC_RELAXED);
    if (!fn) {
        fn = (progress_fn)dlsym(RTLD_NEXT, "ucp_worker_progress");
        __atomic_store_n(&real, fn, __ATOMIC_RELAXED);
    }
    return fn;
}

__attribute__((visibility("default"))) unsigned ucp_worker_progress(void *worker) {
    unsigned done = real_progress()(worker);
    if (done == 0) {
        struct timespec shortest = {0, 1};
        nanosleep(&shortest, NULL);
    }
    return done;
}
