/* POSIX aio on one file, for tests/test_logfs_aio.py: aio_write, aio_fsync (and a bad op), aio_read, aio_error,
 * aio_return, aio_suspend, aio_cancel on a finished request, a refused priority, a SIGEV_SIGNAL notification
 * (its si_code and si_value), lio_listio under LIO_WAIT and LIO_NOWAIT (with a list signal), a LIO_WAIT list
 * whose transfers fail once accepted (a read on a write-only handle, a write at a negative offset) beside one that
 * succeeds, and last a SIGEV_THREAD notification created with the program's own joinable attribute object (still
 * joinable after, still usable).
 * Prints what it saw, one line per step; the file's bytes are the test's to compare. Given OTHER, it ends with
 * a lio_listio writing to FILE and OTHER at once, and prints each entry's aio_error.
 *
 * usage: logfs_aio FILE [OTHER] */
#define _GNU_SOURCE
#include <aio.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char scratch[64];

static struct aiocb request(int fd, int opcode, const char *bytes, size_t n, off_t offset) {
    struct aiocb cb;
    memset(&cb, 0, sizeof cb);
    cb.aio_fildes = fd;
    cb.aio_lio_opcode = opcode;
    cb.aio_buf = bytes ? (void *)bytes : scratch;
    cb.aio_nbytes = n;
    cb.aio_offset = offset;
    return cb;
}

/* Wait for a request with aio_suspend, then print its aio_error and aio_return. */
static void finish(const char *what, struct aiocb *cb) {
    const struct aiocb *list[1] = {cb};
    while (aio_error(cb) == EINPROGRESS) aio_suspend(list, 1, NULL);
    int err = aio_error(cb);
    printf("%s: error %s return %zd\n", what, err ? strerrorname_np(err) : "0", aio_return(cb));
}

static void submitted(const char *what, int rc) {
    printf("%s submitted: %d %s\n", what, rc, rc ? strerrorname_np(errno) : "");
}

static void await_signal(const char *what, int signo) {
    sigset_t set;
    siginfo_t info;
    sigemptyset(&set);
    sigaddset(&set, signo);
    int got = sigwaitinfo(&set, &info);
    printf("%s: signal %d asyncio %d value %d own pid %d\n", what, got == signo, info.si_code == SI_ASYNCIO,
           info.si_value.sival_int, info.si_pid == getpid());
}

static void plain_steps(int fd) {
    struct aiocb w = request(fd, LIO_WRITE, "hello aio world!", 16, 0);
    submitted("aio_write", aio_write(&w));
    finish("aio_write", &w);
    struct aiocb s = request(fd, LIO_NOP, NULL, 0, 0);
    submitted("aio_fsync bad op", aio_fsync(12345, &s));
    submitted("aio_fsync", aio_fsync(O_SYNC, &s));
    finish("aio_fsync", &s);
    struct aiocb r = request(fd, LIO_READ, NULL, 9, 6);
    submitted("aio_read", aio_read(&r));
    finish("aio_read", &r);
    printf("read bytes: %.9s\n", scratch);
    printf("aio_cancel done: %d\n", aio_cancel(fd, &r) == AIO_ALLDONE);
    struct aiocb bad = request(fd, LIO_WRITE, "x", 1, 0);
    bad.aio_reqprio = -1;
    submitted("aio_write bad priority", aio_write(&bad));
    printf("bad priority aio_error: %s\n", strerrorname_np(aio_error(&bad)));
}

static void signal_steps(int fd) {
    struct aiocb w = request(fd, LIO_WRITE, "SIGNAL", 6, 32);
    w.aio_sigevent.sigev_notify = SIGEV_SIGNAL;
    w.aio_sigevent.sigev_signo = SIGRTMIN;
    w.aio_sigevent.sigev_value.sival_int = 42;
    submitted("aio_write signal", aio_write(&w));
    finish("aio_write signal", &w);
    await_signal("aio_write signal", SIGRTMIN);
}

static void list_steps(int fd) {
    struct aiocb a = request(fd, LIO_WRITE, "AAAA", 4, 16), b = request(fd, LIO_WRITE, "BBBB", 4, 20);
    struct aiocb nop = request(fd, LIO_NOP, NULL, 0, 0);
    struct aiocb *waited[] = {&a, NULL, &nop, &b};
    submitted("lio_listio wait", lio_listio(LIO_WAIT, waited, 4, NULL));
    finish("lio wait a", &a);
    finish("lio wait b", &b);
    struct aiocb r = request(fd, LIO_READ, NULL, 8, 16), w = request(fd, LIO_WRITE, "CC", 2, 40);
    struct aiocb *listed[] = {&r, &w};
    struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGRTMIN + 1, .sigev_value.sival_int = 7};
    submitted("lio_listio nowait", lio_listio(LIO_NOWAIT, listed, 2, &ev));
    await_signal("lio_listio nowait", SIGRTMIN + 1);
    finish("lio nowait read", &r);
    finish("lio nowait write", &w);
    printf("lio read bytes: %.8s\n", scratch);
}

static void failing_list(const char *path) {
    int wo = open(path, O_WRONLY);
    struct aiocb ok = request(wo, LIO_WRITE, "ok", 2, 54), read = request(wo, LIO_READ, NULL, 4, 0);
    struct aiocb negative = request(wo, LIO_WRITE, "no", 2, -1);
    struct aiocb *listed[] = {&ok, &read, &negative};
    submitted("lio_listio wait failing", lio_listio(LIO_WAIT, listed, 3, NULL));
    finish("lio failing write", &ok);
    finish("lio failing read on write-only", &read);
    finish("lio failing negative offset", &negative);
    close(wo);
}

/* The notification thread hands its value over and the main thread prints it, so the output's order does not
 * depend on which thread runs first (it printed before "submitted" now and then under load). */
static sem_t notified;
static int notified_value;
static void on_complete(union sigval value) {
    notified_value = value.sival_int;
    sem_post(&notified);
}
static void *nothing(void *arg) { return arg; }

static void thread_steps(int fd) {
    pthread_attr_t attr;
    pthread_t thread;
    int state = -1;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_JOINABLE);
    sem_init(&notified, 0, 0);
    struct aiocb w = request(fd, LIO_WRITE, "thread", 6, 48);
    w.aio_sigevent = (struct sigevent){.sigev_notify = SIGEV_THREAD,
                                       .sigev_value.sival_int = 9,
                                       .sigev_notify_function = on_complete,
                                       .sigev_notify_attributes = &attr};
    submitted("aio_write thread", aio_write(&w));
    while (sem_wait(&notified)) continue;
    printf("thread notification: value %d\n", notified_value);
    finish("aio_write thread", &w);
    pthread_attr_getdetachstate(&attr, &state);
    printf("attr still joinable: %d\n", state == PTHREAD_CREATE_JOINABLE);
    int created = pthread_create(&thread, &attr, nothing, NULL);
    printf("thread from the attr joined: %d\n", created == 0 && pthread_join(thread, NULL) == 0);
    pthread_attr_destroy(&attr);
}

static void mixed_list(int fd, const char *other) {
    int other_fd = open(other, O_RDWR | O_CREAT | O_TRUNC, 0644);
    struct aiocb a = request(fd, LIO_WRITE, "mixed", 5, 64), b = request(other_fd, LIO_WRITE, "mixed", 5, 0);
    struct aiocb *listed[] = {&a, &b};
    lio_listio(LIO_WAIT, listed, 2, NULL);
    printf("mixed list: file %s other %s\n", aio_error(&a) ? strerrorname_np(aio_error(&a)) : "0",
           aio_error(&b) ? strerrorname_np(aio_error(&b)) : "0");
    close(other_fd);
}

int main(int argc, char **argv) {
    sigset_t set;
    if (argc != 2 && argc != 3) return fprintf(stderr, "usage: logfs_aio FILE [OTHER]\n"), 2;
    alarm(30); /* a lost notification fails the run instead of hanging it */
    sigemptyset(&set);
    sigaddset(&set, SIGRTMIN);
    sigaddset(&set, SIGRTMIN + 1);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return perror(argv[1]), 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    plain_steps(fd);
    signal_steps(fd);
    list_steps(fd);
    failing_list(argv[1]);
    thread_steps(fd);
    if (argc == 3) mixed_list(fd, argv[2]);
    return close(fd) ? perror("close"), 1 : 0;
}
