/* Resolving the next definition of an intercepted symbol, and the per-thread reentrancy guard. */
#include <dlfcn.h>

#include "ioloom_core.h"

__thread int ioloom_busy;

void *ioloom_next_symbol(const char *name) {
    /* RTLD_NEXT is relative to the object that calls dlsym: this static library is linked into each
     * preloaded ioloom library, so the search starts after that library, whichever it is. dlsym may
     * allocate; the guard keeps any I/O it does from being recorded. */
    ioloom_busy++;
    void *sym = dlsym(RTLD_NEXT, name);
    ioloom_busy--;
    return sym;
}
