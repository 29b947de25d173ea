/* Sequential calls at the current position, COUNT rounds of one kind, for the test that the tracer follows their
 * offsets without asking the kernel or the stream on every call (tests/test_trace_positions.py): only the calls
 * themselves move the position, and one seek (lseek, rewind) turns from writing to reading.
 *
 * usage: trace_sequential vectors|sendfile|copy_file_range|stdio FILE COUNT
 *   vectors          COUNT writev of 2 x 32 bytes into FILE, lseek to 0, COUNT readv of 2 x 32 bytes
 *   sendfile         FILE.src written by COUNT write of 64 bytes, then COUNT copies of 64 bytes from FILE.src
 *   copy_file_range  (opened again, at 0) to FILE, both descriptors at their current positions
 *   stdio            on a stream opened "w+": COUNT rounds of fwrite, fputs, fputc, putc, fprintf, one rewind, then
 *                    COUNT rounds of fread, fgets, fgetc, getc, fgets reading back what one round wrote */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/uio.h>
#include <unistd.h>

enum { BLOCK = 64 };
static char block[BLOCK];

static void fail(const char *what) {
    perror(what);
    exit(1);
}

static void vectors(const char *path, long count) {
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) fail("open");
    struct iovec iov[2] = {{block, BLOCK / 2}, {block + BLOCK / 2, BLOCK / 2}};
    for (long i = 0; i < count; i++)
        if (writev(fd, iov, 2) != BLOCK) fail("writev");
    if (lseek(fd, 0, SEEK_SET) != 0) fail("lseek");
    for (long i = 0; i < count; i++)
        if (readv(fd, iov, 2) != BLOCK) fail("readv");
    close(fd);
}

/* FILE.src with `count` blocks, opened again for reading. */
static int source(const char *path, long count) {
    char src[4096];
    snprintf(src, sizeof src, "%s.src", path);
    int fd = open(src, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) fail("open");
    for (long i = 0; i < count; i++)
        if (write(fd, block, BLOCK) != BLOCK) fail("write");
    close(fd);
    if ((fd = open(src, O_RDONLY)) < 0) fail("open");
    return fd;
}

static void copies(const char *path, long count, int use_sendfile) {
    int in = source(path, count), out = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0) fail("open");
    for (long i = 0; i < count; i++) {
        ssize_t r = use_sendfile ? sendfile(out, in, NULL, BLOCK) : copy_file_range(in, NULL, out, NULL, BLOCK, 0);
        if (r != BLOCK) fail(use_sendfile ? "sendfile" : "copy_file_range");
    }
    close(in);
    close(out);
}

static void stdio(const char *path, long count) {
    static const char line[] = "a line written by fputs, of 32\n";
    char buf[BLOCK + 1];
    FILE *fp = fopen(path, "w+");
    if (!fp) fail("fopen");
    memset(block, 'b', BLOCK - 1);
    block[BLOCK - 1] = '\n';
    for (long i = 0; i < count; i++) {
        fwrite(block, 1, BLOCK, fp);
        fputs(line, fp);
        fputc('c', fp);
        putc('d', fp);
        fprintf(fp, "%07ld\n", i % 10000000);
    }
    rewind(fp);
    for (long i = 0; i < count; i++) {
        int ok = fread(buf, 1, BLOCK, fp) == BLOCK && fgets(buf, sizeof buf, fp) && fgetc(fp) == 'c' &&
                 getc(fp) == 'd' && fgets(buf, sizeof buf, fp);
        if (!ok) fail("reading back");
    }
    fclose(fp);
}

int main(int argc, char **argv) {
    if (argc != 4) return fprintf(stderr, "usage: %s vectors|sendfile|copy_file_range|stdio FILE COUNT\n", argv[0]), 2;
    const char *kind = argv[1], *path = argv[2];
    long count = atol(argv[3]);
    if (!strcmp(kind, "vectors"))
        vectors(path, count);
    else if (!strcmp(kind, "sendfile") || !strcmp(kind, "copy_file_range"))
        copies(path, count, !strcmp(kind, "sendfile"));
    else if (!strcmp(kind, "stdio"))
        stdio(path, count);
    else
        return fprintf(stderr, "unknown kind %s\n", kind), 2;
    return 0;
}
