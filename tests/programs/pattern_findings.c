/* One MPI program, one I/O behaviour per mode, each the textbook cause of one ioloom finding (or none):
 *
 *   pattern_findings MODE DIR
 *
 *   strided-view   independent MPI_File_write through a strided file view (ROMIO data-sieves it: lock,
 *                  read, write back, unlock; Open MPI's OMPIO does not)
 *   small-strided  many small independent MPI_File_write_at calls interleaved across ranks on one file
 *   collective     the strided view written with MPI_File_write_all (collective buffering)
 *   imbalance      rank 0 writes 64 MiB to its own file, syncing every MiB to disk; the others write 1 MiB
 *                  (not synced) and finish before rank 0 starts
 *   metadata       every rank opens, fstats and closes its file 600 times, then writes once
 *   reread         every rank reads the same 256 KiB of a shared input 32 times
 *   misaligned     1 MiB writes that start 4 KiB after a stripe boundary, file per rank
 *   lockwait       rank 0 holds a record lock for 0.4 s; the others wait for it before their first write
 *   clean          stripe-aligned 1 MiB writes, one file per rank: nothing to report
 *   stdio          every rank fprintf()s 32768 lines of text (1.72 MiB) to its own file
 *   random         every rank writes 8 MiB to its own file, then reads 1200 4 KiB pieces at random offsets
 *   rewrite        every rank writes the same 1 MiB of its own file 4 times
 *   bcast-input    rank 0 writes a 2 MiB input; every rank reads all of it (once)
 *   uneven         POSIX writes to one shared file, rank r writes r + 1 MiB of it (segmented)
 *   independent    1024 independent 64 KiB MPI_File_write_at calls, segmented over a shared file
 *   blocking       6 steps of "compute" (sleep; rank 0 twice as long) then a blocking MPI_File_write_at_all
 *                  of 1 MiB per rank: ranks 1-3 wait in the collective for rank 0
 *   sync           192 times: a 64 KiB MPI_File_write_at per rank on a shared file, then MPI_File_sync
 *                  (enough syncs that their time passes the finding's 0.1 s floor on a disk that syncs in
 *                  0.5 ms: 32 took 0.06 s on this VM when it was quiet; fewer than 1,000 independent writes,
 *                  so that only the sync time is the finding)
 *   script         rank 0 writes a 3000-line input script with fprintf; every rank reads it with fgets
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KiB 1024
#define MiB (1024 * 1024)

static int rank, nranks;
static char path[4096];

static void die(const char *what) {
    perror(what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static char *buffer(size_t n) {
    char *b = malloc(n);
    if (!b) die("malloc");
    memset(b, 'a' + rank % 26, n);
    return b;
}

static void name(const char *dir, const char *file, int per_rank) {
    if (per_rank)
        snprintf(path, sizeof path, "%s/%s.%d", dir, file, rank);
    else
        snprintf(path, sizeof path, "%s/%s", dir, file);
}

static int posix_open(int flags) {
    int fd = open(path, flags, 0644);
    if (fd < 0) die(path);
    return fd;
}

/* `sync`: fsync after every block, so each block costs one disk round trip. */
static void posix_blocks(int blocks, size_t block, off_t start, int sync) {
    int fd = posix_open(O_WRONLY | O_CREAT | O_TRUNC);
    char *b = buffer(block);
    for (int i = 0; i < blocks; i++) {
        if (pwrite(fd, b, block, start + (off_t)i * block) != (ssize_t)block) die("pwrite");
        if (sync && fsync(fd) != 0) die("fsync");
    }
    free(b);
    close(fd);
}

/* Each rank owns every nranks-th block of `block` bytes: a vector file view. */
static void strided_view(int collective) {
    const int block = 4 * KiB, count = 256;
    MPI_File fh;
    MPI_Datatype filetype;
    MPI_Type_vector(count, block, block * nranks, MPI_BYTE, &filetype);
    MPI_Type_commit(&filetype);
    if (MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh) != MPI_SUCCESS)
        die("MPI_File_open");
    MPI_File_set_view(fh, (MPI_Offset)rank * block, MPI_BYTE, filetype, "native", MPI_INFO_NULL);
    char *b = buffer((size_t)block * count);
    for (int rep = 0; rep < 4; rep++) { /* four successive regions: the view's pointer moves on */
        if (collective)
            MPI_File_write_all(fh, b, block * count, MPI_BYTE, MPI_STATUS_IGNORE);
        else
            MPI_File_write(fh, b, block * count, MPI_BYTE, MPI_STATUS_IGNORE);
    }
    free(b);
    MPI_File_close(&fh);
    MPI_Type_free(&filetype);
}

static void small_strided(void) {
    const int block = 2 * KiB, count = 200;
    MPI_File fh;
    if (MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh) != MPI_SUCCESS)
        die("MPI_File_open");
    char *b = buffer(block);
    for (int i = 0; i < count; i++)
        MPI_File_write_at(fh, ((MPI_Offset)i * nranks + rank) * block, b, block, MPI_BYTE, MPI_STATUS_IGNORE);
    free(b);
    MPI_File_close(&fh);
}

static void metadata(void) {
    struct stat st;
    posix_blocks(1, 4 * KiB, 0, 0);
    for (int i = 0; i < 600; i++) {
        int fd = posix_open(O_RDONLY);
        if (fstat(fd, &st) != 0) die("fstat");
        close(fd);
    }
    posix_blocks(1, 4 * KiB, 0, 0);
}

static void reread(const char *dir) {
    const size_t header = 256 * KiB;
    name(dir, "input", 0);
    if (rank == 0) posix_blocks(4, header, 0, 0);
    MPI_Barrier(MPI_COMM_WORLD);
    int fd = posix_open(O_RDONLY);
    char *b = buffer(header);
    for (int i = 0; i < 32; i++)
        if (pread(fd, b, header, 0) != (ssize_t)header) die("pread");
    free(b);
    close(fd);
}

static void lockwait(const char *dir) {
    name(dir, "locked", 0);
    if (rank == 0) close(posix_open(O_WRONLY | O_CREAT | O_TRUNC));
    MPI_Barrier(MPI_COMM_WORLD);
    int fd = posix_open(O_WRONLY);
    struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (rank == 0) {
        if (fcntl(fd, F_SETLKW, &lock) != 0) die("fcntl lock");
        MPI_Barrier(MPI_COMM_WORLD);
        usleep(400 * 1000);
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        usleep(20 * 1000); /* let rank 0's lock be the one in place */
        if (fcntl(fd, F_SETLKW, &lock) != 0) die("fcntl wait");
    }
    char *b = buffer(64 * KiB);
    if (pwrite(fd, b, 64 * KiB, (off_t)rank * 64 * KiB) != 64 * KiB) die("pwrite");
    lock.l_type = F_UNLCK;
    if (fcntl(fd, F_SETLK, &lock) != 0) die("fcntl unlock");
    free(b);
    close(fd);
}

/* The straggler's lead must not depend on the machine's load. Only rank 0 waits for the disk: 64 synced
 * blocks, 64 device round trips at least, which a loaded disk makes longer still. The others never call fsync,
 * because one fsync on a journalled file system may wait for a commit carrying any process's dirty data
 * (measured: 0.14 s for a 1 MiB fsync while another process synced 256 MiB), which would lift the median to
 * rank 0's level. They finish before rank 0 starts, so nothing of rank 0's is in flight while they write. */
static void imbalance(const char *dir) {
    name(dir, "part", 1);
    if (rank != 0) posix_blocks(1, MiB, 0, 0);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) posix_blocks(64, MiB, 0, 1);
}

static void stdio_text(const char *dir) {
    name(dir, "log", 1);
    FILE *f = fopen(path, "w");
    if (!f) die(path);
    for (int i = 0; i < 32768; i++) /* 55-byte lines: 1.72 MiB */
        fprintf(f, "step %09d rank %04d energy %+.12e ok\n", i, rank, 1.0 / (i + 1));
    if (fclose(f) != 0) die("fclose");
}

static void random_reads(const char *dir) {
    name(dir, "random", 1);
    posix_blocks(8, MiB, 0, 0);
    int fd = posix_open(O_RDONLY);
    char *b = buffer(4 * KiB);
    srand48(rank + 1);
    for (int i = 0; i < 1200; i++)
        if (pread(fd, b, 4 * KiB, (off_t)(lrand48() % (8 * MiB / (4 * KiB))) * 4 * KiB) != 4 * KiB) die("pread");
    free(b);
    close(fd);
}

static void rewrite(const char *dir) {
    name(dir, "checkpoint", 1);
    int fd = posix_open(O_WRONLY | O_CREAT | O_TRUNC);
    char *b = buffer(MiB);
    for (int i = 0; i < 4; i++)
        if (pwrite(fd, b, MiB, 0) != MiB) die("pwrite");
    free(b);
    close(fd);
}

static void bcast_input(const char *dir) {
    name(dir, "input", 0);
    if (rank == 0) posix_blocks(8, 256 * KiB, 0, 0);
    MPI_Barrier(MPI_COMM_WORLD);
    int fd = posix_open(O_RDONLY);
    char *b = buffer(256 * KiB);
    for (int i = 0; i < 8; i++)
        if (pread(fd, b, 256 * KiB, (off_t)i * 256 * KiB) != 256 * KiB) die("pread");
    free(b);
    close(fd);
}

static void uneven(const char *dir) {
    name(dir, "shared", 0);
    if (rank == 0) close(posix_open(O_WRONLY | O_CREAT | O_TRUNC));
    MPI_Barrier(MPI_COMM_WORLD);
    int fd = posix_open(O_WRONLY);
    char *b = buffer(MiB);
    off_t start = (off_t)rank * (rank + 1) / 2 * MiB; /* ranks before r wrote 1 + 2 + ... + r MiB */
    for (int i = 0; i <= rank; i++)
        if (pwrite(fd, b, MiB, start + (off_t)i * MiB) != MiB) die("pwrite");
    free(b);
    close(fd);
}

static MPI_File mpi_open(void) {
    MPI_File fh;
    if (MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh) != MPI_SUCCESS)
        die("MPI_File_open");
    return fh;
}

static void independent(void) {
    const int block = 64 * KiB, count = 1024 / nranks;
    MPI_File fh = mpi_open();
    char *b = buffer(block);
    for (int i = 0; i < count; i++)
        MPI_File_write_at(fh, ((MPI_Offset)rank * count + i) * block, b, block, MPI_BYTE, MPI_STATUS_IGNORE);
    free(b);
    MPI_File_close(&fh);
}

static void blocking(void) {
    MPI_File fh = mpi_open();
    char *b = buffer(MiB);
    for (int step = 0; step < 6; step++) {
        usleep((rank == 0 ? 160 : 80) * 1000);
        MPI_File_write_at_all(fh, ((MPI_Offset)step * nranks + rank) * MiB, b, MiB, MPI_BYTE, MPI_STATUS_IGNORE);
    }
    free(b);
    MPI_File_close(&fh);
}

static void sync_often(void) {
    MPI_File fh = mpi_open();
    char *b = buffer(64 * KiB);
    for (int step = 0; step < 192; step++) {
        MPI_File_write_at(fh, ((MPI_Offset)step * nranks + rank) * 64 * KiB, b, 64 * KiB, MPI_BYTE, MPI_STATUS_IGNORE);
        MPI_File_sync(fh);
    }
    free(b);
    MPI_File_close(&fh);
}

static void input_script(const char *dir) {
    char line[256];
    name(dir, "in.script", 0);
    if (rank == 0) {
        FILE *f = fopen(path, "w");
        if (!f) die(path);
        for (int i = 0; i < 3000; i++) fprintf(f, "variable x%d equal %d*2.5 # a line of an input script\n", i, i);
        if (fclose(f) != 0) die("fclose");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    FILE *f = fopen(path, "r");
    if (!f) die(path);
    while (fgets(line, sizeof line, f)) continue;
    fclose(f);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc != 3) {
        if (rank == 0) fprintf(stderr, "usage: %s MODE DIR\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *mode = argv[1], *dir = argv[2];
    if (!strcmp(mode, "strided-view") || !strcmp(mode, "collective")) {
        name(dir, "shared", 0);
        strided_view(!strcmp(mode, "collective"));
    } else if (!strcmp(mode, "small-strided")) {
        name(dir, "shared", 0);
        small_strided();
    } else if (!strcmp(mode, "imbalance")) {
        imbalance(dir);
    } else if (!strcmp(mode, "metadata")) {
        name(dir, "meta", 1);
        metadata();
    } else if (!strcmp(mode, "reread")) {
        reread(dir);
    } else if (!strcmp(mode, "misaligned")) {
        name(dir, "misaligned", 1);
        posix_blocks(8, MiB, 4 * KiB, 0);
    } else if (!strcmp(mode, "lockwait")) {
        lockwait(dir);
    } else if (!strcmp(mode, "stdio")) {
        stdio_text(dir);
    } else if (!strcmp(mode, "random")) {
        random_reads(dir);
    } else if (!strcmp(mode, "rewrite")) {
        rewrite(dir);
    } else if (!strcmp(mode, "bcast-input")) {
        bcast_input(dir);
    } else if (!strcmp(mode, "uneven")) {
        uneven(dir);
    } else if (!strcmp(mode, "independent")) {
        name(dir, "shared", 0);
        independent();
    } else if (!strcmp(mode, "blocking")) {
        name(dir, "shared", 0);
        blocking();
    } else if (!strcmp(mode, "sync")) {
        name(dir, "shared", 0);
        sync_often();
    } else if (!strcmp(mode, "script")) {
        input_script(dir);
    } else if (!strcmp(mode, "clean")) {
        name(dir, "clean", 1);
        posix_blocks(4, MiB, 0, 0);
    } else {
        if (rank == 0) fprintf(stderr, "unknown mode %s\n", mode);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Finalize();
    return 0;
}
