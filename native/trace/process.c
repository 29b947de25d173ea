/* Process life: start (constructor), exit (destructor, _exit), fork (the child gets its own stream), exec
 * (flush first), fatal signals (flush, then what the program asked for), and the facts the MPI module sets:
 * rank, clock offsets, notes. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "positions.h"
#include "trace_internal.h"

#define IOLOOM_DEFAULT_LAYERS "posix,stdio,mpiio,async"
IOLOOM_EXPORT unsigned ioloom_enabled_layers = 1u << IOLOOM_PROCESS;

/* The process whose stream this is. A vfork child (dash, posix_spawn) shares our memory until it execs: it
 * must not write into its parent's buffers, so exec only flushes when the caller is the stream's process. */
static pid_t stream_pid;

IOLOOM_EXPORT int ioloom_layer_enabled(enum ioloom_layer layer) { return ioloom_enabled_layers >> layer & 1; }

static void enable_layer(const char *item, size_t len, void *arg) {
    (void)arg;
    static const char *names[] = {[IOLOOM_POSIX] = "posix",
                                  [IOLOOM_STDIO] = "stdio",
                                  [IOLOOM_MPIIO] = "mpiio",
                                  [IOLOOM_ASYNC] = "async"}; /* process: always on */
    for (unsigned i = 0; i < sizeof names / sizeof *names; i++)
        if (names[i] && strlen(names[i]) == len && !strncmp(item, names[i], len)) ioloom_enabled_layers |= 1u << i;
}

/* A process-layer event (start, exit, fork, exec, signal) at the current time. */
static void record_process(enum ioloom_op op, int64_t ret, int64_t aux) {
    uint64_t now = ioloom_now_ns();
    ioloom_record(&(struct ioloom_event){.t_start = now,
                                         .t_end = now,
                                         .offset = -1,
                                         .req_bytes = -1,
                                         .ret_bytes = ret,
                                         .handle = getpid(),
                                         .aux = aux,
                                         .coll_seq = -1,
                                         .file_id = -1,
                                         .op = (uint16_t)op,
                                         .layer = IOLOOM_PROCESS});
}

/* ---- process information ---- */

static void info_int(const char *key, long long value) {
    char text[32];
    snprintf(text, sizeof text, "%lld", value);
    ioloom_write_info(key, text);
}

/* The command line, arguments separated by U+001F (unit separator), read without stdio. */
static void write_command_line(void) {
    char buf[8192];
    int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t n = syscall(SYS_read, fd, buf, sizeof buf - 1);
    syscall(SYS_close, fd);
    if (n <= 0) return;
    for (ssize_t i = 0; i < n - 1; i++)
        if (!buf[i]) buf[i] = 0x1f;
    buf[n] = 0;
    ioloom_write_info("argv", buf);
}

static void write_process_info(void) {
    struct timespec real;
    uint64_t mono = ioloom_now_ns();
    clock_gettime(CLOCK_REALTIME, &real);
    char host[256] = "", exe[4096] = "";
    gethostname(host, sizeof host - 1);
    ssize_t n = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) exe[n] = 0;
    info_int("pid", getpid());
    info_int("ppid", getppid());
    ioloom_write_info("host", host);
    ioloom_write_info("exe", exe);
    write_command_line();
    info_int("start_monotonic_ns", (long long)mono);
    info_int("start_realtime_ns", (long long)real.tv_sec * 1000000000LL + real.tv_nsec);
    ioloom_write_info("layers", ioloom_env_str("IOLOOM_LAYERS", IOLOOM_DEFAULT_LAYERS));
    ioloom_files_write_excluded(); /* the filters in effect, with zero counts */
}

/* ---- MPI facts ---- */

IOLOOM_EXPORT void ioloom_set_rank(int rank, int nranks) {
    ioloom_busy++;
    info_int("rank", rank);
    info_int("nranks", nranks);
    ioloom_busy--;
}

IOLOOM_EXPORT void ioloom_set_clock(int phase, uint64_t local_ns, int64_t offset_ns, int64_t error_ns) {
    char text[96];
    snprintf(text, sizeof text, "%llu %lld %lld", (unsigned long long)local_ns, (long long)offset_ns,
             (long long)error_ns);
    ioloom_busy++;
    ioloom_write_info(phase ? "clock_finalize" : "clock_init", text);
    ioloom_busy--;
}

IOLOOM_EXPORT void ioloom_note(const char *key, const char *value) {
    char full[512];
    snprintf(full, sizeof full, "note.%s", key);
    ioloom_busy++;
    ioloom_write_info(full, value ? value : "");
    ioloom_busy--;
}

/* ---- signals ---- */

/* Signals that end a process by default: the tracer flushes, then does what the program asked for. The
 * program's own handlers are kept here (signal()/sigaction() below) and called after the flush. */
static const int fatal_signals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL};
static struct sigaction program_action[NSIG];
static volatile sig_atomic_t hooked[NSIG];

static void on_fatal_signal(int sig, siginfo_t *info, void *context) {
    int saved = errno;
    ioloom_busy++;
    ioloom_in_signal++;
    record_process(IOLOOM_OP_SIGNAL, 0, sig);
    ioloom_flush_all();
    ioloom_in_signal--;
    ioloom_busy--;
    struct sigaction program = program_action[sig];
    errno = saved;
    if (program.sa_handler == SIG_IGN) return;
    if (program.sa_handler == SIG_DFL) {
        /* Die as the program would have: default action, delivered again once this handler returns. */
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        hooked[sig] = 0;
        IOLOOM_NEXT(sigaction)(sig, &dfl, NULL);
        raise(sig);
        return;
    }
    if (program.sa_flags & SA_RESETHAND) {
        program_action[sig].sa_handler = SIG_DFL;
        program_action[sig].sa_flags &= ~SA_SIGINFO;
    }
    if (program.sa_flags & SA_SIGINFO)
        program.sa_sigaction(sig, info, context);
    else
        program.sa_handler(sig);
}

/* Installs on_fatal_signal with the program's flags and mask (so SA_RESTART etc. behave as asked). */
static void hook(int sig) {
    struct sigaction ours = program_action[sig];
    ours.sa_sigaction = on_fatal_signal;
    ours.sa_flags = (ours.sa_flags & ~(SA_RESETHAND | SA_NODEFER)) | SA_SIGINFO;
    hooked[sig] = IOLOOM_NEXT(sigaction)(sig, &ours, NULL) == 0;
}

static int is_fatal(int sig) {
    for (size_t i = 0; i < sizeof fatal_signals / sizeof *fatal_signals; i++)
        if (fatal_signals[i] == sig) return 1;
    return 0;
}

/* Faults raised by the instruction that runs, as opposed to signals sent to the process. */
static int is_synchronous(int sig) { return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL; }

static void hook_fatal_signals(void) {
    for (size_t i = 0; i < sizeof fatal_signals / sizeof *fatal_signals; i++) {
        int sig = fatal_signals[i];
        if (IOLOOM_NEXT(sigaction)(sig, NULL, &program_action[sig]) == 0 && program_action[sig].sa_handler == SIG_DFL)
            hook(sig);
    }
}

IOLOOM_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    if (sig <= 0 || sig >= NSIG || !hooked[sig] || !is_fatal(sig)) return IOLOOM_NEXT(sigaction)(sig, act, old);
    struct sigaction previous = program_action[sig];
    if (act) {
        program_action[sig] = *act;
        if (act->sa_handler == SIG_IGN || (act->sa_handler != SIG_DFL && is_synchronous(sig))) {
            /* Ignoring is a real disposition (inherited across exec): set it, nothing to flush. A program that
             * handles its own faults (a JVM, a garbage collector) may take thousands on purpose: step aside. */
            hooked[sig] = 0;
            if (IOLOOM_NEXT(sigaction)(sig, act, NULL)) return -1;
        } else {
            hook(sig);
        }
    }
    if (old) *old = previous;
    return 0;
}

IOLOOM_EXPORT sighandler_t signal(int sig, sighandler_t handler) {
    struct sigaction act = {.sa_handler = handler, .sa_flags = SA_RESTART}, old;
    sigemptyset(&act.sa_mask);
    return sigaction(sig, &act, &old) == 0 ? old.sa_handler : SIG_ERR;
}

/* ---- fork, exec, exit ---- */

static void start_child_stream(void) {
    int saved = errno;
    ioloom_busy++;
    stream_pid = getpid();
    ioloom_writer_after_fork();
    ioloom_positions_after_fork();
    ioloom_files_reset_stream();
    write_process_info();
    record_process(IOLOOM_OP_PROCESS_START, 0, getppid());
    ioloom_busy--;
    errno = saved;
}

IOLOOM_EXPORT pid_t fork(void) {
    pid_t pid = IOLOOM_NEXT(fork)();
    if (pid > 0 && ioloom_tracing && !ioloom_busy) {
        int saved = errno;
        ioloom_busy++;
        record_process(IOLOOM_OP_FORK, pid, -1);
        ioloom_busy--;
        errno = saved;
    }
    return pid;
}

/* Before the image is replaced: an exec event and everything buffered on disk. The new image (or, from a vfork
 * child, this one's parent meanwhile) may use the descriptions this process follows. */
static void before_exec(void) {
    ioloom_positions_shared();
    if (!ioloom_tracing || ioloom_busy || getpid() != stream_pid) return;
    int saved = errno;
    ioloom_busy++;
    record_process(IOLOOM_OP_EXEC, 0, -1);
    ioloom_flush_all();
    ioloom_write_info("ended_by_exec", "1"); /* the new image writes its own stream (same pid) */
    ioloom_busy--;
    errno = saved;
}

IOLOOM_EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
    before_exec();
    return IOLOOM_NEXT(execve)(path, argv, envp);
}

IOLOOM_EXPORT int execv(const char *path, char *const argv[]) {
    before_exec();
    return IOLOOM_NEXT(execv)(path, argv);
}

IOLOOM_EXPORT int execvp(const char *file, char *const argv[]) {
    before_exec();
    return IOLOOM_NEXT(execvp)(file, argv);
}

IOLOOM_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
    before_exec();
    return IOLOOM_NEXT(execvpe)(file, argv, envp);
}

/* Programs started by posix_spawn, system and popen inherit our descriptions (glibc forks them inside libc,
 * where pthread_atfork handlers do not run). */
IOLOOM_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *actions,
                              const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
    ioloom_positions_shared();
    return IOLOOM_NEXT(posix_spawn)(pid, path, actions, attr, argv, envp);
}

IOLOOM_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *actions,
                               const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
    ioloom_positions_shared();
    return IOLOOM_NEXT(posix_spawnp)(pid, file, actions, attr, argv, envp);
}

IOLOOM_EXPORT int system(const char *command) {
    ioloom_positions_shared();
    return IOLOOM_NEXT(system)(command);
}

IOLOOM_EXPORT FILE *popen(const char *command, const char *mode) {
    ioloom_positions_shared();
    return IOLOOM_NEXT(popen)(command, mode);
}

/* execl, execlp, execle: collect the variadic arguments into an argv and use the v-form. */
#define COLLECT_ARGS(first, args, argv, envp_out)                      \
    size_t argc = 1;                                                   \
    va_start(args, first);                                             \
    while (va_arg(args, char *)) argc++;                               \
    va_end(args);                                                      \
    char *argv[argc + 1];                                              \
    va_start(args, first);                                             \
    argv[0] = (char *)first;                                           \
    for (size_t i = 1; i <= argc; i++) argv[i] = va_arg(args, char *); \
    envp_out;                                                          \
    va_end(args)

IOLOOM_EXPORT int execl(const char *path, const char *arg0, ...) {
    va_list args;
    COLLECT_ARGS(arg0, args, argv, (void)0);
    return execv(path, argv);
}

IOLOOM_EXPORT int execlp(const char *file, const char *arg0, ...) {
    va_list args;
    COLLECT_ARGS(arg0, args, argv, (void)0);
    return execvp(file, argv);
}

IOLOOM_EXPORT int execle(const char *path, const char *arg0, ...) {
    va_list args;
    char **envp;
    COLLECT_ARGS(arg0, args, argv, envp = va_arg(args, char **));
    return execve(path, argv, envp);
}

static void final_flush(int64_t status) {
    /* a vfork child whose exec failed exits here too: its parent's stream is not finished */
    if (!ioloom_tracing || ioloom_finished || getpid() != stream_pid) return;
    int saved = errno;
    ioloom_busy++;
    record_process(IOLOOM_OP_PROCESS_EXIT, status, -1);
    ioloom_finished = 1;
    ioloom_look_mask = 0;
    ioloom_flush_all();
    ioloom_write_info("clean_exit", "1");
    ioloom_busy--;
    errno = saved;
}

static int64_t exit_status = -1;

IOLOOM_EXPORT void exit(int status) {
    exit_status = status;
    IOLOOM_NEXT(exit)(status);
    __builtin_unreachable();
}

IOLOOM_EXPORT void _exit(int status) {
    final_flush(status);
    IOLOOM_NEXT(_exit)(status);
    __builtin_unreachable();
}

IOLOOM_EXPORT void _Exit(int status) {
    final_flush(status);
    IOLOOM_NEXT(_Exit)(status);
    __builtin_unreachable();
}

__attribute__((constructor)) static void tracer_start(void) {
    int saved = errno; /* the program starts with the errno it would have untraced */
    ioloom_busy++;
    ioloom_for_each_item(ioloom_env_str("IOLOOM_LAYERS", IOLOOM_DEFAULT_LAYERS), ',', enable_layer, NULL);
    ioloom_files_init();
    stream_pid = getpid();
    if (!ioloom_program_skipped() && ioloom_writer_open() == 0) {
        write_process_info();
        pthread_atfork(ioloom_positions_shared, NULL, start_child_stream);
        hook_fatal_signals();
        ioloom_tracing = (int)ioloom_enabled_layers; /* never 0: the process layer is always on */
        record_process(IOLOOM_OP_PROCESS_START, 0, getppid());
    }
    ioloom_busy--;
    errno = saved;
}

/* Destructors run after the program's atexit handlers and its own destructors: the last moment. */
__attribute__((destructor)) static void tracer_stop(void) { final_flush(exit_status); }
