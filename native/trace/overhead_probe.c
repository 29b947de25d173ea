/* The probe behind `ioloom bench overhead`: times N small calls of each kind on a file in the page cache and
 * prints "<call> <ns of CPU time per call>..." per kind. Built plain (the POSIX and stdio calls) and once per MPI
 * (adding MPI_File_write_at, MPI_File_write_at_all, MPI_File_read_at, and the individual file pointer's
 * MPI_File_write, MPI_File_write_all and MPI_File_read, on one rank).
 *
 * Alone, it times the N calls of each kind as one block, with the process's CPU clock (a tracer's helper threads
 * count). Taking turns (--turn), several probes run at once, one untraced, one traced, one per other tool, and
 * pass a token round a ring of FIFOs: each runs one untimed warm-up block of each kind, then splits the N calls
 * into BLOCKS blocks, runs a block only while it holds the token, and prints the ns per call of each block, timed
 * with the thread's CPU clock (what the program's thread spends: the tracer encodes on it unless told
 * otherwise). Block i of every probe then ran within a few milliseconds of the others' block i, on the same file,
 * in the same page cache and dentry state, so a drift of the machine (another guest on the host, a neighbour's
 * cache use) reaches every side alike.
 *
 * usage: ioloom-overhead-probe[-<mpi>] FILE N [KINDS] [--turn IN OUT BLOCKS [lead]]
 *   KINDS: a comma-separated subset, e.g. "pwrite" (default all; "all" as a placeholder); one kind at a time is
 *   what `bench overhead --instructions` counts. IN, OUT: FIFOs (this probe's and the next one's); the probe
 *   given "lead" writes FILE and starts with the token (the probes share FILE: the others do not write it
 *   again under it). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef IOLOOM_MPI_IMPL
#include <mpi.h>
#endif

#define BLOCK 64
#define SPAN 1024 /* blocks cycled through: 64 KiB stays in the page cache */

static const char *path;
static int fd = -1;
static FILE *stream;
static char buf[BLOCK];
static long failures;

/* ---- turns: a token passed round a ring of FIFOs ---- */

#define TURN_WAIT_MS 120000 /* a peer that has not passed the token in 2 min has failed */

static struct {
    int in, out; /* -1: alone */
    int lead;    /* holds the token first */
    long blocks; /* timed blocks per kind */
    clockid_t clock;
} turns = {-1, -1, 0, 1, CLOCK_PROCESS_CPUTIME_ID};

static double cpu_ns(void) {
    struct timespec ts;
    clock_gettime(turns.clock, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Both ends opened read-write: neither open waits for the peer, and the token stays in the FIFO while a peer
 * that has not started yet opens it. */
static int open_turns(const char *in, const char *out, const char *blocks) {
    turns.in = open(in, O_RDWR);
    turns.out = open(out, O_RDWR);
    turns.blocks = atol(blocks);
    turns.clock = CLOCK_THREAD_CPUTIME_ID;
    return turns.in < 0 || turns.out < 0 || turns.blocks < 1 ? -1 : 0;
}

static void wait_turn(void) {
    if (turns.in < 0) return;
    struct pollfd ready = {.fd = turns.in, .events = POLLIN};
    char token;
    int got;
    while ((got = poll(&ready, 1, TURN_WAIT_MS)) < 0 && errno == EINTR) continue;
    if (got != 1 || read(turns.in, &token, 1) != 1) {
        fprintf(stderr, "overhead probe: no turn for %d s: a probe taking turns with this one has stopped\n",
                TURN_WAIT_MS / 1000);
        exit(3);
    }
}

static void pass_turn(void) {
    if (turns.out >= 0 && write(turns.out, "t", 1) != 1) failures++;
}

/* ---- one call of each kind; call i of a run ---- */

static off_t block(long i) { return (off_t)(i % SPAN) * BLOCK; }
/* Sequential calls go back to the start once per SPAN calls, which keeps the file at 64 KiB. */
static void wrap_around(long i) {
    if (i % SPAN == SPAN - 1) failures += lseek(fd, 0, SEEK_SET) != 0;
}
static void wrap_stream(long i) {
    if (i % SPAN == SPAN - 1) rewind(stream);
}

static void call_pwrite(long i) { failures += pwrite(fd, buf, BLOCK, block(i)) != BLOCK; }
static void call_pread(long i) { failures += pread(fd, buf, BLOCK, block(i)) != BLOCK; }
static void call_write(long i) {
    failures += write(fd, buf, BLOCK) != BLOCK;
    wrap_around(i);
}
static void call_read(long i) {
    failures += read(fd, buf, BLOCK) != BLOCK;
    wrap_around(i);
}
static void call_fwrite(long i) {
    failures += fwrite(buf, 1, BLOCK, stream) != BLOCK;
    wrap_stream(i);
}
static void call_fread(long i) {
    failures += fread(buf, 1, BLOCK, stream) != BLOCK;
    wrap_stream(i);
}
static void call_open_close(long i) {
    (void)i;
    int opened = open(path, O_RDONLY);
    failures += opened < 0 || close(opened) != 0;
}
static void call_stat(long i) {
    (void)i;
    struct stat st;
    failures += stat(path, &st) != 0;
}
static void call_lseek(long i) { failures += lseek(fd, block(i), SEEK_SET) != block(i); }

/* ---- what each kind runs on ---- */

static void open_fd(void) {
    fd = open(path, O_RDWR);
    failures += fd < 0;
}
static void close_fd(void) { failures += close(fd) != 0; }
static void open_writing(void) { failures += !(stream = fopen(path, "r+")); }
static void open_reading(void) { failures += !(stream = fopen(path, "r")); }
static void close_stream(void) { failures += fclose(stream) != 0; }
static void nothing(void) {}

#ifdef IOLOOM_MPI_IMPL
static MPI_File file;
static void open_mpi(void) {
    failures += MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_RDWR, MPI_INFO_NULL, &file) != MPI_SUCCESS;
}
static void close_mpi(void) { failures += MPI_File_close(&file) != MPI_SUCCESS; }
static void call_mpi_write_at(long i) {
    failures += MPI_File_write_at(file, block(i), buf, BLOCK, MPI_BYTE, MPI_STATUS_IGNORE) != MPI_SUCCESS;
}
static void call_mpi_write_at_all(long i) {
    failures += MPI_File_write_at_all(file, block(i), buf, BLOCK, MPI_BYTE, MPI_STATUS_IGNORE) != MPI_SUCCESS;
}
static void call_mpi_read_at(long i) {
    failures += MPI_File_read_at(file, block(i), buf, BLOCK, MPI_BYTE, MPI_STATUS_IGNORE) != MPI_SUCCESS;
}
/* The individual file pointer's calls go back to the start as write and read do: every read is a full one. */
static void wrap_mpi(long i) {
    if (i % SPAN == SPAN - 1) failures += MPI_File_seek(file, 0, MPI_SEEK_SET) != MPI_SUCCESS;
}
static void call_mpi_write(long i) {
    failures += MPI_File_write(file, buf, BLOCK, MPI_BYTE, MPI_STATUS_IGNORE) != MPI_SUCCESS;
    wrap_mpi(i);
}
static void call_mpi_write_all(long i) {
    failures += MPI_File_write_all(file, buf, BLOCK, MPI_BYTE, MPI_STATUS_IGNORE) != MPI_SUCCESS;
    wrap_mpi(i);
}
static void call_mpi_read(long i) {
    failures += MPI_File_read(file, buf, BLOCK, MPI_BYTE, MPI_STATUS_IGNORE) != MPI_SUCCESS;
    wrap_mpi(i);
}
#endif

static const struct kind {
    const char *name;
    void (*call)(long i);
    void (*start)(void), (*end)(void);
} kinds[] = {
    {"pwrite", call_pwrite, open_fd, close_fd},
    {"pread", call_pread, open_fd, close_fd},
    {"write", call_write, open_fd, close_fd},
    {"read", call_read, open_fd, close_fd},
    {"fwrite", call_fwrite, open_writing, close_stream},
    {"fread", call_fread, open_reading, close_stream},
    {"open+close", call_open_close, nothing, nothing},
    {"stat", call_stat, nothing, nothing},
    {"lseek", call_lseek, open_fd, close_fd},
#ifdef IOLOOM_MPI_IMPL
    {"MPI_File_write_at", call_mpi_write_at, open_mpi, close_mpi},
    {"MPI_File_write_at_all", call_mpi_write_at_all, open_mpi, close_mpi},
    {"MPI_File_read_at", call_mpi_read_at, open_mpi, close_mpi},
    {"MPI_File_write", call_mpi_write, open_mpi, close_mpi},
    {"MPI_File_write_all", call_mpi_write_all, open_mpi, close_mpi},
    {"MPI_File_read", call_mpi_read, open_mpi, close_mpi},
#endif
};

/* Is `name` among the kinds asked for (a comma-separated list, NULL for all)? */
static int wanted(const char *asked, const char *name) {
    size_t len = strlen(name);
    if (!asked) return 1;
    for (const char *at = strstr(asked, name); at; at = strstr(at + 1, name))
        if ((at == asked || at[-1] == ',') && (at[len] == ',' || at[len] == 0)) return 1;
    return 0;
}

/* Calls [from, from + n) of kind k, timed: ns per call. */
static double timed_block(const struct kind *k, long from, long n) {
    double start = cpu_ns();
    for (long i = from; i < from + n; i++) k->call(i);
    return (cpu_ns() - start) / n;
}

/* The n calls of kind k in turns.blocks timed blocks, each in this probe's turn, after an untimed warm-up block
 * when taking turns (in a turn of its own, with the kind's start: a probe never runs while another is timed):
 * "<kind> <ns per call of each block>". */
static void run(const struct kind *k, long n) {
    long size = n / turns.blocks, warm = turns.in >= 0;
    printf("%s", k->name);
    for (long b = -warm; b < turns.blocks; b++) {
        wait_turn();
        if (b == -warm) k->start();
        double ns = timed_block(k, (b + warm) * size, size);
        if (b >= 0) printf(" %.1f", ns);
        if (b == turns.blocks - 1) k->end();
        pass_turn();
    }
    printf("\n");
}

/* A file of SPAN blocks in the page cache. */
static int prepare(void) {
    int made = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);
    if (made < 0) return -1;
    for (long i = 0; i < SPAN; i++) failures += pwrite(made, buf, BLOCK, block(i)) != BLOCK;
    return close(made);
}

/* --turn IN OUT BLOCKS [lead] */
static int start_turns(char **turn, int given) {
    if (given != 4 && given != 5) return -1;
    turns.lead = given == 5 && strcmp(turn[4], "lead") == 0;
    return given == 5 && !turns.lead ? -1 : open_turns(turn[1], turn[2], turn[3]);
}

int main(int argc, char **argv) {
    int turn_at = 1;
    while (turn_at < argc && strcmp(argv[turn_at], "--turn") != 0) turn_at++;
    if (turn_at < 3 || turn_at > 4 || (turn_at < argc && start_turns(argv + turn_at, argc - turn_at) != 0)) {
        fprintf(stderr, "usage: %s FILE N [KINDS] [--turn IN OUT BLOCKS [lead]]\n", argv[0]);
        return 2;
    }
    path = argv[1];
    long n = atol(argv[2]);
    const char *asked = turn_at == 4 && strcmp(argv[3], "all") != 0 ? argv[3] : NULL;
    /* Taking turns, the lead writes the file and then gives itself the token: the others touch the file in
     * their turns only. */
    if ((turns.in < 0 || turns.lead) && prepare() != 0) {
        perror(path);
        return 1;
    }
    if (turns.lead && write(turns.in, "t", 1) != 1) failures++;
#ifdef IOLOOM_MPI_IMPL
    MPI_Init(&argc, &argv);
#endif
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        if (wanted(asked, kinds[k].name)) run(&kinds[k], n);
#ifdef IOLOOM_MPI_IMPL
    MPI_Finalize();
#endif
    if (failures) fprintf(stderr, "%ld calls failed\n", failures);
    return failures != 0;
}
