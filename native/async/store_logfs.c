/* The logfs store of libioloom-async (writer.format: logfs): each writer's block data goes into a logfs
 * container, <directory>/<name>.<id>.data (docs/logfs-format.md), through the logfs C API (logfs.h), so that
 * `ioloom container cat|check` and the Python reader read it. libioloom-logfs.so is loaded with dlopen, only when a
 * configuration asks for it and RTLD_LOCAL: the library keeps no dependency on it, and the program's own POSIX
 * calls are never routed through the layer (its interposers stay out of the global scope). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include "async_internal.h"
#include "logfs.h"

/* The logfs calls the store makes, found once. Never dlclosed: the layer registers fork handlers. */
static struct {
    lf_file *(*open)(const char *, int, mode_t, const struct lf_backends *);
    ssize_t (*pwrite)(lf_file *, const void *, size_t, uint64_t);
    int (*truncate)(lf_file *, uint64_t);
    int (*publish)(lf_file *);
    int (*sync)(lf_file *);
    int (*close)(lf_file *);
} lf;

static int find_layer(char msg[ASYNC_MSG_MAX]) {
    void *h = lf.open ? NULL : async_dlopen_beside("libioloom-logfs.so", RTLD_NOW | RTLD_LOCAL);
    if (lf.open) return 0;
    if (h) {
        *(void **)&lf.pwrite = dlsym(h, "lf_pwrite");
        *(void **)&lf.truncate = dlsym(h, "lf_truncate");
        *(void **)&lf.publish = dlsym(h, "lf_publish");
        *(void **)&lf.sync = dlsym(h, "lf_sync");
        *(void **)&lf.close = dlsym(h, "lf_close");
        *(void **)&lf.open = lf.pwrite && lf.truncate && lf.publish && lf.sync && lf.close ? dlsym(h, "lf_open") : NULL;
    }
    if (lf.open) return 0;
    snprintf(msg, ASYNC_MSG_MAX,
             "writer: format logfs needs libioloom-logfs.so (built with ioloom, beside libioloom-async): %.300s",
             h ? "it lacks the logfs C API" : dlerror());
    return -1;
}

static int logfs_open(struct async_writer *w, const struct async_config *cfg, char msg[ASYNC_MSG_MAX]) {
    char path[1200];
    if (find_layer(msg)) return -1;
    snprintf(path, sizeof path, "%s/%s.%d.data", cfg->directory, cfg->name, w->id);
    if ((w->handle = lf.open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644, NULL))) return 0;
    snprintf(msg, ASYNC_MSG_MAX, "%.400s: cannot create the logfs container: %s", path, strerror(errno));
    return -1;
}

/* Each block is published (its index entry appended to the container's journal) before its record goes into
 * our index: a block the output lists is one the container lists, even if the disk fills before close. */
static int logfs_put(struct async_writer *w, const struct async_config *cfg, int variable, int block, int64_t iteration,
                     const void *data, size_t nbytes, uint64_t *where) {
    (void)cfg, (void)variable, (void)block, (void)iteration;
    *where = w->offset;
    ssize_t n = lf.pwrite(w->handle, data, nbytes, w->offset);
    if (n >= 0 && n < (ssize_t)nbytes) errno = ENOSPC;
    return n == (ssize_t)nbytes && lf.publish(w->handle) == 0 ? 0 : -1;
}

static int logfs_undo(struct async_writer *w, const struct async_config *cfg, int variable, int block,
                      int64_t iteration) {
    (void)cfg, (void)variable, (void)block, (void)iteration;
    return lf.truncate(w->handle, w->offset);
}

static int logfs_sync(struct async_writer *w) { return lf.sync(w->handle); }

static void logfs_close(struct async_writer *w) {
    if (w->handle && lf.close(w->handle) != 0)
        fprintf(stderr, "ioloom-async: writer %d: closing its logfs container: %s\n", w->id, strerror(errno));
    w->handle = NULL;
}

const struct async_store async_store_logfs = {"logfs",    logfs_open,  logfs_put, logfs_undo,
                                              logfs_sync, logfs_close, NULL};
