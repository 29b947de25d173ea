/* The container's metadata file (ioloom-logfs.meta): small text, written once at creation and on chmod.
 * Creation is race-free among many ranks and threads: each builds a whole container under a temporary name and
 * renames it into place, so exactly one wins and the others open the winner's (docs/logfs-format.md, "Creation
 * protocol"). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lf_fdtable.h"
#include "lf_internal.h"

/* The process's umask, followed through umask() (known: -1 until first asked): a create applies it to the logical
 * mode without asking the kernel by umask(0) and back, which cost two calls per create and left a moment in which
 * other threads' creates got no umask. First asked of /proc/self/status (Linux >= 4.7), else by umask() itself. */
static int known_mask = -1;

EXPORT mode_t umask(mode_t mask) {
    mode_t old = IOLOOM_NEXT(umask)(mask);
    __atomic_store_n(&known_mask, (int)(mask & 0777), __ATOMIC_RELAXED);
    return old;
}

static int mask_from_proc(void) {
    char status[1024]; /* Umask is its second line */
    int fd = IOLOOM_NEXT(open)("/proc/self/status", O_RDONLY | O_CLOEXEC);
    ssize_t got = fd < 0 ? -1 : IOLOOM_NEXT(read)(fd, status, sizeof status - 1);
    if (fd >= 0) IOLOOM_NEXT(close)(fd);
    status[got > 0 ? got : 0] = 0;
    const char *line = strstr(status, "\nUmask:");
    unsigned mask;
    return line && sscanf(line, "\nUmask: %o", &mask) == 1 ? (int)(mask & 0777) : -1;
}

static mode_t process_umask(void) {
    int mask = __atomic_load_n(&known_mask, __ATOMIC_RELAXED);
    if (mask < 0 && (mask = mask_from_proc()) < 0) {
        mask = (int)IOLOOM_NEXT(umask)(0);
        IOLOOM_NEXT(umask)((mode_t)mask);
    }
    int unknown = -1; /* a umask() call meanwhile wins */
    __atomic_compare_exchange_n(&known_mask, &unknown, mask, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return (mode_t)__atomic_load_n(&known_mask, __ATOMIC_RELAXED);
}

char *lf_slurp(const char *path, size_t *len) { return lf_slurp_at(AT_FDCWD, path, len); }

char *lf_slurp_at(int dirfd, const char *name, size_t *len) {
    int fd = IOLOOM_NEXT(openat)(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return NULL;
    struct stat st;
    char *buf = NULL;
    if (IOLOOM_NEXT(fstat)(fd, &st) == 0 && (buf = malloc((size_t)st.st_size + 1))) {
        ssize_t got = lf_full_pread(fd, buf, (size_t)st.st_size, 0);
        if (got < 0) {
            free(buf);
            buf = NULL;
        } else {
            buf[got] = 0;
            if (len) *len = (size_t)got;
        }
    }
    int saved = errno;
    IOLOOM_NEXT(close)(fd);
    errno = saved;
    return buf;
}

static unsigned long damaged;
static char first_damage[PATH_MAX + 256];

int lf_damaged(const char *path, const char *what) {
    if (__atomic_fetch_add(&damaged, 1, __ATOMIC_RELAXED) == 0)
        snprintf(first_damage, sizeof first_damage, "%s: %s", path, what);
    return errno = EIO, -1;
}

void lf_damaged_report(void) {
    unsigned long n = __atomic_load_n(&damaged, __ATOMIC_RELAXED);
    if (n)
        fprintf(stderr,
                "ioloom-logfs: %lu call(s) on damaged or crafted containers refused (EIO), the first: %s; "
                "`ioloom container check` says what to repair\n",
                n, first_damage);
}

DIR *lf_opendir(const char *dir) {
    int fd = IOLOOM_NEXT(open)(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOATIME);
    if (fd < 0 && errno == EPERM) fd = IOLOOM_NEXT(open)(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* not the owner */
    DIR *d = fd < 0 ? NULL : IOLOOM_NEXT(fdopendir)(fd);
    if (!d && fd >= 0) {
        int saved = errno;
        IOLOOM_NEXT(close)(fd);
        errno = saved;
    }
    return d;
}

int lf_times_get(const char *dir, struct timespec times[2]) {
    struct stat st;
    if (IOLOOM_NEXT(stat)(dir, &st)) return -1;
    times[0] = st.st_atim, times[1] = st.st_mtim;
    return 0;
}

void lf_times_put(const char *dir, const struct timespec times[2]) {
    int saved = errno;
    IOLOOM_NEXT(utimensat)(AT_FDCWD, dir, times, 0);
    errno = saved;
}

int lf_mkdirs(const char *dir, mode_t mode) {
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) return errno = ENAMETOOLONG, -1;
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (IOLOOM_NEXT(mkdir)(path, 0777) && errno != EEXIST) return -1;
        *p = '/';
    }
    return IOLOOM_NEXT(mkdir)(path, mode) && errno != EEXIST ? -1 : 0;
}

/* An id is what the container's extra backend directories end in (".lf<id>"): hex digits and dashes. */
static int valid_id(const char *id) { return *id && strspn(id, "0123456789abcdef-") == strlen(id); }

/* The origin is a relative path of plain names: no empty, "." or ".." component can lead out of a root. */
static int valid_origin(const char *origin) {
    if (*origin == '/' || !*origin) return 0;
    for (const char *c = origin; *c;) {
        size_t len = strcspn(c, "/");
        if (!len || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.')) return 0;
        c += len + (c[len] == '/');
        if (c[-1] == '/' && !*c) return 0;
    }
    return 1;
}

/* Where an extra backend's directory lies below its root: the shared lf-spread/<bucket> of the container's id, or
 * (spread 0) origin.lf<id>, its own. */
static int below_root(const struct lf_meta *m, char *out, size_t cap) {
    int n = m->spread ? snprintf(out, cap, "lf-spread/%03x", lf_fnv1a(m->id) % (unsigned)m->spread)
                      : snprintf(out, cap, "%s.lf%s", m->origin, m->id);
    return n < (int)cap ? 0 : -1;
}

int lf_member_path(const struct lf_meta *m, int b, const char *kind, const char *group, char *out, size_t cap) {
    int n = snprintf(out, cap, "%s/%s%s.%s", m->backend[b], m->prefix[b], kind, group);
    return n < (int)cap ? 0 : (errno = ENAMETOOLONG, -1);
}

const char *lf_member_group(const struct lf_meta *m, int b, const char *name, const char *kind) {
    size_t p = strlen(m->prefix[b]), k = strlen(kind);
    if (strncmp(name, m->prefix[b], p) || strncmp(name + p, kind, k) || name[p + k] != '.') return NULL;
    return name + p + k + 1;
}

/* Is `inner` the directory `outer` or inside it (both real paths)? */
static int within(const char *inner, const char *outer) {
    size_t n = strlen(outer);
    return !strncmp(inner, outer, n) && (inner[n] == '/' || !inner[n] || (n == 1 && outer[0] == '/'));
}

/* Walks the backend directory's components below its root (resolved: `real_root`) without following a link:
 * what exists must be real directories. NULL if so; a missing directory only when `missing_ok` (an unlink
 * finishing a half-removed container: nothing there to touch). */
static const char *walk_below_root(const char *real_root, const char *below, char *real_out, int missing_ok) {
    int n = snprintf(real_out, PATH_MAX, "%s/%s", strcmp(real_root, "/") ? real_root : "", below);
    if (n >= PATH_MAX) return "the path is too long";
    for (char *c = real_out + strlen(real_root) + (strcmp(real_root, "/") != 0);; c++) {
        char *slash = strchr(c, '/');
        if (slash) *slash = 0;
        struct stat st;
        int rc = IOLOOM_NEXT(fstatat)(AT_FDCWD, real_out, &st, AT_SYMLINK_NOFOLLOW);
        if (slash) *slash = '/';
        if (rc)
            return errno == ENOENT ? (missing_ok ? NULL
                                                 : "its directory is missing (the data of its logs is lost, "
                                                   "or its file system is not mounted)")
                                   : "it cannot be examined";
        if (S_ISLNK(st.st_mode)) return "a symbolic link lies between its root and it";
        if (!S_ISDIR(st.st_mode)) return "it is not a directory";
        if (!slash) return NULL;
        c = slash;
    }
}

/* The extra backend directory below `root` (below_root; root as written: absolute, or relative to the container)
 * into out, or why it is refused: ids and origins of plain names, an existing root, no link followed below it, and
 * neither the container nor a directory holding it. */
static const char *backend_problem(const char *dir, const struct lf_meta *m, const char *root, char *out,
                                   int missing_ok) {
    if (!valid_id(m->id)) return "an extra backend, but no valid 'id' line";
    if (!valid_origin(m->origin)) return "an extra backend, but no valid 'origin' line (a relative path of names)";
    char path[PATH_MAX], real_root[PATH_MAX], real_dir[PATH_MAX], real_backend[PATH_MAX], below[PATH_MAX];
    if (below_root(m, below, sizeof below) ||
        snprintf(path, sizeof path, "%s%s%s", *root == '/' ? "" : dir, *root == '/' ? "" : "/", root) >= PATH_MAX ||
        snprintf(out, PATH_MAX, "%s/%s", path, below) >= PATH_MAX)
        return "a backend path too long";
    ioloom_normalise_path(out);
    if (!realpath(path, real_root)) return "a backend root that does not exist (a file system not mounted?)";
    const char *why = walk_below_root(real_root, below, real_backend, missing_ok);
    if (why) return why;
    if (!realpath(dir, real_dir)) return "a container directory it cannot resolve";
    if (within(real_dir, real_backend) || within(real_backend, real_dir))
        return "a backend that is the container, holds it or lies inside it";
    return NULL;
}

/* What the metadata lacks that every container's has (a file cut short, or edited), or NULL. */
static const char *incomplete(const struct lf_meta *m, int seen, int extras, int nroots) {
    if (seen != 0xf) return "a chunk, mode, id or extras line is missing (cut short?)";
    if (extras != nroots) return "its extras line does not count its backend lines (cut short?)";
    if (m->spread < 0 || m->spread > LF_SPREAD_MAX) return "its spread line is out of range (0 to 4096)";
    return m->chunk < LF_PAGE || m->chunk % LF_PAGE ? "its chunk is not a multiple of 4096" : NULL;
}

int lf_meta_read_for(const char *dir, struct lf_meta *m, int missing_ok) {
    char path[PATH_MAX + sizeof LF_META_NAME + 1];
    snprintf(path, sizeof path, "%s/" LF_META_NAME, dir);
    size_t len = 0;
    char *text = lf_slurp(path, &len);
    if (!text) return -1;
    memset(m, 0, sizeof *m);
    snprintf(m->backend[m->nbackends++], PATH_MAX, "%s", dir); /* wherever the container is now */
    const char *roots[LF_MAX_BACKENDS], *why = NULL;
    int version = sscanf(text, "ioloom-logfs %d", &m->version) == 1, seen = 0, extras = -1, nroots = 0;
    /* a NUL would end the text here early, and Python's paths refuse one: refused whole, in both */
    if (memchr(text, 0, len))
        why = "it holds a NUL byte";
    else if (!len || text[len - 1] != '\n')
        why = "it ends inside a line (cut short?)";
    char *rest = NULL; /* strtok_r: threads opening containers at once parse their metadata at once */
    for (char *line = strtok_r(text, "\n", &rest); version && line; line = strtok_r(NULL, "\n", &rest)) {
        unsigned long long chunk;
        unsigned mode;
        if (sscanf(line, "chunk %llu", &chunk) == 1)
            m->chunk = chunk, seen |= 1;
        else if (sscanf(line, "mode %o", &mode) == 1)
            m->mode = mode & 07777, seen |= 2;
        else if (!strncmp(line, "id ", 3))
            snprintf(m->id, sizeof m->id, "%s", line + 3), seen |= 4;
        else if (sscanf(line, "extras %d", &extras) == 1)
            seen |= 8;
        else if (sscanf(line, "spread %d", &m->spread) == 1)
            continue;
        else if (!strncmp(line, "origin ", 7))
            snprintf(m->origin, sizeof m->origin, "%s", line + 7);
        else if (!strncmp(line, "backend ", 8) && nroots < LF_MAX_BACKENDS - 1)
            roots[nroots++] = line + 8;
        else if (!strncmp(line, "backend ", 8))
            why = "too many backends";
    }
    if (!why) why = incomplete(m, seen, extras, nroots);
    for (int i = 0; i < nroots && !why; i++) {
        if (m->spread) snprintf(m->prefix[m->nbackends], sizeof m->prefix[0], "%s.", m->id);
        why = backend_problem(dir, m, roots[i], m->backend[m->nbackends++], missing_ok);
    }
    free(text);
    if (!version || m->version < LF_VERSION_OLDEST || m->version > LF_VERSION) return errno = EPROTO, -1;
    return why ? lf_damaged(path, why) : 0;
}

int lf_meta_read(const char *dir, struct lf_meta *m) { return lf_meta_read_for(dir, m, 0); }

/* The metadata of a new container whose extra backends are in `b` (its origin and id already in m). */
static int format_meta(const struct lf_meta *m, const struct lf_backends *b, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "ioloom-logfs %d\nchunk %llu\nmode %04o\nid %s\nextras %d\n", LF_VERSION,
                     (unsigned long long)m->chunk, (unsigned)m->mode, m->id, m->nbackends - 1);
    if (m->nbackends > 1 && n < (int)cap) n += snprintf(buf + n, cap - (size_t)n, "origin %s\n", m->origin);
    if (m->nbackends > 1 && m->spread && n < (int)cap)
        n += snprintf(buf + n, cap - (size_t)n, "spread %d\n", m->spread);
    for (int i = 0; i < m->nbackends - 1 && n < (int)cap; i++)
        n += snprintf(buf + n, cap - (size_t)n, "backend %s\n", b->roots[i]);
    return n < (int)cap ? n : (errno = ENAMETOOLONG, -1);
}

/* Writes `dir`/`name`, a new file, with n bytes of text. */
static int write_new(const char *dir, const char *name, const char *text, size_t n) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = IOLOOM_NEXT(open)(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return -1;
    int rc = lf_full_pwrite(fd, text, n, 0) == (ssize_t)n ? 0 : -1;
    int saved = errno;
    if (IOLOOM_NEXT(close)(fd) && rc == 0) return -1; /* a write error the file system reports at close */
    errno = saved;
    return rc;
}

/* Undo a container that lost the race to be created (or failed half way): only what we made. */
static void discard(const char *tmp, const struct lf_meta *m) {
    char path[PATH_MAX + sizeof LF_META_NAME + 1];
    snprintf(path, sizeof path, "%s/" LF_META_NAME, tmp);
    IOLOOM_NEXT(unlink)(path);
    IOLOOM_NEXT(rmdir)(tmp);
    for (int i = 1; i < m->nbackends && !m->spread; i++) IOLOOM_NEXT(rmdir)(m->backend[i]); /* spread: shared */
}

/* Is the container at `dir` the one with this id? A rename that failed may have been done all the same (NFS
 * answers a retransmitted rename with an error when the first one went through): then it is ours to keep. */
static int is_ours(const char *dir, const char *id) {
    int saved = errno;
    struct lf_meta there;
    int ours = lf_meta_read(dir, &there) == 0 && !strcmp(there.id, id);
    errno = saved;
    return ours ? 0 : -1;
}

/* The extra backend directories root/origin.lf<id>, made; m->nbackends counts those made. */
static int make_backends(struct lf_meta *m, const struct lf_backends *b) {
    if (!b || !b->count) return 0;
    if (b->count > LF_MAX_BACKENDS - 1) return errno = EINVAL, -1;
    snprintf(m->origin, sizeof m->origin, "%s", b->rel);
    char below[PATH_MAX];
    if (below_root(m, below, sizeof below)) return errno = ENAMETOOLONG, -1;
    for (int i = 0; i < b->count; i++) {
        if (snprintf(m->backend[m->nbackends], PATH_MAX, "%s/%s", b->roots[i], below) >= PATH_MAX)
            return errno = ENAMETOOLONG, -1;
        if (m->spread) snprintf(m->prefix[m->nbackends], sizeof m->prefix[0], "%s.", m->id);
        if (lf_mkdirs(m->backend[m->nbackends++], 0755)) return -1;
    }
    return 0;
}

int lf_meta_create(const char *dir, mode_t mode, const struct lf_backends *backends, int excl, int absent,
                   struct lf_meta *made) {
    if (!absent && lf_is_container(dir)) return excl ? (errno = EEXIST, -1) : 0;
    mode_t mask = process_umask(); /* open(2) applies the umask to a new file's mode: so do we */
    struct lf_meta m = {.version = LF_VERSION,
                        .chunk = ioloom_env_size("IOLOOM_LOGFS_CHUNK", LF_DEFAULT_CHUNK),
                        .mode = mode & 07777 & ~mask};
    size_t spread = ioloom_env_size("IOLOOM_LOGFS_SPREAD", LF_SPREAD_DEFAULT);
    m.spread = spread > LF_SPREAD_MAX ? LF_SPREAD_MAX : (int)spread;
    m.chunk = (m.chunk + LF_PAGE - 1) / LF_PAGE * LF_PAGE;
    if (m.chunk < LF_PAGE) m.chunk = LF_PAGE;
    /* The container is built complete under a temporary name and renamed into place, so a directory with the
     * container's name always holds its metadata: racing creators (N ranks opening with O_CREAT) see either
     * nothing or a whole container, and a rename onto a container that another process put there first fails.
     * The id (the creator's host, process and count, and the time) is unique to this container, so a container
     * created later under the same name, or renamed, never shares its extra backend directories; it names the
     * temporary too. */
    snprintf(m.id, sizeof m.id, "%llx-%llx", (unsigned long long)lf_unique_id(), (unsigned long long)ioloom_now_ns());
    char tmp[PATH_MAX], text[LF_MAX_BACKENDS * (PATH_MAX + 16)];
    if (snprintf(tmp, sizeof tmp, "%s.lfnew.%s", dir, m.id) >= (int)sizeof tmp) return errno = ENAMETOOLONG, -1;
    /* In the file's directory, which must exist, as for open(O_CREAT) of a plain file (ENOENT otherwise). */
    if (IOLOOM_NEXT(mkdir)(tmp, 0755)) return -1;
    struct stat made_dir; /* only a group-executable set-group-ID mode may lose that bit (lf_mode_at_create) */
    if ((m.mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP) && IOLOOM_NEXT(stat)(tmp, &made_dir) == 0)
        m.mode = lf_mode_at_create(m.mode, &made_dir);
    snprintf(m.backend[m.nbackends++], PATH_MAX, "%s", dir);
    int n = 0, rc = make_backends(&m, backends);
    if (rc == 0 && (n = format_meta(&m, backends, text, sizeof text)) < 0) rc = -1;
    if (rc == 0) rc = write_new(tmp, LF_META_NAME, text, (size_t)n);
    if (rc == 0) rc = IOLOOM_NEXT(rename)(tmp, dir);
    if (rc == 0 || (rc = is_ours(dir, m.id)) == 0) {
        if (m.nbackends == 1) m.spread = 0; /* as lf_meta_read reads it back: spread is written with extras only */
        *made = m;
        return 1;
    }
    int saved = errno;
    discard(tmp, &m);
    if (lf_is_container(dir)) return excl ? (errno = EEXIST, -1) : 0; /* another process created it first */
    errno = saved == ENOTEMPTY ? EEXIST : saved;
    return -1;
}

/* The metadata text with its mode line replaced (the other lines kept as written) into out, of capacity cap. */
static int with_mode(const char *text, mode_t mode, char *out, size_t cap) {
    size_t first = strcspn(text, "\n"); /* the version line stays first */
    int n = snprintf(out, cap, "%.*s\nmode %04o\n", (int)first, text, (unsigned)mode);
    for (const char *line = text + first; *line && n < (int)cap;) {
        line += *line == '\n';
        size_t len = strcspn(line, "\n");
        if (len && strncmp(line, "mode ", 5)) n += snprintf(out + n, cap - (size_t)n, "%.*s\n", (int)len, line);
        line += len;
    }
    return n < (int)cap ? n : (errno = ENAMETOOLONG, -1);
}

unsigned long lf_mode_changes;

int lf_meta_set_mode(const char *dir, mode_t mode) {
    struct lf_meta m;
    char tmp[64], from[PATH_MAX + 64], to[PATH_MAX + sizeof LF_META_NAME + 1];
    snprintf(to, sizeof to, "%s/" LF_META_NAME, dir);
    size_t len;
    char *text = lf_meta_read(dir, &m) ? NULL : lf_slurp(to, &len), *out = text ? malloc(len + 16) : NULL;
    int n = out ? with_mode(text, mode & 07777, out, len + 16) : -1;
    free(text);
    /* Replaced whole (a temporary renamed over it): readers see the old or the new metadata, never half. */
    snprintf(tmp, sizeof tmp, ".meta.%d.%llx", (int)getpid(), (unsigned long long)ioloom_now_ns());
    snprintf(from, sizeof from, "%s/%s", dir, tmp);
    struct timespec times[2];
    int kept = lf_times_get(dir, times) == 0; /* a chmod changes the file's ctime, not its mtime */
    int rc = n < 0 || write_new(dir, tmp, out, (size_t)n) ? -1 : IOLOOM_NEXT(rename)(from, to), saved = errno;
    if (rc && n >= 0) IOLOOM_NEXT(unlink)(from);
    if (kept) lf_times_put(dir, times);
    if (rc == 0) __atomic_add_fetch(&lf_mode_changes, 1, __ATOMIC_RELEASE);
    free(out);
    errno = saved;
    return rc;
}

int lf_chmod(const char *dir, mode_t mode) {
    struct stat st;
    if (IOLOOM_NEXT(stat)(dir, &st)) return -1;
    if (!lf_may_chmod(&st)) return errno = EPERM, -1;
    return lf_meta_set_mode(dir, lf_mode_after_chmod(mode & 07777, st.st_gid));
}

void lf_meta_refresh_mode(lf_file *f) {
    int saved = errno;
    f->mode_changes = __atomic_load_n(&lf_mode_changes, __ATOMIC_ACQUIRE); /* before the read: a later one is seen */
    struct lf_meta *now = malloc(sizeof *now); /* its backends' paths make it large: not the caller's stack */
    if (now && lf_meta_read(lf_dir(f), now) == 0) f->meta.mode = now->mode;
    free(now);
    errno = saved;
}

int lf_is_container(const char *dir) {
    char path[PATH_MAX + sizeof LF_META_NAME + 1];
    if (snprintf(path, sizeof path, "%s/" LF_META_NAME, dir) >= (int)sizeof path) return 0;
    return IOLOOM_NEXT(access)(path, F_OK) == 0;
}
