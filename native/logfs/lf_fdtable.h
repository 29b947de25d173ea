/* The preloaded library's table from real descriptors to open containers (lf_fdtable.c).
 *
 * Opening a container reserves a real descriptor (the container directory, opened read-only), so descriptor
 * numbers stay unique, dup/fork/exec behave, and a descriptor that leaks to a program without the layer fails
 * loudly (EISDIR) instead of writing somewhere else. Descriptors that dup() shares one open description: one
 * handle, one offset, one set of status flags, as in POSIX. */
#ifndef LF_FDTABLE_H
#define LF_FDTABLE_H

#include <pthread.h>

#include "lf_internal.h"

struct lf_ofd {
    lf_file *file;
    pthread_mutex_t lock; /* guards pos and status */
    uint64_t pos;
    int status;    /* O_APPEND and the other F_SETFL flags */
    int refs;      /* descriptors that refer to it */
    int lock_fd;   /* the container's lock file, for fcntl record locks; -1 until used */
    int hidden_fd; /* on a container hidden at an unlink: this process's shared flock of it (lf_fdtable.c); or -1 */
};

#define LF_MAX_FDS 65536

extern struct lf_ofd *lf_fds[LF_MAX_FDS];

/* The open container behind fd, or NULL: the pass-through test every descriptor call makes. */
static inline struct lf_ofd *lf_fd(int fd) {
    return (unsigned)fd < LF_MAX_FDS ? __atomic_load_n(&lf_fds[fd], __ATOMIC_ACQUIRE) : NULL;
}

/* A descriptor for an open container (or packed file) f, reserved on its directory; closes f on failure. A
 * packed file's descriptor is its pack's directory, which an exec'ed program does not adopt (a redirection to a
 * packed file is not carried across exec: the program's writes fail with EBADF). */
int lf_fd_open(lf_file *f, int flags);
/* Another descriptor `newfd` (already reserved by dup*) for the same open description. */
void lf_fd_share(int newfd, struct lf_ofd *o);
/* Forget fd; closes the container when it was the last descriptor. Returns lf_close's result. */
int lf_fd_release(int fd);

/* unlink the container `dir`, which this process may hold open: when it does, the container is renamed to a hidden
 * name beside it instead (.ioloom-unlinked.<id>, as an NFS client's .nfsXXXX), its open handles follow it, and the
 * last of this process's descriptors on it to close (or the process's exit) removes it unless another process (a
 * fork's child) holds it, which then does: 1. An unlink of that hidden
 * name itself leaves it where it is, removed at the last close: 1. 0 when the process holds it nowhere (the caller
 * removes it), -1 on failure. */
int lf_unlink_open(const char *dir);
/* A rename's target container `dir` moved aside to its hidden name `aside` (its handles here following it) before
 * the rename, so that a rename that fails loses nothing: 0, or -1 (EBUSY when `dir` is its hidden name already). */
int lf_set_aside(const char *dir, char aside[PATH_MAX]);
/* After the rename: `replaced` (it succeeded), the container aside is removed now, or at this process's last close
 * of it when open here; otherwise it comes back to `dir`. errno is kept when it does. 0, or -1. */
int lf_aside_done(const char *dir, const char *aside, int replaced);
/* The container `from` renamed to `to` by this process: its open handles here follow it, and have a name again. */
void lf_fds_moved(const char *from, const char *to);
/* The directory `from` renamed to `to` by this process: the open containers under it follow it. */
void lf_fds_moved_under(const char *from, const char *to);
/* 1 once this process has given a descriptor to a container (0: no handle can need to follow a rename). */
int lf_fds_ever(void);

/* A standard descriptor (0, 1, 2) that became a container's (inherited across exec, or a shell's `builtin >> file`:
 * open, then dup2 onto 1) gets a stdin/stdout/stderr the layer serves: glibc's own FILE writes with internal
 * calls the layer never sees (to the reserved directory descriptor: EBADF). When the descriptor stops being a
 * container's (the shell restores it), glibc's stream comes back. */
void lf_stdio_follow(int fd);
/* Set once the library's destructor has run: later writes (other destructors, stdio flushing at exit) are
 * published as they happen. */
extern int lf_exiting;

/* Calls on containers the layer cannot serve: counted, printed at exit, failed with an errno. */
enum lf_unsupported { LF_UNS_MMAP, LF_UNS_FALLOCATE, LF_UNS_OTHER, LF_UNS_COUNT };
int lf_unsupported(enum lf_unsupported what, int err);

/* Runs `expr` with the reentrancy guard held, so the layer's own calls inside it pass through; its value. */
#define LF_INSIDE(expr)                             \
    ({                                              \
        ioloom_busy++;                              \
        __typeof__(expr) lf_inside_result = (expr); \
        ioloom_busy--;                              \
        lf_inside_result;                           \
    })

/* Wrappers are exported; the 64-bit spellings are aliases (off_t is 64-bit on LP64). glibc declares some
 * with attributes (nonnull, leaf) that an alias need not repeat. */
#define EXPORT IOLOOM_EXPORT
#define ALIAS(name) __attribute__((alias(#name), visibility("default")))
/* The layer's own wrappers for its own code (stdio cookies, copies between descriptors): hidden aliases, bound in
 * the library, so that a call never goes through the PLT to another preloaded tool's definition (which would
 * record it a second time) but still serves a container's descriptor. */
#define SELF(name) __attribute__((alias(#name), visibility("hidden")))
ssize_t lf_self_read(int fd, void *buf, size_t n);
ssize_t lf_self_write(int fd, const void *buf, size_t n);
ssize_t lf_self_pread(int fd, void *buf, size_t n, off_t off);
ssize_t lf_self_pwrite(int fd, const void *buf, size_t n, off_t off);
off_t lf_self_lseek(int fd, off_t off, int whence);
int lf_self_close(int fd);
#pragma GCC diagnostic ignored "-Wmissing-attributes"

#endif
