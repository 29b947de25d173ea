/* One rank of an N-1 strided POSIX write, without MPI: `PATH RANK NRANKS COUNT SIZE` opens PATH (O_CREAT) and
 * makes COUNT pwrite calls of SIZE bytes, the i-th at (i * NRANKS + RANK) * SIZE, then closes it. The ranks are
 * separate processes started at once (tests/test_logfs_format.py); byte x of the file is (x * 7 + x / 4099) & 0xff,
 * so a misplaced byte shows against a plain file written the same way. Exits 1 with a message on any error. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static unsigned char expected(long long x) { return (unsigned char)((x * 7 + x / 4099) & 0xff); }

int main(int argc, char **argv) {
    if (argc != 6) return fprintf(stderr, "usage: %s PATH RANK NRANKS COUNT SIZE\n", argv[0]), 2;
    long long rank = atoll(argv[2]), nranks = atoll(argv[3]), count = atoll(argv[4]), size = atoll(argv[5]);
    unsigned char *buf = malloc((size_t)size);
    int fd = open(argv[1], O_WRONLY | O_CREAT, 0644);
    if (!buf || fd < 0) return perror(argv[1]), 1;
    for (long long i = 0; i < count; i++) {
        long long off = (i * nranks + rank) * size;
        for (long long j = 0; j < size; j++) buf[j] = expected(off + j);
        if (pwrite(fd, buf, (size_t)size, off) != size) return perror("pwrite"), 1;
    }
    if (close(fd)) return perror("close"), 1;
    free(buf);
    return 0;
}
