/* The shared interposition core: what every preloaded ioloom library needs, and nothing else.
 *
 *  - IOLOOM_NEXT(fn): the next definition of a symbol after ours (dlsym RTLD_NEXT), resolved once and
 *    cached, so that ioloom stacks with other preload and PMPI tools instead of calling libc directly.
 *  - A per-thread reentrancy guard: calls made while ioloom is already working on this thread (its own
 *    I/O, or libc calling back into an intercepted symbol) pass straight through.
 *  - A monotonic nanosecond clock.
 *  - Configuration read from the environment once, and path normalisation.
 */
#ifndef IOLOOM_CORE_H
#define IOLOOM_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define IOLOOM_EXPORT __attribute__((visibility("default")))
#define IOLOOM_LIKELY(x) __builtin_expect(!!(x), 1)
#define IOLOOM_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* The next definition of `name` in lookup order after the calling library; libc's own when nothing comes after
 * it (the calling library was loaded after libc); NULL if neither has one. Never returns our own definition. */
void *ioloom_next_symbol(const char *name);

/* `IOLOOM_NEXT(pwrite)(fd, buf, n, off)`: the cached next pwrite. The cache is a static per call site,
 * filled on first use; a race fills it twice with the same value, which is harmless. */
#define IOLOOM_NEXT(fn)                                                                                      \
    (*({                                                                                                     \
        static __typeof__(&fn) ioloom_next_##fn;                                                             \
        if (IOLOOM_UNLIKELY(!ioloom_next_##fn)) ioloom_next_##fn = (__typeof__(&fn))ioloom_next_symbol(#fn); \
        &ioloom_next_##fn;                                                                                   \
    }))

/* Reentrancy guard. ioloom_enter() returns 1 if the caller may do its work (and must then call
 * ioloom_leave()), 0 if ioloom is already active on this thread and the call must pass through. */
extern __thread int ioloom_busy;
static inline int ioloom_enter(void) { return ioloom_busy++ == 0; }
static inline void ioloom_leave(void) { ioloom_busy--; }

/* Monotonic time in nanoseconds (CLOCK_MONOTONIC, vDSO: no system call). */
static inline uint64_t ioloom_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Environment configuration. Each returns `fallback` when the variable is unset or malformed. */
const char *ioloom_env_str(const char *name, const char *fallback);
int ioloom_env_bool(const char *name, int fallback);           /* 1/0, yes/no, true/false, on/off */
size_t ioloom_env_size(const char *name, size_t fallback);     /* bytes, with optional K/M/G suffix (1024) */
uint64_t ioloom_env_uint(const char *name, uint64_t fallback); /* a plain decimal number, no suffix */

/* Lexically removes "//", "/./" and "dir/.." from an absolute path, in place ("/" if nothing is left). */
void ioloom_normalise_path(char *path);
/* The file an MPI-IO file name names: ROMIO and OMPIO accept a file-system prefix ("ufs:/scratch/f",
 * "lustre:f"), a word of two or more lowercase letters, digits or '_' before the first ':', followed by the
 * file's name. Returns what follows the prefix, or name itself when it has none. One rule for every place that
 * names an MPI-IO file (the file table, the hints note). */
const char *ioloom_romio_path(const char *name);

/* Calls `fn(item, len, arg)` for each element of a `sep`-separated list, skipping empty ones. */
void ioloom_for_each_item(const char *list, char sep, void (*fn)(const char *item, size_t len, void *arg), void *arg);

/* Whether this process's executable is named in IOLOOM_SKIP_PROGRAMS (comma-separated names; `ioloom run` lists
 * the MPI launchers and daemons, which carry LD_PRELOAD to the ranks but whose own I/O is not the program's):
 * then neither the tracer records nor the coordination client coordinates it. */
int ioloom_program_skipped(void);

#endif
