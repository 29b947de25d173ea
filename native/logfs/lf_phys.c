/* The physical I/O on logs and indexes, shown to the tracer. With LD_PRELOAD=libioloom-trace.so:libioloom-logfs.so
 * the tracer's wrappers see the program's logical calls and pass them on to ours; the log writes and reads we
 * make underneath happen inside the tracer's wrapper, where its reentrancy guard hides them. So we hand the
 * tracer an event for each one through its recording interface (ioloom_trace.h), found at run time: without
 * the tracer this costs one test of a NULL pointer. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>

#include "ioloom_ops.h"
#include "ioloom_trace.h"
#include "lf_internal.h"

static struct {
    void (*record)(const struct ioloom_event *);
    int32_t (*file_id)(const char *, int);
    int (*enabled)(enum ioloom_layer);
} tracer;
static pthread_once_t looked = PTHREAD_ONCE_INIT;

static void find_tracer(void) {
    tracer.file_id = (int32_t (*)(const char *, int))dlsym(RTLD_DEFAULT, "ioloom_file_id");
    tracer.enabled = (int (*)(enum ioloom_layer))dlsym(RTLD_DEFAULT, "ioloom_layer_enabled");
    tracer.record = tracer.file_id && tracer.enabled
                        ? (void (*)(const struct ioloom_event *))dlsym(RTLD_DEFAULT, "ioloom_record")
                        : NULL;
}

int lf_phys_traced(void) {
    pthread_once(&looked, find_tracer);
    return tracer.record && tracer.enabled(IOLOOM_POSIX);
}

void lf_phys_event(int op, const char *path, int32_t *file_id, int fd, int64_t offset, int64_t req, int64_t ret,
                   uint64_t t_start) {
    int saved = errno;
    if (*file_id == LF_UNTRACED) *file_id = tracer.file_id(path, fd);
    struct ioloom_event ev = {.t_start = t_start,
                              .t_end = ioloom_now_ns(),
                              .offset = offset,
                              .req_bytes = req,
                              .ret_bytes = ret,
                              .handle = fd,
                              .aux = -1,
                              .coll_seq = -1,
                              .file_id = *file_id,
                              .err = ret < 0 ? saved : 0,
                              .op = (uint16_t)op,
                              .layer = IOLOOM_POSIX};
    if (*file_id >= 0) tracer.record(&ev);
    errno = saved;
}

const int lf_op_pwrite = IOLOOM_OP_PWRITE, lf_op_pread = IOLOOM_OP_PREAD, lf_op_write = IOLOOM_OP_WRITE,
          lf_op_writev = IOLOOM_OP_WRITEV;
