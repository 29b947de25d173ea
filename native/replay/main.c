/* ioloom-replay [--gaps] [--sync FILE] SCRIPT... / ioloom-replay-<mpi> (same arguments, under mpiexec):
 * replays the POSIX and stdio calls of a traced run, one script per traced process, and under MPI its MPI-IO
 * calls when the script holds them (docs/replay.md).
 * The serial program forks one process per script; the MPI one gives script r to rank r (the tracer then labels
 * the replay's streams by rank as it labelled the original's). --sync names a file of one progress counter per
 * process (calls done), mapped by every process, through which a call waits for the calls of other processes its
 * script lists: the cross-process order of the original that decides what a read finds and who gets a lock
 * (docs/replay.md, "Order across processes"). --gaps sleeps the recorded time between calls, and takes what a
 * sleep overran off the gaps that follow, so the gaps add up to the original's. */
#include "replay.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef IOLOOM_MPI_IMPL
#include <mpi.h>
#endif

static const char *const usage = "usage: ioloom-replay [--gaps] [--sync FILE] SCRIPT... | --list-ops\n";
static const long long order_wait_limit_ns = 10LL * 1000 * 1000 * 1000;

struct options {
    int gaps;
    const char *sync;
    char **scripts;
    int nscripts;
};

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void sleep_ns(long long ns) {
    struct timespec t = {ns / 1000000000LL, ns % 1000000000LL};
    while (nanosleep(&t, &t) != 0) {
    }
}

/* The progress counters, mapped with raw system calls (the tracer records none of this); NULL without --sync. */
static long long *map_progress(const char *path, int processes) {
    if (!path) return NULL;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return NULL;
    void *p = (void *)syscall(SYS_mmap, NULL, (size_t)processes * sizeof(long long), PROT_READ | PROT_WRITE, MAP_SHARED,
                              fd, 0);
    syscall(SYS_close, fd);
    return p == MAP_FAILED ? NULL : p;
}

/* Waits until every call this one follows is done; 1 if a wait was given up after order_wait_limit_ns. */
static int wait_order(const long long *progress, const struct call *c) {
    int gave_up = 0;
    for (int i = 0; progress && i < c->waits; i++) {
        long long start = now_ns();
        while (__atomic_load_n(&progress[c->wait_process[i]], __ATOMIC_ACQUIRE) < c->wait_count[i] && !gave_up) {
            sleep_ns(20000);
            gave_up = now_ns() - start > order_wait_limit_ns;
        }
    }
    return gave_up;
}

/* Sleeps what is `owed` of the gaps (ns) less the time since the previous call ended, spent waiting for other
 * processes (in the original that wait was inside the gap: counted twice, it compounds along every chain of waits);
 * what is still owed after (negative: late or slept too long, taken off the next gaps). */
static long long wait_gap(long long owed, long long previous_end) {
    long long start = now_ns();
    owed -= start - previous_end;
    if (owed <= 0) return owed;
    sleep_ns(owed);
    return owed - (now_ns() - start);
}

static int replay_script(const char *path, const struct options *o) {
    struct script s;
    if (script_load(path, &s) != 0) return 2;
    long long *progress = map_progress(o->sync, s.processes);
    if (o->sync && !progress) {
        fprintf(stderr, "ioloom-replay: %s: cannot map the progress file; `ioloom replay run` makes it\n", o->sync);
        return 2;
    }
    struct replayer r = {.script = &s};
    long long gave_up = 0, owed = 0, previous_end = now_ns(), first_start = previous_end;
    for (long long i = 0; i < s.ncalls; i++) {
        gave_up += wait_order(progress, &s.calls[i]);
        if (o->gaps) owed = wait_gap(owed + s.calls[i].gap_ns, previous_end);
        if (i == 0) first_start = now_ns();
        replay_call(&r, &s.calls[i]);
        if (o->gaps) previous_end = now_ns();
        if (progress) __atomic_store_n(&progress[s.process], i + 1, __ATOMIC_RELEASE);
    }
    fprintf(stderr,
            "ioloom-replay: process %d: %lld calls replayed, %lld with another outcome than recorded, "
            "%lld order waits given up, in %.6f s, %lld MPI-IO calls approximated\n",
            s.process, s.ncalls, r.diverged, gave_up, (double)(now_ns() - first_start) / 1e9, r.approximated);
    return 0;
}

static int parse(int argc, char **argv, struct options *o) {
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--gaps") == 0)
            o->gaps = 1;
        else if (strcmp(argv[i], "--sync") == 0 && i + 1 < argc)
            o->sync = argv[++i];
        else if (strcmp(argv[i], "--list-ops") == 0)
            return replay_list(), 1;
        else
            return fputs(usage, stderr), -1;
    }
    o->scripts = argv + i;
    o->nscripts = argc - i;
    return o->nscripts > 0 ? 0 : (fputs(usage, stderr), -1);
}

#ifdef IOLOOM_MPI_IMPL
/* Rank r replays script r; the number of ranks must be the number of scripts. */
static int run(const struct options *o) {
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != o->nscripts) {
        if (rank == 0)
            fprintf(stderr, "ioloom-replay: %d scripts for %d ranks; launch one rank per script\n", o->nscripts, size);
        return 2;
    }
    return replay_script(o->scripts[rank], o);
}

/* MPI_THREAD_MULTIPLE: the tracer then asks the library for a file's individual pointer before each call rather
 * than following it, so the pointer the MPI-IO replay places unseen (mpiio.c) is the one its trace records. The
 * arguments are read first: --list-ops and a usage error need no MPI. */
int main(int argc, char **argv) {
    struct options o = {0};
    int rc = parse(argc, argv, &o), provided;
    if (rc != 0) return rc > 0 ? 0 : 2;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    rc = run(&o);
    MPI_Finalize();
    return rc;
}
#else
/* One child per script, all at once; the exit status is the worst of theirs. */
static int run(const struct options *o) {
    for (int i = 0; i < o->nscripts; i++) {
        pid_t pid = fork();
        if (pid == 0) _exit(replay_script(o->scripts[i], o));
        if (pid < 0) return perror("ioloom-replay: fork"), 2;
    }
    int worst = 0, status;
    while (wait(&status) > 0) {
        int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 2;
        worst = rc > worst ? rc : worst;
    }
    return worst;
}

int main(int argc, char **argv) {
    struct options o = {0};
    int rc = parse(argc, argv, &o);
    return rc == 0 ? run(&o) : rc > 0 ? 0 : 2;
}
#endif
