/* The logfs C API: a logical file stored as a container (per-writer-group data logs plus an index), served
 * back as one ordinary file. The preloaded library (lf_posix.c, lf_stdio.c) is built on it; programs may also
 * link libioloom-logfs.so and call it directly. Errors: -1 (or NULL) with errno set, like the POSIX calls. */
#ifndef IOLOOM_LOGFS_H
#define IOLOOM_LOGFS_H

#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

typedef struct lf_file lf_file;

#define LF_API __attribute__((visibility("default")))

/* Where a new container puts its logs besides its own directory: on each extra backend root R (a directory as
 * configured, e.g. on another file system), files <id>.log.<group> etc. in one of IOLOOM_LOGFS_SPREAD shared
 * directories R/lf-spread/<bucket> (0: the directory R/<rel>.lf<id> of its own), where rel is the container's path
 * below its mount and id is unique to the container. NULL or count 0: a single backend, the container directory. */
struct lf_backends {
    const char *const *roots;
    int count;
    const char *rel;
};

/* Is `dir` a container (a directory holding ioloom-logfs.meta)? */
LF_API int lf_is_container(const char *dir);

/* Open (O_CREAT: create) the container at `dir`. Honours O_RDONLY/O_WRONLY/O_RDWR, O_CREAT, O_EXCL, O_TRUNC,
 * O_APPEND. The writer group comes from the environment (IOLOOM_LOGFS_FANOUT, the MPI rank). */
LF_API lf_file *lf_open(const char *dir, int flags, mode_t mode, const struct lf_backends *backends);
LF_API ssize_t lf_pwrite(lf_file *f, const void *buf, size_t n, uint64_t offset);
LF_API ssize_t lf_pread(lf_file *f, void *buf, size_t n, uint64_t offset);
/* Appends at the logical end; returns bytes written and the offset they went to in *where. */
LF_API ssize_t lf_append(lf_file *f, const void *buf, size_t n, uint64_t *where);
LF_API int lf_truncate(lf_file *f, uint64_t size);
/* Logical size as this handle sees it (its own writes and what other writers had published when it last
 * loaded their indexes). */
LF_API int64_t lf_size(lf_file *f);
/* A sync point: publish this handle's index, make logs and index durable, and load other writers' indexes. */
LF_API int lf_sync(lf_file *f);
/* Publish this handle's index entries (readers that open or refresh afterwards see its writes). */
LF_API int lf_publish(lf_file *f);
/* Load other writers' published indexes again (close-to-open and lock-acquire consistency). */
LF_API int lf_refresh(lf_file *f);
LF_API int lf_close(lf_file *f);
LF_API int lf_flags(const lf_file *f);
LF_API const char *lf_dir(const lf_file *f);

/* Path operations on a container directory. */
LF_API int lf_stat(const char *dir, struct stat *st);   /* a regular file with the logical size */
LF_API int lf_unlink(const char *dir);                  /* removes the container from every backend */
LF_API int lf_rename(const char *from, const char *to); /* renames it (its extra backends stay where they are) */
LF_API int lf_chmod(const char *dir, mode_t mode);      /* the logical file's permission bits, by chmod(2)'s rules */

#endif
