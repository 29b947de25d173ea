/* Writes argv[2] blocks of 64 KiB to the file argv[1] (under logfs: its log's chunks fill and write-behind runs)
 * and checks that each write succeeds whole and leaves errno as the program set it before the call (EDOM, which no
 * write sets): a successful call must not change errno (POSIX lets it; logfs promises the traced program sees
 * nothing of its own best-effort calls). Exits 1 with a message at the first write that breaks this. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) return fprintf(stderr, "usage: %s FILE BLOCKS\n", argv[0]), 2;
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return perror(argv[1]), 1;
    static char block[65536];
    for (int i = 0; i < atoi(argv[2]); i++) {
        memset(block, i % 251, sizeof block);
        errno = EDOM;
        ssize_t done = write(fd, block, sizeof block);
        if (done != (ssize_t)sizeof block) return fprintf(stderr, "write %d: %zd (%s)\n", i, done, strerror(errno)), 1;
        if (errno != EDOM) return fprintf(stderr, "write %d succeeded with errno %s\n", i, strerror(errno)), 1;
    }
    return close(fd) ? perror("close"), 1 : 0;
}
