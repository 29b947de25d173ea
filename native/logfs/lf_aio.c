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
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lf_fdtable.h"

/* The 64 spellings alias the plain ones: on LP64 the two structures are one layout. */
_Static_assert(sizeof(struct aiocb64) == sizeof(struct aiocb), "aiocb64 is aiocb");

/* A SIGEV_THREAD notification's function, run in its own thread as glibc runs it: all signals unblocked. A thread
 * the program's attributes made joinable detaches itself first: its id is never handed out, nobody could join it. */
struct notice {
    void (*function)(union sigval);
    union sigval value;
    int joinable;
};
static void *notice_thread(void *arg) {
    struct notice n = *(struct notice *)arg;
    sigset_t none;
    free(arg);
    sigemptyset(&none);
    pthread_sigmask(SIG_SETMASK, &none, NULL);
    if (n.joinable) pthread_detach(pthread_self());
    n.function(n.value);
    return NULL;
}

/* Start the notification thread with the program's attributes, unchanged, or detached ones if it gave none;
 * 0, or -1 with errno. */
static int notify_thread(const struct sigevent *ev) {
    pthread_attr_t own, *attr = ev->sigev_notify_attributes;
    int state = PTHREAD_CREATE_DETACHED, rc;
    if (attr) pthread_attr_getdetachstate(attr, &state);
    struct notice *n = malloc(sizeof *n);
    if (!n) return -1;
    *n = (struct notice){ev->sigev_notify_function, ev->sigev_value, state == PTHREAD_CREATE_JOINABLE};
    if (!attr) pthread_attr_init(attr = &own), pthread_attr_setdetachstate(&own, PTHREAD_CREATE_DETACHED);
    pthread_t thread;
    rc = pthread_create(&thread, attr, notice_thread, n);
    if (attr == &own) pthread_attr_destroy(&own);
    if (rc) free(n), errno = rc;
    return rc ? -1 : 0;
}

/* Queue the notification signal as glibc's __aio_sigqueue does: si_code SI_ASYNCIO, from this process. */
static int notify_signal(const struct sigevent *ev) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    info.si_signo = ev->sigev_signo;
    info.si_code = SI_ASYNCIO;
    info.si_pid = getpid();
    info.si_uid = getuid();
    info.si_value = ev->sigev_value;
    return syscall(SYS_rt_sigqueueinfo, info.si_pid, info.si_signo, &info) ? -1 : 0;
}

/* Give the completion notification the request asked for; 0, or -1 with errno. */
static int notify(const struct sigevent *ev) {
    if (ev->sigev_notify == SIGEV_SIGNAL) return notify_signal(ev);
    return ev->sigev_notify == SIGEV_THREAD ? notify_thread(ev) : 0;
}

/* Take a request as glibc's queue does: a priority outside 0..AIO_PRIO_DELTA_MAX is refused (EINVAL, recorded);
 * else it is in progress until complete() records its outcome. 0, or -1 with errno. */
static int accept_request(struct aiocb *cb) {
    if (cb->aio_reqprio >= 0 && cb->aio_reqprio <= AIO_PRIO_DELTA_MAX) return cb->__error_code = EINPROGRESS, 0;
    cb->__error_code = EINVAL;
    cb->__return_value = -1;
    return errno = EINVAL, -1;
}

/* Record a request's outcome where glibc's aio_error and aio_return read it, then notify; a failed notification
 * is recorded over the outcome, as glibc's __aio_notify does. */
static void complete(struct aiocb *cb, ssize_t done) {
    cb->__return_value = done;
    cb->__error_code = done < 0 ? errno : 0;
    if (notify(&cb->aio_sigevent)) cb->__error_code = errno, cb->__return_value = -1;
}

/* The transfer a request on a container asks for (LIO_READ or LIO_WRITE), through the layer. */
static ssize_t transfer(struct aiocb *cb, int opcode) {
    if (opcode == LIO_READ) return lf_self_pread(cb->aio_fildes, (void *)cb->aio_buf, cb->aio_nbytes, cb->aio_offset);
    if (opcode == LIO_WRITE)
        return lf_self_pwrite(cb->aio_fildes, (const void *)cb->aio_buf, cb->aio_nbytes, cb->aio_offset);
    return errno = EINVAL, -1;
}

/* Serve a request on a container's descriptor at submission: 0, or -1 with errno if it was refused. */
static int submit(struct aiocb *cb, int opcode) {
    if (accept_request(cb)) return -1;
    complete(cb, transfer(cb, opcode));
    return 0;
}

EXPORT int aio_write(struct aiocb *cb) {
    return lf_fd(cb->aio_fildes) ? submit(cb, LIO_WRITE) : IOLOOM_NEXT(aio_write)(cb);
}
int aio_write64(struct aiocb64 *cb) ALIAS(aio_write);

EXPORT int aio_read(struct aiocb *cb) {
    return lf_fd(cb->aio_fildes) ? submit(cb, LIO_READ) : IOLOOM_NEXT(aio_read)(cb);
}
int aio_read64(struct aiocb64 *cb) ALIAS(aio_read);

EXPORT int aio_fsync(int op, struct aiocb *cb) {
    struct lf_ofd *o = lf_fd(cb->aio_fildes);
    if (!o) return IOLOOM_NEXT(aio_fsync)(op, cb);
    if (op != O_SYNC && op != O_DSYNC) return errno = EINVAL, -1;
    if (accept_request(cb)) return -1;
    complete(cb, lf_sync(o->file));
    return 0;
}
int aio_fsync64(int op, struct aiocb64 *cb) ALIAS(aio_fsync);

/* Whether a list entry asks for a transfer (NULL entries and LIO_NOP are skipped, as glibc skips them). */
static int transfers(const struct aiocb *cb) { return cb && cb->aio_lio_opcode != LIO_NOP; }

/* How many of the list's transfers are on containers' descriptors, and how many there are. */
static void count_containers(struct aiocb *const list[], int nent, int *mine, int *all) {
    *mine = *all = 0;
    for (int i = 0; i < nent; i++)
        if (transfers(list[i])) ++*all, *mine += lf_fd(list[i]->aio_fildes) != NULL;
}

/* Serve every transfer of a list on containers, each notified as its aio_read/aio_write would be, then the list's
 * own notification (LIO_NOWAIT). As glibc: -1 if a request was refused; under LIO_WAIT, -1 with EIO if any request
 * failed, refused or once accepted (its aio_error says which). */
static int serve_list(int mode, struct aiocb *const list[], int nent, struct sigevent *sig) {
    int refused = 0, failed = 0;
    for (int i = 0; i < nent; i++) {
        if (!transfers(list[i])) continue;
        refused |= submit(list[i], list[i]->aio_lio_opcode) != 0;
        failed |= list[i]->__return_value < 0; /* a refused request's too: accept_request records -1 */
    }
    if (mode == LIO_NOWAIT && sig) notify(sig);
    if (failed && mode == LIO_WAIT) return errno = EIO, -1;
    return refused ? -1 : 0;
}

/* A list whose transfers are all on containers is served by the layer; one mixing containers' descriptors with
 * others cannot be (glibc's thread would write the containers' past the layer): counted as unsupported and passed
 * through. */
EXPORT int lio_listio(int mode, struct aiocb *const list[], int nent, struct sigevent *sig) {
    int mine, all;
    count_containers(list, nent, &mine, &all);
    if ((mode == LIO_WAIT || mode == LIO_NOWAIT) && mine && mine == all) return serve_list(mode, list, nent, sig);
    if (mine) lf_unsupported(LF_UNS_OTHER, 0);
    return IOLOOM_NEXT(lio_listio)(mode, list, nent, sig);
}
int lio_listio64(int mode, struct aiocb64 *const list[], int nent, struct sigevent *sig) ALIAS(lio_listio);
