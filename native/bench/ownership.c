/* Never lose user data: before a run that writes, rank 0 checks that every file it would replace (the run
 * removes its files before writing and after, as IOR does) is empty, absent, or one ioloom-bench wrote,
 * recognised by its first bytes: the data pattern at offset 0 (fill.c), BT-IO's first two values (0.0, 1.0),
 * or the HDF5 signature for HDF5 files (so an HDF5 file of one's own at exactly that path is not told apart). */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define PREFIX 16

const char *const bench_flash_suffixes[BENCH_FLASH_FILES] = {"checkpoint", "plot_cnt", "plot_crn"};

static const unsigned char hdf5_signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

/* 0 when `name` may be replaced: absent, empty, or starting with the `len` bytes of `expected` (as many of
 * them as the file holds). Otherwise rank 0 has said why and BENCH_EXIT_USAGE is returned. */
static int replaceable(const char *name, const unsigned char *expected, size_t len) {
    int fd = open(name, O_RDONLY | O_NONBLOCK); /* O_NONBLOCK: a FIFO there must not hang the check */
    if (fd < 0 && errno == ENOENT) return 0;
    unsigned char head[PREFIX];
    ssize_t n = fd < 0 ? -1 : read(fd, head, len);
    int err = errno;
    if (fd >= 0) close(fd);
    if (n < 0) { /* unreadable, a directory, ...: the run's unlink could still remove it, so do not start */
        fprintf(stderr,
                "ioloom-bench: -o/--output: %s exists and cannot be read to tell whether ioloom-bench "
                "wrote it (%s); move it away or choose another -o\n(nothing was written)\n",
                name, strerror(err));
        return BENCH_EXIT_USAGE;
    }
    if (n == 0 || memcmp(head, expected, (size_t)n) == 0) return 0;
    fprintf(stderr,
            "ioloom-bench: -o/--output: %s exists and was not written by ioloom-bench (its first bytes "
            "differ from what ioloom-bench writes); it replaces only its own files: move the file away "
            "or choose another -o\n(nothing was written)\n",
            name);
    return BENCH_EXIT_USAGE;
}

static int pattern_files_replaceable(const struct bench_options *o, int nranks) {
    unsigned char expected[PREFIX];
    for (int i = 0; i < bench_file_count(o, nranks); i++) {
        char name[sizeof o->path + 64];
        bench_file_name(o, i, name, sizeof name);
        /* who wrote offset 0: rank 0 in a shared file, the file's rank otherwise */
        int writer = bench_shared_file(o) ? 0 : o->pattern == PATTERN_FPP ? i : (int)(i / o->segment_count);
        bench_fill(expected, PREFIX, 0, writer);
        int rc = o->api == API_HDF5 ? replaceable(name, hdf5_signature, sizeof hdf5_signature)
                                    : replaceable(name, expected, PREFIX);
        if (rc) return rc;
    }
    return 0;
}

static int kernel_file_replaceable(const struct bench_options *o, const char *suffix, const unsigned char *expected,
                                   size_t len) {
    char name[sizeof o->path + 32];
    bench_kernel_file(o, suffix, name, sizeof name);
    return replaceable(name, expected, len);
}

int bench_check_replaceable(const struct bench_options *o, int nranks) {
    unsigned char expected[PREFIX];
    double first_values[2] = {0.0, 1.0};
    switch (o->kernel) {
        case KERNEL_NONE:
            return pattern_files_replaceable(o, nranks);
        case KERNEL_RIOT:
            bench_fill(expected, PREFIX, 0, 0);
            return kernel_file_replaceable(o, BENCH_RIOT_SUFFIX, expected, PREFIX);
        case KERNEL_BTIO:
            memcpy(expected, first_values, sizeof first_values);
            return kernel_file_replaceable(o, BENCH_BTIO_SUFFIX, expected, PREFIX);
        case KERNEL_FLASH:
            for (int i = 0; i < BENCH_FLASH_FILES; i++)
                if (kernel_file_replaceable(o, bench_flash_suffixes[i], hdf5_signature, sizeof hdf5_signature))
                    return BENCH_EXIT_USAGE;
            return 0;
    }
    return 0;
}
