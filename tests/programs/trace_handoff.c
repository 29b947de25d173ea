/* Many events from several threads, before and after a fork, so that with a small IOLOOM_TRACE_BUFFER the
 * tracer hands hundreds of buffer halves to its encoder thread (and writes inline when the encoder lags), in
 * the parent and in the child, which starts its own encoder.
 *
 * usage: trace_handoff DIR CALLS -- each thread pwrites CALLS 8-byte records to DIR/t<k>.dat at offsets 8*i */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *dir;
static long calls;

static void *writer(void *arg) {
    char path[4096];
    snprintf(path, sizeof path, "%s/t%ld.dat", dir, (long)arg);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0) return (void *)1;
    long failures = 0;
    for (long i = 0; i < calls; i++) failures += pwrite(fd, &i, sizeof i, i * (off_t)sizeof i) != sizeof i;
    close(fd);
    return (void *)failures;
}

/* Runs `threads` writers numbered from `first`; returns how many calls failed. */
static long run_writers(long first, int threads) {
    pthread_t t[8];
    long failures = 0;
    for (int k = 0; k < threads; k++) pthread_create(&t[k], NULL, writer, (void *)(first + k));
    for (int k = 0; k < threads; k++) {
        void *r;
        pthread_join(t[k], &r);
        failures += (long)r;
    }
    return failures;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s DIR CALLS\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    calls = atol(argv[2]);
    long failures = run_writers(0, 4);
    pid_t child = fork();
    if (child == 0) _exit(run_writers(10, 2) ? 1 : 0);
    failures += (long)writer((void *)4);
    int status = 0;
    waitpid(child, &status, 0);
    printf("%ld failures, child exit %d\n", failures, WEXITSTATUS(status));
    return failures || status;
}
