/* A POSIX and stdio program for tests/test_replay.py: DIR holds input.dat; it writes three step files (ten
 * writes of growing size, a pwrite past a hole, fsync), reads each back (lseek, read, pread), writes a log through
 * stdio (fprintf, fwrite, fputs, fputc), reads the input (fopen, fread), sleeps 300 ms, then forks a child that
 * writes its own file while the parent reads a step file again. usage: replay_posix DIR */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char buf[8192];

static void step(const char *dir, int i) {
    char path[4096];
    snprintf(path, sizeof path, "%s/out/step_%d.dat", dir, i);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    for (int j = 0; j < 10; j++) write(fd, buf, 4096 + j);
    pwrite(fd, buf, 100, 1 << 20);
    fsync(fd);
    close(fd);
    fd = open(path, O_RDONLY);
    lseek(fd, 4096, SEEK_SET);
    read(fd, buf, 8192);
    pread(fd, buf, 200, (1 << 20) - 50);
    close(fd);
}

static void logs(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/log.txt", dir);
    FILE *f = fopen(path, "w");
    for (int i = 0; i < 5; i++) fprintf(f, "step %d done\n", i);
    fwrite(buf, 1, 3000, f);
    fputs("end\n", f);
    fputc('\n', f);
    fclose(f);
    snprintf(path, sizeof path, "%s/input.dat", dir);
    f = fopen(path, "r");
    while (fread(buf, 1, 1000, f) > 0) {
    }
    fclose(f);
}

static void child(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/child.dat", dir);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    for (int j = 0; j < 4; j++) pwrite(fd, buf, 1000, 1000 * j);
    close(fd);
}

int main(int argc, char **argv) {
    if (argc != 2) return fputs("usage: replay_posix DIR\n", stderr), 2;
    memset(buf, 'a', sizeof buf);
    for (int i = 0; i < 3; i++) step(argv[1], i);
    logs(argv[1]);
    usleep(300000);
    pid_t pid = fork();
    if (pid == 0) return child(argv[1]), 0;
    step(argv[1], 0);
    waitpid(pid, NULL, 0);
    return 0;
}
