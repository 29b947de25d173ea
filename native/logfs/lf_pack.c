/* 1-N packing: many small files of a directory stored in one container, DIR/.ioloom-pack, each file's records
 * and index entries carrying its file_id (fnv1a of its name). Each writer group's names.<group> journal maps ids
 * back to names (lines "%08x NAME"). A packed file exists when its last entry is not an unlink. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lf_internal.h"

uint32_t lf_pack_id(const char *name) {
    uint32_t h = lf_fnv1a(name);
    return h ? h : 1; /* 0 means "the whole container" */
}

static int valid_name(const char *name) {
    return *name && !strchr(name, '/') && strlen(name) < NAME_MAX && strcmp(name, ".") && strcmp(name, "..");
}

lf_file *lf_open_packed(const char *pack, const char *name, int flags, mode_t mode,
                        const struct lf_backends *backends) {
    if (!valid_name(name)) return errno = EINVAL, NULL;
    lf_file *f = lf_open_file(pack, lf_pack_id(name), flags & ~(O_EXCL | O_TRUNC), mode, backends, 0);
    if (!f) return NULL;
    int err = 0;
    if (lf_map_build(f))
        err = errno;
    else if (!f->map.exists && !(flags & O_CREAT))
        err = ENOENT;
    else if (f->map.exists && (flags & O_CREAT) && (flags & O_EXCL))
        err = EEXIST;
    else if (!f->map.exists) { /* created: named, marked, and published so that others list it */
        if (lf_writer_name(f, name) || lf_writer_append(f, LF_CREATE, NULL, 0, 0) || lf_writer_publish(f)) err = errno;
    } else if ((flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY && f->map.size &&
               lf_writer_append(f, LF_TRUNCATE, NULL, 0, 0)) {
        err = errno;
    }
    if (err) {
        lf_close(f);
        errno = err;
        return NULL;
    }
    return f;
}

int lf_unlink_packed(const char *pack, const char *name) {
    lf_file *f = lf_open_packed(pack, name, O_WRONLY, 0, NULL);
    if (!f) return -1;
    int rc = lf_writer_append(f, LF_UNLINK, NULL, 0, 0);
    int closed = lf_close(f);
    return rc || closed ? -1 : 0;
}

int lf_stat_packed(const char *pack, const char *name, struct stat *st) {
    lf_file *f = lf_open_packed(pack, name, O_RDONLY, 0, NULL);
    if (!f) return -1;
    int rc = IOLOOM_NEXT(stat)(pack, st);
    if (rc == 0) {
        st->st_mode = S_IFREG | f->meta.mode;
        st->st_size = (off_t)f->map.size;
        st->st_nlink = 1;
        st->st_blocks = (st->st_size + 511) / 512;
        st->st_ino ^= (ino_t)f->file_id << 20; /* distinct per file for tools that compare inodes */
    }
    int saved = errno;
    lf_close(f);
    errno = saved;
    return rc;
}

static int by_id_then_key(const void *a, const void *b) {
    const struct lf_src *x = a, *y = b;
    if (x->e.file_id != y->e.file_id) return x->e.file_id < y->e.file_id ? -1 : 1;
    return lf_key_less(x->e.stamp, x->writer, y->e.stamp, y->writer)
               ? -1
               : lf_key_less(y->e.stamp, y->writer, x->e.stamp, x->writer);
}

/* The index of `id` in the sorted ids, or -1. */
static long find_id(const uint32_t *ids, size_t n, uint32_t id) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && ids[lo] == id ? (long)lo : -1;
}

/* Calls fn once per existing file, with the first name a names journal gives its id. */
static void name_existing(const struct lf_meta *m, int b, const uint32_t *ids, char *named, size_t nids,
                          void (*fn)(const char *, void *), void *arg) {
    DIR *d = lf_opendir(m->backend[b]);
    if (!d) return;
    for (struct dirent *de; (de = IOLOOM_NEXT(readdir)(d));) {
        if (!lf_member_group(m, b, de->d_name, "names")) continue;
        char path[PATH_MAX + NAME_MAX + 2];
        snprintf(path, sizeof path, "%s/%s", m->backend[b], de->d_name);
        char *text = lf_slurp(path, NULL), *save = NULL;
        for (char *line = text ? strtok_r(text, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save)) {
            unsigned id;
            char *name = strchr(line, ' ');
            long at = name && sscanf(line, "%x", &id) == 1 ? find_id(ids, nids, id) : -1;
            if (at < 0 || named[at]) continue;
            named[at] = 1;
            fn(name + 1, arg);
        }
        free(text);
    }
    IOLOOM_NEXT(closedir)(d);
}

int lf_pack_list(const char *pack, void (*fn)(const char *name, void *arg), void *arg) {
    lf_file *f = lf_open(pack, O_RDONLY, 0, NULL);
    if (!f) return -1;
    if (f->others_stale && lf_load_others(f)) {
        int saved = errno;
        lf_close(f);
        errno = saved;
        return -1;
    }
    /* The last entry of each file in key order says whether it exists. */
    qsort(f->others, f->nothers, sizeof *f->others, by_id_then_key);
    uint32_t *ids = malloc((f->nothers + 1) * sizeof *ids);
    char *named = calloc(f->nothers + 1, 1);
    size_t nids = 0;
    for (size_t i = 0; ids && i < f->nothers; i++) {
        int last = i + 1 == f->nothers || f->others[i + 1].e.file_id != f->others[i].e.file_id;
        if (last && f->others[i].e.kind != LF_UNLINK) ids[nids++] = f->others[i].e.file_id;
    }
    for (int b = 0; ids && named && b < f->meta.nbackends; b++) name_existing(&f->meta, b, ids, named, nids, fn, arg);
    int rc = ids && named ? 0 : (errno = ENOMEM, -1);
    free(ids);
    free(named);
    lf_close(f);
    return rc;
}
