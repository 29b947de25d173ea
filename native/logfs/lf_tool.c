/* ioloom-logfs-tool: the C side of the format tests and benchmarks, through the C API (logfs.h).
 *
 *   synth DIR WRITERS COUNT BLOCK   WRITERS writers (ranks 0..WRITERS-1 as the environment would say) each write
 *                                   COUNT blocks of BLOCK bytes N-1 strided; byte x of the file is x*13 mod 251
 *   open-time DIR                   time opening the container, loading every index and resolving it, as a reader
 *                                   does; prints JSON
 *   vectors DIR PLAIN               a fixed sequence of overlapping writes and truncates from three writers into
 *                                   the container DIR, and the same applied to the plain file PLAIN
 *   sum FILE                        lf_sum64 of a file's bytes, in hex (the checksum vector)
 *   entry-problem                   for each line of standard input (an index entry's 11 fields in decimal, in
 *                                   struct order), the rule it breaks (lf_entry_problem) or "ok"
 *   runtime-name PATH...            for each PATH, "runtime" if its last component names an MPI runtime's file
 *                                   (lf_runtime_name: the layer keeps it a plain file), else "data" */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ioloom_core.h"
#include "lf_format.h"
#include "lf_runtime.h"
#include "logfs.h"

static unsigned char pattern_byte(uint64_t x) { return (unsigned char)(x * 13 % 251); }

static int fail(const char *what, const char *path) {
    perror(path ? path : what);
    fprintf(stderr, "ioloom-logfs-tool: %s failed\n", what);
    return 1;
}

/* A writer as rank `rank` of an MPI job would be (the group comes from the environment). */
static lf_file *open_as_rank(const char *dir, int rank, int flags) {
    char value[16];
    snprintf(value, sizeof value, "%d", rank);
    setenv("PMI_RANK", value, 1);
    return lf_open(dir, flags, 0644, NULL);
}

static int synth(const char *dir, int writers, long count, long block) {
    if (writers < 1 || count < 1 || block < 1) {
        fprintf(stderr, "ioloom-logfs-tool: synth: WRITERS, COUNT and BLOCK must be whole numbers >= 1\n");
        return 2;
    }
    unsigned char *buf = malloc((size_t)block);
    if (!buf) return fail("malloc", NULL);
    for (int w = 0; w < writers; w++) {
        lf_file *f = open_as_rank(dir, w, O_WRONLY | O_CREAT);
        if (!f) return fail("open", dir);
        for (long i = 0; i < count; i++) {
            uint64_t off = ((uint64_t)i * (uint64_t)writers + (uint64_t)w) * (uint64_t)block;
            for (long b = 0; b < block; b++) buf[b] = pattern_byte(off + (uint64_t)b);
            if (lf_pwrite(f, buf, (size_t)block, off) != block) return fail("write", dir);
        }
        if (lf_close(f)) return fail("close", dir);
    }
    free(buf);
    return 0;
}

static int open_time(const char *dir) {
    uint64_t t0 = ioloom_now_ns();
    lf_file *f = lf_open(dir, O_RDONLY, 0, NULL);
    if (!f) return fail("open", dir);
    int64_t size = lf_size(f); /* loads every index and resolves the extents */
    unsigned char byte = 0;
    if (size > 0 && lf_pread(f, &byte, 1, (uint64_t)size - 1) != 1) return fail("read", dir);
    uint64_t t1 = ioloom_now_ns();
    printf("{\"seconds\": %.6f, \"size\": %lld, \"last_byte_ok\": %s}\n", (double)(t1 - t0) / 1e9, (long long)size,
           size > 0 && byte == pattern_byte((uint64_t)size - 1) ? "true" : "false");
    return lf_close(f);
}

/* One step of the vector sequence: writer w writes `n` bytes of value `v` at `off`, or truncates (n < 0). */
struct step {
    int writer;
    long off, n;
    unsigned char v;
};

static int vectors(const char *dir, const char *plain_path) {
    static const struct step steps[] = {
        {0, 0, 4096, 'a'}, {1, 1000, 100, 'b'}, {2, 5000, 10, 'c'}, {0, 4090, 20, 'd'},
        {1, 3000, -1, 0},  {2, 3500, 50, 'e'},  {0, 100, 8, 'f'},   {0, 200, 8, 'f'},
        {0, 300, 8, 'f'},  {0, 400, 8, 'f'},    {1, 8000, -1, 0},   {2, 7990, 4, 'g'},
    };
    lf_file *w[3];
    for (int i = 0; i < 3; i++)
        if (!(w[i] = open_as_rank(dir, i, O_RDWR | O_CREAT))) return fail("open", dir);
    int plain = open(plain_path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (plain < 0) return fail("open", plain_path);
    size_t nsteps = sizeof steps / sizeof *steps;
    for (size_t s = 0; s < nsteps; s++) {
        const struct step *st = &steps[s];
        /* Each step is published before another writer's (a sync point), so the order is the steps' order; a
         * writer's steps in a row stay unpublished between them (writer 0's strided 'f' writes: one run). */
        if (st->n < 0) {
            if (lf_truncate(w[st->writer], (uint64_t)st->off) || ftruncate(plain, st->off))
                return fail("truncate", dir);
        } else {
            char buf[4096];
            memset(buf, st->v, (size_t)st->n);
            if (lf_pwrite(w[st->writer], buf, (size_t)st->n, (uint64_t)st->off) != st->n ||
                pwrite(plain, buf, (size_t)st->n, st->off) != st->n)
                return fail("write", dir);
        }
        if ((s + 1 == nsteps || steps[s + 1].writer != st->writer) && lf_publish(w[st->writer]))
            return fail("publish", dir);
    }
    for (int i = 0; i < 3; i++)
        if (lf_close(w[i])) return fail("close", dir);
    return close(plain);
}

/* The sum is over the whole file at once (its weights count from the end), so the file must fit the buffer. */
static int sum(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return fail("open", path);
    static unsigned char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    int unread = n == sizeof buf && fgetc(f) != EOF, failed = ferror(f);
    fclose(f);
    if (failed) return fail("read", path);
    if (unread) {
        fprintf(stderr, "ioloom-logfs-tool: sum: %s is larger than %zu bytes, the most it sums\n", path, sizeof buf);
        return 2;
    }
    printf("%016llx\n", (unsigned long long)lf_sum64(buf, n));
    return 0;
}

static int entry_problem(void) {
    struct lf_entry e;
    unsigned long long v[11];
    while (scanf("%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                 &v[6], &v[7], &v[8], &v[9], &v[10]) == 11) {
        e = (struct lf_entry){(uint32_t)v[0], (uint32_t)v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10]};
        const char *problem = lf_entry_problem(&e);
        printf("%s\n", problem ? problem : "ok");
    }
    return 0;
}

static int runtime_names(int n, char **paths) {
    for (int i = 0; i < n; i++) printf("%s\n", lf_runtime_name(paths[i]) ? "runtime" : "data");
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 6 && !strcmp(argv[1], "synth")) return synth(argv[2], atoi(argv[3]), atol(argv[4]), atol(argv[5]));
    if (argc == 3 && !strcmp(argv[1], "open-time")) return open_time(argv[2]);
    if (argc == 4 && !strcmp(argv[1], "vectors")) return vectors(argv[2], argv[3]);
    if (argc == 3 && !strcmp(argv[1], "sum")) return sum(argv[2]);
    if (argc == 2 && !strcmp(argv[1], "entry-problem")) return entry_problem();
    if (argc >= 2 && !strcmp(argv[1], "runtime-name")) return runtime_names(argc - 2, argv + 2);
    fprintf(stderr,
            "usage: %s synth DIR WRITERS COUNT BLOCK | open-time DIR | vectors DIR PLAIN | sum FILE | "
            "entry-problem | runtime-name PATH...\n",
            argv[0]);
    return 2;
}
