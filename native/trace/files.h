/* Paths named again (files.c), the part the wrappers recall inline.
 *
 * Programs open and stat the same few paths again and again. Each thread remembers the state of the last paths
 * it named from the cwd, as given (before normalisation), with the (device, inode) and type the file had: a stat
 * of the same path that finds the same (device, inode) reuses the state, skipping normalisation, the filters
 * and the file table's lock. An open of the same path reuses it without asking the file's (device, inode)
 * (fstat, the larger part of what tracing adds to an open) as long as this process has removed or renamed
 * nothing since: a file another process replaced meanwhile keeps its earlier id in this process's stream, as a
 * path-keyed tool (Darshan) would name it. A relative path is remembered with the cwd's generation (chdir and
 * fchdir move it).
 *
 * The path this thread named last is tried first, by one comparison; an open that finds it, with nothing removed
 * or renamed since, gives its descriptor its own description (positions.h) without leaving the wrapper. */
#ifndef IOLOOM_FILES_H
#define IOLOOM_FILES_H

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "positions.h"

#define IOLOOM_RECENT_PATH_BYTES 112
struct ioloom_recent_path {
    uint64_t hash, dev, ino;
    uint32_t cwd, names; /* the cwd and names generations it was named in */
    int32_t state;
    unsigned mode;
    char path[IOLOOM_RECENT_PATH_BYTES];
};
/* The entry named or recalled last by this thread (NULL: none yet). */
extern IOLOOM_TLS const struct ioloom_recent_path *ioloom_last_named;
/* Moved by chdir/fchdir (relative paths name other files) and by removes and renames (a path may name another
 * file). */
extern volatile uint32_t ioloom_cwd_generation, ioloom_names_generation;

/* The entry named last by this thread if it is path's (named from the cwd), else NULL: one comparison, no key. */
IOLOOM_INLINE const struct ioloom_recent_path *ioloom_named_last(const char *path) {
    const struct ioloom_recent_path *r = ioloom_last_named;
    uint32_t cwd = path[0] == '/' ? 0 : ioloom_cwd_generation;
    return r && r->cwd == cwd && !strcmp(r->path, path) ? r : NULL;
}

/* Can the state of `path`, named relative to dirfd, be remembered (a path named from the cwd)? */
static inline int ioloom_rememberable(int dirfd, const char *path) { return path && dirfd == AT_FDCWD; }

/* The entry named last by this thread when `path`, named for a descriptor fd (>= 0) from the cwd, is its path. */
IOLOOM_INLINE const struct ioloom_recent_path *ioloom_named_again(int dirfd, const char *path, int fd) {
    return fd >= 0 && ioloom_rememberable(dirfd, path) ? ioloom_named_last(path) : NULL;
}

/* ioloom_stat_state's every case but the common one; `again`: the entry named last when it is the path's. */
int32_t ioloom_stat_state_slowly(int dirfd, const char *path, const struct stat *st,
                                 const struct ioloom_recent_path *again);

/* The state of `path` relative to dirfd (as ioloom_path_state), a file whose stat (st) is known; st may be NULL. The
 * common stat, the path named last found to be the same file (device, inode), makes no call but strcmp. */
IOLOOM_INLINE int32_t ioloom_stat_state(int dirfd, const char *path, const struct stat *st) {
    const struct ioloom_recent_path *again = st && ioloom_rememberable(dirfd, path) ? ioloom_named_last(path) : NULL;
    if (IOLOOM_LIKELY(again && again->dev == (uint64_t)st->st_dev && again->ino == (uint64_t)st->st_ino))
        return again->state;
    return ioloom_stat_state_slowly(dirfd, path, st, again);
}

/* ioloom_open_state's every case but the common one; `again`: the entry named last when it is the path's. */
int32_t ioloom_open_state_slowly(int dirfd, const char *path, int fd, int flags,
                                 const struct ioloom_recent_path *again);

/* As ioloom_path_state for a descriptor a traced open just made with `flags`: it is mapped to the file and to a
 * new open file description whose position the tracer follows (positions.h). The common open, the path named
 * last opened again into a descriptor that takes its own description, makes no call but strcmp. */
IOLOOM_INLINE int32_t ioloom_open_state(int dirfd, const char *path, int fd, int flags) {
    const struct ioloom_recent_path *again = ioloom_named_again(dirfd, path, fd);
    if (IOLOOM_LIKELY(again && again->names == ioloom_names_generation && ioloom_mode_has_position(again->mode)) &&
        ioloom_fd_take_own(fd, again->state, (flags & O_APPEND) != 0))
        return again->state;
    return ioloom_open_state_slowly(dirfd, path, fd, flags, again);
}

#endif
