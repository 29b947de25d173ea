/* Which paths are logfs's: those under a mount of IOLOOM_LOGFS_ROOTS and those written `logfs:PATH`.
 *
 *   IOLOOM_LOGFS_ROOTS=MOUNT[=EXTRA[,EXTRA...]][:MOUNT...]
 *
 * A MOUNT is a real directory: files created under it become containers in place (but an MPI runtime's files: see
 * lf_runtime.c), directories and plain files already there stay what they are. EXTRAs are more backend directories
 * (other file systems) over which the containers' logs are spread: the container MOUNT/a/b keeps its files there in
 * EXTRA/lf-spread/<bucket> (or its own EXTRA/a/b.lf<id>; its metadata records EXTRA and a/b, so the tools can check
 * them). An absolute path with no empty, `.` or `..` component outside every mount costs two string scans and one
 * compare per mount before it passes through (outside_every_mount), a relative one with no `..` component one scan
 * when the working directory is far from every mount (lf_cwd.c); any other path is made absolute (relative ones
 * against the thread's copy of the working directory, dirfd's through /proc/self/fd) and normalised first. */
#include <errno.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lf_internal.h"
#include "lf_paths.h"
#include "lf_runtime.h"

#define MAX_MOUNTS 16

struct mount {
    char path[PATH_MAX];
    size_t len;
    int pack;
    int nextra;
    char extra[LF_MAX_BACKENDS - 1][PATH_MAX];
};

static struct mount mounts[MAX_MOUNTS];
static int nmounts;
static pthread_once_t parsed = PTHREAD_ONCE_INIT;
static int parse_done; /* set (release) once mounts[] is final: a load instead of pthread_once on every call */

static void strip_slashes(char *path, size_t *len) {
    while (*len > 1 && path[*len - 1] == '/') path[--*len] = 0;
}

static void add_extra(const char *item, size_t len, void *arg) {
    struct mount *m = arg;
    if (m->nextra < LF_MAX_BACKENDS - 1 && len < PATH_MAX) {
        memcpy(m->extra[m->nextra], item, len);
        m->extra[m->nextra++][len] = 0;
    }
}

static void add_mount(const char *item, size_t len, void *arg) {
    (void)arg;
    if (nmounts == MAX_MOUNTS || len >= PATH_MAX || *item != '/') {
        /* Said once per process, on stderr: the program runs on, with that entry passed through. */
        fprintf(stderr, "ioloom-logfs: IOLOOM_LOGFS_ROOTS entry '%.*s' ignored: %s\n", (int)len, item,
                *item != '/' ? "a mount must be an absolute path" : "too many mounts or too long");
        return;
    }
    struct mount *m = &mounts[nmounts];
    const char *eq = memchr(item, '=', len);
    size_t plen = eq ? (size_t)(eq - item) : len;
    memcpy(m->path, item, plen);
    m->path[plen] = 0;
    m->len = plen;
    strip_slashes(m->path, &m->len);
    if (eq) {
        char list[LF_MAX_BACKENDS * PATH_MAX];
        snprintf(list, sizeof list, "%.*s", (int)(len - plen - 1), eq + 1);
        ioloom_for_each_item(list, ',', add_extra, m);
    }
    nmounts++;
}

/* IOLOOM_LOGFS_PACK=MOUNT[:MOUNT...]: those mounts pack a directory's new files into one container (1-N). */
static void mark_pack(const char *item, size_t len, void *arg) {
    (void)arg;
    while (len > 1 && item[len - 1] == '/') len--;
    for (int i = 0; i < nmounts; i++)
        if (mounts[i].len == len && !strncmp(mounts[i].path, item, len)) mounts[i].pack = 1;
}

static void parse_roots(void) {
    ioloom_for_each_item(ioloom_env_str("IOLOOM_LOGFS_ROOTS", ""), ':', add_mount, NULL);
    ioloom_for_each_item(ioloom_env_str("IOLOOM_LOGFS_PACK", ""), ':', mark_pack, NULL);
    __atomic_store_n(&parse_done, 1, __ATOMIC_RELEASE);
}

/* `path` relative to `dirfd` made absolute into out; 0 on success. */
static int absolute(int dirfd, const char *path, char out[PATH_MAX]) {
    char base[PATH_MAX];
    const char *cwd = NULL;
    if (*path == '/')
        base[0] = 0;
    else if (dirfd == AT_FDCWD) {
        const struct lf_cwd *c = lf_cwd();
        if (!c->ok) return -1;
        cwd = c->path;
    } else {
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
        ssize_t n = IOLOOM_NEXT(readlink)(link, base, sizeof base - 1);
        if (n < 0) return -1;
        base[n] = 0;
    }
    if (snprintf(out, PATH_MAX, "%s/%s", cwd ? cwd : base, path) >= PATH_MAX) return -1;
    ioloom_normalise_path(out);
    return 0;
}

int lf_is_link(const char *dir) {
    struct stat st;
    int saved = errno, link = IOLOOM_NEXT(fstatat)(AT_FDCWD, dir, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
    errno = saved;
    return link;
}

int lf_paths_active(void) {
    if (IOLOOM_UNLIKELY(!__atomic_load_n(&parse_done, __ATOMIC_ACQUIRE))) pthread_once(&parsed, parse_roots);
    return nmounts > 0;
}

/* Has the relative `path` a `..` component, which may lead out of the directory it is relative to? */
static int climbs(const char *path) {
    for (const char *dots = strstr(path, ".."); dots; dots = strstr(dots + 1, ".."))
        if ((dots == path || dots[-1] == '/') && (dots[2] == '/' || !dots[2])) return 1;
    return 0;
}

#ifdef __SSE2__
/* The length of `path`, or -1 when a slash in it is followed by a slash or a dot (which may begin a `.` or `..`
 * component: the caller looks closer). One pass, 16 bytes at a time: the aligned loads never cross a page, and the
 * bytes around the path that they read are masked off (as glibc's own string functions do). */
static long plain_length(const char *path) {
    const __m128i slash = _mm_set1_epi8('/'), dot = _mm_set1_epi8('.'), nul = _mm_setzero_si128();
    const char *block = (const char *)((uintptr_t)path & ~(uintptr_t)15);
    unsigned skip = (unsigned)((uintptr_t)path & 15), after_slash = 0;
    for (;; block += 16, skip = 0) {
        __m128i v = _mm_load_si128((const __m128i *)block);
        unsigned slashes = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, slash)) >> skip << skip;
        unsigned odd = (slashes << 1 | after_slash) & (slashes | (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, dot)));
        unsigned ends = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, nul)) >> skip << skip;
        if (ends) return odd & ((ends & -ends) - 1) ? -1 : (long)(block - path) + __builtin_ctz(ends);
        if (odd) return -1;
        after_slash = slashes >> 15;
    }
}
#else
static long plain_length(const char *path) {
    return strstr(path, "//") || strstr(path, "/.") ? -1 : (long)strlen(path);
}
#endif

/* Is the absolute `path` already normal: no empty, `.` or `..` component (a trailing slash aside)? Then
 * ioloom_normalise_path would only drop that slash. */
static int normal_absolute(const char *path) {
    if (*path != '/' || strstr(path, "//")) return 0;
    for (const char *dot = strchr(path, '.'); dot; dot = strchr(dot + 1, '.')) {
        const char *after = dot + 1 + (dot[1] == '.'); /* past `.` or `..` */
        if (dot[-1] == '/' && (*after == '/' || !*after)) return 0;
    }
    return 1;
}

/* Is the normal absolute `path` under mount m: m's path, a slash, and a name after it? */
static int under(const struct mount *m, const char *path) {
    return !strncmp(path, m->path, m->len) && path[m->len] == '/' && path[m->len + 1];
}

void lf_cwd_place(struct lf_cwd *c) {
    c->inside = 0;
    c->below = 0;
    for (int i = 0; i < nmounts; i++) {
        const struct mount *m = &mounts[i];
        c->inside |= !strcmp(m->path, c->path) || under(m, c->path);
        if (c->len < m->len && !strncmp(m->path, c->path, c->len) && (m->path[c->len] == '/' || c->len == 1))
            c->below |= 1u << i;
    }
}

/* Does the `len` bytes long `path` (normal, relative to `base`: a mount's path, or where a relative path starts in
 * it) lie under mount i? A slash after the mount's part: a name follows it (a normal path ends with none). */
static int starts_under(int i, size_t base, const char *path, size_t len) {
    size_t part = mounts[i].len - base;
    return len > part && path[part] == '/' && !memcmp(path, mounts[i].path + base, part);
}

/* outside_every_mount of a path relative to the working directory: a `..` component may climb to a mount above
 * it, a leading `.` is looked at closer (./x), and otherwise only the mounts below it can hold the path. */
static int relative_outside(const char *path) {
    const struct lf_cwd *c = lf_cwd();
    if (!c->ok) return 1; /* as absolute() does: a path against no known directory passes through */
    if (c->inside) return 0;
    long len = *path == '.' ? -1 : plain_length(path);
    if (!c->below) return len >= 0 || !climbs(path);
    if (len < 0) return 0;
    size_t base = c->len == 1 ? 1 : c->len + 1; /* where the mounts below go on after the working directory */
    for (int i = 0; i < nmounts; i++)
        if ((c->below >> i & 1) && starts_under(i, base, path, (size_t)len)) return 0;
    return 1;
}

/* 1 when `path` (relative to dirfd) certainly lies under no mount, decided without copying it: most calls a program
 * makes (libraries, /proc, its other files, relative names in its working directory) pass through at this cost. */
static int outside_every_mount(int dirfd, const char *path) {
    if (*path != '/') return dirfd == AT_FDCWD && relative_outside(path);
    long len = plain_length(path);
    if (len < 0 && !normal_absolute(path)) return 0;
    if (len < 0) len = (long)strlen(path);
    for (int i = 0; i < nmounts; i++)
        if (starts_under(i, 0, path, (size_t)len)) return 0;
    return 1;
}

static int has_prefix(const char *path) {
    return *path == LF_PREFIX[0] && !strncmp(path, LF_PREFIX, sizeof LF_PREFIX - 1);
}

int lf_passes(int dirfd, const char *path) {
    if (!path || ioloom_busy) return 1;
    return !has_prefix(path) && (!lf_paths_active() || outside_every_mount(dirfd, path));
}

/* An MPI runtime's file (lf_runtime_name) made a container, each open would create and remove one (most of the
 * open's time through the layer, docs/logfs-format.md) and every lock on it would be a sync point: it stays a plain
 * file of the mount's directory. A container already made under such a name (by a layer that did not know it)
 * stays the container it is. */
int lf_resolve(int dirfd, const char *path, struct lf_place *place) {
    if (!path) return 0;
    int prefixed = has_prefix(path);
    if (!prefixed && (!lf_paths_active() || outside_every_mount(dirfd, path))) return 0;
    const char *rest = prefixed ? path + sizeof LF_PREFIX - 1 : path;
    int saved = errno;
    int ok = absolute(prefixed ? AT_FDCWD : dirfd, rest, place->dir) == 0 &&
             (prefixed || !lf_runtime_name(place->dir) || lf_is_container(place->dir)); /* logfs: is always logfs's */
    errno = saved;
    if (!ok) return 0;
    place->backends = place->pack_backends = (struct lf_backends){place->roots, 0, NULL};
    place->pack = 0;
    for (int i = 0; i < nmounts; i++) {
        const struct mount *m = &mounts[i];
        if (!under(m, place->dir)) continue;
        for (int e = 0; e < m->nextra; e++) place->roots[e] = m->extra[e];
        place->backends.count = place->pack_backends.count = m->nextra;
        place->backends.rel = place->dir + m->len + 1;
        if ((place->pack = m->pack)) {
            const char *slash = strrchr(place->dir, '/');
            place->name = slash + 1;
            snprintf(place->pack_dir, sizeof place->pack_dir, "%.*s/" LF_PACK_NAME, (int)(slash - place->dir),
                     place->dir);
            place->pack_backends.rel = place->pack_dir + m->len + 1;
        }
        return 1;
    }
    return prefixed;
}

int lf_resolve_call(int dirfd, const char *path, const char **real, struct lf_place *place) {
    *real = path;
    if (ioloom_busy || !lf_resolve(dirfd, path, place)) return 0; /* lf_resolve: 0 wherever lf_passes is 1 */
    if (has_prefix(path)) *real = place->dir;
    return 1;
}
