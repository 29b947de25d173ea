/* A walk that changes directory inside glibc, for tests/test_logfs_cwd.py: run in a directory (a mount), it first
 * opens a file there by a relative name (the layer then holds that working directory), then walks DIR with
 * nftw(FTW_CHDIR) or fts (which moves into each directory) and prints each regular file's name and bytes, read by
 * the name relative to where the walk moved; then creates `after` by a relative name (back where it started).
 *
 * usage: logfs_walk DIR nftw|fts */
#define _GNU_SOURCE
#include <fcntl.h>
#include <fts.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void show(const char *name, const char *relative) {
    char buf[64] = {0};
    int fd = open(relative, O_RDONLY);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
    printf("%s %s\n", name, n < 0 ? "(unreadable)" : buf);
    if (fd >= 0) close(fd);
}

static int entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    if (flag == FTW_F) show(path + ftw->base, path + ftw->base);
    return 0;
}

static void walk_fts(char *dir) {
    char *roots[] = {dir, NULL};
    FTS *fts = fts_open(roots, FTS_PHYSICAL, NULL);
    for (FTSENT *e; fts && (e = fts_read(fts));)
        if (e->fts_info == FTS_F) show(e->fts_name, e->fts_accpath);
    if (fts) fts_close(fts);
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    show("before", "before");
    if (!strcmp(argv[2], "nftw")) {
        if (nftw(argv[1], entry, 4, FTW_CHDIR | FTW_PHYS)) return 1;
    } else {
        walk_fts(argv[1]);
    }
    int fd = open("after", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, "after", 5) != 5 || close(fd)) return 1;
    show("after", "after");
    return 0;
}
