/* Internals shared by the logfs sources: the open-container handle and the helpers each file provides. */
#ifndef LF_INTERNAL_H
#define LF_INTERNAL_H

#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "ioloom_core.h"
#include "lf_format.h"
#include "logfs.h"

#define LF_MAX_BACKENDS 8

#define LF_ID_MAX 40

/* FNV-1a, 32 bits: how names are hashed to backends, spread directories and packed file ids. */
static inline uint32_t lf_fnv1a(const char *s) {
    uint32_t h = 2166136261u;
    while (*s) h = (h ^ (unsigned char)*s++) * 16777619u;
    return h;
}

#define LF_SPREAD_DEFAULT 32 /* shared directories per extra backend root (IOLOOM_LOGFS_SPREAD), as PLFS's hostdirs */
#define LF_SPREAD_MAX 4096

/* Parsed ioloom-logfs.meta. backend[0] is the container's directory; backend[i > 0] are its extra backend
 * directories, each checked by lf_meta_read (docs/logfs-format.md, "Backends"): root/lf-spread/<bucket> shared by
 * the containers of that bucket (spread > 0; this container's files there are named prefix[i] = "<id>."), or
 * root/origin.lf<id> of its own (spread 0, prefix ""). */
struct lf_meta {
    int version;
    uint64_t chunk;
    mode_t mode;
    char id[LF_ID_MAX + 1];
    char origin[PATH_MAX];
    int spread;
    int nbackends;
    char backend[LF_MAX_BACKENDS][PATH_MAX];
    char prefix[LF_MAX_BACKENDS][LF_ID_MAX + 2];
};

/* A data log a handle reads from (its own or another group's), opened on first use. */
struct lf_log {
    char *path;
    int fd;
    int32_t traced_id; /* its id in the tracer's file table (lf_phys.c), LF_UNTRACED until asked */
};

#define LF_UNTRACED (-2)

/* An index entry with what the index journal's block says about it. */
struct lf_src {
    struct lf_entry e;
    uint64_t writer;
    int32_t log;
};

/* The reader's view: sorted, non-overlapping extents; log -1 is a hole (reads as zeros). */
struct lf_extent {
    uint64_t offset, length, physical;
    int32_t log;
};

struct lf_map {
    struct lf_src *all; /* every entry (ours and the others'), sorted by key */
    size_t nall;
    uint64_t size;
    int exists;            /* a packed file: created or written since its last unlink */
    struct lf_extent *ext; /* resolved extents of the window [lo, hi) (lf_read.c) */
    size_t n, cap;         /* extents in ext, room in ext */
    uint64_t lo, hi;
};

#define LF_WINDOW (4u << 20) /* logical bytes resolved at a time: bounds the reader's memory */
#define LF_FEW_ENTRIES 64    /* up to this many entries with more than */
#define LF_DENSE_RECORDS 16  /* this many records in a window, a read resolves its own range alone (lf_read.c) */

struct lf_file {
    pthread_mutex_t lock;
    struct lf_meta meta;
    char dir[PATH_MAX];
    int flags;
    uint32_t file_id; /* a packed file's id (its entries alone are read and written); 0: the whole container */
    /* writer side: created on the first write */
    uint64_t writer, last_stamp;
    char group[96];
    int wlog;         /* index in logs[] of our log, -1 before the first write */
    int created;      /* this handle made the container: its group's files are new (opened O_EXCL first) */
    int journals_new; /* index and records were created empty by this handle and not written yet */
    int log_fd, index_fd, records_fd;
    int32_t records_traced_id;
    struct lf_entry batch[LF_RECORD_BATCH]; /* records not yet appended to the record journal (as runs) */
    size_t nbatch;
    int run_open; /* the last of batch[] may still grow by the next write */
    int32_t index_traced_id;
    uint64_t resv_cur, resv_end; /* the part of our log we reserved and have not filled yet */
    uint64_t behind;             /* our log's filled pages before this were handed to the device (write_behind) */
    int write_behind;            /* IOLOOM_LOGFS_WRITE_BEHIND (1 unless 0), read at the first write; 0 once refused */
    uint64_t page;               /* the kernel's page size (4 KiB, 64 KiB on some aarch64, ppc64le), which write_behind
                                  * rounds to: not LF_PAGE */
    struct lf_entry *mine;       /* our entries, published or not */
    size_t nmine, capmine, npublished;
    int entry_open;             /* the last entry may still grow into a pattern */
    unsigned long mode_changes; /* lf_mode_changes when meta.mode was read */
    pid_t unlinked_by;          /* the process that hid the container at an unlink while it was open (lf_fdtable.c) */
    int read_marked;            /* its first read has marked the access time (mark_read) */
    /* reader side */
    struct lf_src *others; /* other writers' entries, as last loaded */
    size_t nothers;
    struct lf_log *logs;
    size_t nlogs;
    struct lf_map map;
    int map_stale;       /* our own writes changed the view */
    int others_stale;    /* reload the other writers' indexes before the next read */
    int reloaded_at_end; /* a read past the known end reloaded them; cleared by any change of the view */
    /* O_APPEND across processes (lf_file.c, do_append) */
    int append_fd;         /* the container's directory, whose flock serialises appends; -1 before the first append */
    int append_known;      /* append_end and append_sig describe the container after this handle's last append */
    uint64_t append_end;   /* the logical end after it */
    uint64_t append_stamp; /* its stamp: any later write or truncate of this handle moves last_stamp past it */
    uint64_t append_sig;   /* lf_journals_sig after it, its own publish included */
};

/* lf_meta.c */
int lf_meta_read(const char *dir, struct lf_meta *m);
/* lf_meta_read, accepting extra backend directories that are gone when `missing_ok` (unlink finishing a
 * half-removed container); lf_meta_read refuses them (EIO): their data is lost. */
int lf_meta_read_for(const char *dir, struct lf_meta *m, int missing_ok);
/* Creates the container `dir` (docs/logfs-format.md, "Creation protocol"): 1 when this call made it (its metadata
 * in *made), 0 when it was there (-1 with EEXIST under `excl`). `absent`: the caller saw no `dir` just before, so
 * it is not looked for first (a concurrent creator's container is found when the rename fails). */
int lf_meta_create(const char *dir, mode_t mode, const struct lf_backends *backends, int excl, int absent,
                   struct lf_meta *made);
/* The path of a group's file `kind` ("log", "records", "index", "names") on backend b into out; -1 if too long. */
int lf_member_path(const struct lf_meta *m, int b, const char *kind, const char *group, char *out, size_t cap);
/* The group of a directory entry of backend b that is this container's file `kind`, or NULL. */
const char *lf_member_group(const struct lf_meta *m, int b, const char *name, const char *kind);
/* Whole file into a malloc'ed buffer (NUL-terminated); NULL with errno on failure. Never follows a symbolic
 * link (a link planted in a container must not make a reader show another file). */
char *lf_slurp(const char *path, size_t *len);
/* lf_slurp of `name` relative to the directory open as `dirfd` (a name found in it: no path walked again). */
char *lf_slurp_at(int dirfd, const char *name, size_t *len);
/* A container refused as damaged or crafted: counted, the first one described at exit; -1 with errno EIO. */
int lf_damaged(const char *path, const char *what);
void lf_damaged_report(void);
int lf_mkdirs(const char *dir, mode_t mode);
/* The metadata's mode line replaced by `mode` (lf_chmod without the kernel's rules: the layer's own changes). */
int lf_meta_set_mode(const char *dir, mode_t mode);
/* Counts the modes this process set (lf_meta_set_mode): a handle that saw fewer reads its container's again. */
extern unsigned long lf_mode_changes;
/* The mode the container's metadata holds now into f->meta.mode (a chmod by path, from any handle or process,
 * replaces it whole; kept as opened when the metadata cannot be read: the container renamed away); errno kept. */
void lf_meta_refresh_mode(lf_file *f);
/* A container directory's access and modification times (the logical file's), to put back after the layer
 * changed its entries for something that is not a modification of the file (chmod, a lock file, a rename). */
int lf_times_get(const char *dir, struct timespec times[2]);
void lf_times_put(const char *dir, const struct timespec times[2]);
/* opendir of a container's directory without touching its access time (the logical file's: docs/logfs-format.md). */
DIR *lf_opendir(const char *dir);

/* lf_privs.c: the kernel's rules on a regular file's mode, for a container's logical mode. The caller (effective
 * ids with `effective`, else real ones) is in group `gid`. */
int lf_in_group(gid_t gid, int effective);
/* May the caller chmod the file whose container directory's stat is `dir` (its owner, or CAP_FOWNER)? */
int lf_may_chmod(const struct stat *dir);
/* The logical mode a new file gets, asked with `mode` (umask applied), whose container directory was made as `made`
 * (in a set-group-ID directory, it has that bit and its group). */
mode_t lf_mode_at_create(mode_t mode, const struct stat *made);
/* The mode a chmod to `mode`, a chown, or a write or truncate by the caller leaves a file in group `gid` with. */
mode_t lf_mode_after_chmod(mode_t mode, gid_t gid);
mode_t lf_mode_after_chown(mode_t mode, gid_t gid);
mode_t lf_mode_after_write(mode_t mode, gid_t gid);

/* lf_file.c: lf_open of one packed file's entries (file_id), or of the whole container (0); `absent` as for
 * lf_meta_create. */
lf_file *lf_open_file(const char *dir, uint32_t file_id, int flags, mode_t mode, const struct lf_backends *backends,
                      int absent);
/* A container's stat from its directory's (times, owner, inode: the logical file's, docs/logfs-format.md): the
 * logical file's type and mode, size, one link, and the blocks its data logs take. */
void lf_stat_fill(const lf_file *f, int64_t size, struct stat *st);

/* The logical file's modification (and change) time set to now, as the kernel's truncate or fallocate that changes
 * no byte still does. */
int lf_touch(lf_file *f);
/* The container renamed to `to` under the open handle f: its paths follow (logs already open keep their
 * descriptors). */
void lf_moved(lf_file *f, const char *to);
/* Says at exit how many O_APPEND writes could not be serialised against other processes' (lf_append). */
void lf_append_report(void);

/* lf_write.c */
/* An id unique among concurrent writers and creators: host hash, pid and a per-process count (a writer's id; with
 * the time, a new container's). */
uint64_t lf_unique_id(void);
/* In a forked child: the pid (and host) lf_unique_id and the group names use are asked again. */
void lf_process_forget(void);
/* Which group's log this handle writes: fixed at open from the environment (IOLOOM_LOGFS_FANOUT, the rank). */
void lf_writer_init(lf_file *f);
int lf_writer_append(lf_file *f, uint16_t kind, const void *buf, size_t n, uint64_t offset);
int lf_writer_publish(lf_file *f);
/* 1-N packing: record that f->file_id is `name` in the group's names journal. */
int lf_writer_name(lf_file *f, const char *name);
void lf_writer_after_fork(lf_file *f);

/* lf_pack.c: 1-N packing (many small files of a directory in its LF_PACK_NAME container) */
uint32_t lf_pack_id(const char *name);
lf_file *lf_open_packed(const char *pack, const char *name, int flags, mode_t mode, const struct lf_backends *backends);
int lf_unlink_packed(const char *pack, const char *name);
int lf_stat_packed(const char *pack, const char *name, struct stat *st);
/* Calls fn for each existing packed file of the pack. */
int lf_pack_list(const char *pack, void (*fn)(const char *name, void *arg), void *arg);

/* lf_read.c */
int lf_load_others(lf_file *f);
/* lf_load_others, and with `blocks` the blocks the data logs take added to it (a stat's st_blocks) in the same
 * scan of the backends' directories. */
int lf_load_scan(lf_file *f, blkcnt_t *blocks);
/* A summary of every index journal of the container as it is now (the sum of lf_journal_term over them: journals
 * only grow, and a recover replaces one whole, so an equal summary means nothing was published since), into *sig;
 * the stat of the one whose inode is `own` into *own_st (st_size -1 if none is). -1 if a directory cannot be read. */
int lf_journals_sig(lf_file *f, ino_t own, struct stat *own_st, uint64_t *sig);
uint64_t lf_journal_term(const struct stat *st);
/* The blocks the file `name` of backend b's directory, open as `dirfd`, takes if it is one of the container's data
 * logs (a member of the log group); 0 if not, or if it cannot be examined. Never follows a link. */
blkcnt_t lf_log_blocks(const struct lf_meta *m, int b, int dirfd, const char *name);
int lf_log_id(lf_file *f, const char *path);
int lf_map_build(lf_file *f);
ssize_t lf_map_read(lf_file *f, void *buf, size_t n, uint64_t offset);

/* lf_phys.c: physical I/O shown to a tracer preloaded before us. lf_phys_traced() says whether to time the
 * call; then lf_phys_event() records it (file_id caches the tracer's id of the file). */
int lf_phys_traced(void);
void lf_phys_event(int op, const char *path, int32_t *file_id, int fd, int64_t offset, int64_t req, int64_t ret,
                   uint64_t t_start);
extern const int lf_op_pwrite, lf_op_pread, lf_op_write, lf_op_writev;

/* Physical I/O: the next definitions (libc), never our own wrappers. */
ssize_t lf_full_pwrite(int fd, const void *buf, size_t n, uint64_t off);
ssize_t lf_full_pread(int fd, void *buf, size_t n, uint64_t off);

#endif
