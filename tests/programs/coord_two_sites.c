/* Writes a file from two call sites, alternately: header() and body() each call write() themselves. Under
 * `ioloom run --coord` with IOLOOM_STACKS=1 the tracer must give the writes two symbols (the program's two sites),
 * not one (the coordination client's wrapper that calls the tracer's). usage: coord_two_sites FILE ROUNDS */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char block[4096];

__attribute__((noinline)) static void header(int fd) {
    if (write(fd, block, 64) != 64) exit(2);
}

__attribute__((noinline)) static void body(int fd) {
    if (write(fd, block, sizeof block) != (ssize_t)sizeof block) exit(2);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s FILE ROUNDS\n", argv[0]);
        return 1;
    }
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return 2;
    for (int i = 0; i < atoi(argv[2]); i++) {
        header(fd);
        body(fd);
    }
    return close(fd) != 0;
}
