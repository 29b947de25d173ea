/* Calls by path (and fstat) that must see a container as one regular file: the stat family with the logical
 * size, truncate, unlink, rmdir, rename, and readdir (a container is listed as a file, not a directory). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lf_fdtable.h"
#include "lf_paths.h"


int lf_container_at(int dirfd, const char *path, const char **real, struct lf_place *place) {
    *real = path;
    if (ioloom_busy || !lf_resolve(dirfd, path, place)) return 0;
    if (!strncmp(path, LF_PREFIX, sizeof LF_PREFIX - 1)) *real = place->dir;
    int saved = errno, is = lf_is_container(place->dir);
    errno = saved;
    return is;
}

/* Runs `expr` with the guard held, so the library's own calls pass through. */
#define INSIDE(expr) ({ ioloom_busy++; __typeof__(expr) inside_result = expr; ioloom_busy--; inside_result; })

/* ---- stat ---- */

static int fstat_open(int fd, struct lf_ofd *o, struct stat *st) {
    int64_t size = lf_size(o->file);
    if (size < 0 || IOLOOM_NEXT(fstat)(fd, st)) return -1;
    st->st_mode = S_IFREG | o->file->meta.mode;
    st->st_size = size;
    st->st_nlink = 1;
    st->st_blocks = (size + 511) / 512;
    return 0;
}

EXPORT int fstat(int fd, struct stat *st) {
    struct lf_ofd *o = lf_fd(fd);
    return o ? INSIDE(fstat_open(fd, o, st)) : IOLOOM_NEXT(fstat)(fd, st);
}
/* On LP64 glibc struct stat64 is struct stat. */
EXPORT int fstat64(int fd, struct stat64 *st) { return fstat(fd, (struct stat *)st); }

EXPORT int fstatat(int dirfd, const char *path, struct stat *st, int flags) {
    struct lf_place place;
    const char *real;
    if ((flags & AT_EMPTY_PATH) && !*path && lf_fd(dirfd)) return fstat(dirfd, st);
    if (lf_container_at(dirfd, path, &real, &place)) return INSIDE(lf_stat(place.dir, st));
    return IOLOOM_NEXT(fstatat)(dirfd, real, st, flags);
}
EXPORT int fstatat64(int dirfd, const char *path, struct stat64 *st, int flags) {
    return fstatat(dirfd, path, (struct stat *)st, flags);
}

EXPORT int stat(const char *path, struct stat *st) { return fstatat(AT_FDCWD, path, st, 0); }
EXPORT int stat64(const char *path, struct stat64 *st) { return stat(path, (struct stat *)st); }
EXPORT int lstat(const char *path, struct stat *st) { return fstatat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW); }
EXPORT int lstat64(const char *path, struct stat64 *st) { return lstat(path, (struct stat *)st); }

static struct statx_timestamp stx_time(struct timespec t) {
    return (struct statx_timestamp){.tv_sec = t.tv_sec, .tv_nsec = (uint32_t)t.tv_nsec};
}

/* statx (ls, cp): the directory's own statx, then the file's view of it. */
EXPORT int statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *stx) {
    struct lf_place place;
    const char *real;
    struct stat st;
    int rc;
    if ((flags & AT_EMPTY_PATH) && !*path && lf_fd(dirfd)) rc = fstat(dirfd, &st);
    else if (lf_container_at(dirfd, path, &real, &place)) rc = INSIDE(lf_stat(place.dir, &st));
    else return IOLOOM_NEXT(statx)(dirfd, real, flags, mask, stx);
    if (rc || (IOLOOM_NEXT(statx)(dirfd, path, flags, mask, stx) && IOLOOM_NEXT(statx)(AT_FDCWD, place.dir, flags, mask, stx)))
        return -1;
    stx->stx_mode = (uint16_t)st.st_mode;
    stx->stx_size = (uint64_t)st.st_size;
    stx->stx_blocks = (uint64_t)st.st_blocks;
    stx->stx_nlink = 1;
    stx->stx_mtime = stx->stx_ctime = stx_time(st.st_mtim);
    stx->stx_mask |= STATX_TYPE | STATX_MODE | STATX_SIZE | STATX_BLOCKS | STATX_NLINK | STATX_MTIME | STATX_CTIME;
    return 0;
}

/* ---- truncate, unlink, rename ---- */

static int truncate_container(const char *dir, off_t len) {
    if (len < 0) return errno = EINVAL, -1;
    lf_file *f = lf_open(dir, O_WRONLY, 0, NULL);
    if (!f) return -1;
    int rc = lf_truncate(f, (uint64_t)len);
    int closed = lf_close(f);
    return rc || closed ? -1 : 0;
}

EXPORT int truncate(const char *path, off_t len) {
    struct lf_place place;
    const char *real;
    if (lf_container_at(AT_FDCWD, path, &real, &place)) return INSIDE(truncate_container(place.dir, len));
    return IOLOOM_NEXT(truncate)(real, len);
}
int truncate64(const char *path, off_t len) ALIAS(truncate);

EXPORT int unlinkat(int dirfd, const char *path, int flags) {
    struct lf_place place;
    const char *real;
    if (!lf_container_at(dirfd, path, &real, &place)) return IOLOOM_NEXT(unlinkat)(dirfd, real, flags);
    if (flags & AT_REMOVEDIR) return errno = ENOTDIR, -1;
    return INSIDE(lf_unlink(place.dir));
}
EXPORT int unlink(const char *path) { return unlinkat(AT_FDCWD, path, 0); }
EXPORT int rmdir(const char *path) { return unlinkat(AT_FDCWD, path, AT_REMOVEDIR); }

EXPORT int renameat2(int olddir, const char *old, int newdir, const char *new, unsigned flags) {
    struct lf_place from, to;
    const char *old_real, *new_real;
    int old_is = lf_container_at(olddir, old, &old_real, &from);
    int new_is = lf_container_at(newdir, new, &new_real, &to);
    if (!old_is) {
        /* A plain file replacing a container: the container goes first, as rename(2) replaces its target. */
        if (new_is && !(flags & RENAME_NOREPLACE) && INSIDE(lf_unlink(to.dir))) return -1;
        return flags ? IOLOOM_NEXT(renameat2)(olddir, old_real, newdir, new_real, flags)
                     : IOLOOM_NEXT(renameat)(olddir, old_real, newdir, new_real);
    }
    if (flags & RENAME_EXCHANGE) return lf_unsupported(LF_UNS_OTHER, EINVAL);
    /* A container leaving logfs's paths cannot stay a container: EXDEV makes mv copy it through us. */
    if (!new_is && !lf_resolve(newdir, new, &to)) return errno = EXDEV, -1;
    if ((flags & RENAME_NOREPLACE) && IOLOOM_NEXT(access)(to.dir, F_OK) == 0) return errno = EEXIST, -1;
    return INSIDE(lf_rename(from.dir, to.dir));
}
EXPORT int renameat(int olddir, const char *old, int newdir, const char *new) { return renameat2(olddir, old, newdir, new, 0); }
EXPORT int rename(const char *old, const char *new) { return renameat2(AT_FDCWD, old, AT_FDCWD, new, 0); }

/* ---- permissions: the logical file's mode lives in the metadata (the directory keeps rwx for the layer) ---- */

EXPORT int fchmodat(int dirfd, const char *path, mode_t mode, int flags) {
    struct lf_place place;
    const char *real;
    if (lf_container_at(dirfd, path, &real, &place)) return INSIDE(lf_chmod(place.dir, mode));
    return IOLOOM_NEXT(fchmodat)(dirfd, real, mode, flags);
}
EXPORT int chmod(const char *path, mode_t mode) { return fchmodat(AT_FDCWD, path, mode, 0); }

EXPORT int fchmod(int fd, mode_t mode) {
    struct lf_ofd *o = lf_fd(fd);
    if (!o) return IOLOOM_NEXT(fchmod)(fd, mode);
    int rc = INSIDE(lf_chmod(lf_dir(o->file), mode));
    if (rc == 0) o->file->meta.mode = mode & 07777;
    return rc;
}

/* ---- directories: a container is listed as a regular file ---- */

static struct dirent *as_file(DIR *d, struct dirent *de) {
    if (!de || de->d_type != DT_DIR || ioloom_busy || !lf_paths_active()) return de;
    char meta[sizeof de->d_name + sizeof LF_META_NAME + 1];
    snprintf(meta, sizeof meta, "%s/%s", de->d_name, LF_META_NAME);
    int saved = errno;
    if (faccessat(dirfd(d), meta, F_OK, 0) == 0) de->d_type = DT_REG;
    errno = saved;
    return de;
}

EXPORT struct dirent *readdir(DIR *d) { return as_file(d, IOLOOM_NEXT(readdir)(d)); }
EXPORT struct dirent64 *readdir64(DIR *d) { return (struct dirent64 *)as_file(d, (struct dirent *)IOLOOM_NEXT(readdir64)(d)); }
