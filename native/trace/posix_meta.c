/* POSIX metadata wrappers: the stat family, access, unlink, rename, mkdir, rmdir, truncate. Path calls name
 * their file by path (and by (device, inode) when the call returns a stat); ret_bytes is the return value. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "files.h"
#include "wrap.h"

#define P IOLOOM_POSIX
#define OP(name) IOLOOM_OP_##name

/* A call on a path relative to dirfd: aux as given; st (when the call filled one) names the file exactly. Inline in
 * each wrapper (the stat family is called as often as read and write). */
IOLOOM_INLINE void record_path(struct ioloom_call *c, enum ioloom_op op, int dirfd, const char *path,
                               const struct stat *st, int64_t req, int64_t ret, int64_t aux) {
    int32_t file = ioloom_stat_state(dirfd, path, ret == 0 ? st : NULL);
    ioloom_record_file(c, op, P, file, dirfd == AT_FDCWD ? -1 : dirfd, -1, req, ret, aux);
}

/* stat(path, buf) shapes. glibc before 2.33 compiled stat() into __xstat(version, ...): those take a version
 * first and are served here by the plain call, so they work whatever this glibc still exports. */
#define WRAP_STAT(fn, opname, stat_type)                                                                               \
    IOLOOM_EXPORT int fn(const char *path, struct stat_type *buf) {                                                    \
        TRACED(P, fn, (path, buf), r < 0, record_path(&c, OP(opname), AT_FDCWD, path, (struct stat *)buf, -1, r, -1)); \
    }
WRAP_STAT(stat, STAT, stat)
WRAP_STAT(stat64, STAT64, stat64)
WRAP_STAT(lstat, LSTAT, stat)
WRAP_STAT(lstat64, LSTAT64, stat64)

#define WRAP_XSTAT(fn, opname, plain, stat_type)                                            \
    int fn(int version, const char *path, struct stat_type *buf);                           \
    IOLOOM_EXPORT int fn(int version, const char *path, struct stat_type *buf) {            \
        (void)version;                                                                      \
        TRACED(P, plain, (path, buf), r < 0,                                                \
               record_path(&c, OP(opname), AT_FDCWD, path, (struct stat *)buf, -1, r, -1)); \
    }
WRAP_XSTAT(__xstat, U_XSTAT, stat, stat)
WRAP_XSTAT(__xstat64, U_XSTAT64, stat64, stat64)
WRAP_XSTAT(__lxstat, U_LXSTAT, lstat, stat)
WRAP_XSTAT(__lxstat64, U_LXSTAT64, lstat64, stat64)

#define WRAP_FSTAT(fn, opname, stat_type)                                                        \
    IOLOOM_EXPORT int fn(int fd, struct stat_type *buf) {                                        \
        TRACED(P, fn, (fd, buf), r < 0, ioloom_record_fd(&c, OP(opname), P, fd, -1, -1, r, -1)); \
    }
WRAP_FSTAT(fstat, FSTAT, stat)
WRAP_FSTAT(fstat64, FSTAT64, stat64)

#define WRAP_FXSTAT(fn, opname, plain, stat_type)                                                   \
    int fn(int version, int fd, struct stat_type *buf);                                             \
    IOLOOM_EXPORT int fn(int version, int fd, struct stat_type *buf) {                              \
        (void)version;                                                                              \
        TRACED(P, plain, (fd, buf), r < 0, ioloom_record_fd(&c, OP(opname), P, fd, -1, -1, r, -1)); \
    }
WRAP_FXSTAT(__fxstat, U_FXSTAT, fstat, stat)
WRAP_FXSTAT(__fxstat64, U_FXSTAT64, fstat64, stat64)

/* fstatat: aux = flags. With AT_EMPTY_PATH and "" it is an fstat of dirfd. */
#define WRAP_FSTATAT(fn, opname, stat_type)                                                 \
    IOLOOM_EXPORT int fn(int dirfd, const char *path, struct stat_type *buf, int flags) {   \
        TRACED(P, fn, (dirfd, path, buf, flags), r < 0,                                     \
               record_path(&c, OP(opname), dirfd, path, (struct stat *)buf, -1, r, flags)); \
    }
WRAP_FSTATAT(fstatat, FSTATAT, stat)
WRAP_FSTATAT(fstatat64, FSTATAT64, stat64)

#define WRAP_FXSTATAT(fn, opname, plain, stat_type)                                                    \
    int fn(int version, int dirfd, const char *path, struct stat_type *buf, int flags);                \
    IOLOOM_EXPORT int fn(int version, int dirfd, const char *path, struct stat_type *buf, int flags) { \
        (void)version;                                                                                 \
        TRACED(P, plain, (dirfd, path, buf, flags), r < 0,                                             \
               record_path(&c, OP(opname), dirfd, path, (struct stat *)buf, -1, r, flags));            \
    }
WRAP_FXSTATAT(__fxstatat, U_FXSTATAT, fstatat, stat)
WRAP_FXSTATAT(__fxstatat64, U_FXSTATAT64, fstatat64, stat64)

/* statx: aux = flags, req_bytes = the mask asked. */
static void record_statx(struct ioloom_call *c, int dirfd, const char *path, const struct statx *sx, int flags,
                         unsigned mask, int r) {
    struct stat st = {0};
    if (r == 0) {
        st.st_dev = makedev(sx->stx_dev_major, sx->stx_dev_minor);
        st.st_ino = sx->stx_ino;
    }
    record_path(c, OP(STATX), dirfd, path, &st, mask, r, flags);
}
IOLOOM_EXPORT int statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *buf) {
    TRACED(P, statx, (dirfd, path, flags, mask, buf), r < 0, record_statx(&c, dirfd, path, buf, flags, mask, r));
}

/* access: aux = mode. */
IOLOOM_EXPORT int access(const char *path, int mode) {
    TRACED(P, access, (path, mode), r < 0, record_path(&c, OP(ACCESS), AT_FDCWD, path, NULL, -1, r, mode));
}
IOLOOM_EXPORT int faccessat(int dirfd, const char *path, int mode, int flags) {
    TRACED(P, faccessat, (dirfd, path, mode, flags), r < 0,
           record_path(&c, OP(FACCESSAT), dirfd, path, NULL, -1, r, mode | (int64_t)flags << 16));
}

/* Calls that remove or rename names, traced or not: a path opened again afterwards may be another file. */
static int renamed(int r) {
    ioloom_names_changed();
    return r;
}
#define WRAP_RENAMING(fn, params, args) \
    IOLOOM_EXPORT int fn params { return renamed(traced_##fn args); }

static int traced_unlink(const char *path) {
    TRACED(P, unlink, (path), r < 0, record_path(&c, OP(UNLINK), AT_FDCWD, path, NULL, -1, r, -1));
}
static int traced_unlinkat(int dirfd, const char *path, int flags) {
    TRACED(P, unlinkat, (dirfd, path, flags), r < 0, record_path(&c, OP(UNLINKAT), dirfd, path, NULL, -1, r, flags));
}
static int traced_rmdir(const char *path) {
    TRACED(P, rmdir, (path), r < 0, record_path(&c, OP(RMDIR), AT_FDCWD, path, NULL, -1, r, -1));
}
WRAP_RENAMING(unlink, (const char *path), (path))
WRAP_RENAMING(unlinkat, (int dirfd, const char *path, int flags), (dirfd, path, flags))
WRAP_RENAMING(rmdir, (const char *path), (path))
/* remove and renameat2 are not recorded (glibc's remove unlinks inside libc). */
IOLOOM_EXPORT int remove(const char *path) { return renamed(IOLOOM_NEXT(remove)(path)); }
IOLOOM_EXPORT int renameat2(int olddir, const char *old, int newdir, const char *new, unsigned flags) {
    return renamed(IOLOOM_NEXT(renameat2)(olddir, old, newdir, new, flags));
}
/* mkdir: req_bytes = mode. */
IOLOOM_EXPORT int mkdir(const char *path, mode_t mode) {
    TRACED(P, mkdir, (path, mode), r < 0, record_path(&c, OP(MKDIR), AT_FDCWD, path, NULL, mode, r, -1));
}
IOLOOM_EXPORT int mkdirat(int dirfd, const char *path, mode_t mode) {
    TRACED(P, mkdirat, (dirfd, path, mode), r < 0, record_path(&c, OP(MKDIRAT), dirfd, path, NULL, mode, r, -1));
}

/* rename: the file is the old path; aux = the file id of the new path (-1 if excluded). */
static void record_rename(struct ioloom_call *c, enum ioloom_op op, int olddir, const char *old, int newdir,
                          const char *new, int r) {
    int32_t target = ioloom_stat_state(newdir, new, NULL);
    record_path(c, op, olddir, old, NULL, -1, r, target >= 0 ? target : -1);
}
static int traced_rename(const char *old, const char *new) {
    TRACED(P, rename, (old, new), r < 0, record_rename(&c, OP(RENAME), AT_FDCWD, old, AT_FDCWD, new, r));
}
static int traced_renameat(int olddir, const char *old, int newdir, const char *new) {
    TRACED(P, renameat, (olddir, old, newdir, new), r < 0,
           record_rename(&c, OP(RENAMEAT), olddir, old, newdir, new, r));
}
WRAP_RENAMING(rename, (const char *old, const char *new), (old, new))
WRAP_RENAMING(renameat, (int olddir, const char *old, int newdir, const char *new), (olddir, old, newdir, new))

/* truncate: offset = req_bytes = the new length. */
static void record_truncate(struct ioloom_call *c, enum ioloom_op op, const char *path, off_t len, int r) {
    int32_t file = ioloom_stat_state(AT_FDCWD, path, NULL);
    ioloom_record_file(c, op, P, file, -1, len, len, r, -1);
}
IOLOOM_EXPORT int truncate(const char *path, off_t len) {
    TRACED(P, truncate, (path, len), r < 0, record_truncate(&c, OP(TRUNCATE), path, len, r));
}
IOLOOM_EXPORT int truncate64(const char *path, off64_t len) {
    TRACED(P, truncate64, (path, len), r < 0, record_truncate(&c, OP(TRUNCATE64), path, len, r));
}

/* chdir and fchdir pass through unrecorded; relative paths named after them are other files. */
IOLOOM_EXPORT int chdir(const char *path) {
    int r = IOLOOM_NEXT(chdir)(path);
    if (r == 0) ioloom_cwd_changed();
    return r;
}
IOLOOM_EXPORT int fchdir(int fd) {
    int r = IOLOOM_NEXT(fchdir)(fd);
    if (r == 0) ioloom_cwd_changed();
    return r;
}
