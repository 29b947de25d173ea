/* Nek5000-like (Dorier's thesis, Table 7.5): after a reduce, rank 0 writes one field file per output step
 * through POSIX: a 132-byte header, then each field element block by element block. Which of two code paths
 * writes a block depends on its data (the thesis's data-dependent branches); a field whose mean passes a
 * threshold gets a 16-byte flag record as well, so the operations themselves depend on the data. */
#include "kernels.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { FIELDS = 4, BLOCKS = 8, BLOCK_DOUBLES = 128, HEADER_BYTES = 132, FLAG_BYTES = 16 };

static void local_fields(const struct run *r, int step, double *fields) {
    unsigned seed = 77u + (unsigned)(step * 131 + r->rank);
    for (int i = 0; i < FIELDS * BLOCKS * BLOCK_DOUBLES; i++) fields[i] = (double)next_random(&seed) / 32768.0 - 0.45;
}

static void write_positive(int fd, const double *block) { write_all(fd, block, BLOCK_DOUBLES * sizeof *block); }

static void write_negative(int fd, const double *block) {
    double copy[BLOCK_DOUBLES];
    for (int i = 0; i < BLOCK_DOUBLES; i++) copy[i] = -block[i];
    write_all(fd, copy, sizeof copy);
}

static void write_field(int fd, const double *field) {
    double sum = 0;
    for (int b = 0; b < BLOCKS; b++) {
        const double *block = field + b * BLOCK_DOUBLES;
        sum += block[0];
        if (block[0] >= 0)
            write_positive(fd, block);
        else
            write_negative(fd, block);
    }
    if (sum / BLOCKS > 0.05) {
        char flag[FLAG_BYTES] = "flag: positive";
        write_all(fd, flag, sizeof flag);
    }
}

static void write_step(const struct run *r, int step, const double *fields) {
    char path[4096], header[HEADER_BYTES] = {0};
    snprintf(path, sizeof path, "%s/nek_%04d.f", r->dir, step);
    int fd = create_file(path);
    snprintf(header, sizeof header, "#std 8 %d %d %d step %d", BLOCKS, BLOCK_DOUBLES, FIELDS, step);
    write_all(fd, header, sizeof header);
    for (int f = 0; f < FIELDS; f++) write_field(fd, fields + f * BLOCKS * BLOCK_DOUBLES);
    close_file(fd);
}

int kernel_nek(const struct run *r) {
    int n = FIELDS * BLOCKS * BLOCK_DOUBLES;
    double *local = malloc(sizeof(double) * n), *sum = malloc(sizeof(double) * n);
    if (!local || !sum) fail("out of memory for", "Nek5000 fields");
    for (int step = 0; step < r->steps; step++) {
        compute(r);
        local_fields(r, step, local);
        MPI_Reduce(local, sum, n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        if (r->rank == 0) write_step(r, step, sum);
    }
    free(local);
    free(sum);
    return 0;
}
