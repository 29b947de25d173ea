/* POSIX asynchronous I/O on containers (aio_read, aio_write, aio_fsync and their 64 spellings). glibc's aio
 * threads call pread/pwrite/fsync inside libc, past this layer, on the descriptor it hands out for a container (a
 * directory's), which fails with EBADF: Open MPI's OMPIO does every non-blocking access (MPI_File_iwrite_at,
 * the split collectives, write_ordered_begin) so. A request on a container's descriptor is therefore done at
 * submission, through the layer, and left complete in its aiocb, in the fields glibc's aio_error, aio_return,
 * aio_suspend and aio_cancel read (POSIX lets a request complete at any time after it is submitted); its
 * notification, if any, is then given. Other descriptors pass through to the next definition. */
#include <aio.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "lf_fdtable.h"

/* The 64 spellings alias the plain ones: on LP64 the two structures are one layout. */
_Static_assert(sizeof(struct aiocb64) == sizeof(struct aiocb), "aiocb64 is aiocb");

/* A SIGEV_THREAD notification's function, run in its own thread as glibc runs it. */
struct notice {
    void (*function)(union sigval);
    union sigval value;
};
static void *notice_thread(void *arg) {
    struct notice n = *(struct notice *)arg;
    free(arg);
    n.function(n.value);
    return NULL;
}

/* Give the completion notification the request asked for. */
static void notify(const struct sigevent *ev) {
    if (ev->sigev_notify == SIGEV_SIGNAL) {
        sigqueue(getpid(), ev->sigev_signo, ev->sigev_value);
        return;
    }
    if (ev->sigev_notify != SIGEV_THREAD) return;
    struct notice *n = malloc(sizeof *n);
    pthread_t thread;
    if (!n) return;
    *n = (struct notice){ev->sigev_notify_function, ev->sigev_value};
    pthread_attr_t detached, *given = ev->sigev_notify_attributes;
    if (!given) pthread_attr_init(given = &detached);
    pthread_attr_setdetachstate(given, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&thread, given, notice_thread, n) != 0) free(n);
    if (given == &detached) pthread_attr_destroy(&detached);
}

/* Record a request's outcome where glibc's aio_error and aio_return read it, then notify. */
static int complete(struct aiocb *cb, ssize_t done) {
    int saved = errno;
    cb->__return_value = done;
    cb->__error_code = done < 0 ? errno : 0;
    errno = saved;
    notify(&cb->aio_sigevent);
    return 0;
}

EXPORT int aio_write(struct aiocb *cb) {
    if (!lf_fd(cb->aio_fildes)) return IOLOOM_NEXT(aio_write)(cb);
    return complete(cb, lf_self_pwrite(cb->aio_fildes, (const void *)cb->aio_buf, cb->aio_nbytes, cb->aio_offset));
}
int aio_write64(struct aiocb64 *cb) ALIAS(aio_write);

EXPORT int aio_read(struct aiocb *cb) {
    if (!lf_fd(cb->aio_fildes)) return IOLOOM_NEXT(aio_read)(cb);
    return complete(cb, lf_self_pread(cb->aio_fildes, (void *)cb->aio_buf, cb->aio_nbytes, cb->aio_offset));
}
int aio_read64(struct aiocb64 *cb) ALIAS(aio_read);

EXPORT int aio_fsync(int op, struct aiocb *cb) {
    struct lf_ofd *o = lf_fd(cb->aio_fildes);
    if (!o) return IOLOOM_NEXT(aio_fsync)(op, cb);
    if (op != O_SYNC && op != O_DSYNC) return errno = EINVAL, -1;
    return complete(cb, lf_sync(o->file));
}
int aio_fsync64(int op, struct aiocb64 *cb) ALIAS(aio_fsync);
