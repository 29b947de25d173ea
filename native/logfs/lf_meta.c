/* The container's metadata file (ioloom-logfs.meta): small text, written once at creation and on rename.
 * Creation is race-free among many ranks: each writes a private temporary file and link()s it into place, so
 * exactly one wins and the others find the winner's file (O_EXCL semantics without a lock). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lf_internal.h"

char *lf_slurp(const char *path, size_t *len) {
    int fd = IOLOOM_NEXT(open)(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat st;
    char *buf = NULL;
    if (IOLOOM_NEXT(fstat)(fd, &st) == 0 && (buf = malloc((size_t)st.st_size + 1))) {
        ssize_t got = lf_full_pread(fd, buf, (size_t)st.st_size, 0);
        if (got < 0) { free(buf); buf = NULL; }
        else { buf[got] = 0; if (len) *len = (size_t)got; }
    }
    int saved = errno;
    IOLOOM_NEXT(close)(fd);
    errno = saved;
    return buf;
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

int lf_meta_read(const char *dir, struct lf_meta *m) {
    char path[PATH_MAX + sizeof LF_META_NAME + 1];
    snprintf(path, sizeof path, "%s/" LF_META_NAME, dir);
    char *text = lf_slurp(path, NULL);
    if (!text) return -1;
    memset(m, 0, sizeof *m);
    m->chunk = LF_DEFAULT_CHUNK;
    m->mode = 0644;
    snprintf(m->backend[m->nbackends++], PATH_MAX, "%s", dir); /* wherever the container is now */
    int ok = sscanf(text, "ioloom-logfs %d", &m->version) == 1;
    for (char *line = strtok(text, "\n"); ok && line; line = strtok(NULL, "\n")) {
        unsigned long long chunk;
        unsigned mode;
        if (sscanf(line, "chunk %llu", &chunk) == 1) m->chunk = chunk;
        else if (sscanf(line, "mode %o", &mode) == 1) m->mode = mode & 07777;
        else if (!strncmp(line, "backend ", 8) && m->nbackends < LF_MAX_BACKENDS)
            snprintf(m->backend[m->nbackends++], PATH_MAX, "%s", line + 8);
    }
    free(text);
    if (!ok || m->version != LF_VERSION || m->chunk < LF_PAGE || m->chunk % LF_PAGE) return errno = EPROTO, -1;
    return 0;
}

static int format_meta(const struct lf_meta *m, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "ioloom-logfs %d\nchunk %llu\nmode %04o\n", LF_VERSION,
                     (unsigned long long)m->chunk, (unsigned)m->mode);
    for (int i = 1; i < m->nbackends && n < (int)cap; i++)
        n += snprintf(buf + n, cap - (size_t)n, "backend %s\n", m->backend[i]);
    return n < (int)cap ? n : (errno = ENAMETOOLONG, -1);
}

/* Writes `dir`/`name` (a new file) with the metadata. */
static int write_meta(const char *dir, const char *name, const struct lf_meta *m) {
    char text[LF_MAX_BACKENDS * (PATH_MAX + 16)], path[PATH_MAX + 64];
    int n = format_meta(m, text, sizeof text);
    if (n < 0) return -1;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = IOLOOM_NEXT(open)(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    int rc = lf_full_pwrite(fd, text, (size_t)n, 0) == n ? 0 : -1;
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
    for (int i = 1; i < m->nbackends; i++) IOLOOM_NEXT(rmdir)(m->backend[i]);
}

int lf_meta_create(const char *dir, mode_t mode, const struct lf_backends *backends, int excl) {
    if (lf_is_container(dir)) return excl ? (errno = EEXIST, -1) : 0;
    mode_t mask = umask(0); /* open(2) applies the umask to a new file's mode: so do we */
    umask(mask);
    struct lf_meta m = {.version = LF_VERSION, .chunk = ioloom_env_size("IOLOOM_LOGFS_CHUNK", LF_DEFAULT_CHUNK),
                        .mode = mode & 07777 & ~mask};
    m.chunk = (m.chunk + LF_PAGE - 1) / LF_PAGE * LF_PAGE;
    if (m.chunk < LF_PAGE) m.chunk = LF_PAGE;
    /* The container is built complete under a temporary name and renamed into place, so a directory with the
     * container's name always holds its metadata: racing creators (N ranks opening with O_CREAT) see either
     * nothing or a whole container, and a rename onto a container that another process put there first fails. */
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.lfnew.%d.%llx", dir, (int)getpid(), (unsigned long long)ioloom_now_ns()) >=
        (int)sizeof tmp)
        return errno = ENAMETOOLONG, -1;
    struct stat st;
    if (lf_mkdirs(tmp, 0755) || IOLOOM_NEXT(stat)(tmp, &st)) return -1;
    snprintf(m.backend[m.nbackends++], PATH_MAX, "%s", dir);
    /* Extra backend directories get a suffix unique to this container (inode and time), so a container created
     * later under the same name, or renamed, never shares them. */
    int rc = 0;
    for (int i = 0; rc == 0 && backends && i < backends->count && m.nbackends < LF_MAX_BACKENDS; i++) {
        if (snprintf(m.backend[m.nbackends], PATH_MAX, "%s.lf%llx-%llx", backends->dirs[i],
                     (unsigned long long)st.st_ino, (unsigned long long)ioloom_now_ns()) >= PATH_MAX)
            rc = (errno = ENAMETOOLONG, -1);
        else rc = lf_mkdirs(m.backend[m.nbackends++], 0755);
    }
    if (rc == 0) rc = write_meta(tmp, LF_META_NAME, &m);
    if (rc == 0) rc = IOLOOM_NEXT(rename)(tmp, dir);
    if (rc == 0) return 0;
    int saved = errno;
    discard(tmp, &m);
    if (lf_is_container(dir)) return excl ? (errno = EEXIST, -1) : 0; /* another process created it first */
    errno = saved == ENOTEMPTY ? EEXIST : saved;
    return -1;
}

int lf_chmod(const char *dir, mode_t mode) {
    struct lf_meta m;
    if (lf_meta_read(dir, &m)) return -1;
    m.mode = mode & 07777;
    /* Replaced whole (a temporary renamed over it): readers see the old or the new metadata, never half. */
    char tmp[64], from[PATH_MAX + 64], to[PATH_MAX + sizeof LF_META_NAME + 1];
    snprintf(tmp, sizeof tmp, ".meta.%d.%llx", (int)getpid(), (unsigned long long)ioloom_now_ns());
    snprintf(from, sizeof from, "%s/%s", dir, tmp);
    snprintf(to, sizeof to, "%s/" LF_META_NAME, dir);
    if (write_meta(dir, tmp, &m)) return -1;
    int rc = IOLOOM_NEXT(rename)(from, to), saved = errno;
    if (rc) IOLOOM_NEXT(unlink)(from);
    errno = saved;
    return rc;
}

int lf_is_container(const char *dir) {
    char path[PATH_MAX + sizeof LF_META_NAME + 1];
    if (snprintf(path, sizeof path, "%s/" LF_META_NAME, dir) >= (int)sizeof path) return 0;
    return IOLOOM_NEXT(access)(path, F_OK) == 0;
}
