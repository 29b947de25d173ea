/* A waiting MPI rank gives its core away when its MPI's progress call finds nothing to do.
 *
 * MPICH's ch4:ucx device waits by calling ucp_worker_progress in a loop and never yields (its
 * MPIR_CVAR_POLLS_BEFORE_YIELD belongs to ch3:nemesis): with more ranks than cores, a rank that has work
 * waits for the spinning ones' time slices to end, and every step of a collective costs a scheduler round; on a
 * loaded machine ranks that fit the cores wait for the other programs' slices the same way. Open MPI yields
 * when oversubscribed (mpi_yield_when_idle, a sched_yield after an opal_progress that found nothing). This
 * library sleeps instead, after either progress call that completed nothing: a sleeping rank leaves the run
 * queue, so the rank with work runs at once, where a yielding one stays runnable and comes back after one slice
 * of each other (docs/ARCHITECTURE.md, "Launching MPI", has both measured). The sleep is the shortest the timer
 * grants; a call that did anything returns at once. The program's results are unchanged: only when the waiting
 * rank runs. Preloaded by ioloom into every MPICH launch and into oversubscribed Open MPI launches
 * (python/ioloom/mpi.py, MpiImpl.idle_yield). */
#include <dlfcn.h>
#include <time.h>

typedef unsigned (*progress_fn)(void *worker);

/* The next definition of `name` (the MPI library's own), found at the first call and kept in `slot`: a program
 * calling it has its library loaded. Two threads racing here store the same pointer. */
static void *next_definition(void **slot, const char *name) {
    void *fn = __atomic_load_n(slot, __ATOMIC_RELAXED);
    if (!fn) {
        fn = dlsym(RTLD_NEXT, name);
        __atomic_store_n(slot, fn, __ATOMIC_RELAXED);
    }
    return fn;
}

/* ucp_worker_progress of libucp. */
static progress_fn real_progress(void) {
    static void *real;
    return (progress_fn)next_definition(&real, "ucp_worker_progress");
}

/* The shortest sleep the timer grants: the caller leaves the run queue until then. */
static void doze(void) {
    struct timespec shortest = {0, 1};
    nanosleep(&shortest, NULL);
}

__attribute__((visibility("default"))) unsigned ucp_worker_progress(void *worker) {
    unsigned done = real_progress()(worker);
    if (done == 0) doze();
    return done;
}

typedef int (*opal_progress_fn)(void);

/* Open MPI's progress engine (libopen-pal), which its waits call through the PLT. */
static opal_progress_fn real_opal_progress(void) {
    static void *real;
    return (opal_progress_fn)next_definition(&real, "opal_progress");
}

/* Open MPI yields when oversubscribed (sched_yield), which leaves a waiting rank runnable: it sleeps instead. */
__attribute__((visibility("default"))) int opal_progress(void) {
    int done = real_opal_progress()();
    if (done <= 0) doze();
    return done;
}
