/* Scenarios for the tracer's tests: each does a fixed sequence of calls in DIR and prints every result and errno,
 * so a test can check the trace against exact offsets and byte counts, and check that the printed results are
 * the same traced and untraced.
 *
 * usage: trace_scenarios posix|stdio|threads|shared_stream|fork|loop|handler|abort|reuse|renamed|restat|crowd|burst
 *        DIR [N M] */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *dir;
static char buf[4096];

/* dir/name, in one of 8 buffers of the calling thread's own (threads and crowd call it from many threads at once;
 * shared buffers and a shared counter would hand two threads one buffer). */
static const char *in_dir(const char *name) {
    static __thread char paths[8][4096];
    static __thread int next;
    char *p = paths[next++ % 8];
    snprintf(p, 4096, "%s/%s", dir, name);
    return p;
}

static void ignore(ssize_t result) { (void)result; }

/* Prints what a call returned and the errno it left (0 when it succeeded). */
static long show(const char *what, long ret) {
    printf("%s %ld %d\n", what, ret, ret < 0 ? errno : 0);
    return ret;
}

static void posix(void) {
    memset(buf, 'p', sizeof buf);
    int fd = (int)show("open", open(in_dir("a.dat"), O_CREAT | O_RDWR | O_TRUNC, 0644));
    for (int i = 0; i < 3; i++) show("write", write(fd, buf, 100));
    show("pwrite", pwrite(fd, buf, 50, 1000));
    show("pread", pread(fd, buf, 30, 10));
    show("lseek", lseek(fd, 0, SEEK_SET));
    show("read", read(fd, buf, 64));
    struct iovec three[3] = {{buf, 10}, {buf, 20}, {buf, 30}}, two[2] = {{buf, 16}, {buf + 16, 16}};
    show("writev", writev(fd, three, 3));
    show("readv", readv(fd, two, 1));
    show("pwritev", pwritev(fd, two, 2, 2000));
    show("preadv", preadv(fd, two, 2, 2000));
    show("fsync", fsync(fd));
    show("fdatasync", fdatasync(fd));
    show("ftruncate", ftruncate(fd, 1500));
    int fd2 = (int)show("dup", dup(fd));
    int fd3 = (int)show("dup2", dup2(fd, 50));
    int fd4 = (int)show("fcntl_dupfd", fcntl(fd, F_DUPFD, 60));
    show("write_dup", write(fd3, buf, 7));
    struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 100, .l_len = 200};
    show("setlk", fcntl(fd, F_SETLK, &lock));
    lock.l_type = F_UNLCK;
    show("unlock", fcntl(fd, F_SETLK, &lock));
    char *map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    show("mmap", map == MAP_FAILED ? -1 : 0);
    map[0] = 'm';
    show("msync", msync(map, 4096, MS_SYNC));
    show("munmap", munmap(map, 4096));
    struct stat st;
    struct statx sx;
    show("stat", stat(in_dir("a.dat"), &st));
    show("lstat", lstat(in_dir("a.dat"), &st));
    show("fstat", fstat(fd, &st));
    show("fstatat", fstatat(AT_FDCWD, in_dir("a.dat"), &st, 0));
    show("statx", statx(AT_FDCWD, in_dir("a.dat"), 0, STATX_SIZE, &sx));
    show("access", access(in_dir("a.dat"), R_OK));
    show("open_missing", open(in_dir("missing/x"), O_RDONLY));
    show("pread_badfd", pread(999, buf, 1, 0));
    show("stat_missing", stat(in_dir("missing"), &st));
    int fdb = (int)show("open_b", open(in_dir("b.dat"), O_CREAT | O_RDWR | O_TRUNC, 0644));
    loff_t in = 0, out = 0;
    show("copy_file_range", copy_file_range(fd, &in, fdb, &out, 500, 0));
    off_t from = 0;
    show("sendfile", sendfile(fdb, fd, &from, 300));
    show("close_b", close(fdb));
    show("rename", rename(in_dir("b.dat"), in_dir("c.dat")));
    show("unlink", unlink(in_dir("c.dat")));
    show("mkdir", mkdir(in_dir("sub"), 0755));
    show("rmdir", rmdir(in_dir("sub")));
    show("close", close(fd));
    show("close2", close(fd2));
    show("close3", close(fd3));
    show("close4", close(fd4));
    int dirfd = (int)show("open_dir", open(dir, O_RDONLY | O_DIRECTORY));
    int fda = (int)show("openat", openat(dirfd, "a.dat", O_RDONLY));
    volatile int flags = O_RDONLY; /* not a constant: glibc's fortified open() calls __open_2 */
    int fdf = (int)show("open_fortified", open(in_dir("a.dat"), flags));
    show("read_fortified", read(fdf, buf, 10));
    int fdc = (int)show("creat", creat(in_dir("d.dat"), 0600));
    show("close_dir", close(dirfd) | close(fda) | close(fdf) | close(fdc));
}

static void stdio(void) {
    FILE *f = fopen(in_dir("s.txt"), "w+");
    show("fopen", f ? 0 : -1);
    memset(buf, 's', 100);
    show("fwrite", (long)fwrite(buf, 1, 100, f));
    show("fprintf", fprintf(f, "%d\n", 12345));
    show("fputs", fputs("hello\n", f));
    show("fputc", fputc('x', f));
    show("putc", putc('y', f));
    show("fflush", fflush(f));
    show("ftell", ftell(f));
    show("fseek", fseek(f, 100, SEEK_SET));
    show("fgets", fgets(buf, sizeof buf, f) ? (long)strlen(buf) : -1);
    char *line = NULL;
    size_t cap = 0;
    show("getline", getline(&line, &cap, f));
    free(line);
    show("fgetc", fgetc(f));
    show("getc", getc(f));
    show("fgetc_eof", fgetc(f));
    rewind(f);
    show("fread", (long)fread(buf, 1, 60, f));
    show("ungetc", ungetc(buf[59], f)); /* moves the position by what the tracer does not count: it asks */
    show("fread_after_ungetc", (long)fread(buf, 1, 10, f));
    show("fseek_cur", fseek(f, 0, SEEK_CUR));
    show("fread_after_seek", (long)fread(buf, 1, 10, f));
    show("fileno", fileno(f) >= 0);
    show("fclose", fclose(f));
    FILE *tail = fopen(in_dir("s.txt"), "a"); /* append mode: every write lands at the end, offset -1 */
    show("append_fputs", fputs("tail\n", tail));
    show("fclose_append", fclose(tail));
    int fd = open(in_dir("fd.txt"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    FILE *g = fdopen(fd, "w");
    show("fdopen_fprintf", fprintf(g, "%s", "abcdefgh"));
    show("fclose_fdopen", fclose(g));
    FILE *h = freopen(in_dir("re.txt"), "w", fopen(in_dir("fd.txt"), "r"));
    show("freopen_fwrite", (long)fwrite(buf, 1, 33, h));
    show("fclose_freopen", fclose(h));
    show("fopen_missing", fopen(in_dir("missing/x"), "r") ? 0 : -1);
    printf("%s\n", "to stdout");
    puts("puts to stdout");
}

static void *thread_writes(void *arg) {
    long id = (long)arg;
    int fd = open(in_dir("t.dat"), O_WRONLY);
    for (int i = 0; i < 100; i++) ignore(pwrite(fd, buf, 10, id * 1000 + i * 10));
    close(fd);
    return NULL;
}

static void threads(void) {
    close(open(in_dir("t.dat"), O_CREAT | O_WRONLY | O_TRUNC, 0644));
    pthread_t t[4];
    for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, thread_writes, (void *)i);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    show("threads", 0);
}

/* crowd: N threads, all started before any writes (a barrier), each making M pwrites: every thread holds a
 * buffer at once, the worst case for the tracer's memory budget. */
static pthread_barrier_t crowd_start;
static long crowd_writes;

static void *crowd_thread(void *arg) {
    long id = (long)arg;
    int fd = open(in_dir("crowd.dat"), O_WRONLY);
    pthread_barrier_wait(&crowd_start);
    for (long i = 0; i < crowd_writes; i++) ignore(pwrite(fd, buf, 8, (id * crowd_writes + i) * 8));
    pthread_barrier_wait(&crowd_start); /* none exits (and frees its buffer) before all have written */
    close(fd);
    return NULL;
}

static void crowd(long threads, long writes) {
    close(open(in_dir("crowd.dat"), O_CREAT | O_WRONLY | O_TRUNC, 0644));
    crowd_writes = writes;
    pthread_barrier_init(&crowd_start, NULL, (unsigned)threads);
    pthread_t *t = calloc((size_t)threads, sizeof *t);
    for (long i = 0; i < threads; i++) pthread_create(&t[i], NULL, crowd_thread, (void *)i);
    for (long i = 0; i < threads; i++) pthread_join(t[i], NULL);
    free(t);
    show("crowd", threads * writes);
}

/* burst: N pwrites of 1 byte from one thread, M times over the same 4096 bytes. */
static void burst(long writes) {
    int fd = open(in_dir("burst.dat"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    for (long i = 0; i < writes; i++) ignore(pwrite(fd, buf, 1, i % 4096));
    show("burst", close(fd));
}

static FILE *shared;

static void *thread_fwrites(void *arg) {
    (void)arg;
    for (int i = 0; i < 200; i++) ignore(fwrite(buf, 1, 10, shared) == 10);
    return NULL;
}

/* Threads writing through one stream at once: each record's offset must be its own. */
static void shared_stream(void) {
    shared = fopen(in_dir("s.dat"), "w");
    pthread_t t[4];
    for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, thread_fwrites, NULL);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    show("shared_stream", fclose(shared));
}

static void forks(void) {
    int fd = open(in_dir("f.dat"), O_CREAT | O_RDWR | O_TRUNC, 0644);
    pid_t pid = fork();
    if (pid == 0) {
        ignore(pwrite(fd, "child", 5, 0));
        _exit(3);
    }
    int status;
    waitpid(pid, &status, 0);
    show("child_status", WEXITSTATUS(status));
    show("parent_pwrite", pwrite(fd, "parent", 6, 10));
    close(fd);
}

/* Writes forever, 1000 bytes every millisecond: for the tests that kill it. Prints "ready" once some
 * events must have been flushed (the test sets a short flush interval). */
static void loop(void) {
    int fd = open(in_dir("loop.dat"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    for (long i = 0;; i++) {
        ignore(pwrite(fd, buf, 1000, i * 1000));
        if (i == 300) {
            printf("ready\n");
            fflush(stdout);
        }
        usleep(1000);
    }
}

/* The program's own SIGTERM handler: the tracer flushes first, then this runs as it would untraced. */
static void on_term(int sig) {
    (void)sig;
    static const char text[] = "handled\n";
    ignore(write(1, text, sizeof text - 1));
    _exit(5);
}

static void handler(void) {
    struct sigaction act = {.sa_handler = on_term};
    sigemptyset(&act.sa_mask);
    sigaction(SIGTERM, &act, NULL);
    loop();
}

static void aborts(void) {
    int fd = open(in_dir("abort.dat"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    for (int i = 0; i < 10; i++) ignore(pwrite(fd, buf, 100, i * 100));
    abort();
}

/* Closes every descriptor above stderr (the tracer's too), then opens 1000 files, so that one of them gets the
 * number the tracer's stream had, and writes to the last: no trace byte may land in any of them. */
/* One path, three files: opened, removed (remove, inside libc) and created again, then replaced by a rename.
 * A second link keeps each removed file alive, so that the file system cannot hand its inode out again. */
static void renamed(void) {
    for (int i = 0; i < 3; i++) {
        if (i == 1) {
            ignore(link(in_dir("a.dat"), in_dir("kept.dat")));
            remove(in_dir("a.dat"));
        }
        if (i == 2) {
            close(open(in_dir("b.dat"), O_CREAT | O_WRONLY, 0644));
            rename(in_dir("b.dat"), in_dir("a.dat"));
        }
        for (int j = 0; j < 2; j++) close(open(in_dir("a.dat"), O_CREAT | O_WRONLY, 0644));
    }
}

/* a.dat stat'ed twice, replaced by another process (a child renaming b.dat over it: this process removed and renamed
 * nothing), then stat'ed twice again. */
static void restat(void) {
    struct stat st;
    close(open(in_dir("a.dat"), O_CREAT | O_WRONLY, 0644));
    close(open(in_dir("b.dat"), O_CREAT | O_WRONLY, 0644));
    for (int i = 0; i < 2; i++) ignore(stat(in_dir("a.dat"), &st));
    pid_t child = fork();
    if (child == 0) _exit(rename(in_dir("b.dat"), in_dir("a.dat")) != 0);
    waitpid(child, NULL, 0);
    for (int i = 0; i < 2; i++) ignore(stat(in_dir("a.dat"), &st));
}

static void reuse(void) {
    close_range(3, ~0U, 0);
    int fd = -1;
    char name[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof name, "f%d", i);
        fd = open(in_dir(name), O_CREAT | O_RDWR | O_TRUNC, 0644);
    }
    for (int i = 0; i < 20000; i++) ignore(pwrite(fd, "x", 1, i));
}

/* The scenarios taking no count, by name. */
static const struct {
    const char *name;
    void (*run)(void);
} scenarios[] = {
    {"posix", posix}, {"stdio", stdio},     {"threads", threads}, {"shared_stream", shared_stream},
    {"fork", forks},  {"loop", loop},       {"handler", handler}, {"abort", aborts},
    {"reuse", reuse}, {"renamed", renamed}, {"restat", restat},
};

int main(int argc, char **argv) {
    if (argc != 3 && argc != 5) return 2;
    long n = argc == 5 ? atol(argv[3]) : 0, m = argc == 5 ? atol(argv[4]) : 0;
    dir = argv[2];
    const char *what = argv[1];
    for (size_t k = 0; k < sizeof scenarios / sizeof scenarios[0]; k++)
        if (!strcmp(what, scenarios[k].name)) {
            scenarios[k].run();
            return 0;
        }
    if (!strcmp(what, "crowd") && n > 0)
        crowd(n, m);
    else if (!strcmp(what, "burst") && n > 0)
        burst(n);
    else
        return 2;
    return 0;
}
