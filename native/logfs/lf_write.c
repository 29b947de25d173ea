/* The writer: appends the data of each write to its group's data log and keeps its index entries in memory,
 * merging regular runs into pattern entries, until a sync point publishes them to the group's index journal.
 *
 * The data log holds nothing but data, so a write costs one pwrite of exactly its bytes, as it would on the plain
 * file. What recovery needs to re-index the log after a crash (a struct lf_record per regular run of writes:
 * equal writes evenly spaced in the file and the log) is batched in memory and appended to the group's record
 * journal when LF_RECORD_BATCH runs are held, before a new chunk is reserved and at every sync point: a strided
 * or sequential stream costs one record per chunk of data. A crash loses at most the writes of the current batch
 * for `recover` (their data is in the log, not described); everything published stays.
 *
 * Several writers may share one log (fan-out control: IOLOOM_LOGFS_FANOUT=rank|node|K). They never write
 * into the same bytes: each reserves whole chunks of the log (meta chunk size) under an flock of the log,
 * by growing the file. A writer whose reservation is still at the end of the log extends it in place, so a
 * lone writer's log is one contiguous run and a strided run stays one pattern entry. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/falloc.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "lf_fdtable.h"
#include "lf_internal.h"

static const char *env_rank(void) {
    const char *names[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const char *v = ioloom_env_str(names[i], NULL);
        if (v) return v;
    }
    return NULL;
}

/* This process's host name and pid, asked of the kernel once (and again in a forked child: lf_process_forget),
 * not at every create and first write. */
static struct {
    pthread_mutex_t lock;
    int known;
    int pid;
    char host[64];
} self = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void process_known(void) {
    pthread_mutex_lock(&self.lock);
    if (!self.known) {
        snprintf(self.host, sizeof self.host, "host");
        gethostname(self.host, sizeof self.host - 1);
        self.pid = (int)getpid();
        __atomic_store_n(&self.known, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&self.lock);
}

static void process_ask(void) {
    if (!__atomic_load_n(&self.known, __ATOMIC_ACQUIRE)) process_known();
}

void lf_process_forget(void) {
    pthread_mutex_init(&self.lock, NULL); /* another thread may have held it at the fork */
    self.known = 0;
}

/* The group name: which log this process writes (IOLOOM_LOGFS_FANOUT). */
static void writer_group(char *out, size_t cap) {
    process_ask();
    const char *host = self.host;
    const char *fanout = ioloom_env_str("IOLOOM_LOGFS_FANOUT", "rank");
    const char *rank = env_rank();
    long k = strtol(fanout, NULL, 10);
    if (!strcmp(fanout, "node"))
        snprintf(out, cap, "h%s", host);
    else if (rank && k > 0)
        snprintf(out, cap, "g%ld", strtol(rank, NULL, 10) / k);
    else if (rank)
        snprintf(out, cap, "r%s", rank);
    else
        snprintf(out, cap, "p%s.%d", host, self.pid);
}

uint64_t lf_unique_id(void) {
    static unsigned counter;
    process_ask();
    unsigned n = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
    return ((uint64_t)(lf_fnv1a(self.host) & 0xffffff) << 40) | ((uint64_t)(self.pid & 0x3fffff) << 18) | (n & 0x3ffff);
}

/* The backend a group's log goes to: spread by group and container name. */
static int group_backend(const lf_file *f) {
    const char *base = strrchr(f->dir, '/');
    return (int)((lf_fnv1a(f->group) ^ lf_fnv1a(base ? base : f->dir)) % (uint32_t)f->meta.nbackends);
}

/* The path of our group's file `kind` on its backend (made with the container: never made again). */
static void member(const lf_file *f, const char *kind, char path[PATH_MAX]) {
    if (lf_member_path(&f->meta, group_backend(f), kind, f->group, path, PATH_MAX)) path[0] = 0; /* open: ENOENT */
}

void lf_writer_init(lf_file *f) { writer_group(f->group, sizeof f->group); }

/* Opens our group's file `kind` into *fd (created if missing): 1 when this call created it (so it is empty), as
 * O_EXCL tells when the handle made the container and the file is almost surely new. */
static int open_member(const lf_file *f, const char *kind, int flags, int *fd, char path[PATH_MAX]) {
    member(f, kind, path);
    flags |= O_CREAT | O_CLOEXEC | O_NOFOLLOW;
    if (f->created && (*fd = IOLOOM_NEXT(open)(path, flags | O_EXCL, 0644)) >= 0) return 1;
    *fd = IOLOOM_NEXT(open)(path, flags, 0644);
    return 0;
}

static int writer_setup(lf_file *f) {
    if (f->wlog >= 0) return 0;
    f->writer = lf_unique_id();
    char path[PATH_MAX];
    f->journals_new = open_member(f, "index", O_WRONLY | O_APPEND, &f->index_fd, path) &
                      open_member(f, "records", O_WRONLY | O_APPEND, &f->records_fd, path);
    open_member(f, "log", O_RDWR, &f->log_fd, path);
    /* EACCES: a writer who may not write the container's directory (another user's file that its mode lets this
     * one write): refused and counted, as the layer cannot serve it (docs/logfs-format.md) */
    if (f->index_fd < 0 || f->records_fd < 0 || f->log_fd < 0)
        return errno == EACCES ? lf_unsupported(LF_UNS_OTHER, EACCES) : -1;
    int id = lf_log_id(f, path);
    if (id < 0) return -1;
    f->wlog = id;
    f->write_behind = ioloom_env_size("IOLOOM_LOGFS_WRITE_BEHIND", 1) != 0;
    f->page = (uint64_t)sysconf(_SC_PAGESIZE);
    return 0;
}

static size_t record_size(const lf_file *f) {
    return f->meta.version == LF_VERSION_OLDEST ? sizeof(struct lf_record_v2) : sizeof(struct lf_record);
}

/* Run e of the batch as a version-3 record, or (a version-2 container: runs never grow there) a version-2 one. */
static void encode_record(const lf_file *f, const struct lf_entry *e, unsigned char *out) {
    if (f->meta.version == LF_VERSION_OLDEST) {
        assert(e->count == 1); /* add_record grows no run in a version-2 container */
        struct lf_record_v2 r = {.magic = LF_RECORD_MAGIC_V2,
                                 .kind = (uint16_t)e->kind,
                                 .version = LF_VERSION_OLDEST,
                                 .file_id = e->file_id,
                                 .offset = e->offset,
                                 .length = e->length,
                                 .stamp = e->stamp,
                                 .writer = f->writer,
                                 .data_sum = e->data_sum,
                                 .physical = e->physical};
        r.header_sum = (uint32_t)lf_sum64(&r, sizeof r);
        memcpy(out, &r, sizeof r);
        return;
    }
    struct lf_record r = {.magic = LF_RECORD_MAGIC,
                          .kind = (uint16_t)e->kind,
                          .version = LF_VERSION,
                          .file_id = e->file_id,
                          .offset = e->offset,
                          .length = e->length,
                          .count = e->count,
                          .stride = e->stride,
                          .physical = e->physical,
                          .pstride = e->pstride,
                          .stamp = e->stamp,
                          .stamp_last = e->stamp_last,
                          .writer = f->writer,
                          .data_sum = e->data_sum};
    r.header_sum = (uint32_t)lf_sum64(&r, sizeof r);
    memcpy(out, &r, sizeof r);
}

/* Appends the batched records to the record journal in one O_APPEND write (whole records: those of concurrent
 * writers of the group never interleave). A short write keeps the records it did not complete for the next try;
 * a torn one fails its header_sum and recovery skips it. The last run is closed: the next write starts a record. */
static int flush_records(lf_file *f) {
    f->run_open = 0;
    if (!f->nbatch) return 0;
    unsigned char out[LF_RECORD_BATCH * sizeof(struct lf_record)];
    size_t size = record_size(f), bytes = f->nbatch * size;
    for (size_t i = 0; i < f->nbatch; i++) encode_record(f, &f->batch[i], out + i * size);
    uint64_t t0 = lf_phys_traced() ? ioloom_now_ns() : 0;
    ssize_t done = IOLOOM_NEXT(write)(f->records_fd, out, bytes);
    if (t0) {
        char path[PATH_MAX];
        member(f, "records", path);
        lf_phys_event(lf_op_write, path, &f->records_traced_id, f->records_fd, -1, (int64_t)bytes, done, t0);
    }
    if (done == (ssize_t)bytes) return f->nbatch = 0, 0;
    if (done < 0) return -1;
    size_t whole = (size_t)done / size;
    memmove(f->batch, f->batch + whole, (f->nbatch - whole) * sizeof *f->batch);
    f->nbatch -= whole;
    return errno = ENOSPC, -1;
}

/* sync_file_range's errors that the next call would meet again (a seccomp filter, a kernel or file system without
 * it, a log that is not a regular file); EIO and ENOSPC report an earlier writeback, which the next may not. */
static int refused_for_good(int err) { return err == ENOSYS || err == EPERM || err == EINVAL || err == ESPIPE; }

/* Write-behind (docs/logfs-format.md, "Write-behind"): when a writer reserves its next chunk, the whole pages of
 * its log that it filled since the last time are handed to the device. SYNC_FILE_RANGE_WRITE only: WAIT_BEFORE or
 * WAIT_AFTER would wait, and would advance the descriptor's writeback error cursor (file_fdatawait_range), so the
 * layer's later fsync of the log would miss an asynchronous EIO. Best effort: no write fails or sees its errno. */
static void write_behind(lf_file *f) {
    /* [start, end): the kernel's whole pages (not LF_PAGE's) from where the last hand-over, or another writer's part
     * of the log (a multiple of LF_PAGE only), ended to where this writer's data ends: none is written again. */
    uint64_t start = (f->behind + f->page - 1) / f->page * f->page, end = f->resv_cur / f->page * f->page;
    if (end <= start) return;
    if (f->write_behind) {
        int saved = errno; /* the write that reserved succeeds or fails on its own: errno stays the program's */
        if (IOLOOM_NEXT(sync_file_range)(f->log_fd, (off_t)start, (off_t)(end - start), SYNC_FILE_RANGE_WRITE))
            f->write_behind = !refused_for_good(errno);
        errno = saved;
    }
    f->behind = end;
}

/* Room for `need` bytes at f->resv_cur. A new chunk first appends the batched records, so a crash leaves at
 * most the current chunk's writes undescribed, and hands the filled one's pages to the device (write_behind). */
static int reserve(lf_file *f, uint64_t need) {
    if (!need || (f->resv_cur + need <= f->resv_end && f->resv_end)) return 0;
    if (f->resv_end) write_behind(f);
    if (flush_records(f) || flock(f->log_fd, LOCK_EX)) return -1;
    struct stat st;
    int rc = IOLOOM_NEXT(fstat)(f->log_fd, &st);
    if (rc == 0) {
        uint64_t end = (uint64_t)st.st_size, chunk = f->meta.chunk;
        if (!f->resv_end || end != f->resv_end) f->resv_cur = f->behind = end; /* someone else grew it: start afresh */
        uint64_t want = f->resv_cur + need;
        f->resv_end = (want + chunk - 1) / chunk * chunk;
        rc = IOLOOM_NEXT(ftruncate)(f->log_fd, (off_t)f->resv_end);
    }
    flock(f->log_fd, LOCK_UN);
    return rc;
}

static uint64_t next_stamp(lf_file *f) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    f->last_stamp = now > f->last_stamp ? now : f->last_stamp + 1;
    return f->last_stamp;
}

/* Does record r continue the open entry e as a pattern? */
static int extends(const struct lf_entry *e, const struct lf_entry *r) {
    if (e->kind != LF_WRITE || r->kind != LF_WRITE || e->length != r->length || e->file_id != r->file_id) return 0;
    if (e->count == 1) return r->offset >= e->offset + e->length && r->physical > e->physical;
    return r->offset == e->offset + e->count * e->stride && r->physical == e->physical + e->count * e->pstride;
}

/* Does write r continue the single record e, in the file and in the log? Then they are one longer record. */
static int continues(const struct lf_entry *e, const struct lf_entry *r) {
    return e->kind == LF_WRITE && r->kind == LF_WRITE && e->count == 1 && e->file_id == r->file_id &&
           r->offset == e->offset + e->length && r->physical == e->physical + e->length;
}

static void extend(struct lf_entry *e, const struct lf_entry *r) {
    if (e->count == 1) {
        e->stride = r->offset - e->offset;
        e->pstride = r->physical - e->physical;
    }
    e->count++;
    e->stamp_last = r->stamp_last;
    e->data_sum += r->data_sum;
}

/* Writes smaller than the blocks they fill (IOR's -t < -b: 16 writes of 64 KiB per 1 MiB block, then a jump)
 * grow the open record until it is as long as the pattern's before it, and then join that pattern: a strided
 * run of blocks stays one entry whatever the transfer size. Published entries never change. */
static void fold_into_pattern(lf_file *f) {
    if (f->nmine < 2 || f->nmine - 2 < f->npublished) return;
    struct lf_entry *p = &f->mine[f->nmine - 2];
    if (!extends(p, &f->mine[f->nmine - 1])) return;
    extend(p, &f->mine[f->nmine - 1]);
    f->nmine--;
}

/* Adds write r to our entries: 0 when it joined the open entry, 1 when it starts a new one, -1 on failure. */
static int add_entry(lf_file *f, const struct lf_entry *r) {
    struct lf_entry *e = f->nmine ? &f->mine[f->nmine - 1] : NULL;
    if (e && f->entry_open && continues(e, r)) {
        e->length += r->length;
        e->stamp_last = r->stamp_last;
        e->data_sum += r->data_sum;
        fold_into_pattern(f);
        return 0;
    }
    if (e && f->entry_open && extends(e, r)) {
        extend(e, r);
        return 0;
    }
    if (f->nmine == f->capmine) {
        size_t cap = f->capmine ? 2 * f->capmine : 16;
        struct lf_entry *grown = realloc(f->mine, cap * sizeof *grown);
        if (!grown) return errno = ENOMEM, -1;
        f->mine = grown;
        f->capmine = cap;
    }
    f->mine[f->nmine++] = *r;
    f->entry_open = r->kind == LF_WRITE;
    return 1;
}

/* Describes write r in the record batch: it joins the open run when it continues it (equal length, the run's
 * strides) and starts no index entry, so that every index entry is made of whole runs and its stamps are runs'
 * stamps (check compares them); a version-2 container has a record per write. */
static void add_record(lf_file *f, const struct lf_entry *r, int new_entry) {
    struct lf_entry *run = f->nbatch ? &f->batch[f->nbatch - 1] : NULL;
    if (run && f->run_open && !new_entry && f->meta.version > LF_VERSION_OLDEST && extends(run, r)) {
        extend(run, r);
        return;
    }
    assert(f->nbatch < LF_RECORD_BATCH); /* ensure_journal_room appended a full batch before this write */
    f->batch[f->nbatch++] = *r;
    f->run_open = r->kind == LF_WRITE;
}

/* Room allocated ahead, beyond the end of an O_APPEND journal (known to be 0 when `empty`) and without changing
 * its size. File systems without FALLOC_FL_KEEP_SIZE get no such guarantee (then `ioloom container recover`
 * indexes the logs). */
static int room_ahead(int fd, off_t bytes, int empty) {
    struct stat st = {.st_size = 0};
    if (!empty && IOLOOM_NEXT(fstat)(fd, &st)) return -1;
    if (IOLOOM_NEXT(fallocate)(fd, FALLOC_FL_KEEP_SIZE, st.st_size, bytes) == 0) return 0;
    return errno == EOPNOTSUPP || errno == ENOSYS ? 0 : -1;
}

/* Space for what a write will add to the journals, allocated before its data goes anywhere: index room every
 * 32 unpublished entries; record room for two batches at the start of a batch (a batch that a new chunk starts
 * uses the second). On a full file system the write that could not be described fails with ENOSPC, and
 * publishing does not. */
static int ensure_journal_room(lf_file *f) {
    size_t pending = f->nmine - f->npublished;
    int empty = f->journals_new; /* the first write to journals this handle created */
    f->journals_new = 0;
    if (pending % 32 == 0 &&
        room_ahead(f->index_fd, (off_t)((pending + 64) * sizeof(struct lf_entry) + 4 * sizeof(struct lf_block)), empty))
        return -1;
    if (f->nbatch == LF_RECORD_BATCH && flush_records(f)) return -1;
    return f->nbatch ? 0 : room_ahead(f->records_fd, 2 * LF_RECORD_BATCH * sizeof(struct lf_record), empty);
}

int lf_writer_append(lf_file *f, uint16_t kind, const void *buf, size_t n, uint64_t offset) {
    if (offset > LF_MAX_SIZE || n > LF_MAX_SIZE - offset) return errno = EFBIG, -1; /* as past a file system's limit */
    if (writer_setup(f) || ensure_journal_room(f) || reserve(f, n)) return -1;
    uint64_t at = f->resv_cur, stamp = next_stamp(f);
    struct lf_entry e = {.kind = kind,
                         .file_id = f->file_id,
                         .offset = offset,
                         .length = n,
                         .count = 1,
                         .physical = at,
                         .stamp = stamp,
                         .stamp_last = stamp,
                         .data_sum = lf_sum64(buf, n)};
    if (n) {
        uint64_t t0 = lf_phys_traced() ? ioloom_now_ns() : 0;
        ssize_t done = lf_full_pwrite(f->log_fd, buf, n, at);
        if (t0) {
            struct lf_log *log = &f->logs[f->wlog];
            lf_phys_event(lf_op_pwrite, log->path, &log->traced_id, f->log_fd, (int64_t)at, (int64_t)n, done, t0);
        }
        if (done != (ssize_t)n) {
            /* Short or failed (ENOSPC, EIO...): the write is neither recorded nor indexed, and its torn bytes
             * are abandoned with the rest of the reservation. */
            if (done >= 0) errno = ENOSPC;
            f->resv_end = 0;
            return -1;
        }
    }
    f->resv_cur = at + n;
    int new_entry = add_entry(f, &e);
    if (new_entry < 0) return -1;
    add_record(f, &e, new_entry);
    f->map_stale = 1;
    return 0;
}

int lf_writer_name(lf_file *f, const char *name) {
    char path[PATH_MAX], line[NAME_MAX + 16];
    member(f, "names", path);
    int n = snprintf(line, sizeof line, "%08x %s\n", f->file_id, name);
    int fd = IOLOOM_NEXT(open)(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return -1;
    /* One short O_APPEND write: lines of concurrent writers of the group never interleave. */
    ssize_t done = IOLOOM_NEXT(write)(fd, line, (size_t)n);
    int saved = errno;
    if (IOLOOM_NEXT(close)(fd) && done == n) return -1; /* a write error the file system reports at close */
    return done == n ? 0 : (errno = done < 0 ? saved : ENOSPC, -1);
}

static uint64_t ns(struct timespec t) { return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec; }

/* The logical file's modification time is its directory's (stat reports the directory's times): published
 * writes move it to their last stamp, unless the times were set (utimensat: the directory's ctime moves) after
 * them, or a later time is there already. Best effort: the data is published either way. */
static void mark_modified(const lf_file *f, uint64_t stamp) {
    struct stat st;
    if (IOLOOM_NEXT(stat)(f->dir, &st) || stamp <= ns(st.st_ctim) || stamp <= ns(st.st_mtim)) return;
    struct timespec times[2] = {{.tv_nsec = UTIME_OMIT}, {(time_t)(stamp / 1000000000u), (long)(stamp % 1000000000u)}};
    int saved = errno;
    IOLOOM_NEXT(utimensat)(AT_FDCWD, f->dir, times, 0);
    errno = saved;
}

/* Appends the unpublished entries as one block to the group's index journal; closes the open entry. */
int lf_writer_publish(lf_file *f) {
    f->entry_open = 0;
    size_t count = f->nmine - f->npublished;
    if (f->wlog < 0) return 0;
    if (flush_records(f)) return -1;
    if (!count) return 0;
    struct lf_block b = {.magic = LF_BLOCK_MAGIC,
                         .version = (uint32_t)f->meta.version,
                         .writer = f->writer,
                         .count = (uint32_t)count,
                         .entries_sum = lf_sum64(f->mine + f->npublished, count * sizeof *f->mine)};
    b.header_sum = (uint32_t)lf_sum64(&b, sizeof b);
    struct iovec iov[2] = {{&b, sizeof b}, {f->mine + f->npublished, count * sizeof *f->mine}};
    if (flock(f->index_fd, LOCK_EX)) return -1;
    uint64_t t0 = lf_phys_traced() ? ioloom_now_ns() : 0;
    ssize_t done = IOLOOM_NEXT(writev)(f->index_fd, iov, 2);
    if (t0) {
        char path[PATH_MAX];
        member(f, "index", path);
        lf_phys_event(lf_op_writev, path, &f->index_traced_id, f->index_fd, -1,
                      (int64_t)(iov[0].iov_len + iov[1].iov_len), done, t0);
    }
    int saved = errno;
    flock(f->index_fd, LOCK_UN);
    if (done != (ssize_t)(iov[0].iov_len + iov[1].iov_len)) return errno = done < 0 ? saved : ENOSPC, -1;
    f->npublished = f->nmine;
    mark_modified(f, f->mine[f->nmine - 1].stamp_last);
    return 0;
}

/* In a forked child: the parent keeps writing as itself, so the child becomes a new writer (new id, and a
 * new group log when groups are per process) on its next write. The parent published before forking
 * (lf_posix.c), so the child finds all of the entries it inherited in the index journals. */
void lf_writer_after_fork(lf_file *f) {
    if (f->wlog < 0) return;
    IOLOOM_NEXT(close)(f->log_fd);
    IOLOOM_NEXT(close)(f->index_fd);
    IOLOOM_NEXT(close)(f->records_fd);
    f->log_fd = f->index_fd = f->records_fd = f->wlog = -1;
    f->writer = 0; /* not the parent's id until its next write: loads must not skip the parent's blocks as its own */
    f->index_traced_id = f->records_traced_id = LF_UNTRACED;
    f->nbatch = 0;
    f->run_open = 0;
    writer_group(f->group, sizeof f->group); /* per-process groups name the child's own log */
    f->nmine = f->npublished = 0;
    f->entry_open = 0;
    f->resv_end = 0;
    f->others_stale = f->map_stale = 1;
    if (f->append_fd >= 0) IOLOOM_NEXT(close)(f->append_fd); /* shared with the parent: its flock would be ours */
    f->append_fd = -1;
    f->append_known = 0;
}
