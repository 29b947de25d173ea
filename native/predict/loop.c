/* ioloom-predict-loop DIR STEPS [SEED]: a serial program whose I/O the tracer's predictor is tested on
 * (tests/test_predict_tracer.py). Each step opens step_<n>.dat with stdio, writes a header line, then 4 + 3 blocks
 * of 4 KiB through one helper called from two places (only call stacks of two frames or more tell those apart),
 * and closes it; then it appends 512 bytes to log.dat with POSIX calls. With SEED, each step instead makes 64
 * writes whose call site is drawn at random (a stream no grammar folds: for the grammar cap). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char block[4096];

static void fail(const char *what, const char *path) {
    perror(path);
    fprintf(stderr, "ioloom-predict-loop: %s failed\n", what);
    exit(1);
}

__attribute__((noinline)) static void write_block(FILE *f, const char *path) {
    if (fwrite(block, 1, sizeof block, f) != sizeof block) fail("fwrite", path);
}

__attribute__((noinline)) static void fields(FILE *f, const char *path) {
    for (int i = 0; i < 4; i++) write_block(f, path);
}

__attribute__((noinline)) static void particles(FILE *f, const char *path) {
    for (int i = 0; i < 3; i++) write_block(f, path);
}

static void random_writes(FILE *f, const char *path, unsigned *seed) {
    for (int i = 0; i < 64; i++) {
        switch (rand_r(seed) % 4) {
            case 0:
                fputc('a', f);
                break;
            case 1:
                fputs("bb", f);
                break;
            case 2:
                fprintf(f, "%d", i);
                break;
            default:
                write_block(f, path);
        }
    }
}

static void append_log(const char *dir, int step) {
    char path[4096];
    snprintf(path, sizeof path, "%s/log.dat", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) fail("open", path);
    if (pwrite(fd, block, 512, (off_t)step * 512) != 512) fail("pwrite", path);
    close(fd);
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4 || atoi(argv[2]) < 1) {
        fputs("usage: ioloom-predict-loop DIR STEPS [SEED]\n", stderr);
        return 2;
    }
    unsigned seed = argc == 4 ? (unsigned)atoi(argv[3]) : 0;
    for (int step = 0; step < atoi(argv[2]); step++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/step_%04d.dat", argv[1], step);
        FILE *f = fopen(path, "w");
        if (!f) fail("fopen", path);
        fprintf(f, "step %d\n", step);
        if (argc == 4) {
            random_writes(f, path, &seed);
        } else {
            fields(f, path);
            particles(f, path);
        }
        if (fclose(f)) fail("fclose", path);
        append_log(argv[1], step);
    }
    return 0;
}
