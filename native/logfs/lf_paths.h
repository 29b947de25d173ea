/* Path resolution for the preloaded library (lf_paths.c). */
#ifndef LF_PATHS_H
#define LF_PATHS_H

#include "lf_internal.h"

#define LF_PREFIX "logfs:"

/* Where a logfs path lives: the container directory, and the extra backend directories for a new one. */
struct lf_place {
    char dir[PATH_MAX];
    int pack; /* under a packing mount (IOLOOM_LOGFS_PACK): new files go to pack_dir as `name` */
    char pack_dir[PATH_MAX + sizeof LF_PACK_NAME];
    const char *name;
    struct lf_backends backends;      /* for the container at dir */
    struct lf_backends pack_backends; /* for the pack at pack_dir */
    const char *roots[LF_MAX_BACKENDS - 1];
};

/* Is the last component of the absolute path `dir` a symbolic link? */
int lf_is_link(const char *dir);

/* Are any mounts configured (IOLOOM_LOGFS_ROOTS)? */
int lf_paths_active(void);
/* 1 if `path` (relative to dirfd, as for openat) is logfs's: under a mount or `logfs:`-prefixed; fills place.
 * It is then a container if lf_is_container(place->dir), or may become one (O_CREAT). Keeps errno. */
int lf_resolve(int dirfd, const char *path, struct lf_place *place);

/* 1 when a wrapper passes a call on `path` (relative to dirfd) straight through, with `path` as it is: while the
 * layer's own calls run (the guard is held), and for a path certainly under no mount. A wrapper tests it before
 * setting up a struct lf_place (PATH_MAX-sized: a large frame costs instructions of its own). */
int lf_passes(int dirfd, const char *path);

/* lf_resolve for a wrapper: 0 while the layer's own calls run (the guard is held). *real is set either way to
 * the path to pass through: `path`, or the container directory when `path` has the logfs: prefix. */
int lf_resolve_call(int dirfd, const char *path, const char **real, struct lf_place *place);

/* lf_cwd.c: the working directory as a thread last saw it (getcwd's text), with where the mounts lie from it. */
struct lf_cwd {
    unsigned long epoch; /* lf_cwd.c's count of changes when it was taken */
    int ok;              /* getcwd succeeded (it fails for a removed directory, or one outside a chroot) */
    int inside;          /* at or under a mount */
    unsigned below;      /* bit i: mount i lies under it */
    size_t len;
    char path[PATH_MAX];
};
/* This thread's copy, taken again after each change of the working directory the layer sees (lf_cwd_forget). */
const struct lf_cwd *lf_cwd(void);
/* The working directory may have changed (a rename, a fork): every thread's copy is taken again on next use. */
void lf_cwd_forget(void);
/* lf_paths.c: fills c->inside and c->below from c->path. */
void lf_cwd_place(struct lf_cwd *c);

/* open() for the preloaded library (lf_posix.c): 1 and *fd set (a descriptor or -1 with errno) when the path is
 * an existing container or a new one under O_CREAT; 0 when the caller must pass the call through to `*real`,
 * the path without any logfs: prefix. */
int lf_open_container(int dirfd, const char *path, int flags, mode_t mode, int *fd, const char **real,
                      struct lf_place *place);

#endif
