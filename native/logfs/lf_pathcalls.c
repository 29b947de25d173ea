/* Calls by path (and fstat) that must see a container as one regular file: the stat family with the logical
 * size, truncate, unlink, rmdir, rename, and readdir (a container is listed as a file, not a directory). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "lf_fdtable.h"
#include "lf_paths.h"

/* What a path is to the layer: LF_CONTAINER (its directory in place->dir), LF_PACKED (an existing packed file,
 * place->pack_dir and place->name), or LF_PASS with *real the path to pass through. */
enum lf_kind_of_path { LF_PASS = 0, LF_CONTAINER = 1, LF_PACKED = 2 };

/* `follow` 0: the call acts on a symbolic link itself, not on what it names (lstat, unlink, rename): a link to a
 * container is a link, passed through. */
static enum lf_kind_of_path lf_container_at(int dirfd, const char *path, const char **real, struct lf_place *place,
                                            int follow) {
    if (!lf_resolve_call(dirfd, path, real, place)) return LF_PASS;
    int saved = errno;
    enum lf_kind_of_path kind =
        lf_is_container(place->dir) && (follow || !lf_is_link(place->dir)) ? LF_CONTAINER : LF_PASS;
    if (kind == LF_PASS && place->pack && IOLOOM_NEXT(access)(place->dir, F_OK) && lf_is_container(place->pack_dir)) {
        lf_file *f = LF_INSIDE(lf_open_packed(place->pack_dir, place->name, O_RDONLY, 0, NULL));
        if (f) kind = LF_PACKED, lf_close(f);
    }
    errno = saved;
    return kind;
}

/* ---- stat ---- */

static int fstat_open(int fd, struct lf_ofd *o, struct stat *st) {
    int64_t size = lf_size(o->file);
    if (size < 0 || IOLOOM_NEXT(fstat)(fd, st)) return -1;
    if (o->file->file_id) { /* as lf_stat_packed: stat and fstat agree (cp checks) */
        st->st_ino ^= (ino_t)o->file->file_id << 20;
        st->st_mode = S_IFREG | o->file->meta.mode, st->st_size = size, st->st_nlink = 1;
        st->st_blocks = (size + 511) / 512;
    } else {
        lf_meta_refresh_mode(o->file);
        lf_stat_fill(o->file, size, st);
    }
    return 0;
}

EXPORT int fstat(int fd, struct stat *st) {
    struct lf_ofd *o = lf_fd(fd);
    return o ? LF_INSIDE(fstat_open(fd, o, st)) : IOLOOM_NEXT(fstat)(fd, st);
}
/* On LP64 glibc struct stat64 is struct stat. */
EXPORT int fstat64(int fd, struct stat64 *st) { return fstat(fd, (struct stat *)st); }

/* Every fstatat but one certainly outside the mounts (fstatat), with its struct lf_place. */
__attribute__((noinline)) static int fstatat_resolved(int dirfd, const char *path, struct stat *st, int flags) {
    struct lf_place place;
    const char *real;
    if ((flags & AT_EMPTY_PATH) && !*path && lf_fd(dirfd)) return fstat(dirfd, st);
    switch (lf_container_at(dirfd, path, &real, &place, !(flags & AT_SYMLINK_NOFOLLOW))) {
        case LF_CONTAINER:
            return LF_INSIDE(lf_stat(place.dir, st));
        case LF_PACKED:
            return LF_INSIDE(lf_stat_packed(place.pack_dir, place.name, st));
        default:
            return IOLOOM_NEXT(fstatat)(dirfd, real, st, flags);
    }
}

EXPORT int fstatat(int dirfd, const char *path, struct stat *st, int flags) {
    /* an empty path with AT_EMPTY_PATH is dirfd's, which may be a container's */
    if (!(flags & AT_EMPTY_PATH) && lf_passes(dirfd, path)) return IOLOOM_NEXT(fstatat)(dirfd, path, st, flags);
    return fstatat_resolved(dirfd, path, st, flags);
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

/* statx (ls, cp) of a path that may be logfs's: the directory's own statx, then the file's view of it. */
__attribute__((noinline)) static int statx_resolved(int dirfd, const char *path, int flags, unsigned mask,
                                                    struct statx *stx) {
    struct lf_place place;
    const char *real;
    struct stat st;
    int rc;
    enum lf_kind_of_path kind = LF_CONTAINER;
    if ((flags & AT_EMPTY_PATH) && !*path && lf_fd(dirfd))
        rc = fstat(dirfd, &st);
    else if ((kind = lf_container_at(dirfd, path, &real, &place, !(flags & AT_SYMLINK_NOFOLLOW))) == LF_CONTAINER)
        rc = LF_INSIDE(lf_stat(place.dir, &st));
    else if (kind == LF_PACKED)
        rc = LF_INSIDE(lf_stat_packed(place.pack_dir, place.name, &st));
    else
        return IOLOOM_NEXT(statx)(dirfd, real, flags, mask, stx);
    /* The other statx fields: from the directory that holds the file (the container, or the pack). */
    const char *holder = kind == LF_PACKED ? place.pack_dir : place.dir;
    if (rc ||
        (IOLOOM_NEXT(statx)(dirfd, path, flags, mask, stx) && IOLOOM_NEXT(statx)(AT_FDCWD, holder, flags, mask, stx)))
        return -1;
    stx->stx_ino = (uint64_t)st.st_ino;
    stx->stx_mode = (uint16_t)st.st_mode;
    stx->stx_size = (uint64_t)st.st_size;
    stx->stx_blocks = (uint64_t)st.st_blocks;
    stx->stx_nlink = 1;
    stx->stx_mtime = stx->stx_ctime = stx_time(st.st_mtim);
    stx->stx_mask |= STATX_TYPE | STATX_MODE | STATX_SIZE | STATX_BLOCKS | STATX_NLINK | STATX_MTIME | STATX_CTIME;
    return 0;
}

EXPORT int statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *stx) {
    if (!(flags & AT_EMPTY_PATH) && lf_passes(dirfd, path)) return IOLOOM_NEXT(statx)(dirfd, path, flags, mask, stx);
    return statx_resolved(dirfd, path, flags, mask, stx);
}

/* ---- times: the logical file's are its directory's; a handle's writes are published first, so that their
 * modification time (lf_write.c) comes before the times set ---- */

EXPORT int utimensat(int dirfd, const char *path, const struct timespec times[2], int flags) {
    /* futimens(fd) is utimensat(fd, NULL): glibc declares path nonnull, so the test must not be optimised away */
    uintptr_t given = (uintptr_t)path;
    __asm__("" : "+r"(given));
    struct lf_ofd *o = given ? NULL : lf_fd(dirfd);
    if (o) lf_publish(o->file);
    return IOLOOM_NEXT(utimensat)(dirfd, path, times, flags);
}
EXPORT int futimens(int fd, const struct timespec times[2]) {
    struct lf_ofd *o = lf_fd(fd);
    if (o) lf_publish(o->file);
    return IOLOOM_NEXT(futimens)(fd, times);
}

/* ---- truncate, unlink, rename ---- */

static int truncate_container(const struct lf_place *place, int packed, off_t len) {
    if (len < 0) return errno = EINVAL, -1;
    lf_file *f = packed ? lf_open_packed(place->pack_dir, place->name, O_WRONLY, 0, NULL)
                        : lf_open(place->dir, O_WRONLY, 0, NULL);
    if (!f) return -1;
    int rc = lf_truncate(f, (uint64_t)len);
    int closed = lf_close(f);
    return rc || closed ? -1 : 0;
}

EXPORT int truncate(const char *path, off_t len) {
    struct lf_place place;
    const char *real;
    enum lf_kind_of_path kind = lf_container_at(AT_FDCWD, path, &real, &place, 1);
    if (kind != LF_PASS) return LF_INSIDE(truncate_container(&place, kind == LF_PACKED, len));
    return IOLOOM_NEXT(truncate)(real, len);
}
int truncate64(const char *path, off_t len) ALIAS(truncate);

/* An unlink of a container, hidden instead while this process holds it open (lf_unlink_open). */
static int remove_container(const char *dir) {
    int hidden = lf_unlink_open(dir);
    return hidden ? (hidden < 0 ? -1 : 0) : lf_unlink(dir);
}

EXPORT int unlinkat(int dirfd, const char *path, int flags) {
    struct lf_place place;
    const char *real;
    enum lf_kind_of_path kind = lf_container_at(dirfd, path, &real, &place, 0);
    if (kind == LF_PASS) return IOLOOM_NEXT(unlinkat)(dirfd, real, flags);
    if (flags & AT_REMOVEDIR) return errno = ENOTDIR, -1;
    return LF_INSIDE(kind == LF_PACKED ? lf_unlink_packed(place.pack_dir, place.name) : remove_container(place.dir));
}
EXPORT int unlink(const char *path) { return unlinkat(AT_FDCWD, path, 0); }
EXPORT int rmdir(const char *path) { return unlinkat(AT_FDCWD, path, AT_REMOVEDIR); }

/* After a rename of a plain path: when it was a directory in a mount, the containers open under it follow it (their
 * handles name them by path; reads open the logs again by it). */
__attribute__((noinline)) static void directory_moved(int olddir, const char *old, int newdir, const char *new,
                                                      const char *new_real) {
    struct lf_place from, to;
    struct stat st;
    int saved = errno;
    if (IOLOOM_NEXT(fstatat)(newdir, new_real, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
        lf_resolve(olddir, old, &from) && lf_resolve(newdir, new, &to))
        lf_fds_moved_under(from.dir, to.dir);
    errno = saved;
}

EXPORT int renameat2(int olddir, const char *old, int newdir, const char *new, unsigned flags) {
    struct lf_place from, to;
    const char *old_real, *new_real;
    enum lf_kind_of_path old_is = lf_container_at(olddir, old, &old_real, &from, 0);
    enum lf_kind_of_path new_is = lf_container_at(newdir, new, &new_real, &to, 0);
    /* Packed files move by copy: EXDEV makes mv copy through us and unlink the source. */
    if (old_is == LF_PACKED || new_is == LF_PACKED) return errno = EXDEV, -1;
    if (!old_is) {
        /* A plain file replacing a container: the container moves aside first (rename(2) replaces a file, the
         * kernel no directory), and comes back if the rename fails. */
        char aside[PATH_MAX];
        int set = new_is && !(flags & (RENAME_NOREPLACE | RENAME_EXCHANGE));
        struct stat st; /* a directory onto a file fails (ENOTDIR): it must not take the container's place */
        if (set && IOLOOM_NEXT(fstatat)(olddir, old_real, &st, AT_SYMLINK_NOFOLLOW)) return -1;
        if (set && S_ISDIR(st.st_mode)) return errno = ENOTDIR, -1;
        if (set && LF_INSIDE(lf_set_aside(to.dir, aside))) return -1;
        int rc = flags ? IOLOOM_NEXT(renameat2)(olddir, old_real, newdir, new_real, flags)
                       : IOLOOM_NEXT(renameat)(olddir, old_real, newdir, new_real);
        if (set) LF_INSIDE(lf_aside_done(to.dir, aside, rc == 0)); /* after a success, a failure leaves it hidden */
        if (rc == 0 && !(flags & RENAME_EXCHANGE) && lf_fds_ever()) directory_moved(olddir, old, newdir, new, new_real);
        if (rc == 0) lf_cwd_forget(); /* a directory renamed may hold the working directory */
        return rc;
    }
    if (flags & RENAME_EXCHANGE) return lf_unsupported(LF_UNS_OTHER, EINVAL);
    /* A container leaving logfs's paths cannot stay a container: EXDEV makes mv copy it through us. */
    if (!new_is && !lf_resolve(newdir, new, &to)) return errno = EXDEV, -1;
    if (!strcmp(from.dir, to.dir) && !(flags & RENAME_NOREPLACE)) return 0; /* the same file: nothing to do */
    if ((flags & RENAME_NOREPLACE) && IOLOOM_NEXT(access)(to.dir, F_OK) == 0) return errno = EEXIST, -1;
    char aside[PATH_MAX]; /* a target container moves aside, removed once the rename succeeded (lf_set_aside) */
    int set = new_is == LF_CONTAINER;
    if (set && LF_INSIDE(lf_set_aside(to.dir, aside))) return -1;
    int rc = LF_INSIDE(lf_rename(from.dir, to.dir));
    if (rc == 0) lf_fds_moved(from.dir, to.dir);
    if (set) LF_INSIDE(lf_aside_done(to.dir, aside, rc == 0)); /* after a success, a failure leaves it hidden */
    return rc;
}
EXPORT int renameat(int olddir, const char *old, int newdir, const char *new) {
    return renameat2(olddir, old, newdir, new, 0);
}
EXPORT int rename(const char *old, const char *new) { return renameat2(AT_FDCWD, old, AT_FDCWD, new, 0); }

/* ---- permissions: the logical file's mode lives in the metadata (the directory keeps rwx for the layer) ---- */

/* access() of a container: its logical mode's bits, owner and group the directory's, checked as the kernel checks
 * a plain file's (root may read and write anything, and execute what has an x bit). */
static int container_access(const char *dir, int want, int flags) {
    struct stat st;
    struct lf_meta m;
    if (lf_meta_read(dir, &m) || IOLOOM_NEXT(stat)(dir, &st)) return -1;
    st.st_mode = m.mode;
    int effective = flags & AT_EACCESS;
    uid_t uid = effective ? geteuid() : getuid();
    if (want == F_OK) return 0;
    mode_t bits = uid == 0                            ? ((st.st_mode & 0111) ? 07 : 06)
                  : uid == st.st_uid                  ? (st.st_mode >> 6) & 07
                  : lf_in_group(st.st_gid, effective) ? (st.st_mode >> 3) & 07
                                                      : st.st_mode & 07;
    return (want & (R_OK | W_OK | X_OK) & ~bits) ? (errno = EACCES, -1) : 0;
}

/* Every faccessat but one certainly outside the mounts (faccessat), with its struct lf_place. */
__attribute__((noinline)) static int faccessat_resolved(int dirfd, const char *path, int mode, int flags) {
    struct lf_place place;
    const char *real;
    if (lf_container_at(dirfd, path, &real, &place, !(flags & AT_SYMLINK_NOFOLLOW)) == LF_CONTAINER)
        return LF_INSIDE(container_access(place.dir, mode, flags));
    return IOLOOM_NEXT(faccessat)(dirfd, real, mode, flags);
}

EXPORT int faccessat(int dirfd, const char *path, int mode, int flags) {
    if (lf_passes(dirfd, path)) return IOLOOM_NEXT(faccessat)(dirfd, path, mode, flags);
    return faccessat_resolved(dirfd, path, mode, flags);
}
EXPORT int access(const char *path, int mode) { return faccessat(AT_FDCWD, path, mode, 0); }
EXPORT int eaccess(const char *path, int mode) { return faccessat(AT_FDCWD, path, mode, AT_EACCESS); }
int euidaccess(const char *path, int mode) ALIAS(eaccess);

EXPORT int fchmodat(int dirfd, const char *path, mode_t mode, int flags) {
    struct lf_place place;
    const char *real;
    switch (lf_container_at(dirfd, path, &real, &place, !(flags & AT_SYMLINK_NOFOLLOW))) {
        case LF_CONTAINER:
            return LF_INSIDE(lf_chmod(place.dir, mode));
        case LF_PACKED:
            return lf_unsupported(LF_UNS_OTHER, EOPNOTSUPP); /* packed files share their pack's mode */
        default:
            break;
    }
    return IOLOOM_NEXT(fchmodat)(dirfd, real, mode, flags);
}
EXPORT int chmod(const char *path, mode_t mode) { return fchmodat(AT_FDCWD, path, mode, 0); }

EXPORT int fchmod(int fd, mode_t mode) {
    struct lf_ofd *o = lf_fd(fd);
    if (!o) return IOLOOM_NEXT(fchmod)(fd, mode);
    if (o->file->file_id) return lf_unsupported(LF_UNS_OTHER, EOPNOTSUPP);
    return LF_INSIDE(lf_chmod(lf_dir(o->file), mode)); /* the handle reads the mode again (lf_mode_changes) */
}

/* ---- owner: the container's directory holds the logical file's owner and group, and chown changes them there; a
 * chown of a regular file (even to -1, -1) also makes the kernel drop its set-user-ID bit, and its set-group-ID bit
 * when it is group-executable or the caller is neither privileged nor in the file's group, which the layer does to
 * the mode in the metadata (the kernel keeps a directory's bits) ---- */

/* chown of the container whose directory is `dir` (open handles read its mode again: lf_mode_changes). */
static int container_chown(const char *dir, uid_t uid, gid_t gid) {
    struct stat st;
    struct lf_meta m;
    if (lf_meta_read(dir, &m) || IOLOOM_NEXT(stat)(dir, &st) || IOLOOM_NEXT(chown)(dir, uid, gid)) return -1;
    mode_t mode = lf_mode_after_chown(m.mode, st.st_gid);
    return mode == m.mode ? 0 : lf_meta_set_mode(dir, mode);
}

EXPORT int fchownat(int dirfd, const char *path, uid_t uid, gid_t gid, int flags) {
    if ((flags & AT_EMPTY_PATH) && !*path) /* the descriptor itself; AT_FDCWD, the working directory */
        return lf_fd(dirfd) ? fchown(dirfd, uid, gid) : IOLOOM_NEXT(fchownat)(dirfd, path, uid, gid, flags);
    struct lf_place place;
    const char *real;
    switch (lf_container_at(dirfd, path, &real, &place, !(flags & AT_SYMLINK_NOFOLLOW))) {
        case LF_CONTAINER:
            return LF_INSIDE(container_chown(place.dir, uid, gid));
        case LF_PACKED:
            return lf_unsupported(LF_UNS_OTHER, EOPNOTSUPP); /* packed files share their pack's owner */
        default:
            break;
    }
    return IOLOOM_NEXT(fchownat)(dirfd, real, uid, gid, flags);
}
EXPORT int chown(const char *path, uid_t uid, gid_t gid) { return fchownat(AT_FDCWD, path, uid, gid, 0); }
EXPORT int lchown(const char *path, uid_t uid, gid_t gid) {
    return fchownat(AT_FDCWD, path, uid, gid, AT_SYMLINK_NOFOLLOW);
}

EXPORT int fchown(int fd, uid_t uid, gid_t gid) {
    struct lf_ofd *o = lf_fd(fd);
    if (!o) return IOLOOM_NEXT(fchown)(fd, uid, gid);
    if (o->file->file_id) return lf_unsupported(LF_UNS_OTHER, EOPNOTSUPP);
    return LF_INSIDE(container_chown(lf_dir(o->file), uid, gid));
}

/* ---- extended attributes: a packed file has none (ls -l asks for ACLs and labels); a container keeps no ACL,
 * as a file system without ACL support: its permissions are the mode bits (cp -a then sets them by chmod) ---- */

static int acl_name(const char *name) { return !strncmp(name, "system.posix_acl_", 17); }

EXPORT int setxattr(const char *path, const char *name, const void *value, size_t size, int flags) {
    struct lf_place place;
    const char *real;
    if (acl_name(name) && lf_container_at(AT_FDCWD, path, &real, &place, 1) != LF_PASS) return errno = EOPNOTSUPP, -1;
    return IOLOOM_NEXT(setxattr)(real, name, value, size, flags);
}
EXPORT int lsetxattr(const char *path, const char *name, const void *value, size_t size, int flags) {
    struct lf_place place;
    const char *real;
    if (acl_name(name) && lf_container_at(AT_FDCWD, path, &real, &place, 0) != LF_PASS) return errno = EOPNOTSUPP, -1;
    return IOLOOM_NEXT(lsetxattr)(real, name, value, size, flags);
}
EXPORT int fsetxattr(int fd, const char *name, const void *value, size_t size, int flags) {
    if (acl_name(name) && lf_fd(fd)) return errno = EOPNOTSUPP, -1;
    return IOLOOM_NEXT(fsetxattr)(fd, name, value, size, flags);
}

#define NO_XATTRS_IF_PACKED(fn, path, none, ...)                                     \
    struct lf_place place;                                                           \
    const char *real;                                                                \
    if (lf_container_at(AT_FDCWD, path, &real, &place, 1) == LF_PACKED) return none; \
    return IOLOOM_NEXT(fn)(real, __VA_ARGS__)

EXPORT ssize_t getxattr(const char *path, const char *name, void *value, size_t size) {
    NO_XATTRS_IF_PACKED(getxattr, path, (errno = ENODATA, -1), name, value, size);
}
EXPORT ssize_t lgetxattr(const char *path, const char *name, void *value, size_t size) {
    NO_XATTRS_IF_PACKED(lgetxattr, path, (errno = ENODATA, -1), name, value, size);
}
EXPORT ssize_t listxattr(const char *path, char *list, size_t size) {
    NO_XATTRS_IF_PACKED(listxattr, path, 0, list, size);
}
EXPORT ssize_t llistxattr(const char *path, char *list, size_t size) {
    NO_XATTRS_IF_PACKED(llistxattr, path, 0, list, size);
}

/* ---- directories: a container is listed as a regular file ---- */

static struct dirent *as_file(DIR *d, struct dirent *de) {
    if (!de || de->d_type != DT_DIR || ioloom_busy || !lf_paths_active()) return de;
    if (!strcmp(de->d_name, LF_PACK_NAME))
        return as_file(d, IOLOOM_NEXT(readdir)(d)); /* its files are listed instead */
    char meta[sizeof de->d_name + sizeof LF_META_NAME + 1];
    snprintf(meta, sizeof meta, "%s/%s", de->d_name, LF_META_NAME);
    int saved = errno;
    if (IOLOOM_NEXT(faccessat)(dirfd(d), meta, F_OK, 0) == 0) de->d_type = DT_REG;
    errno = saved;
    return de;
}

/* A directory with packed files lists them after its real entries: when the real listing ends, the names of
 * the pack's existing files follow (read once per open directory stream). */
struct listing {
    DIR *d;
    char **names;
    size_t n, next;
    struct dirent64 entry;
};
#define MAX_LISTINGS 64
static struct listing listings[MAX_LISTINGS];
static pthread_mutex_t listings_lock = PTHREAD_MUTEX_INITIALIZER;

static void add_name(const char *name, void *arg) {
    struct listing *l = arg;
    char **grown = realloc(l->names, (l->n + 1) * sizeof *grown);
    if (grown && (grown[l->n] = strdup(name)))
        l->names = grown, l->n++;
    else if (grown)
        l->names = grown;
}

/* The pack listing of d, made on first use; NULL when d's directory holds no pack. */
static struct listing *listing_of(DIR *d) {
    struct listing *free_slot = NULL;
    for (int i = 0; i < MAX_LISTINGS; i++) {
        if (listings[i].d == d) return &listings[i];
        if (!listings[i].d && !free_slot) free_slot = &listings[i];
    }
    char link[64], dir[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd(d));
    ssize_t n = IOLOOM_NEXT(readlink)(link, dir, sizeof dir - sizeof LF_PACK_NAME - 2);
    struct lf_place place;
    if (n <= 0 || !free_slot) return NULL;
    snprintf(dir + n, sizeof dir - (size_t)n, "/" LF_PACK_NAME);
    if (!lf_resolve(AT_FDCWD, dir, &place) || !place.pack || !lf_is_container(dir)) return NULL;
    *free_slot = (struct listing){.d = d};
    lf_pack_list(dir, add_name, free_slot);
    return free_slot;
}

static void forget_listing(DIR *d) {
    pthread_mutex_lock(&listings_lock);
    for (int i = 0; i < MAX_LISTINGS; i++) {
        if (listings[i].d != d) continue;
        for (size_t k = 0; k < listings[i].n; k++) free(listings[i].names[k]);
        free(listings[i].names);
        listings[i] = (struct listing){0};
    }
    pthread_mutex_unlock(&listings_lock);
}

/* The next name of d's pack listing as a directory entry (a regular file), NULL after the last. */
static struct dirent64 *next_packed(DIR *d) {
    pthread_mutex_lock(&listings_lock);
    struct listing *l = listing_of(d);
    struct dirent64 *out = NULL;
    if (l && l->next < l->n) {
        out = &l->entry;
        *out = (struct dirent64){.d_ino = lf_pack_id(l->names[l->next]), .d_type = DT_REG, .d_reclen = sizeof *out};
        snprintf(out->d_name, sizeof out->d_name, "%s", l->names[l->next++]);
    }
    pthread_mutex_unlock(&listings_lock);
    return out;
}

static struct dirent64 *packed_entry(DIR *d) {
    if (ioloom_busy || !lf_paths_active()) return NULL;
    int saved = errno;
    struct dirent64 *out = LF_INSIDE(next_packed(d));
    errno = saved;
    return out;
}

EXPORT struct dirent *readdir(DIR *d) {
    struct dirent *de = as_file(d, IOLOOM_NEXT(readdir)(d));
    return de ? de : (struct dirent *)packed_entry(d); /* struct dirent is struct dirent64 on LP64 */
}
EXPORT struct dirent64 *readdir64(DIR *d) {
    struct dirent64 *de = (struct dirent64 *)as_file(d, (struct dirent *)IOLOOM_NEXT(readdir64)(d));
    return de ? de : packed_entry(d);
}
/* Our own directory streams (ioloom_busy) never have a listing, and their closedir must not take the lock that
 * listing_of holds while it reads the pack. */
EXPORT void rewinddir(DIR *d) {
    if (!ioloom_busy) forget_listing(d);
    IOLOOM_NEXT(rewinddir)(d);
}
EXPORT int closedir(DIR *d) {
    if (!ioloom_busy) forget_listing(d);
    return IOLOOM_NEXT(closedir)(d);
}
