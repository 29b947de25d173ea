/* The descriptor table, fork and exit handling, and the count of calls that could not be served. */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lf_fdtable.h"
#include "lf_paths.h"

struct lf_ofd *lf_fds[LF_MAX_FDS];
static int fd_limit; /* one past the highest descriptor ever given a container */

static void raise_limit(int fd) {
    int seen = __atomic_load_n(&fd_limit, __ATOMIC_RELAXED);
    while (fd >= seen &&
           !__atomic_compare_exchange_n(&fd_limit, &seen, fd + 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}
static unsigned long unsupported[LF_UNS_COUNT];
static const char *const unsupported_names[LF_UNS_COUNT] = {"mmap", "fallocate", "other"};

/* The reserved descriptor carries what an exec'ed program needs to adopt it (see adopt_inherited): O_APPEND
 * as itself, and "opened for writing" as O_NONBLOCK, meaningless on a directory. */
static int reserve_flags(int flags) {
    return O_RDONLY | O_DIRECTORY | (flags & (O_CLOEXEC | O_APPEND)) |
           ((flags & O_ACCMODE) != O_RDONLY ? O_NONBLOCK : 0);
}

/* Enter an open container into the table under fd. */
static int install(int fd, lf_file *f, int flags) {
    struct lf_ofd *o = fd < LF_MAX_FDS ? calloc(1, sizeof *o) : NULL;
    if (!o) return errno = fd < LF_MAX_FDS ? ENOMEM : EMFILE, -1;
    *o = (struct lf_ofd){
        .file = f, .status = flags & ~(O_ACCMODE | O_CREAT | O_EXCL | O_TRUNC | O_CLOEXEC), .refs = 1, .lock_fd = -1};
    pthread_mutex_init(&o->lock, NULL);
    raise_limit(fd);
    __atomic_store_n(&lf_fds[fd], o, __ATOMIC_RELEASE);
    return 0;
}

int lf_fd_open(lf_file *f, int flags) {
    if (!f) return -1;
    int fd = IOLOOM_NEXT(open)(lf_dir(f), reserve_flags(flags));
    if (fd >= 0 && install(fd, f, flags)) {
        int saved = errno;
        IOLOOM_NEXT(close)(fd);
        errno = saved;
        fd = -1;
    }
    if (fd < 0) {
        int saved = errno;
        lf_close(f);
        errno = saved;
    }
    return fd;
}

void lf_fd_share(int newfd, struct lf_ofd *o) {
    __atomic_add_fetch(&o->refs, 1, __ATOMIC_ACQ_REL);
    raise_limit(newfd);
    __atomic_store_n(&lf_fds[newfd], o, __ATOMIC_RELEASE);
}

/* An open description of this process on the container `dir` (a whole container's, not a packed file's), or NULL. */
static struct lf_ofd *open_on(const char *dir) {
    int limit = __atomic_load_n(&fd_limit, __ATOMIC_RELAXED);
    for (int fd = 0; fd < limit; fd++) {
        struct lf_ofd *o = lf_fd(fd);
        if (o && !o->file->file_id && !strcmp(lf_dir(o->file), dir)) return o;
    }
    return NULL;
}

/* The hidden name beside the container `dir` whose metadata id is `id`: 0, or -1 (ENAMETOOLONG). */
static int hidden_name(const char *dir, const char *id, char hidden[PATH_MAX]) {
    const char *slash = strrchr(dir, '/');
    if (!slash || snprintf(hidden, PATH_MAX, "%.*s/.ioloom-unlinked.%s", (int)(slash - dir), dir, id) >= PATH_MAX)
        return errno = ENAMETOOLONG, -1;
    return 0;
}

/* Every open description of this process on `dir` is of a file with no name left: its last close removes it. */
static void mark_unlinked(const char *dir) {
    int limit = __atomic_load_n(&fd_limit, __ATOMIC_RELAXED);
    for (int fd = 0; fd < limit; fd++) {
        struct lf_ofd *o = lf_fd(fd);
        if (o && !o->file->file_id && !strcmp(lf_dir(o->file), dir)) o->file->unlinked_by = getpid();
    }
}

int lf_set_aside(const char *dir, char aside[PATH_MAX]) {
    struct lf_meta m;
    if (lf_meta_read(dir, &m) || hidden_name(dir, m.id, aside)) return -1;
    if (!strcmp(dir, aside)) return errno = EBUSY, -1; /* already aside: a second move would be onto itself */
    /* Invariant: a container is never renamed onto itself (lf_rename removes its target first: the data goes). */
    assert(strcmp(dir, aside));
    if (lf_rename(dir, aside)) return -1;
    lf_fds_moved(dir, aside);
    return 0;
}

int lf_aside_done(const char *dir, const char *aside, int replaced) {
    int saved = errno;
    if (!replaced) { /* the rename failed: the target comes back, its handles with it */
        int rc = lf_rename(aside, dir);
        if (rc == 0) lf_fds_moved(aside, dir);
        return errno = saved, rc;
    }
    if (open_on(aside)) return mark_unlinked(aside), 0;
    return lf_unlink(aside);
}

int lf_unlink_open(const char *dir) {
    struct lf_ofd *o = open_on(dir);
    char hidden[PATH_MAX];
    if (!o) return 0;
    if (hidden_name(dir, o->file->meta.id, hidden)) return -1;
    /* Its hidden name unlinked (rm -rf of its directory): it stays there until the last close, as an NFS .nfsXXXX. */
    if (strcmp(dir, hidden) && lf_set_aside(dir, hidden)) return -1;
    mark_unlinked(hidden);
    return 1;
}

void lf_fds_moved(const char *from, const char *to) {
    for (struct lf_ofd *o; (o = open_on(from)); o->file->unlinked_by = 0) lf_moved(o->file, to); /* named again */
}

void lf_fds_moved_under(const char *from, const char *to) {
    size_t n = strlen(from);
    int limit = __atomic_load_n(&fd_limit, __ATOMIC_RELAXED);
    for (int fd = 0; fd < limit; fd++) {
        struct lf_ofd *o = lf_fd(fd);
        const char *dir = o && !o->file->file_id ? lf_dir(o->file) : NULL;
        char moved[PATH_MAX];
        if (dir && !strncmp(dir, from, n) && dir[n] == '/' &&
            snprintf(moved, sizeof moved, "%s%s", to, dir + n) < (int)sizeof moved)
            lf_moved(o->file, moved); /* a dup'ed descriptor's second visit no longer matches `from` */
    }
}

/* Removes the container of f if this process hid it at an unlink and holds it open nowhere else. */
static void remove_hidden(lf_file *f, char gone[PATH_MAX]) {
    gone[0] = 0;
    if (f->unlinked_by == getpid() && !open_on(lf_dir(f))) snprintf(gone, PATH_MAX, "%s", lf_dir(f));
}

int lf_fd_release(int fd) {
    struct lf_ofd *o = __atomic_exchange_n(&lf_fds[fd], NULL, __ATOMIC_ACQ_REL);
    if (!o || __atomic_sub_fetch(&o->refs, 1, __ATOMIC_ACQ_REL)) return 0;
    char gone[PATH_MAX];
    remove_hidden(o->file, gone);
    int rc = lf_close(o->file), saved = errno;
    if (gone[0]) lf_unlink(gone);
    if (o->lock_fd >= 0) IOLOOM_NEXT(close)(o->lock_fd);
    pthread_mutex_destroy(&o->lock);
    free(o);
    errno = saved;
    return rc;
}

int lf_unsupported(enum lf_unsupported what, int err) {
    __atomic_add_fetch(&unsupported[what], 1, __ATOMIC_RELAXED);
    errno = err;
    return -1;
}

/* Each open description once (dup'ed descriptors share one). */
static void for_each_ofd(void (*fn)(struct lf_ofd *)) {
    int limit = __atomic_load_n(&fd_limit, __ATOMIC_RELAXED);
    for (int fd = 0; fd < limit; fd++) {
        struct lf_ofd *o = lf_fd(fd);
        int first = o != NULL;
        for (int prev = 0; first && prev < fd; prev++) first = lf_fds[prev] != o;
        if (first) fn(o);
    }
}

static void publish(struct lf_ofd *o) { lf_publish(o->file); }
/* At exit: what this process hid at an unlink goes (its log descriptors stay valid for later writes). */
static void remove_hidden_at_exit(struct lf_ofd *o) {
    if (o->file->unlinked_by == getpid()) lf_unlink(lf_dir(o->file));
}
static void become_child(struct lf_ofd *o) { lf_writer_after_fork(o->file); }

/* Before fork the parent publishes, so the child (a new writer) sees everything written so far. */
static void before_fork(void) {
    ioloom_busy++;
    for_each_ofd(publish);
    ioloom_busy--;
}
static void in_child(void) {
    lf_process_forget();
    lf_cwd_forget(); /* another thread's chdir may have come between its system call and its lf_cwd_forget */
    for_each_ofd(become_child);
}

/* Descriptors inherited across exec (a shell's `cmd > logfs:file`) are container directories this process
 * has no handle for: adopt them, with the access mode and O_APPEND their reservation recorded. The file
 * position starts at 0 (it lived in the parent's memory), right for redirections. Costs one directory scan of
 * /proc/self/fd per program start. */
static void adopt_inherited(void) {
    DIR *d = IOLOOM_NEXT(opendir)("/proc/self/fd");
    if (!d) return;
    for (struct dirent *de; (de = IOLOOM_NEXT(readdir)(d));) {
        int fd = atoi(de->d_name), fl;
        struct stat st;
        if (fd == dirfd(d) || !(de->d_name[0] >= '0' && de->d_name[0] <= '9') || IOLOOM_NEXT(fstat)(fd, &st) ||
            !S_ISDIR(st.st_mode) || (fl = IOLOOM_NEXT(fcntl)(fd, F_GETFL)) < 0 ||
            IOLOOM_NEXT(faccessat)(fd, LF_META_NAME, F_OK, 0))
            continue;
        char link[64], dir[PATH_MAX];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = IOLOOM_NEXT(readlink)(link, dir, sizeof dir - 1);
        if (n <= 0) continue;
        dir[n] = 0;
        /* A pack's descriptor says which pack but not which packed file: leave it unadopted, so the program's
         * I/O on it fails (EBADF/EISDIR) instead of going to the wrong file. */
        if (n >= (ssize_t)sizeof LF_PACK_NAME && !strcmp(dir + n - (sizeof LF_PACK_NAME - 1), LF_PACK_NAME)) continue;
        int flags = (fl & O_NONBLOCK ? O_RDWR : O_RDONLY) | (fl & O_APPEND);
        lf_file *f = lf_open(dir, flags, 0, NULL);
        if (f && install(fd, f, flags))
            lf_close(f);
        else if (f)
            lf_stdio_follow(fd);
    }
    IOLOOM_NEXT(closedir)(d);
}

__attribute__((constructor)) static void lf_init(void) {
    ioloom_busy++;
    adopt_inherited();
    ioloom_busy--;
    pthread_atfork(before_fork, NULL, in_child);
}

/* A program that exits without closing still gets its writes indexed; and we say what we could not do. */
/* _exit skips the destructors (forked children, Python's os._exit): publish first, so what the process wrote
 * is indexed. */
EXPORT __attribute__((noreturn)) void _exit(int status) {
    ioloom_busy++;
    for_each_ofd(publish);
    IOLOOM_NEXT(_exit)(status);
    __builtin_unreachable();
}
void _Exit(int status) __attribute__((noreturn, alias("_exit"), visibility("default")));

int lf_exiting;

__attribute__((destructor)) static void lf_fini(void) {
    fflush(NULL); /* stdio flushes after the destructors: make container streams write while we still index */
    ioloom_busy++;
    lf_exiting = 1;
    for_each_ofd(publish);
    for_each_ofd(remove_hidden_at_exit);
    for (int i = 0; i < LF_UNS_COUNT; i++)
        if (unsupported[i])
            fprintf(stderr, "ioloom-logfs: %lu %s call(s) on containers could not be served (failed with an error)\n",
                    unsupported[i], unsupported_names[i]);
    lf_damaged_report();
    lf_append_report();
    ioloom_busy--;
}
