/* The logfs C API (logfs.h) over the writer (lf_write.c) and the reader (lf_read.c). One mutex per handle:
 * threads sharing a descriptor share its handle. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lf_internal.h"

#define LOCKED(f, expr)                        \
    ({                                         \
        pthread_mutex_lock(&(f)->lock);        \
        __typeof__(expr) locked_result = expr; \
        int locked_errno = errno;              \
        pthread_mutex_unlock(&(f)->lock);      \
        errno = locked_errno;                  \
        locked_result;                         \
    })

static int writable(const lf_file *f) { return (f->flags & O_ACCMODE) != O_RDONLY; }
static int readable(const lf_file *f) { return (f->flags & O_ACCMODE) != O_WRONLY; }

/* Closes a handle whose open failed; NULL with the failure's errno. */
static lf_file *failed(lf_file *f) {
    int saved = errno;
    lf_close(f);
    errno = saved;
    return NULL;
}

/* A handle on the container `dir` (made first under O_CREAT), its metadata read, no index loaded yet. */
static lf_file *new_handle(const char *dir, uint32_t file_id, int flags, mode_t mode,
                           const struct lf_backends *backends, int absent) {
    struct lf_meta made;
    int created = 0;
    if (flags & O_CREAT) {
        if ((created = lf_meta_create(dir, mode, backends, flags & O_EXCL, absent, &made)) < 0) return NULL;
    } else if (!lf_is_container(dir)) {
        return errno = ENOENT, NULL;
    }
    lf_file *f = calloc(1, sizeof *f);
    if (!f) return errno = ENOMEM, NULL;
    pthread_mutex_init(&f->lock, NULL);
    snprintf(f->dir, sizeof f->dir, "%s", dir);
    f->flags = flags;
    f->file_id = file_id;
    f->wlog = f->log_fd = f->index_fd = f->records_fd = f->append_fd = -1;
    f->index_traced_id = f->records_traced_id = LF_UNTRACED;
    f->map_stale = f->others_stale = 1;
    f->created = created;
    f->mode_changes = __atomic_load_n(&lf_mode_changes, __ATOMIC_ACQUIRE); /* before its metadata is read */
    lf_writer_init(f);
    /* The metadata this handle just wrote is not read back, unless it names extra backends (reading checks and
     * resolves their directories as every later opener will). */
    if (created && made.nbackends == 1 ? (f->meta = made, 0) : lf_meta_read(dir, &f->meta)) return failed(f);
    return f;
}

/* Before a write, truncate or open with O_TRUNC: the set-user-ID bit, and the set-group-ID bit where the kernel
 * would, dropped from the logical mode when the caller may not keep them (lf_mode_after_write), as the kernel drops
 * them from a plain file (file_remove_privs). The mode is the handle's, read again when this process changed a mode
 * since: a chmod by another process after the open is not seen (docs/logfs-format.md). Packed files have their
 * pack's mode, which no chmod sets. */
static int drop_privs(lf_file *f) {
    if (f->file_id) return 0;
    if (f->mode_changes != __atomic_load_n(&lf_mode_changes, __ATOMIC_ACQUIRE)) lf_meta_refresh_mode(f);
    if (!(f->meta.mode & (S_ISUID | S_ISGID))) return 0;
    struct stat st;
    if (IOLOOM_NEXT(stat)(f->dir, &st)) return -1;
    mode_t mode = lf_mode_after_write(f->meta.mode, st.st_gid);
    if (mode == f->meta.mode) return 0;
    if (lf_meta_set_mode(f->dir, mode)) return -1; /* a writer that may not change the container's directory */
    f->meta.mode = mode;
    return 0;
}

/* Opened with O_TRUNC for writing: a truncate to 0 logged when the file holds bytes; -1 if logging it failed. A
 * file this open made is not truncated (its set-ID bits stay, as the kernel's FMODE_CREATED). */
static int truncate_at_open(lf_file *f) {
    if (!(f->flags & O_TRUNC) || !writable(f) || f->created) return 0;
    if (drop_privs(f)) return -1;
    if (lf_map_build(f)) return 0;
    if (!f->map.size) return lf_touch(f); /* nothing to log, but the kernel's truncate marks the times all the same */
    return lf_writer_append(f, LF_TRUNCATE, NULL, 0, 0) ? -1 : 0;
}

lf_file *lf_open_file(const char *dir, uint32_t file_id, int flags, mode_t mode, const struct lf_backends *backends,
                      int absent) {
    lf_file *f = new_handle(dir, file_id, flags, mode, backends, absent);
    /* A writer loads the other writers' indexes on its first read or size query, not here: N writers opening a
     * shared file would otherwise read N^2 journals. A reader loads them now, so a damaged index fails the open. */
    if (f && ((!writable(f) && lf_load_others(f)) || truncate_at_open(f))) return failed(f);
    return f;
}

lf_file *lf_open(const char *dir, int flags, mode_t mode, const struct lf_backends *backends) {
    return lf_open_file(dir, 0, flags, mode, backends, 0);
}

static ssize_t do_pwrite(lf_file *f, const void *buf, size_t n, uint64_t offset) {
    if (!writable(f)) return errno = EBADF, -1;
    if (!n) return 0;
    return drop_privs(f) || lf_writer_append(f, LF_WRITE, buf, n, offset) ? -1 : (ssize_t)n;
}

ssize_t lf_pwrite(lf_file *f, const void *buf, size_t n, uint64_t offset) {
    return LOCKED(f, do_pwrite(f, buf, n, offset));
}

/* Appends made without the container's lock (its directory could not be opened or flock failed): reported at exit. */
static unsigned long unserialised;

void lf_append_report(void) {
    unsigned long n = __atomic_load_n(&unserialised, __ATOMIC_RELAXED);
    if (n)
        fprintf(stderr,
                "ioloom-logfs: %lu O_APPEND write(s) could not lock their container (flock) and went to the end "
                "this process knew: appends of other processes at the same time may have overwritten them\n",
                n);
}

/* The exclusive flock of the container's directory that appenders of every process take (0), or -1 (counted). */
static int lock_appends(lf_file *f) {
    int saved = errno, rc = -1;
    if (f->append_fd < 0) f->append_fd = IOLOOM_NEXT(open)(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (f->append_fd >= 0)
        while ((rc = flock(f->append_fd, LOCK_EX)) && errno == EINTR) continue;
    if (rc) __atomic_fetch_add(&unserialised, 1, __ATOMIC_RELAXED);
    errno = saved;
    return rc;
}

static ino_t own_journal(const lf_file *f) {
    struct stat st;
    return f->index_fd >= 0 && IOLOOM_NEXT(fstat)(f->index_fd, &st) == 0 ? st.st_ino : 0;
}

/* The logical end, under the lock: the other writers' indexes are loaded again unless no journal changed since
 * this handle's last append (*sig, *own as lf_journals_sig found them); the end that append left is taken as it is
 * when nothing at all changed since (no map to rebuild: the single appender's case). */
static int append_end(lf_file *f, uint64_t *sig, struct stat *own, uint64_t *end) {
    int scanned = lf_journals_sig(f, own_journal(f), own, sig) == 0;
    if (!scanned || !f->append_known || *sig != f->append_sig) f->others_stale = 1;
    if (!f->others_stale && f->append_known && f->append_stamp == f->last_stamp) return *end = f->append_end, 0;
    if (lf_map_build(f)) return -1;
    *end = f->map.size;
    for (size_t i = 0; i < f->map.nall; i++) /* stamped after every entry it follows, whatever the clocks say */
        if (f->map.all[i].e.stamp_last > f->last_stamp) f->last_stamp = f->map.all[i].e.stamp_last;
    return 0;
}

/* After the append at `end` is published: what the next append of this handle may take as it is. The summary
 * stays valid only if this handle's journal grew by its own block alone since the scan (`own`, before) and the
 * scan found it: another writer of the group that published meanwhile makes the next append load again. */
static void append_done(lf_file *f, uint64_t sig, const struct stat *own, uint64_t end, size_t published) {
    struct stat now;
    f->append_known = own->st_size >= 0 && IOLOOM_NEXT(fstat)(f->index_fd, &now) == 0 && now.st_ino == own->st_ino &&
                      now.st_size == own->st_size + (off_t)published;
    f->append_end = end;
    f->append_stamp = f->last_stamp;
    f->append_sig = sig - lf_journal_term(own) + (f->append_known ? lf_journal_term(&now) : 0);
}

/* O_APPEND as a local file system does it for every process (docs/logfs-format.md, "Appends"): under the
 * container's lock, the write goes to the end that every append completed before it left, and its entry is
 * published before the lock is released, so the next appender, in any process, finds it. Without the lock
 * (counted), at the end this handle knows after loading the published indexes. */
static ssize_t do_append(lf_file *f, const void *buf, size_t n, uint64_t *where) {
    if (!writable(f)) return errno = EBADF, -1;
    int locked = lock_appends(f) == 0;
    uint64_t sig;
    struct stat own;
    ssize_t done = append_end(f, &sig, &own, where) ? -1 : do_pwrite(f, buf, n, *where);
    size_t published = (f->nmine - f->npublished) * sizeof(struct lf_entry) + sizeof(struct lf_block);
    int unpublished = done > 0 && lf_writer_publish(f);
    if (done > 0 && !unpublished)
        append_done(f, sig, &own, *where + (uint64_t)done, published);
    else
        f->append_known = 0; /* nothing written: the next append starts from the indexes again */
    if (unpublished && locked) __atomic_fetch_add(&unserialised, 1, __ATOMIC_RELAXED); /* others cannot see it */
    int saved = errno;
    if (locked) flock(f->append_fd, LOCK_UN);
    errno = saved;
    return done;
}

ssize_t lf_append(lf_file *f, const void *buf, size_t n, uint64_t *where) {
    return LOCKED(f, do_append(f, buf, n, where));
}

/* The first read of a handle lists its container's directory once without O_NOATIME: the kernel then marks the
 * directory's access time, the logical file's, by the mount's own rule (relatime, strictatime, noatime), as it marks
 * a plain file's at a read (the layer's other listings do not touch it). Not under O_NOATIME, as the kernel. */
static void mark_read(lf_file *f) {
    f->read_marked = 1;
    if (f->flags & O_NOATIME) return;
    int saved = errno, fd = IOLOOM_NEXT(open)(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd < 0 ? NULL : IOLOOM_NEXT(fdopendir)(fd);
    if (d) {
        IOLOOM_NEXT(readdir)(d);
        IOLOOM_NEXT(closedir)(d);
    } else if (fd >= 0) {
        IOLOOM_NEXT(close)(fd);
    }
    errno = saved;
}

/* A read that reaches past the end this handle knows may be racing a writer that has published since: load
 * the indexes again once (not again until something changes), then answer. */
static ssize_t do_pread(lf_file *f, void *buf, size_t n, uint64_t offset) {
    if (!readable(f)) return errno = EBADF, -1;
    if (n && !f->read_marked) mark_read(f);
    if (lf_map_build(f)) return -1;
    if (offset + n > f->map.size && !f->reloaded_at_end) {
        f->reloaded_at_end = 1;
        if (lf_load_others(f)) return -1;
    }
    return lf_map_read(f, buf, n, offset);
}

ssize_t lf_pread(lf_file *f, void *buf, size_t n, uint64_t offset) { return LOCKED(f, do_pread(f, buf, n, offset)); }

static int do_truncate(lf_file *f, uint64_t size) {
    if (!writable(f)) return errno = EINVAL, -1;
    return drop_privs(f) || lf_writer_append(f, LF_TRUNCATE, NULL, 0, size) ? -1 : 0;
}

int lf_truncate(lf_file *f, uint64_t size) { return LOCKED(f, do_truncate(f, size)); }

static int64_t do_size(lf_file *f) { return lf_map_build(f) ? -1 : (int64_t)f->map.size; }

int64_t lf_size(lf_file *f) { return LOCKED(f, do_size(f)); }

/* One fsync, run in a thread of its own by sync_writer. */
struct sync_job {
    int fd, rc, err;
};

static void *sync_job(void *arg) {
    struct sync_job *job = arg;
    job->rc = IOLOOM_NEXT(fsync)(job->fd);
    job->err = errno;
    return NULL;
}

/* Starts the job in a thread with every signal blocked (the program's handlers never run in it); 0 if none could
 * be made (then the caller runs it itself). */
static int sync_thread(pthread_t *thread, struct sync_job *job) {
    pthread_attr_t attr;
    sigset_t all, old;
    sigfillset(&all);
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 << 10);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int started = pthread_create(thread, &attr, sync_job, job) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    return started;
}

/* The writer's three files made durable, their fsyncs at once: the file system then commits them together (one
 * journal commit and device flush, where one fsync after another waited for three). */
static int sync_writer(lf_file *f) {
    struct sync_job jobs[] = {{.fd = f->records_fd}, {.fd = f->index_fd}, {.fd = f->log_fd}};
    pthread_t threads[2];
    int started[2];
    for (int i = 0; i < 2; i++) started[i] = sync_thread(&threads[i], &jobs[i]);
    sync_job(&jobs[2]);
    for (int i = 0; i < 2; i++) {
        if (started[i])
            pthread_join(threads[i], NULL);
        else
            sync_job(&jobs[i]);
    }
    for (int i = 0; i < 3; i++)
        if (jobs[i].rc) return errno = jobs[i].err, -1;
    return 0;
}

static int do_sync(lf_file *f) {
    if (lf_writer_publish(f) || (f->wlog >= 0 && sync_writer(f))) return -1;
    return lf_load_others(f);
}

int lf_sync(lf_file *f) { return LOCKED(f, do_sync(f)); }

int lf_publish(lf_file *f) { return LOCKED(f, lf_writer_publish(f)); }

static int do_refresh(lf_file *f) { return lf_writer_publish(f) || lf_load_others(f) ? -1 : 0; }

int lf_refresh(lf_file *f) { return LOCKED(f, do_refresh(f)); }

int lf_touch(lf_file *f) {
    const struct timespec now[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_nsec = UTIME_NOW}};
    return IOLOOM_NEXT(utimensat)(AT_FDCWD, f->dir, now, 0);
}

static void do_moved(lf_file *f, const char *to) {
    size_t old = strlen(f->dir);
    for (size_t i = 0; i < f->nlogs; i++) {
        char *path = f->logs[i].path, *moved;
        if (strncmp(path, f->dir, old) || path[old] != '/') continue; /* on an extra backend: it stays */
        if (asprintf(&moved, "%s%s", to, path + old) < 0) continue;   /* the old path: an open log still reads */
        free(path);
        f->logs[i].path = moved;
    }
    snprintf(f->dir, sizeof f->dir, "%s", to);
    snprintf(f->meta.backend[0], sizeof f->meta.backend[0], "%s", to); /* backend 0 is where the container is */
}

void lf_moved(lf_file *f, const char *to) {
    pthread_mutex_lock(&f->lock);
    do_moved(f, to);
    pthread_mutex_unlock(&f->lock);
}

int lf_flags(const lf_file *f) { return f->flags; }
const char *lf_dir(const lf_file *f) { return f->dir; }

/* The close of a file we wrote may be the first to report a write error (NFS defers ENOSPC, EDQUOT and EIO to
 * close): the program's close of the container must fail then, as it would on a plain file. */
int lf_close(lf_file *f) {
    int rc = lf_writer_publish(f);
    int saved = errno;
    for (size_t i = 0; i < f->nlogs; i++) {
        if (f->logs[i].fd >= 0) IOLOOM_NEXT(close)(f->logs[i].fd); /* read only: nothing to report */
        free(f->logs[i].path);
    }
    if (f->append_fd >= 0) IOLOOM_NEXT(close)(f->append_fd); /* its lock is held only during an append */
    int written[] = {f->log_fd, f->index_fd, f->records_fd};
    for (size_t i = 0; i < sizeof written / sizeof *written; i++)
        if (written[i] >= 0 && IOLOOM_NEXT(close)(written[i]) && rc == 0) rc = -1, saved = errno;
    free(f->logs);
    free(f->mine);
    free(f->others);
    free(f->map.ext);
    free(f->map.all);
    pthread_mutex_destroy(&f->lock);
    free(f);
    errno = saved;
    return rc;
}

/* The space the container's data logs on backend b take (what a plain file's st_blocks counts: its data, holes
 * excluded). */
static blkcnt_t backend_log_blocks(const struct lf_meta *m, int b) {
    DIR *d = lf_opendir(m->backend[b]);
    blkcnt_t blocks = 0;
    for (struct dirent *de; d && (de = IOLOOM_NEXT(readdir)(d));) blocks += lf_log_blocks(m, b, dirfd(d), de->d_name);
    if (d) IOLOOM_NEXT(closedir)(d);
    return blocks;
}

static void stat_set(const lf_file *f, int64_t size, blkcnt_t blocks, struct stat *st) {
    st->st_mode = S_IFREG | f->meta.mode;
    st->st_size = size;
    st->st_nlink = f->unlinked_by ? 0 : 1; /* an open file unlinked: no name left */
    st->st_blocks = blocks;
}

void lf_stat_fill(const lf_file *f, int64_t size, struct stat *st) {
    blkcnt_t blocks = 0;
    for (int b = 0; b < f->meta.nbackends; b++) blocks += backend_log_blocks(&f->meta, b);
    stat_set(f, size, blocks, st);
}

/* One scan of the container's directories loads the indexes (the size) and adds up the logs' blocks: MPI-IO
 * libraries stat the file they have just opened (OMPIO's file system probe at every MPI_File_open). */
int lf_stat(const char *dir, struct stat *st) {
    lf_file *f = new_handle(dir, 0, O_RDONLY, 0, NULL, 0);
    if (!f) return -1;
    blkcnt_t blocks = 0;
    int64_t size = lf_load_scan(f, &blocks) ? -1 : lf_size(f);
    int rc = size >= 0 ? IOLOOM_NEXT(stat)(dir, st) : -1; /* the times, owner and inode: the directory's */
    if (rc == 0) stat_set(f, size, blocks, st);
    int saved = errno;
    lf_close(f);
    errno = saved;
    return rc;
}

/* Is `name` a file logfs puts on backend b for this container (a group's log, journals or names)? */
static int backend_file(const struct lf_meta *m, int b, const char *name) {
    static const char *const kinds[] = {"log", "records", "index", "names"};
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        if (lf_member_group(m, b, name, kinds[i])) return 1;
    return 0;
}

/* Removes backend b's files of this container and its directory (unless `dry`), never following a link. An extra
 * backend (b > 0) holding anything but the regular files logfs puts there is refused (EIO); a spread directory is
 * shared: only this container's files (named <id>.*) are looked at and removed, the directory stays. */
static int remove_dir(const struct lf_meta *m, int b, int dry) {
    const char *dir = m->backend[b];
    int strict = b > 0, shared = b > 0 && m->spread;
    int fd = IOLOOM_NEXT(open)(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd < 0 ? NULL : IOLOOM_NEXT(fdopendir)(fd);
    if (!d) {
        if (fd >= 0) IOLOOM_NEXT(close)(fd);
        return errno == ENOENT ? 0 : -1;
    }
    int rc = 0;
    for (struct dirent *de; rc == 0 && (de = IOLOOM_NEXT(readdir)(d));) {
        struct stat st;
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        if (shared && strncmp(de->d_name, m->prefix[b], strlen(m->prefix[b]))) continue; /* another container's */
        if (strict && (IOLOOM_NEXT(fstatat)(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode) ||
                       !backend_file(m, b, de->d_name)))
            rc = lf_damaged(dir, "an extra backend holding files logfs did not put there (nothing was deleted)");
        else if (!dry && IOLOOM_NEXT(unlinkat)(fd, de->d_name, 0))
            rc = -1;
    }
    IOLOOM_NEXT(closedir)(d);
    return rc || dry || shared ? rc : IOLOOM_NEXT(rmdir)(dir);
}

int lf_unlink(const char *dir) {
    struct lf_meta m;
    if (lf_meta_read_for(dir, &m, 1)) return -1;
    for (int b = 1; b < m.nbackends; b++)
        if (remove_dir(&m, b, 1)) return -1; /* every extra backend checked before anything goes */
    int rc = 0;
    /* Extra backends first, the primary (with the metadata) last: an interrupted unlink leaves a container
     * that still opens and that unlink can finish. */
    for (int b = m.nbackends - 1; b >= 0; b--) rc |= remove_dir(&m, b, 0);
    return rc;
}

int lf_rename(const char *from, const char *to) {
    struct stat src, st; /* rename replaces its target; a symbolic link is replaced, never what it names */
    if (!lf_is_container(from) || IOLOOM_NEXT(fstatat)(AT_FDCWD, from, &src, AT_SYMLINK_NOFOLLOW))
        return errno = ENOENT, -1;
    if (IOLOOM_NEXT(fstatat)(AT_FDCWD, to, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        /* Two names of one container (rename(a, a)): nothing to do, as rename(2); removing the target first would
         * remove the source with it. */
        if (st.st_dev == src.st_dev && st.st_ino == src.st_ino) return 0;
        if (S_ISDIR(st.st_mode) && lf_is_container(to)) {
            if (lf_unlink(to)) return -1;
        } else if (S_ISDIR(st.st_mode))
            return errno = EISDIR, -1;
        else if (IOLOOM_NEXT(unlink)(to))
            return -1;
    }
    /* Only the primary directory moves: the metadata names the extra backends' directories, which are
     * unique to this container (lf_meta.c). Moved to another directory, its ".." entry changes: not the file. */
    struct timespec times[2];
    int kept = lf_times_get(from, times) == 0, rc = IOLOOM_NEXT(rename)(from, to);
    if (rc == 0 && kept) lf_times_put(to, times);
    return rc;
}
