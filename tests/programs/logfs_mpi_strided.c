/* N-1 strided MPI-IO, unmodified: `write PATH BLOCK COUNT` has every rank write COUNT blocks of BLOCK bytes at
 * (i * nranks + rank) * BLOCK: a third through a strided file view with a collective write (two-phase I/O), a
 * third through the view with one independent write (ROMIO: data sieving, read-modify-write under fcntl locks),
 * the rest with independent contiguous writes; `read PATH` reads the whole file back split evenly over however many
 * ranks run it and checks every byte. Byte at offset x is (x * 7 + x / 4099) & 0xff, so any misplaced byte shows.
 * Prints "OK <bytes>". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char expected(long long x) { return (unsigned char)((x * 7 + x / 4099) & 0xff); }

static void fill(unsigned char *buf, long long offset, long long n) {
    for (long long i = 0; i < n; i++) buf[i] = expected(offset + i);
}

static int check(int rc, const char *what) {
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len;
        MPI_Error_string(rc, msg, &len);
        fprintf(stderr, "%s: %s\n", what, msg);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return rc;
}

static void write_file(const char *path, long long block, int count, int rank, int nranks) {
    MPI_File fh;
    check(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh), "open");
    int third = count / 3;
    MPI_Datatype filetype;
    MPI_Type_vector(third, (int)block, (int)(block * nranks), MPI_BYTE, &filetype);
    MPI_Type_commit(&filetype);
    unsigned char *buf = malloc((size_t)(block * count));
    /* Through the view, blocks packed contiguously in memory: the first third collectively, the second
     * independently (the view moved on by a third's worth of strides). */
    for (int part = 0; part < 2; part++) {
        long long first = (long long)part * third;
        for (int i = 0; i < third; i++) fill(buf + i * block, ((first + i) * nranks + rank) * block, block);
        check(MPI_File_set_view(fh, (first * nranks + rank) * block, MPI_BYTE, filetype, "native", MPI_INFO_NULL),
              "set_view");
        if (part == 0)
            check(MPI_File_write_all(fh, buf, (int)(block * third), MPI_BYTE, MPI_STATUS_IGNORE), "write_all");
        else
            check(MPI_File_write(fh, buf, (int)(block * third), MPI_BYTE, MPI_STATUS_IGNORE), "write");
    }
    check(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL), "set_view");
    /* Independent contiguous: the rest, one block at a time. */
    for (int i = 2 * third; i < count; i++) {
        long long off = ((long long)i * nranks + rank) * block;
        fill(buf, off, block);
        check(MPI_File_write_at(fh, off, buf, (int)block, MPI_BYTE, MPI_STATUS_IGNORE), "write_at");
    }
    check(MPI_File_close(&fh), "close");
    MPI_Type_free(&filetype);
    free(buf);
}

static long long read_file(const char *path, int rank, int nranks) {
    MPI_File fh;
    MPI_Offset size;
    check(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh), "open");
    check(MPI_File_get_size(fh, &size), "get_size");
    long long share = (size + nranks - 1) / nranks, from = rank * share;
    long long n = from >= size ? 0 : (from + share > size ? size - from : share);
    unsigned char *buf = malloc((size_t)n + 1);
    check(MPI_File_read_at_all(fh, from, buf, (int)n, MPI_BYTE, MPI_STATUS_IGNORE), "read_at_all");
    long long bad = 0;
    for (long long i = 0; i < n; i++) bad += buf[i] != expected(from + i);
    check(MPI_File_close(&fh), "close");
    free(buf);
    long long total_bad;
    MPI_Reduce(&bad, &total_bad, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    return rank == 0 && total_bad ? -total_bad : size;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc == 5 && !strcmp(argv[1], "write")) {
        write_file(argv[2], atoll(argv[3]), atoi(argv[4]), rank, nranks);
        if (rank == 0) printf("OK written\n");
    } else if (argc == 3 && !strcmp(argv[1], "read")) {
        long long result = read_file(argv[2], rank, nranks);
        if (rank == 0) printf(result < 0 ? "BAD %lld bytes differ\n" : "OK %lld\n", result < 0 ? -result : result);
    } else if (rank == 0) {
        fprintf(stderr, "usage: %s write PATH BLOCK COUNT | read PATH\n", argv[0]);
    }
    MPI_Finalize();
    return 0;
}
