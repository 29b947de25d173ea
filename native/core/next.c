/* Resolving the next definition of an intercepted symbol, and the per-thread reentrancy guard. */
#include <dlfcn.h>

#include "ioloom_core.h"

__thread int ioloom_busy;

/* The object (library or program) that holds the code at `address`; NULL if none does. */
static void *object_of(const void *address) {
    Dl_info info;
    return dladdr(address, &info) ? info.dli_fbase : NULL;
}

void *ioloom_next_symbol(const char *name) {
    /* RTLD_NEXT is relative to the object that calls dlsym: this static library is linked into each
     * preloaded ioloom library, so the search starts after that library, whichever it is. dlsym may
     * allocate; the guard keeps any I/O it does from being recorded. */
    ioloom_busy++;
    void *sym = dlsym(RTLD_NEXT, name);
    if (!sym) {
        /* Nothing after us: we were loaded after the definition the program uses (a library that needs ours
         * preloaded alone, so ours comes after libc). That definition is the first one; never our own. */
        sym = dlsym(RTLD_DEFAULT, name);
        if (sym && object_of(sym) == object_of((const void *)ioloom_next_symbol)) sym = NULL;
    }
    ioloom_busy--;
    return sym;
}
