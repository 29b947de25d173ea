/* The working directory, as the layer resolves relative paths against it: each thread keeps a copy (getcwd's text,
 * and whether any mount lies near it), taken again after every change the layer sees (chdir, fchdir, chroot, a
 * rename by this process, which may move the directory or one above it, and a fork). A relative path then costs no
 * getcwd, and one outside the mounts passes through after one string scan and a compare per mount below the
 * working directory (lf_paths.c, relative_outside).
 *
 * glibc's nftw(FTW_CHDIR) and fts change directory inside glibc, out of the layer's sight: their calls are wrapped so
 * that each entry they hand over is looked at in the directory they moved to. Changes the layer cannot see leave
 * the copy stale until the next one it sees: another process renaming a directory above this one's working
 * directory, a raw system call (docs/logfs-format.md, "Paths outside the mounts, and relative paths"). */
#include <errno.h>
#include <fcntl.h>
#include <fts.h>
#include <ftw.h>
#include <string.h>
#include <unistd.h>

#include "lf_fdtable.h"
#include "lf_paths.h"

/* Bumped after each change of the working directory; a copy taken in an older epoch is taken again. Starts at 1 so
 * that a thread's zeroed copy (epoch 0) is never current. */
static unsigned long cwd_epoch = 1;

static __thread struct lf_cwd cwd;

void lf_cwd_forget(void) { __atomic_add_fetch(&cwd_epoch, 1, __ATOMIC_RELEASE); }

/* The epoch is read before getcwd, so a change racing with it leaves the copy in the old epoch; the copy's epoch is
 * written last (and zeroed first), so a signal handler running a wrapper in between takes its own. */
const struct lf_cwd *lf_cwd(void) {
    unsigned long epoch = __atomic_load_n(&cwd_epoch, __ATOMIC_ACQUIRE);
    if (IOLOOM_LIKELY(cwd.epoch == epoch)) return &cwd;
    int saved = errno;
    cwd.epoch = 0;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    cwd.ok = getcwd(cwd.path, sizeof cwd.path) != NULL;
    cwd.len = cwd.ok ? strlen(cwd.path) : 0;
    if (cwd.ok) lf_cwd_place(&cwd);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    cwd.epoch = epoch;
    errno = saved;
    return &cwd;
}

/* ---- the calls that change it ---- */

/* rc of a call that may have changed the working directory (even when it failed: fts_close): the copies are
 * forgotten. */
static int changed(int rc) {
    lf_cwd_forget();
    return rc;
}

/* A container is a regular file: neither chdir nor fchdir enters it (ENOTDIR, as for a plain file). */
EXPORT int chdir(const char *path) {
    struct lf_place place;
    const char *real;
    if (lf_resolve_call(AT_FDCWD, path, &real, &place) && lf_is_container(place.dir)) return errno = ENOTDIR, -1;
    return changed(IOLOOM_NEXT(chdir)(real));
}

EXPORT int fchdir(int fd) { return lf_fd(fd) ? (errno = ENOTDIR, -1) : changed(IOLOOM_NEXT(fchdir)(fd)); }

EXPORT int chroot(const char *path) { return changed(IOLOOM_NEXT(chroot)(path)); }

/* ---- walks that change it inside glibc ---- */

typedef int (*walk_fn)(const char *, const struct stat *, int, struct FTW *);
typedef int (*walk_call)(const char *, walk_fn, int, int);
static __thread walk_fn walker; /* the program's function for the innermost nftw(FTW_CHDIR) of this thread */

static int walked(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    lf_cwd_forget(); /* nftw moved into the entry's directory */
    return walker(path, st, flag, ftw);
}

static int walk(walk_call next, const char *dir, walk_fn fn, int fds, int flags) {
    if (!(flags & FTW_CHDIR)) return next(dir, fn, fds, flags);
    walk_fn outer = walker; /* a walk started inside another's function */
    walker = fn;
    int rc = next(dir, walked, fds, flags);
    walker = outer;
    lf_cwd_forget(); /* nftw went back where it started */
    return rc;
}

EXPORT int nftw(const char *dir, walk_fn fn, int fds, int flags) {
    return walk(IOLOOM_NEXT(nftw), dir, fn, fds, flags);
}
/* On LP64 struct stat64 is struct stat: one walk for both spellings. */
EXPORT int nftw64(const char *dir, int (*fn)(const char *, const struct stat64 *, int, struct FTW *), int fds,
                  int flags) {
    return walk((walk_call)(void (*)(void))IOLOOM_NEXT(nftw64), dir, (walk_fn)(void (*)(void))fn, fds, flags);
}

/* fts (without FTS_NOCHDIR) moves between directories in fts_read, fts_children and fts_close: their result,
 * after the copies are dropped. */
static void *moved(void *entries) {
    lf_cwd_forget();
    return entries;
}
EXPORT FTSENT *fts_read(FTS *fts) { return moved(IOLOOM_NEXT(fts_read)(fts)); }
EXPORT FTSENT *fts_children(FTS *fts, int options) { return moved(IOLOOM_NEXT(fts_children)(fts, options)); }
EXPORT int fts_close(FTS *fts) { return changed(IOLOOM_NEXT(fts_close)(fts)); }
EXPORT FTSENT64 *fts64_read(FTS64 *fts) { return moved(IOLOOM_NEXT(fts64_read)(fts)); }
EXPORT FTSENT64 *fts64_children(FTS64 *fts, int options) { return moved(IOLOOM_NEXT(fts64_children)(fts, options)); }
EXPORT int fts64_close(FTS64 *fts) { return changed(IOLOOM_NEXT(fts64_close)(fts)); }
