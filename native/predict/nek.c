/* Nek5000-like (Dorier's thesis, Table 7.5: "I/O phase executed by rank 0 after a reduce phase"; Sec. 7.3.3:
 * "although it writes periodically the exact same amount of data, [...] this is due to code branches that process
 * data in a different way depending on its content and then write it in an identical manner, leading to the
 * creation of several symbols that are actually interchangeable in the grammar"): after a reduce, rank 0 writes one
 * field file per output step through POSIX: a 132-byte header, then each field block by block, each block by one
 * of two code paths (the same size) chosen by the data.
 *
 * nek5000: the same bytes every step; the fields evolve smoothly from step to step (each one's mean a slow wave,
 * period PERIOD steps, a quarter period apart), and each field's sign picks the path of all its blocks, so a path
 * changes where a field's mean changes sign (the thesis does not say how often the real branches change).
 * nek5000-stress: fields of new random data at every step, the path chosen block by block (about half the blocks
 * change path from one step to the next), and a 16-byte flag record after a field whose mean passes a threshold,
 * so the bytes and the operations themselves depend on the data. */
#include "kernels.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { FIELDS = 4, BLOCKS = 8, BLOCK_DOUBLES = 128, HEADER_BYTES = 132, FLAG_BYTES = 16, PERIOD = 200 };

static void random_fields(const struct run *r, int step, double *fields) {
    unsigned seed = 77u + (unsigned)(step * 131 + r->rank);
    for (int i = 0; i < FIELDS * BLOCKS * BLOCK_DOUBLES; i++) fields[i] = (double)next_random(&seed) / 32768.0 - 0.45;
}

/* Each field a wave in time around which its values scatter a little. */
static void smooth_fields(const struct run *r, int step, double *fields) {
    unsigned seed = 77u + (unsigned)(step * 131 + r->rank);
    for (int f = 0; f < FIELDS; f++) {
        double mean = sin(2 * M_PI * (step + f * PERIOD / 4.0) / PERIOD);
        for (int i = 0; i < BLOCKS * BLOCK_DOUBLES; i++)
            fields[f * BLOCKS * BLOCK_DOUBLES + i] = mean + (double)next_random(&seed) / 327680.0 - 0.05;
    }
}

static void write_positive(int fd, const double *block) { write_all(fd, block, BLOCK_DOUBLES * sizeof *block); }

static void write_negative(int fd, const double *block) {
    double copy[BLOCK_DOUBLES];
    for (int i = 0; i < BLOCK_DOUBLES; i++) copy[i] = -block[i];
    write_all(fd, copy, sizeof copy);
}

static double field_mean(const double *field) {
    double sum = 0;
    for (int i = 0; i < BLOCKS * BLOCK_DOUBLES; i++) sum += field[i];
    return sum / (BLOCKS * BLOCK_DOUBLES);
}

static void write_field(int fd, const double *field) {
    double mean = field_mean(field);
    for (int b = 0; b < BLOCKS; b++) {
        const double *block = field + b * BLOCK_DOUBLES;
        if (mean >= 0)
            write_positive(fd, block);
        else
            write_negative(fd, block);
    }
}

static void write_field_stress(int fd, const double *field) {
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
    for (int f = 0; f < FIELDS; f++)
        (r->stress ? write_field_stress : write_field)(fd, fields + f * BLOCKS * BLOCK_DOUBLES);
    close_file(fd);
}

int kernel_nek(const struct run *r) {
    int n = FIELDS * BLOCKS * BLOCK_DOUBLES;
    double *local = malloc(sizeof(double) * n), *sum = malloc(sizeof(double) * n);
    if (!local || !sum) fail("out of memory for", "Nek5000 fields");
    for (int step = 0; step < r->steps; step++) {
        compute(r);
        (r->stress ? random_fields : smooth_fields)(r, step, local);
        MPI_Reduce(local, sum, n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        if (r->rank == 0) write_step(r, step, sum);
    }
    free(local);
    free(sum);
    return 0;
}
