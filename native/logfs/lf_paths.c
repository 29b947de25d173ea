/* Which paths are logfs's: those under a mount of IOLOOM_LOGFS_ROOTS and those written `logfs:PATH`.
 *
 *   IOLOOM_LOGFS_ROOTS=MOUNT[=EXTRA[,EXTRA...]][:MOUNT...]
 *
 * A MOUNT is a real directory: files created under it become containers in place (but runtime probes: see
 * runtime_probe), directories and plain files already there stay what they are. EXTRAs are more backend directories
 * (other file systems) over which the containers' logs are spread: the container MOUNT/a/b keeps its files there in
 * EXTRA/lf-spread/<bucket> (or its own EXTRA/a/b.lf<id>; its metadata records EXTRA and a/b, so the tools can check
 * them). An absolute path with no empty, `.` or `..` component outside every mount costs two string scans and one
 * compare per mount before it passes through (outside_every_mount); any other path is made absolute (relative
 * ones with a getcwd) and normalised first. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lf_internal.h"
#include "lf_paths.h"

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
}

/* `path` relative to `dirfd` made absolute into out; 0 on success. */
static int absolute(int dirfd, const char *path, char out[PATH_MAX]) {
    char base[PATH_MAX];
    if (*path == '/')
        base[0] = 0;
    else if (dirfd == AT_FDCWD) {
        if (!getcwd(base, sizeof base)) return -1;
    } else {
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
        ssize_t n = IOLOOM_NEXT(readlink)(link, base, sizeof base - 1);
        if (n < 0) return -1;
        base[n] = 0;
    }
    if (snprintf(out, PATH_MAX, "%s/%s", base, path) >= PATH_MAX) return -1;
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
    pthread_once(&parsed, parse_roots);
    return nmounts > 0;
}

/* A file a runtime creates beside the program's to probe the file system, never data: Open MPI's OMPIO tests fcntl
 * locks on NAME.locktest.RANK at every MPI_File_open. Made a container, each open would create and remove one (most
 * of the open's time through the layer, docs/logfs-format.md); it stays a plain file of the mount's directory. */
static int runtime_probe(const char *path) {
    const char *base = strrchr(path, '/');
    return strstr(base ? base + 1 : path, ".locktest.") != NULL;
}

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

/* 1 when `path` certainly lies under no mount, decided without copying it: most calls a program makes (libraries,
 * /proc, its other files) pass through at this cost. */
static int outside_every_mount(const char *path) {
    if (!normal_absolute(path)) return 0;
    for (int i = 0; i < nmounts; i++)
        if (under(&mounts[i], path)) return 0;
    return 1;
}

int lf_resolve(int dirfd, const char *path, struct lf_place *place) {
    if (!path) return 0;
    int prefixed = *path == LF_PREFIX[0] && !strncmp(path, LF_PREFIX, sizeof LF_PREFIX - 1);
    if (!prefixed && (!lf_paths_active() || outside_every_mount(path))) return 0;
    const char *rest = prefixed ? path + sizeof LF_PREFIX - 1 : path;
    int saved = errno;
    int ok = absolute(prefixed ? AT_FDCWD : dirfd, rest, place->dir) == 0;
    errno = saved;
    if (!ok || (!prefixed && runtime_probe(place->dir))) return 0; /* a logfs: path is always logfs's */
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
    if (ioloom_busy || !lf_resolve(dirfd, path, place)) return 0;
    if (!strncmp(path, LF_PREFIX, sizeof LF_PREFIX - 1)) *real = place->dir;
    return 1;
}
