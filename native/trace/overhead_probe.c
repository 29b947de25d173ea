/* The probe behind `ioloom bench overhead`: times N small calls of each kind on a file in the page cache and
 * prints "<call> <ns per call>" per kind. Run once untraced and once with the tracer preloaded, the difference
 * is what tracing adds per call. Built plain (pwrite, pread, fwrite) and once per MPI (adding
 * MPI_File_write_at, on one rank).
 *
 * usage: ioloom-overhead-probe[-<mpi>] FILE N [KINDS]   (KINDS: a comma-separated subset, e.g. "pwrite"; default all;
 *        one kind at a time is what `bench overhead --instructions` counts) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef IOLOOM_MPI_IMPL
#include <mpi.h>
#endif

#define BLOCK 64
#define SPAN 1024 /* blocks cycled through: 64 KiB stays in the page cache */

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void report(const char *call, double start, long n) { printf("%s %.1f\n", call, (now_ns() - start) / n); }

static const char *kinds = "pwrite,pread,fwrite,MPI_File_write_at";

/* Is `call` among the kinds asked for? */
static int wanted(const char *call) {
    size_t len = strlen(call);
    for (const char *at = strstr(kinds, call); at; at = strstr(at + 1, call))
        if ((at == kinds || at[-1] == ',') && (at[len] == ',' || at[len] == 0)) return 1;
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s FILE N [KINDS]\n", argv[0]);
        return 2;
    }
    const char *path = argv[1];
    long n = atol(argv[2]);
    if (argc == 4) kinds = argv[3];
    static char buf[BLOCK];
    int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    long failures = 0;
    for (long i = 0; i < SPAN; i++) failures += pwrite(fd, buf, BLOCK, i * BLOCK) != BLOCK; /* warm the cache */
    double start = now_ns();
    if (wanted("pwrite")) {
        for (long i = 0; i < n; i++) failures += pwrite(fd, buf, BLOCK, (i % SPAN) * BLOCK) != BLOCK;
        report("pwrite", start, n);
    }
    start = now_ns();
    if (wanted("pread")) {
        for (long i = 0; i < n; i++) failures += pread(fd, buf, BLOCK, (i % SPAN) * BLOCK) != BLOCK;
        report("pread", start, n);
    }
    close(fd);
    FILE *f = fopen(path, "w");
    start = now_ns();
    if (wanted("fwrite")) {
        for (long i = 0; i < n; i++) {
            failures += fwrite(buf, 1, BLOCK, f) != BLOCK;
            if (i % SPAN == SPAN - 1) rewind(f); /* keep the file small; one rewind per 1024 calls */
        }
        report("fwrite", start, n);
    }
    fclose(f);
#ifdef IOLOOM_MPI_IMPL
    MPI_Init(&argc, &argv);
    MPI_File fh;
    MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    start = now_ns();
    if (wanted("MPI_File_write_at")) {
        for (long i = 0; i < n; i++)
            failures += MPI_File_write_at(fh, (i % SPAN) * BLOCK, buf, BLOCK, MPI_BYTE, MPI_STATUS_IGNORE) != MPI_SUCCESS;
        report("MPI_File_write_at", start, n);
    }
    MPI_File_close(&fh);
    MPI_Finalize();
#endif
    if (failures) fprintf(stderr, "%ld calls failed\n", failures);
    return failures != 0;
}
