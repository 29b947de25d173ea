/* The file table (full path and (device, inode) per file id), the descriptor table (which file each fd is),
 * and the include/exclude path filters with their counters.
 *
 * Descriptors are looked up on every data call, so the fd table is a plain array read without a lock. Files
 * are registered on open, which takes a lock. Descriptors the tracer never saw opened (inherited stdin,
 * sockets made by socket(), fds from untraced code) are named on first use from /proc/self/fd. */
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "files.h"

#define MAX_RULES 64
#define HASH_SLOTS_MIN 1024

struct ioloom_fd_entry ioloom_fds[IOLOOM_FD_SLOTS];

struct file_entry {
    char *path;
    uint64_t dev, ino;
    int pending; /* not yet written to the stream (new, or (dev, ino) learnt later) */
};

struct rule {
    char prefix[PATH_MAX];
    size_t len;
    int include;
    uint64_t calls, bytes;                 /* excluded calls and their bytes (exclude rules only) */
    uint64_t calls_written, bytes_written; /* as last written to the stream */
    int written;                           /* written at least once */
};

static struct {
    pthread_mutex_t lock;
    struct file_entry *entries;
    int32_t count, capacity;
    int32_t *hash; /* path hash -> id + 1, open addressing; the latest entry of a path wins */
    size_t hash_slots;
    int pending;
    struct rule rules[MAX_RULES];
    int nrules;
} ft = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* ---- path filters ---- */

static void add_rule(const char *prefix, size_t len, int include) {
    if (ft.nrules == MAX_RULES || len == 0 || len >= PATH_MAX) return;
    struct rule *r = &ft.rules[ft.nrules++];
    memcpy(r->prefix, prefix, len);
    while (len > 1 && r->prefix[len - 1] == '/') len--; /* "/tmp/" and "/tmp" are the same rule */
    r->prefix[len] = 0;
    r->len = len;
    r->include = include;
}

static void add_exclude(const char *item, size_t len, void *arg) {
    (void)arg;
    add_rule(item, len, 0);
}
static void add_include(const char *item, size_t len, void *arg) {
    (void)arg;
    add_rule(item, len, 1);
}

/* A rule matches whole path components ("/dev" matches "/dev/null", not "/devices"); a rule ending in
 * ':' ("socket:") matches the kernel's names for non-file descriptors. */
static int rule_matches(const struct rule *r, const char *path) {
    if (strncmp(path, r->prefix, r->len)) return 0;
    char next = path[r->len], last = r->prefix[r->len - 1];
    return next == 0 || next == '/' || last == '/' || last == ':';
}

/* -1 if the path is traced, else the index of the exclude rule that drops it (longest match wins; an
 * include rule as long as an exclude rule wins). */
static int excluding_rule(const char *path) {
    int best = -1;
    size_t best_len = 0;
    for (int i = 0; i < ft.nrules; i++) {
        const struct rule *r = &ft.rules[i];
        if ((r->len > best_len || (r->len == best_len && r->include)) && rule_matches(r, path)) {
            best = i;
            best_len = r->len;
        }
    }
    return best >= 0 && !ft.rules[best].include ? best : -1;
}

void ioloom_count_excluded(int32_t state, int64_t bytes) {
    int rule = -(state + 2);
    if (rule < 0 || rule >= ft.nrules) return;
    __atomic_add_fetch(&ft.rules[rule].calls, 1, __ATOMIC_RELAXED);
    if (bytes > 0) __atomic_add_fetch(&ft.rules[rule].bytes, (uint64_t)bytes, __ATOMIC_RELAXED);
}

/* The INFO pairs of the rules to write (every rule the first time, then those whose counts changed) from rule *next
 * on into the chunk at `chunk` (`room` bytes), as many as fit; each written, once the chunk is, with the counts in
 * `written`. Returns the payload's end. */
static uint8_t *put_rule_pairs(uint8_t *chunk, size_t room, int *next, uint64_t (*written)[2]) {
    uint8_t *p = chunk + IOLOOM_CHUNK_HEADER_BYTES;
    for (; *next < ft.nrules; ++*next) {
        struct rule *r = &ft.rules[*next];
        uint64_t calls = __atomic_load_n(&r->calls, __ATOMIC_RELAXED),
                 bytes = __atomic_load_n(&r->bytes, __ATOMIC_RELAXED);
        written[*next][0] = calls;
        written[*next][1] = bytes;
        if (r->written && calls == r->calls_written && bytes == r->bytes_written) continue;
        char value[48];
        snprintf(value, sizeof value, "%llu %llu", (unsigned long long)calls, (unsigned long long)bytes);
        /* "exclude:" or "include:", the prefix, the value, two NULs */
        if ((size_t)(p - chunk) + 8 + r->len + strlen(value) + 2 > room) break;
        p = ioloom_put_cstr(p, r->include ? "include:" : "exclude:") - 1; /* the prefix goes on from its NUL */
        p = ioloom_put_cstr(ioloom_put_cstr(p, r->prefix), value);
    }
    return p;
}

void ioloom_files_write_excluded(void) {
    /* The rules' INFO pairs, "exclude:<prefix>" = "<calls> <bytes>" (0 0 when nothing matched, so the report can list
     * the filters in effect), together in one INFO chunk (more when they do not fit): every rule the first time, then
     * those whose counts changed. */
    uint8_t chunk[IOLOOM_CHUNK_HEADER_BYTES + PATH_MAX + 64]; /* a pair at least: its prefix is under PATH_MAX */
    uint64_t written[MAX_RULES][2];
    for (int first = 0, next = 0; next < ft.nrules; first = next) {
        uint8_t *p = put_rule_pairs(chunk, sizeof chunk, &next, written);
        if (p == chunk + IOLOOM_CHUNK_HEADER_BYTES) continue;
        ioloom_seal_chunk(chunk, IOLOOM_CHUNK_INFO, (uint32_t)(p - chunk - IOLOOM_CHUNK_HEADER_BYTES));
        if (ioloom_write_chunk(chunk, (size_t)(p - chunk))) continue;
        for (int i = first; i < next; i++) {
            ft.rules[i].written = 1;
            ft.rules[i].calls_written = written[i][0];
            ft.rules[i].bytes_written = written[i][1];
        }
    }
}

void ioloom_files_init(void) {
    ioloom_for_each_item("/proc,/sys,/dev,socket:,anon_inode:", ',', add_exclude, NULL);
    ioloom_for_each_item("/dev/shm", ',', add_include, NULL);
    const char *dir = ioloom_env_str("IOLOOM_TRACE_DIR", NULL);
    if (dir && dir[0] == '/') add_rule(dir, strlen(dir), 0); /* the tracer's own output */
    ioloom_for_each_item(ioloom_env_str("IOLOOM_EXCLUDE", ""), ',', add_exclude, NULL);
    ioloom_for_each_item(ioloom_env_str("IOLOOM_INCLUDE", ""), ',', add_include, NULL);
}

/* ---- paths ---- */

static ssize_t fd_link(int fd, char *out, size_t size) {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = syscall(SYS_readlinkat, AT_FDCWD, link, out, size - 1);
    if (n >= 0) out[n] = 0;
    return n;
}

/* The absolute, normalised form of `path` relative to dirfd; 0 on success. */
static int absolute(int dirfd, const char *path, char *out, size_t size) {
    size_t base = 0;
    if (path[0] != '/') {
        if (dirfd == AT_FDCWD) {
            if (syscall(SYS_getcwd, out, size) < 0) return -1;
        } else if (fd_link(dirfd, out, size) < 0) {
            return -1;
        }
        base = strlen(out);
        if (base + 1 >= size) return -1;
        out[base++] = '/';
    }
    size_t len = strlen(path);
    if (base + len + 1 > size) return -1;
    memcpy(out + base, path, len + 1);
    if (out[0] == '/') ioloom_normalise_path(out);
    return 0;
}

/* ---- the file table ---- */

static uint64_t hash_path(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    while (*s) h = (h ^ (uint8_t)*s++) * 1099511628211ull;
    return h;
}

static int32_t *hash_slot(const char *path) {
    size_t i = hash_path(path) & (ft.hash_slots - 1);
    while (ft.hash[i] && strcmp(ft.entries[ft.hash[i] - 1].path, path)) i = (i + 1) & (ft.hash_slots - 1);
    return &ft.hash[i];
}

static int grow_locked(void) {
    if (ft.count == ft.capacity) {
        int32_t capacity = ft.capacity ? ft.capacity * 2 : 256;
        struct file_entry *entries = realloc(ft.entries, (size_t)capacity * sizeof *entries);
        if (!entries) return -1;
        ft.entries = entries;
        ft.capacity = capacity;
    }
    if ((size_t)ft.count * 2 >= ft.hash_slots) {
        size_t slots = ft.hash_slots ? ft.hash_slots * 2 : HASH_SLOTS_MIN;
        int32_t *hash = calloc(slots, sizeof *hash);
        if (!hash) return -1;
        free(ft.hash);
        ft.hash = hash;
        ft.hash_slots = slots;
        for (int32_t id = 0; id < ft.count; id++) *hash_slot(ft.entries[id].path) = id + 1;
    }
    return 0;
}

/* The id of (path, dev, ino); dev = ino = 0 when unknown. A path whose inode changed (deleted and created
 * again) gets a new id; an entry whose inode was unknown learns it. */
static int32_t register_file(const char *path, uint64_t dev, uint64_t ino) {
    pthread_mutex_lock(&ft.lock);
    int32_t id = -1;
    if (grow_locked() == 0) {
        int32_t *slot = hash_slot(path);
        struct file_entry *e = *slot ? &ft.entries[*slot - 1] : NULL;
        int known = dev || ino, entry_known = e && (e->dev || e->ino);
        if (e && (!known || !entry_known || (e->dev == dev && e->ino == ino))) {
            id = *slot - 1;
            if (known && !entry_known) {
                e->dev = dev;
                e->ino = ino;
                e->pending = ft.pending = 1;
            }
        } else if ((path = strdup(path))) {
            id = ft.count++;
            ft.entries[id] = (struct file_entry){(char *)path, dev, ino, 1};
            ft.pending = 1;
            *slot = id + 1;
        }
    }
    pthread_mutex_unlock(&ft.lock);
    return id;
}

void ioloom_files_flush(int deltas) {
    if (!__atomic_load_n(&ft.pending, __ATOMIC_ACQUIRE) || ioloom_lock(&ft.lock)) return;
    size_t size = IOLOOM_CHUNK_HEADER_BYTES;
    for (int32_t id = 0; id < ft.count; id++)
        if (ft.entries[id].pending) size += IOLOOM_FILE_ENTRY_BYTES + strlen(ft.entries[id].path) + 1;
    uint8_t *chunk = malloc(size);
    if (chunk) {
        uint8_t *p = chunk + IOLOOM_CHUNK_HEADER_BYTES;
        struct ioloom_file_ref previous = IOLOOM_FILE_REF_START;
        for (int32_t id = 0; id < ft.count; id++) {
            struct file_entry *e = &ft.entries[id];
            if (!e->pending) continue;
            struct ioloom_file_ref entry = {id, e->dev, e->ino, e->path};
            p = deltas ? ioloom_put_file_delta(p, &previous, &entry) : ioloom_put_file(p, &entry);
            previous = entry;
            e->pending = 0;
        }
        ft.pending = 0;
        ioloom_seal_chunk(chunk, deltas ? IOLOOM_CHUNK_FILE_DELTAS : IOLOOM_CHUNK_FILES,
                          (uint32_t)(p - chunk - IOLOOM_CHUNK_HEADER_BYTES));
        pthread_mutex_unlock(&ft.lock);
        ioloom_write_chunk(chunk, (size_t)(p - chunk));
        free(chunk);
        return;
    }
    pthread_mutex_unlock(&ft.lock);
}

void ioloom_files_reset_stream(void) {
    pthread_mutex_init(&ft.lock, NULL);
    for (int32_t id = 0; id < ft.count; id++) ft.entries[id].pending = 1;
    ft.pending = ft.count > 0;
    for (int i = 0; i < ft.nrules; i++) ft.rules[i].calls = ft.rules[i].bytes = 0;
}

/* The state (see ioloom_fds) of a named file, registering it. `st` is its stat when known. */
static int32_t name_state(const char *name, const struct stat *st) {
    int rule = excluding_rule(name);
    if (rule >= 0) return -(rule + 2);
    int32_t id = register_file(name, st ? (uint64_t)st->st_dev : 0, st ? (uint64_t)st->st_ino : 0);
    return id >= 0 ? id : -1;
}

static int fd_stat(int fd, struct stat *st) { return (int)syscall(SYS_fstat, fd, st); }

/* ---- paths named again (files.h) ---- */
#define RECENT_PATHS 4
static IOLOOM_TLS struct ioloom_recent_path recent[RECENT_PATHS];
volatile uint32_t ioloom_cwd_generation = 1, ioloom_names_generation = 1;

void ioloom_cwd_changed(void) { __atomic_add_fetch(&ioloom_cwd_generation, 1, __ATOMIC_RELAXED); }
void ioloom_names_changed(void) { __atomic_add_fetch(&ioloom_names_generation, 1, __ATOMIC_RELAXED); }

/* The path's hash (0 when it is too long to remember): its length and its first and last 8 bytes mixed, enough
 * to pick a slot and to reject most others before the full comparison. */
static uint64_t recent_hash(const char *path) {
    size_t len = strnlen(path, IOLOOM_RECENT_PATH_BYTES);
    if (len >= IOLOOM_RECENT_PATH_BYTES) return 0;
    uint64_t first = 0, last = 0;
    /* loads of 8 bytes: the library is built with -fno-builtin, where memcpy is always a call */
    if (len >= 8)
        __builtin_memcpy(&first, path, 8);
    else
        for (size_t i = 0; i < len; i++) first |= (uint64_t)(uint8_t)path[i] << 8 * i;
    if (len > 8) __builtin_memcpy(&last, path + len - 8, 8);
    return ((first * 0x9E3779B97F4A7C15ull) ^ (last * 0xC2B2AE3D27D4EB4Full) ^ len) | 1;
}

static struct ioloom_recent_path *recent_slot(uint64_t hash) { return &recent[(hash >> 59) % RECENT_PATHS]; }
IOLOOM_TLS const struct ioloom_recent_path *ioloom_last_named;

/* A path's key as recall_by_key makes it: its hash (0: too long to remember) and the cwd generation it depends on. */
struct path_key {
    uint64_t hash;
    uint32_t cwd;
};

/* The entry remembered for path (named from the cwd) found by its key, or NULL; *key is the path's key, computed
 * once. For a path that is not the one named last. */
static const struct ioloom_recent_path *recall_by_key(const char *path, struct path_key *key) {
    *key = (struct path_key){recent_hash(path), path[0] == '/' ? 0 : ioloom_cwd_generation};
    const struct ioloom_recent_path *r = recent_slot(key->hash);
    if (!key->hash || r->hash != key->hash || r->cwd != key->cwd || strcmp(r->path, path)) return NULL;
    ioloom_last_named = r;
    return r;
}

static void remember(const char *path, const struct stat *st, const struct path_key *key, int32_t state) {
    if (!key->hash || state == -1) return;
    struct ioloom_recent_path *r = recent_slot(key->hash);
    *r = (struct ioloom_recent_path){
        key->hash, (uint64_t)st->st_dev, (uint64_t)st->st_ino, key->cwd, ioloom_names_generation, state, st->st_mode,
        {0}};
    strcpy(r->path, path);
    ioloom_last_named = r;
}

/* The state of `path` relative to dirfd, a file whose stat is st (NULL when unknown), not remembered (or not
 * the same file any more): normalised, filtered and registered, then remembered under `key` (NULL: not). */
static __attribute__((noinline)) int32_t named_state(int dirfd, const char *path, const struct stat *st,
                                                     const struct path_key *key) {
    int saved = errno;
    char abs[PATH_MAX];
    int32_t state = path && absolute(dirfd, path, abs, sizeof abs) == 0 ? name_state(abs, st) : -1;
    if (key) remember(path, st, key, state);
    errno = saved;
    return state;
}

/* The state of `path` relative to dirfd, a file whose stat is st (NULL when unknown), given the entry remembered for
 * it (`known`, under `key`; key NULL when the path cannot be remembered: not from the cwd, or no stat). */
static inline __attribute__((always_inline)) int32_t stat_state_recalled(int dirfd, const char *path,
                                                                         const struct stat *st,
                                                                         const struct ioloom_recent_path *known,
                                                                         const struct path_key *key) {
    if (!known) return named_state(dirfd, path, st, key);
    if (known->dev == (uint64_t)st->st_dev && known->ino == (uint64_t)st->st_ino) return known->state;
    return named_state(dirfd, path, st, &(struct path_key){known->hash, known->cwd});
}

/* The state of `path` relative to dirfd, a file whose stat is st (NULL when unknown), not found inline (files.h):
 * `again` is the entry named last when it is the path's, found as another file. */
int32_t ioloom_stat_state_slowly(int dirfd, const char *path, const struct stat *st,
                                 const struct ioloom_recent_path *again) {
    struct path_key key;
    if (!st || !ioloom_rememberable(dirfd, path)) return named_state(dirfd, path, st, NULL);
    return stat_state_recalled(dirfd, path, st, again ? again : recall_by_key(path, &key), &key);
}

/* As ioloom_path_state for a path that is not the one this thread named last, or is (`again`) but from before a
 * remove or rename; `asked`: it can be remembered (named from the cwd, with a descriptor to fstat). A path
 * remembered since nothing was removed or renamed is recalled; otherwise the file's (device, inode) is asked
 * (fstat). *mode is its type and mode (0 when fstat failed). */
static __attribute__((noinline)) int32_t path_state_asked(int dirfd, const char *path, int fd, unsigned *mode,
                                                          int asked, const struct ioloom_recent_path *again) {
    struct path_key key;
    const struct ioloom_recent_path *known = again ? again : asked ? recall_by_key(path, &key) : NULL;
    if (known && known->names == ioloom_names_generation) {
        *mode = known->mode;
        return known->state;
    }
    int saved = errno;
    struct stat st;
    int known_stat = fd >= 0 && fd_stat(fd, &st) == 0;
    int32_t state = known_stat ? stat_state_recalled(dirfd, path, &st, known, asked ? &key : NULL)
                               : named_state(dirfd, path, NULL, NULL);
    *mode = known_stat ? st.st_mode : 0;
    errno = saved;
    return state;
}

/* As ioloom_path_state, given `again` (the entry named last when it is the path's); *mode is the file's type and
 * mode (0 when fstat failed). The path this thread named last, named again since nothing was removed or renamed, is
 * recalled inline; the rest is path_state_asked's. */
static inline int32_t path_state_mode(int dirfd, const char *path, int fd, const struct ioloom_recent_path *again,
                                      unsigned *mode) {
    if (IOLOOM_LIKELY(again && again->names == ioloom_names_generation)) {
        *mode = again->mode;
        return again->state;
    }
    return path_state_asked(dirfd, path, fd, mode, fd >= 0 && ioloom_rememberable(dirfd, path), again);
}

int32_t ioloom_path_state(int dirfd, const char *path, int fd) {
    unsigned mode;
    return path_state_mode(dirfd, path, fd, ioloom_named_again(dirfd, path, fd), &mode);
}

int32_t ioloom_open_state_slowly(int dirfd, const char *path, int fd, int flags,
                                 const struct ioloom_recent_path *again) {
    unsigned mode;
    int32_t state = path_state_mode(dirfd, path, fd, again, &mode);
    if (fd >= 0) ioloom_fd_opened(fd, state, flags, mode);
    return state;
}

/* ---- descriptors ---- */

static int32_t name_fd(int fd) {
    int saved = errno;
    char name[PATH_MAX];
    struct stat st;
    int32_t state = -1;
    int known = fd_stat(fd, &st) == 0;
    if (known) ioloom_fd_named(fd, st.st_mode);
    if (fd_link(fd, name, sizeof name) > 0) state = name_state(name, known ? &st : NULL);
    errno = saved;
    return state;
}

/* A descriptor not named yet (or beyond the table): named from /proc/self/fd, and remembered. */
int32_t ioloom_fd_state_slow(int fd) {
    if (fd < 0) return -1;
    int32_t state = name_fd(fd);
    ioloom_fd_set(fd, state);
    return state;
}

void ioloom_fd_set(int fd, int32_t state) {
    if (fd >= 0 && fd < IOLOOM_FD_SLOTS)
        __atomic_store_n(&ioloom_fds[fd].slot, ioloom_state_slot(state), __ATOMIC_RELAXED);
}

void ioloom_fd_copy(int from, int to) {
    if (to >= 0 && to < IOLOOM_FD_SLOTS) ioloom_fd_set(to, ioloom_fd_state(from));
    ioloom_fd_share(from, to);
}

/* ---- exported to the MPI-IO module and logfs ---- */

IOLOOM_EXPORT int32_t ioloom_file_id(const char *path, int fd) {
    int32_t state = ioloom_path_state(AT_FDCWD, path ? ioloom_romio_path(path) : NULL, fd);
    if (state <= -2) ioloom_count_excluded(state, 0);
    return state >= 0 ? state : -1;
}

/* ---- for the predictor (predict.c) ---- */

const char *ioloom_file_path(int32_t id) {
    pthread_mutex_lock(&ft.lock);
    const char *path = id >= 0 && id < ft.count ? ft.entries[id].path : NULL; /* paths are never freed */
    pthread_mutex_unlock(&ft.lock);
    return path;
}
