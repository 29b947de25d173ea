/* unwind_sites FILE ROUNDS: pwrites of 8 bytes from stacks of every shape the tracer's x86-64 walk meets in code
 * built without frame pointers (tests/test_predict_unwind.py; native/trace/unwind_rules.c): 24 call sites reached
 * through two callers each, recursion of depths 1 to 6, VLA and alloca frames (CFA from rbp) under a writer that
 * clobbers rbp (the walk must read it back from where the writer saved it), a realigned stack (a CFA expression:
 * the walk gives up, backtrace() answers), a qsort callback (libc in the middle), a signal handler (the kernel's
 * frame, on the thread's stack and on an alternate one), and four threads doing all of it at once. Each write
 * goes to its own offset; the program prints the sum of what it read back, the same traced or not. */
#include <alloca.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { THREADS = 4, SITES = 24, BLOCK = 8, PER_ROUND = 64 };

static int fd, rounds;

/* One pwrite of BLOCK bytes at slot `at` of thread `t`'s area. */
__attribute__((noinline)) static void put(int t, long at) {
    char block[BLOCK];
    memset(block, 'a' + (int)(at % 26), sizeof block);
    long slot = (long)t * rounds * PER_ROUND + at;
    if (pwrite(fd, block, BLOCK, slot * BLOCK) != BLOCK) abort();
}

/* A writer that saves rbp and changes it before the call, so a caller whose CFA is rbp-based is found only through
 * the saved copy. */
__attribute__((noinline)) static void put_clobbering_rbp(int t, long at) {
    __asm__ volatile("xor %%ebp, %%ebp" ::: "rbp");
    put(t, at);
    __asm__ volatile("" ::: "memory");
}

#define SITE(i)                                                      \
    __attribute__((noinline)) static void site_##i(int t, long at) { \
        put(t, at);                                                  \
        __asm__ volatile("" ::: "memory");                           \
    }
/* clang-format off */
SITE(0) SITE(1) SITE(2) SITE(3) SITE(4) SITE(5) SITE(6) SITE(7) SITE(8) SITE(9) SITE(10) SITE(11)
SITE(12) SITE(13) SITE(14) SITE(15) SITE(16) SITE(17) SITE(18) SITE(19) SITE(20) SITE(21) SITE(22) SITE(23)
static void (*const sites[SITES])(int, long) = {
    site_0,  site_1,  site_2,  site_3,  site_4,  site_5,  site_6,  site_7,  site_8,  site_9,  site_10, site_11,
    site_12, site_13, site_14, site_15, site_16, site_17, site_18, site_19, site_20, site_21, site_22, site_23};
/* clang-format on */

__attribute__((noinline)) static void caller_a(int t, long at, int i) {
    sites[i](t, at);
    __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void caller_b(int t, long at, int i) {
    volatile char pad[40];
    pad[0] = 0;
    sites[i](t, at + pad[0]);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void recurse(int t, long at, int depth) {
    if (depth == 0)
        put(t, at);
    else
        recurse(t, at, depth - 1);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void vla(int t, long at, int n) {
    char buf[n];
    memset(buf, 0, (size_t)n);
    __asm__ volatile("" ::"r"(buf) : "memory");
    put_clobbering_rbp(t, at);
    __asm__ volatile("" ::"r"(buf) : "memory");
}
__attribute__((noinline)) static void with_alloca(int t, long at, int n) {
    char *buf = alloca((size_t)n);
    memset(buf, 0, (size_t)n);
    __asm__ volatile("" ::"r"(buf) : "memory");
    vla(t, at, n / 2 + 1);
    __asm__ volatile("" ::"r"(buf) : "memory");
}

/* The stack realigned on entry beside a VLA: GCC keeps the incoming stack pointer in a register (DRAP), and the
 * CFA is an expression (DW_CFA_def_cfa_expression). */
__attribute__((noinline)) static void realigned(int t, long at, int n) {
    _Alignas(64) volatile char line[64];
    char buf[n];
    memset(buf, 0, (size_t)n);
    __asm__ volatile("" ::"r"(buf) : "memory");
    line[0] = 0;
    put(t, at + line[0]);
    __asm__ volatile("" ::"r"(buf) : "memory");
}

static __thread int sort_thread;
static __thread long sort_at;
static int compare(const void *a, const void *b) {
    put(sort_thread, sort_at++);
    return *(const int *)a - *(const int *)b;
}
__attribute__((noinline)) static void sorted(int t, long at) {
    int values[3] = {3, 1, 2};
    sort_thread = t, sort_at = at;
    qsort(values, 3, sizeof *values, compare); /* 2 or 3 comparisons; the slots after them stay unwritten */
}

static __thread int signal_thread;
static __thread long signal_at;
static void on_signal(int sig) {
    (void)sig;
    put(signal_thread, signal_at);
    __asm__ volatile("" ::: "memory"); /* not a tail call: the handler keeps its frame */
}
__attribute__((noinline)) static void signalled(int t, long at) {
    signal_thread = t, signal_at = at;
    raise(SIGUSR1);
}

/* Round r of thread t: PER_ROUND slots, each written at most once. */
__attribute__((noinline)) static void round_of(int t, long r) {
    long at = r * PER_ROUND;
    for (int i = 0; i < SITES; i++) (i % 2 ? caller_a : caller_b)(t, at + i, i);
    for (int d = 1; d <= 6; d++) recurse(t, at + SITES + d, d);
    with_alloca(t, at + 31, 16 + (int)(r % 7) * 24);
    vla(t, at + 32, 8 + (int)(r % 5) * 40);
    realigned(t, at + 33, 8 + (int)(r % 3) * 8);
    sorted(t, at + 34); /* 34 to 37 */
    signalled(t, at + 38);
}

static void *thread_main(void *arg) {
    int t = (int)(long)arg;
    if (t == 1) { /* this thread's signals run on an alternate stack */
        stack_t alt = {.ss_sp = malloc(1 << 16), .ss_size = 1 << 16};
        if (!alt.ss_sp || sigaltstack(&alt, NULL)) abort();
    }
    for (long r = 0; r < rounds; r++) round_of(t, r);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3 || (rounds = atoi(argv[2])) < 1) {
        fputs("usage: unwind_sites FILE ROUNDS\n", stderr);
        return 2;
    }
    struct sigaction act = {.sa_handler = on_signal, .sa_flags = SA_ONSTACK};
    if (sigaction(SIGUSR1, &act, NULL)) return perror("sigaction"), 1;
    if ((fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644)) < 0) return perror(argv[1]), 1;
    pthread_t threads[THREADS];
    for (long t = 1; t < THREADS; t++)
        if (pthread_create(&threads[t], NULL, thread_main, (void *)t)) return 1;
    thread_main((void *)0);
    for (int t = 1; t < THREADS; t++) pthread_join(threads[t], NULL);
    long sum = 0;
    unsigned char block[BLOCK];
    for (long at = 0; pread(fd, block, BLOCK, at * BLOCK) == BLOCK; at++) sum += (at + 1) * block[0];
    printf("%ld\n", sum);
    return close(fd) ? perror("close"), 1 : 0;
}
