/* Record locks, re-reads and open-to-close phases over many calls of one process: what a stream summarised
 * in parts must carry from one part to the next (tests/test_analysis_parts.py). Six times: open the file, lock
 * a range over 100 sequential writes and unlock it, lock another range twice (released by the close), read
 * the same 5 KiB ten times over, write 50 strided blocks, close.
 * usage: lock_phases DIR */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOCK 512

static void lock(int fd, short type, off_t start, off_t length) {
    struct flock range = {.l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = length};
    if (fcntl(fd, F_SETLKW, &range) != 0) {
        perror("fcntl");
        exit(1);
    }
}

static void io(ssize_t done) {
    if (done != BLOCK) {
        perror("pread/pwrite");
        exit(1);
    }
}

int main(int argc, char **argv) {
    char path[4096], buf[BLOCK];
    if (argc != 2) return 2;
    memset(buf, 'x', sizeof buf);
    snprintf(path, sizeof path, "%s/phases.dat", argv[1]);
    for (int phase = 0; phase < 6; phase++) {
        int fd = open(path, O_RDWR | O_CREAT, 0644);
        if (fd < 0) return 1;
        lock(fd, F_WRLCK, 0, 1 << 20);
        for (int i = 0; i < 100; i++) io(pwrite(fd, buf, BLOCK, (off_t)(phase * 100 + i) * BLOCK));
        lock(fd, F_UNLCK, 0, 1 << 20);
        lock(fd, F_WRLCK, 1 << 20, BLOCK);
        lock(fd, F_WRLCK, 1 << 20, BLOCK);
        for (int i = 0; i < 50; i++) io(pread(fd, buf, BLOCK, (off_t)(i % 10) * BLOCK));
        for (int i = 0; i < 50; i++) io(pwrite(fd, buf, BLOCK, (off_t)(2 << 20) + (off_t)i * 4 * BLOCK));
        close(fd);
    }
    return 0;
}
