/* The descriptor table, fork and exit handling, and the count of calls that could not be served. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
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
    *o = (struct lf_ofd){.file = f,
                         .status = flags & ~(O_ACCMODE | O_CREAT | O_EXCL | O_TRUNC | O_CLOEXEC),
                         .refs = 1,
                         .lock_fd = -1,
                         .hidden_fd = -1};
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

/* The open description of this process on the container `dir` (a whole container's, not a packed file's) at the
 * first descriptor from *fd on, or NULL; *fd moves past it (a dup'ed description is met once per descriptor). */
static struct lf_ofd *next_on(const char *dir, int *fd) {
    int limit = __atomic_load_n(&fd_limit, __ATOMIC_RELAXED);
    for (; *fd < limit; ++*fd) {
        struct lf_ofd *o = lf_fd(*fd);
        if (o && !o->file->file_id && !strcmp(lf_dir(o->file), dir)) {
            ++*fd;
            return o;
        }
    }
    return NULL;
}

static struct lf_ofd *open_on(const char *dir) {
    int fd = 0;
    return next_on(dir, &fd);
}

/* The hidden name beside the container `dir` whose metadata id is `id`: 0, or -1 (ENAMETOOLONG). */
static int hidden_name(const char *dir, const char *id, char hidden[PATH_MAX]) {
    const char *slash = strrchr(dir, '/');
    if (!slash || snprintf(hidden, PATH_MAX, "%.*s/.ioloom-unlinked.%s", (int)(slash - dir), dir, id) >= PATH_MAX)
        return errno = ENAMETOOLONG, -1;
    return 0;
}

/* A hidden container is held, by each process with descriptors on it, under a shared flock of its own open
 * description: a fork's child, which shares the parent's descriptors, takes its own (become_child), so that the
 * last close in one process can tell whether another still uses the container (held_elsewhere). */
static void hold_hidden(struct lf_ofd *o) {
    int fd = o->hidden_fd < 0 ? IOLOOM_NEXT(open)(lf_dir(o->file), O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (fd >= 0 && flock(fd, LOCK_SH)) {
        IOLOOM_NEXT(close)(fd);
        fd = -1;
    }
    if (fd >= 0) o->hidden_fd = fd;
}
static void let_go(struct lf_ofd *o) {
    if (o->hidden_fd >= 0) IOLOOM_NEXT(close)(o->hidden_fd);
    o->hidden_fd = -1;
}
/* Another process (a fork's child) holds the hidden container `dir`: an exclusive flock of it is refused. */
static int held_elsewhere(const char *dir) {
    int fd = IOLOOM_NEXT(open)(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), held = 0, saved = errno;
    if (fd >= 0) {
        held = flock(fd, LOCK_EX | LOCK_NB) && errno == EWOULDBLOCK;
        IOLOOM_NEXT(close)(fd);
    }
    errno = saved;
    return held;
}

/* Every open description of this process on `dir` is of a file with no name left: its last close removes it. */
static void mark_unlinked(const char *dir) {
    int fd = 0;
    for (struct lf_ofd *o; (o = next_on(dir, &fd));) {
        o->file->unlinked_by = getpid();
        hold_hidden(o);
    }
}

int lf_set_aside(const char *dir, char aside[PATH_MAX]) {
    struct lf_meta m;
    if (lf_meta_read(dir, &m) || hidden_name(dir, m.id, aside)) return -1;
    if (!strcmp(dir, aside)) return errno = EBUSY, -1; /* already aside */
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
    if (!open_on(aside)) return lf_unlink(aside);
    mark_unlinked(aside);
    return 0;
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
    for (struct lf_ofd *o; (o = open_on(from));) {
        lf_moved(o->file, to);
        o->file->unlinked_by = 0; /* named again: no longer removed at the close */
        let_go(o);
    }
}

int lf_fds_ever(void) { return __atomic_load_n(&fd_limit, __ATOMIC_RELAXED) > 0; }

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

/* The container of o, hidden at an unlink by this process or the one it was forked from, goes once this process
 * holds it open nowhere else and no other process holds it (gone: its path). */
static void remove_hidden(struct lf_ofd *o, char gone[PATH_MAX]) {
    const char *dir = lf_dir(o->file);
    gone[0] = 0;
    if (!o->file->unlinked_by || open_on(dir)) return;
    let_go(o);
    if (!held_elsewhere(dir)) snprintf(gone, PATH_MAX, "%s", dir);
}

int lf_fd_release(int fd) {
    struct lf_ofd *o = __atomic_exchange_n(&lf_fds[fd], NULL, __ATOMIC_ACQ_REL);
    if (!o || __atomic_sub_fetch(&o->refs, 1, __ATOMIC_ACQ_REL)) return 0;
    char gone[PATH_MAX];
    remove_hidden(o, gone);
    int rc = lf_close(o->file), saved = errno;
    if (gone[0]) lf_unlink(gone);
    if (o->lock_fd >= 0) IOLOOM_NEXT(close)(o->lock_fd);
    let_go(o);
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
    if (!o->file->unlinked_by) return;
    let_go(o);
    if (!held_elsewhere(lf_dir(o->file))) lf_unlink(lf_dir(o->file));
}
/* A child takes its own hold of a hidden container before it lets go of the one shared with its parent. */
static void become_child(struct lf_ofd *o) {
    lf_writer_after_fork(o->file);
    int shared = o->hidden_fd;
    o->hidden_fd = -1;
    if (shared < 0) return;
    hold_hidden(o);
    IOLOOM_NEXT(close)(shared);
}

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
