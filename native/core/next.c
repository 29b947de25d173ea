/* Resolving the next definition of an intercepted symbol, and the per-thread reentrancy guard. */
#include <dlfcn.h>
#include <gnu/lib-names.h>

#include "ioloom_core.h"

__thread int ioloom_busy;

/* The C library's definition of `name` (NULL if it has none), found in libc itself: it is loaded before any
 * program runs, and RTLD_NOLOAD never loads it again. */
static void *libc_symbol(const char *name) {
    void *libc = dlopen(LIBC_SO, RTLD_LAZY | RTLD_NOLOAD);
    void *sym = libc ? dlsym(libc, name) : NULL;
    if (libc) dlclose(libc);
    return sym;
}

void *ioloom_next_symbol(const char *name) {
    /* RTLD_NEXT is relative to the object that calls dlsym: this static library is linked into each
     * preloaded ioloom library, so the search starts after that library, whichever it is. dlsym may
     * allocate; the guard keeps any I/O it does from being recorded. */
    ioloom_busy++;
    void *sym = dlsym(RTLD_NEXT, name);
    /* Nothing after us: we were loaded after libc (a library that needs ours preloaded alone brings ours in
     * after it). The C library's own definition, never a library loaded before us, which may be a tool whose
     * next definition is ours (a loop), nor a program's PLT entry. */
    if (!sym) sym = libc_symbol(name);
    ioloom_busy--;
    return sym;
}
