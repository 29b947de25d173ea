/* The reader: loads the index journals of every group on every backend, expands the entries into records and
 * resolves them into a sorted list of non-overlapping extents.
 *
 * Overlap rule (docs/logfs-format.md): the later entry in the total order (stamp, then writer id) wins, byte by
 * byte; a truncate to s hides every byte at or past s that an earlier entry wrote. The common case, no overlap
 * at all, costs one sort; otherwise a sweep over the record boundaries keeps the live records in a heap ordered
 * by that key, O(n log n) either way.
 *
 * Memory stays bounded however long the patterns are (PLFS's readers ran out of it): the entries are kept as
 * they are, and only the records inside the window being read (LF_WINDOW bytes around it, or the read itself
 * if larger) are expanded and resolved; the next read outside the window resolves another. With few entries
 * (LF_FEW_ENTRIES, e.g. one strided pattern per writer) whose records are dense (more than LF_DENSE_RECORDS in
 * the window: many writers' small pieces) a read resolves its own range only: expanding every entry again is
 * cheaper than resolving a window of records of which the read needs one or two. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lf_internal.h"

ssize_t lf_full_pwrite(int fd, const void *buf, size_t n, uint64_t off) {
    size_t done = 0;
    while (done < n) {
        ssize_t w = IOLOOM_NEXT(pwrite)(fd, (const char *)buf + done, n - done, (off_t)(off + done));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return w < 0 ? -1 : (ssize_t)done;
        done += (size_t)w;
    }
    return (ssize_t)done;
}

ssize_t lf_full_pread(int fd, void *buf, size_t n, uint64_t off) {
    size_t done = 0;
    while (done < n) {
        ssize_t r = IOLOOM_NEXT(pread)(fd, (char *)buf + done, n - done, (off_t)(off + done));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) break;
        done += (size_t)r;
    }
    return (ssize_t)done;
}

/* Where an entry puts the end of the file: a write extends it to past its last byte, a truncate sets it to the
 * new size, an unlink to 0; a create leaves it (0 extends nothing). */
static uint64_t entry_end(const struct lf_entry *e) {
    if (e->kind == LF_WRITE) return e->offset + (e->count - 1) * e->stride + e->length;
    return e->kind == LF_CREATE ? 0 : e->offset; /* truncate: the new size; unlink: 0 */
}

int lf_log_id(lf_file *f, const char *path) {
    for (size_t i = 0; i < f->nlogs; i++)
        if (!strcmp(f->logs[i].path, path)) return (int)i;
    struct lf_log *grown = realloc(f->logs, (f->nlogs + 1) * sizeof *grown);
    if (!grown) return errno = ENOMEM, -1;
    f->logs = grown;
    if (!(f->logs[f->nlogs].path = strdup(path))) return errno = ENOMEM, -1;
    f->logs[f->nlogs].fd = -1;
    f->logs[f->nlogs].traced_id = LF_UNTRACED;
    return (int)f->nlogs++;
}

static int push_src(lf_file *f, size_t *cap, const struct lf_entry *e, uint64_t writer, int log) {
    if (f->nothers == *cap) {
        size_t grown_cap = *cap ? 2 * *cap : 64;
        struct lf_src *grown = realloc(f->others, grown_cap * sizeof *grown);
        if (!grown) return errno = ENOMEM, -1;
        f->others = grown;
        *cap = grown_cap;
    }
    f->others[f->nothers++] = (struct lf_src){*e, writer, log};
    return 0;
}

/* An index journal being loaded: its name in its backend's directory `dir` (for the messages only) and the data
 * log its entries point into (lf_log_id). */
struct journal {
    const char *dir, *name;
    int log;
};

/* Refuse the load with EIO, naming the journal and the rule entry i breaks. */
static int damaged_entry(const struct journal *j, uint32_t i, const char *problem) {
    char path[PATH_MAX], why[96];
    snprintf(path, sizeof path, "%s/%s", j->dir, j->name);
    snprintf(why, sizeof why, "index entry %u of a block has an invalid %s", i, problem);
    return lf_damaged(path, why);
}

/* The entries of one block of a journal (others' only: a writer has its own in memory), each checked first: an
 * invalid one (a crafted or damaged index whose sums match) refuses the whole load with EIO. */
static int load_block(lf_file *f, size_t *cap, const struct journal *j, const struct lf_block *b, const char *body) {
    for (uint32_t i = 0; b->writer != f->writer && i < b->count; i++) {
        struct lf_entry e;
        memcpy(&e, body + i * sizeof e, sizeof e);
        const char *problem = lf_entry_problem(&e);
        if (problem) return damaged_entry(j, i, problem);
        if ((!f->file_id || e.file_id == f->file_id) && push_src(f, cap, &e, b->writer, j->log)) return -1;
    }
    return 0;
}

/* One index journal, `name` in the backend's directory open as `dirfd`: its valid blocks, up to the first torn or
 * corrupt one (a crash mid-append). */
static int load_journal(lf_file *f, size_t *cap, int backend, const char *group, int dirfd, const char *name) {
    char log_path[PATH_MAX];
    if (lf_member_path(&f->meta, backend, "log", group, log_path, sizeof log_path)) return -1;
    size_t len;
    char *buf = lf_slurp_at(dirfd, name, &len);
    if (!buf) return errno == ENOENT ? 0 : -1;
    struct journal j = {f->meta.backend[backend], name, lf_log_id(f, log_path)};
    int rc = j.log < 0 ? -1 : 0;
    for (size_t at = 0; rc == 0 && at + sizeof(struct lf_block) <= len;) {
        struct lf_block b;
        memcpy(&b, buf + at, sizeof b);
        uint32_t want = b.header_sum;
        b.header_sum = 0;
        size_t body = (size_t)b.count * sizeof(struct lf_entry);
        if (b.magic != LF_BLOCK_MAGIC || want != (uint32_t)lf_sum64(&b, sizeof b) || body > len - at - sizeof b ||
            lf_sum64(buf + at + sizeof b, body) != b.entries_sum)
            break;
        rc = load_block(f, cap, &j, &b, buf + at + sizeof b);
        at += sizeof b + body;
    }
    free(buf);
    return rc;
}

blkcnt_t lf_log_blocks(const struct lf_meta *m, int b, int dirfd, const char *name) {
    struct stat st;
    if (!lf_member_group(m, b, name, "log")) return 0;
    return IOLOOM_NEXT(fstatat)(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) ? 0 : st.st_blocks;
}

int lf_load_others(lf_file *f) { return lf_load_scan(f, NULL); }

/* splitmix64's finaliser: one journal's (inode, size) as a term of the summary. */
static uint64_t journal_term(uint64_t ino, uint64_t size) {
    uint64_t z = ino * 0x9e3779b97f4a7c15u + size;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

uint64_t lf_journal_term(const struct stat *st) { return journal_term((uint64_t)st->st_ino, (uint64_t)st->st_size); }

/* Calls visit(f, ctx, backend, dirfd, name) on every member of the container, backend by backend (a backend
 * that does not exist has none); -1 (errno set) when a backend cannot be listed or a visit returns nonzero. */
static int each_member(lf_file *f, int (*visit)(lf_file *, void *, int, int, const char *), void *ctx) {
    for (int b = 0; b < f->meta.nbackends; b++) {
        DIR *d = lf_opendir(f->meta.backend[b]);
        if (!d) {
            if (errno == ENOENT) continue;
            return -1;
        }
        int rc = 0;
        for (struct dirent *de; !rc && (de = IOLOOM_NEXT(readdir)(d));) rc = visit(f, ctx, b, dirfd(d), de->d_name);
        IOLOOM_NEXT(closedir)(d);
        if (rc) return -1;
    }
    return 0;
}

struct journals_sig {
    ino_t own;
    struct stat *own_st;
    uint64_t *sig;
};

static int add_journal_term(lf_file *f, void *ctx, int b, int dirfd, const char *name) {
    struct journals_sig *js = ctx;
    struct stat st;
    if (!lf_member_group(&f->meta, b, name, "index") || IOLOOM_NEXT(fstatat)(dirfd, name, &st, AT_SYMLINK_NOFOLLOW))
        return 0; /* not a journal, or gone (a journal is never removed while its container is open) */
    *js->sig += lf_journal_term(&st);
    if (st.st_ino == js->own) *js->own_st = st;
    return 0;
}

int lf_journals_sig(lf_file *f, ino_t own, struct stat *own_st, uint64_t *sig) {
    *sig = 0;
    *own_st = (struct stat){.st_size = -1};
    return each_member(f, add_journal_term, &(struct journals_sig){own, own_st, sig});
}

struct load_scan {
    size_t cap;
    blkcnt_t *blocks;
};

static int load_member(lf_file *f, void *ctx, int b, int dirfd, const char *name) {
    struct load_scan *ls = ctx;
    const char *group = lf_member_group(&f->meta, b, name, "index");
    if (group) return load_journal(f, &ls->cap, b, group, dirfd, name);
    if (ls->blocks) *ls->blocks += lf_log_blocks(&f->meta, b, dirfd, name);
    return 0;
}

int lf_load_scan(lf_file *f, blkcnt_t *blocks) {
    struct load_scan ls = {f->nothers, blocks};
    f->nothers = 0;
    if (each_member(f, load_member, &ls)) return -1;
    f->others_stale = 0;
    f->map_stale = 1;
    return 0;
}

struct rec {
    uint64_t off, end, phys, stamp, writer;
    int32_t log;
};

static int src_by_key(const void *a, const void *b) {
    const struct lf_src *x = a, *y = b;
    return lf_key_less(x->e.stamp, x->writer, y->e.stamp, y->writer)
               ? -1
               : lf_key_less(y->e.stamp, y->writer, x->e.stamp, x->writer);
}

static int rec_key_less(const struct rec *a, const struct rec *b) {
    return lf_key_less(a->stamp, a->writer, b->stamp, b->writer);
}

/* The logical size: replay sizes in key order (writes extend, truncates and unlinks set); and whether a packed
 * file exists (its last entry is not an unlink). */
static uint64_t replay_size(struct lf_src *all, size_t n, int *exists) {
    qsort(all, n, sizeof *all, src_by_key);
    uint64_t size = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t end = entry_end(&all[i].e);
        int sets = all[i].e.kind == LF_TRUNCATE || all[i].e.kind == LF_UNLINK;
        size = sets ? end : (end > size ? end : size);
    }
    *exists = n && all[n - 1].e.kind != LF_UNLINK;
    return size;
}

/* The records j in [*lo, *hi] of a write entry that overlap [a, b); 0 if none. Entries are valid (lf_entry_problem):
 * no end overflows, and a pattern's stride is at least its length, so at most b - a records overlap. */
static int records_in(const struct lf_entry *e, uint64_t a, uint64_t b, uint64_t *lo, uint64_t *hi) {
    if (e->offset >= b) return 0;
    uint64_t stride = e->count > 1 ? e->stride : 1;
    *lo = a < e->offset + e->length ? 0 : (a - e->offset - e->length) / stride + 1;
    *hi = (b - 1 - e->offset) / stride;
    if (*hi > e->count - 1) *hi = e->count - 1;
    return *lo <= *hi;
}

/* Records of the entries clipped to [a, b) into out (or only counted, when out is NULL). A truncate or unlink to
 * s is a hole record from s on. */
static size_t expand_window(const struct lf_src *all, size_t n, uint64_t a, uint64_t b, struct rec *out) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const struct lf_entry *e = &all[i].e;
        uint64_t lo, hi;
        if (e->kind == LF_TRUNCATE || e->kind == LF_UNLINK) {
            if (e->offset >= b) continue;
            if (out) out[k] = (struct rec){e->offset > a ? e->offset : a, b, 0, e->stamp, all[i].writer, -1};
            k++;
        } else if (e->kind == LF_WRITE && records_in(e, a, b, &lo, &hi)) {
            for (uint64_t j = lo; out && j <= hi; j++) {
                uint64_t off = e->offset + j * e->stride, end = off + e->length;
                uint64_t from = off > a ? off : a;
                out[k + (j - lo)] =
                    (struct rec){from,     end < b ? end : b, e->physical + j * e->pstride + (from - off),
                                 e->stamp, all[i].writer,     all[i].log};
            }
            k += hi - lo + 1;
        }
    }
    return k;
}

/* The end of the ascending run of records that starts at `from`. */
static size_t run_end(const struct rec *r, size_t n, size_t from) {
    size_t i = from + 1;
    while (i < n && r[i - 1].off <= r[i].off) i++;
    return i;
}

/* Merges the ascending runs a[0, na) and b[0, nb) into out. */
static void merge_runs(const struct rec *a, size_t na, const struct rec *b, size_t nb, struct rec *out) {
    size_t i = 0, j = 0;
    while (i < na && j < nb) *out++ = b[j].off < a[i].off ? b[j++] : a[i++];
    memcpy(out, a + i, (na - i) * sizeof *a);
    memcpy(out + (na - i), b + j, (nb - j) * sizeof *b);
}

/* Sorts r[0, n) by offset, with tmp[0, n) as scratch. expand_window leaves one ascending run per entry, so merging
 * neighbouring runs (a natural merge sort) takes n log(runs) steps: a window of many writers' small records was
 * most of a read's cost with qsort's n log n calls of a comparison function. */
static void sort_by_offset(struct rec *r, struct rec *tmp, size_t n) {
    struct rec *src = r, *dst = tmp;
    for (size_t runs = n > 1 && run_end(r, n, 0) < n ? 2 : 1; runs > 1;) { /* one run: sorted already */
        runs = 0;
        for (size_t a = 0; a < n; runs++) {
            size_t m = run_end(src, n, a), b = m < n ? run_end(src, n, m) : n;
            merge_runs(src + a, m - a, src + m, b - m, dst + a);
            a = b;
        }
        struct rec *swap = src;
        src = dst;
        dst = swap;
    }
    if (src != r) memcpy(r, src, n * sizeof *r);
}

/* Max-heap of record indices by key. */
struct heap {
    size_t *v, n;
    const struct rec *r;
};
static void heap_push(struct heap *h, size_t x) {
    size_t i = h->n++;
    for (; i && rec_key_less(&h->r[h->v[(i - 1) / 2]], &h->r[x]); i = (i - 1) / 2) h->v[i] = h->v[(i - 1) / 2];
    h->v[i] = x;
}
static void heap_pop(struct heap *h) {
    size_t x = h->v[--h->n], i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && rec_key_less(&h->r[h->v[c]], &h->r[h->v[c + 1]])) c++;
        if (!rec_key_less(&h->r[x], &h->r[h->v[c]])) break;
        h->v[i] = h->v[c];
        i = c;
    }
    h->v[i] = x;
}

static int u64_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void emit(struct lf_map *m, const struct rec *r, uint64_t from, uint64_t to) {
    struct lf_extent *last = m->n ? &m->ext[m->n - 1] : NULL;
    uint64_t phys = r->log < 0 ? 0 : r->phys + (from - r->off);
    if (last && last->log == r->log && last->offset + last->length == from &&
        (r->log < 0 || last->physical + last->length == phys)) {
        last->length += to - from;
        return;
    }
    m->ext[m->n++] = (struct lf_extent){from, to - from, phys, r->log};
}

/* Room for n extents in m->ext, kept from one window to the next. */
static int ext_reserve(struct lf_map *m, size_t n) {
    if (n <= m->cap) return 0;
    struct lf_extent *grown = realloc(m->ext, n * sizeof *grown);
    if (!grown) return errno = ENOMEM, -1;
    m->ext = grown;
    m->cap = n;
    return 0;
}

/* Overlapping records: the winner of each stretch between boundaries is the heap's top. */
static int sweep(struct lf_map *m, const struct rec *r, size_t n) {
    uint64_t *bounds = malloc(2 * n * sizeof *bounds);
    struct heap h = {malloc(n * sizeof(size_t)), 0, r};
    if (!bounds || !h.v || ext_reserve(m, 2 * n)) {
        free(bounds);
        free(h.v);
        return errno = ENOMEM, -1;
    }
    for (size_t i = 0; i < n; i++) {
        bounds[2 * i] = r[i].off;
        bounds[2 * i + 1] = r[i].end;
    }
    qsort(bounds, 2 * n, sizeof *bounds, u64_cmp);
    size_t next = 0;
    for (size_t k = 0; k + 1 < 2 * n; k++) {
        if (bounds[k] == bounds[k + 1]) continue;
        while (next < n && r[next].off <= bounds[k]) heap_push(&h, next++);
        while (h.n && r[h.v[0]].end <= bounds[k]) heap_pop(&h);
        if (h.n) emit(m, &r[h.v[0]], bounds[k], bounds[k + 1]);
    }
    free(bounds);
    free(h.v);
    return 0;
}

/* The entries (ours and the others'), the logical size and, for a packed file, whether it exists. The extents
 * are resolved later, a window at a time (map_window). */
int lf_map_build(lf_file *f) {
    if (f->others_stale && lf_load_others(f)) return -1;
    if (!f->map_stale) return 0;
    size_t n = f->nothers + f->nmine;
    struct lf_src *all = malloc((n ? n : 1) * sizeof *all);
    if (!all) return errno = ENOMEM, -1;
    memcpy(all, f->others, f->nothers * sizeof *all);
    for (size_t i = 0; i < f->nmine; i++) all[f->nothers + i] = (struct lf_src){f->mine[i], f->writer, f->wlog};
    free(f->map.ext);
    free(f->map.all);
    f->map = (struct lf_map){.all = all, .nall = n};
    f->map.size = replay_size(all, n, &f->map.exists);
    f->map_stale = 0;
    f->reloaded_at_end = 0;
    return 0;
}

/* Resolves the extents of the records r[0, n) (sorted by offset) into m. */
static int resolve(struct lf_map *m, const struct rec *r, size_t n) {
    int overlap = 0;
    for (size_t i = 0; i + 1 < n && !overlap; i++) overlap = r[i].end > r[i + 1].off;
    if (overlap) return sweep(m, r, n);
    if (ext_reserve(m, n)) return -1;
    for (size_t i = 0; i < n; i++) emit(m, &r[i], r[i].off, r[i].end);
    return 0;
}

/* Resolve the extents of the window [a, b) around the read [from, to) unless the current window holds them. With
 * few entries whose records are dense in the window (many writers' small pieces, of which the read needs one or
 * two), the read's own range is resolved instead: expanding the few entries again at the next read costs less. */
static int map_window(lf_file *f, uint64_t a, uint64_t b, uint64_t from, uint64_t to) {
    struct lf_map *m = &f->map;
    if (m->hi > m->lo && from >= m->lo && to <= m->hi) return 0;
    size_t nrec = expand_window(m->all, m->nall, a, b, NULL);
    if (m->nall <= LF_FEW_ENTRIES && nrec > LF_DENSE_RECORDS) {
        a = from, b = to;
        nrec = expand_window(m->all, m->nall, a, b, NULL);
    }
    struct rec few[2 * LF_DENSE_RECORDS];
    struct rec *r = 2 * nrec <= sizeof few / sizeof *few ? few : malloc(2 * nrec * sizeof *r); /* + the scratch */
    if (!r) return errno = ENOMEM, -1;
    expand_window(m->all, m->nall, a, b, r);
    m->n = 0;
    m->lo = m->hi = 0;
    sort_by_offset(r, r + nrec, nrec);
    int rc = resolve(m, r, nrec);
    if (r != few) free(r);
    if (rc == 0) m->lo = a, m->hi = b;
    return rc;
}

static int log_fd(lf_file *f, int32_t log) {
    struct lf_log *l = &f->logs[log];
    if (l->fd < 0) l->fd = IOLOOM_NEXT(open)(l->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    return l->fd;
}

/* The first extent ending after `off`. */
static size_t find_extent(const struct lf_map *m, uint64_t off) {
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (m->ext[mid].offset + m->ext[mid].length <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

ssize_t lf_map_read(lf_file *f, void *buf, size_t n, uint64_t offset) {
    if (lf_map_build(f)) return -1;
    if (offset >= f->map.size) return 0;
    if (n > f->map.size - offset) n = (size_t)(f->map.size - offset);
    char *out = buf;
    uint64_t pos = offset, stop = offset + n;
    uint64_t lo = offset / LF_WINDOW * LF_WINDOW, hi = (stop + LF_WINDOW - 1) / LF_WINDOW * LF_WINDOW;
    if (map_window(f, lo, hi, offset, stop)) return -1;
    for (size_t i = find_extent(&f->map, pos); pos < stop; i++) {
        const struct lf_extent *x = i < f->map.n ? &f->map.ext[i] : NULL;
        uint64_t start = x && x->offset < stop ? (x->offset > pos ? x->offset : pos) : stop;
        memset(out + (pos - offset), 0, start - pos); /* a hole before the extent (or to the end) */
        pos = start;
        if (pos >= stop) break;
        uint64_t end = x->offset + x->length < stop ? x->offset + x->length : stop;
        if (x->log < 0)
            memset(out + (pos - offset), 0, end - pos);
        else {
            int fd = log_fd(f, x->log);
            uint64_t at = x->physical + (pos - x->offset), t0 = lf_phys_traced() ? ioloom_now_ns() : 0;
            ssize_t got = fd < 0 ? -1 : lf_full_pread(fd, out + (pos - offset), end - pos, at);
            if (t0 && fd >= 0)
                lf_phys_event(lf_op_pread, f->logs[x->log].path, &f->logs[x->log].traced_id, fd, (int64_t)at,
                              (int64_t)(end - pos), got, t0);
            if (got < 0) return -1;
            if ((uint64_t)got < end - pos) return errno = EIO, -1; /* the index points past the log's end */
        }
        pos = end;
    }
    return (ssize_t)n;
}
