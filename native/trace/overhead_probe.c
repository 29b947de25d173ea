/* The probe behind `ioloom bench overhead`: times N small calls of each kind on a file in the page cache and
 * prints "<call> <ns of CPU time per call>" per kind. Run untraced and with the tracer preloaded, alternately,
 * the difference is what tracing adds per call. Built plain (the POSIX and stdio calls) and once per MPI
 * (adding MPI_File_write_at, MPI_File_write_at_all and MPI_File_read_at, on one rank).
 *
 * CPU time (the process's, so that a tracer's helper threads count) rather than wall-clock time: a busy machine
 * stretches the wall clock of both runs unevenly, not the work each does.
 *
 * usage: ioloom-overhead-probe[-<mpi>] FILE N [KINDS]   (KINDS: a comma-separated subset, e.g. "pwrite"; default
 *        all; one kind at a time is what `bench overhead --instructions` counts) */
#include <fcntl.h>
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

static double cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
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

static void run(const struct kind *k, long n) {
    k->start();
    double start = cpu_ns();
    for (long i = 0; i < n; i++) k->call(i);
    printf("%s %.1f\n", k->name, (cpu_ns() - start) / n);
    k->end();
}

/* A file of SPAN blocks in the page cache. */
static int prepare(void) {
    int made = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);
    if (made < 0) return -1;
    for (long i = 0; i < SPAN; i++) failures += pwrite(made, buf, BLOCK, block(i)) != BLOCK;
    return close(made);
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s FILE N [KINDS]\n", argv[0]);
        return 2;
    }
    path = argv[1];
    long n = atol(argv[2]);
    const char *asked = argc == 4 ? argv[3] : NULL;
    if (prepare() != 0) {
        perror(path);
        return 1;
    }
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
