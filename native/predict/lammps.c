/* LAMMPS-like (Dorier's thesis, Table 7.5: "I/O phase executed by rank 0 after a reduce phase"; Sec. 7.3.1: "This
 * process then writes each set of particles (of potentially different sizes) contiguously in a single file"; Sec.
 * 7.3.3: "LAMMPS had the most interesting distribution, with 123 symbols associated with a unique size (yet
 * potentially different for each symbol), and one unique symbol associated with a different size at almost every
 * appearance. This distribution is due to the fact that all n processes send their set of particles to the rank 0
 * process, which writes them into a file in n successive write calls"): after a gather, rank 0
 * appends a dump to one trajectory file, and every fifth dump also writes a restart file.
 *
 * lammps: each dump and restart makes the calls of Debian's LAMMPS (package lammps 20220106.git7586adbb6a, the
 * 7 Jan 2022 release) on the Lennard-Jones melt of `ioloom bench predict` (examples/melt, 2,048 atoms, 2 ranks, a
 * dump every 25 steps and a restart every 125), traced by `ioloom run` (docs/predict.md, the kernel table): per
 * dump nine fprintf from nine call sites (DumpAtom's header: the timestep's line grows with its digits, the
 * others keep one size), one fwrite per rank of its atoms, an fflush; per restart an fopen, 157 fwrite of one size
 * each from their own call sites (WriteRestart's header fields), per rank a flag, a count and its atoms, a closing
 * magic string, an fclose. Atoms per rank: 512, varying by up to 12 either way without period (Sec. 7.3.3: "the
 * number of particles written (and thus the size of each write) varies slightly from one write to another. Thus,
 * after trying to build a local size grammar out of those random sizes, Omnisc'IO falls back to keeping track of
 * the average only"): a standard deviation of 1.0% of the mean, as each rank's block of Debian's LAMMPS melt
 * (0.97%, docs/predict.md).
 *
 * lammps-stress (the lammps kernel of model 1.1, unchanged): through POSIX, per dump one text header and
 * one write per rank of its atoms, every fifth dump a restart file (header, all atoms); 100 to 156 atoms per rank,
 * +-22% around their mean, repeating every 57 dumps. */
#include "kernels.h"

#include <assert.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ATOM_DOUBLES = 5, RESTART_EVERY = 5, MAX_ATOMS = 1024, ATOMS = 512, ATOMS_JITTER = 12, DUMP_EVERY = 25 };

/* The sizes of the 157 fwrite of the header of Debian's LAMMPS restart file, in their order (WriteRestart's header,
 * type arrays, force fields and file layout: each field a flag and a value, a string a flag, a length and its
 * characters), from the magic string (16 bytes) to the number of processes' flag and value (the last two). */
/* clang-format off */
#define RESTART_HEADER(X) \
    X(16) X(4) X(4) X(4) X(4) X(12) X(4) X(4) X(4) X(4) X(4) X(4) X(4) X(4) X(4) X(4) \
    X(3) X(4) X(8) X(4) X(4) X(4) X(4) X(4) X(4) X(12) X(4) X(4) X(4) X(4) X(4) X(4) \
    X(4) X(4) X(4) X(4) X(4) X(4) X(24) X(4) X(4) X(48) X(4) X(4) X(7) X(4) X(4) X(8) \
    X(4) X(4) X(4) X(8) X(4) X(4) X(4) X(4) X(4) X(8) X(4) X(4) X(4) X(4) X(4) X(8) \
    X(4) X(4) X(4) X(4) X(4) X(8) X(4) X(4) X(4) X(4) X(4) X(4) X(4) X(4) X(24) X(4) \
    X(4) X(24) X(4) X(8) X(4) X(8) X(4) X(8) X(4) X(4) X(24) X(4) X(4) X(24) X(4) X(8) \
    X(4) X(4) X(4) X(4) X(4) X(4) X(4) X(4) X(4) X(8) X(4) X(4) X(4) X(8) X(4) X(4) \
    X(4) X(4) X(4) X(4) X(4) X(4) X(4) X(4) X(4) X(4) X(4) X(8) X(4) X(8) X(4) X(8) \
    X(4) X(8) X(4) X(4) X(4) X(4) X(4) X(4) X(8) X(4) X(4) X(4) X(7) X(8) X(4) X(4) \
    X(4) X(4) X(8) X(8) X(8) X(4) X(4) X(4) X(4) X(4) X(4) X(4) X(4)
/* clang-format on */

static int my_atoms(const struct run *r, int step) {
    if (r->stress) return 100 + (step * 31 + r->rank * 17) % 57;
    return ATOMS + jitter(3u + (unsigned)step * 7919u + (unsigned)r->rank * 104729u, ATOMS_JITTER);
}

static void write_header(int fd, int step, int total) {
    char text[256];
    int n = snprintf(text, sizeof text, "ITEM: TIMESTEP\n%d\nITEM: NUMBER OF ATOMS\n%d\nITEM: ATOMS id x y z q\n",
                     step * 100, total);
    write_all(fd, text, (size_t)n);
}

static void write_restart(const struct run *r, int step, const double *atoms, int total) {
    char path[4096], header[64] = {0};
    snprintf(path, sizeof path, "%s/restart_%04d.bin", r->dir, step);
    int fd = create_file(path);
    snprintf(header, sizeof header, "LAMMPS restart step %d atoms %d", step, total);
    write_all(fd, header, sizeof header);
    write_all(fd, atoms, sizeof(double) * ATOM_DOUBLES * (size_t)total);
    close_file(fd);
}

static void dump(const struct run *r, int fd, int step, const int *counts, const double *atoms) {
    int total = 0;
    for (int p = 0; p < r->nranks; p++) total += counts[p];
    write_header(fd, step, total);
    for (int p = 0, at = 0; p < r->nranks; at += counts[p], p++)
        write_all(fd, atoms + (size_t)at * ATOM_DOUBLES, sizeof(double) * ATOM_DOUBLES * (size_t)counts[p]);
    if (step % RESTART_EVERY == RESTART_EVERY - 1) write_restart(r, step, atoms, total);
}

static void gather(const struct run *r, int step, int *counts, double *atoms, const double *mine) {
    int n = my_atoms(r, step) * ATOM_DOUBLES, *displs = calloc((size_t)r->nranks, sizeof(int)), *sizes = NULL;
    if (!displs) fail("out of memory", "gather");
    MPI_Gather(&n, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (r->rank == 0) {
        if (!(sizes = calloc((size_t)r->nranks, sizeof(int)))) fail("out of memory", "gather");
        for (int p = 0; p < r->nranks; p++) {
            sizes[p] = counts[p];
            displs[p] = p ? displs[p - 1] + sizes[p - 1] : 0;
            counts[p] /= ATOM_DOUBLES;
        }
    }
    MPI_Gatherv(mine, n, MPI_DOUBLE, atoms, sizes, displs, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    free(displs);
    free(sizes);
}

/* One field of a restart file: `size` bytes, by a call whose caller's call site names the field, as LAMMPS's
 * write_int and write_string do. */
static __attribute__((noinline)) void put(FILE *f, size_t size) {
    static const char zeros[64];
    assert(size <= sizeof zeros); /* the fields are ints, doubles and short strings */
    if (fwrite(zeros, 1, size, f) != size) fail("cannot write", "a LAMMPS restart file");
}

static void put_atoms(FILE *f, const double *atoms, int count) {
    size_t n = ATOM_DOUBLES * (size_t)count;
    if (fwrite(atoms, sizeof(double), n, f) != n) fail("cannot write", "LAMMPS atoms");
}

/* DumpAtom's header: one fprintf per line, each from its own call site (the literals go through a format with a
 * conversion, which the compiler does not turn into fputs or fwrite). */
static void dump_header(FILE *f, int step, int total) {
    fprintf(f, "ITEM: %s\n", "TIMESTEP");
    fprintf(f, "%d\n", step * DUMP_EVERY);
    fprintf(f, "ITEM: %s\n", "NUMBER OF ATOMS");
    fprintf(f, "%d\n", total);
    fprintf(f, "ITEM: %s\n", "BOX BOUNDS pp pp pp");
    fprintf(f, "%-1.16e %-1.16e\n", 0.0, 13.4);
    fprintf(f, "%-1.16e %-1.16e\n", 0.0, 13.4);
    fprintf(f, "%-1.16e %-1.16e\n", 0.0, 13.4);
    fprintf(f, "ITEM: %s\n", "ATOMS id type xs ys zs");
}

static void dump_stdio(const struct run *r, FILE *f, int step, const int *counts, const double *atoms) {
    int total = 0;
    for (int p = 0; p < r->nranks; p++) total += counts[p];
    dump_header(f, step, total);
    for (int p = 0, at = 0; p < r->nranks; at += counts[p], p++)
        put_atoms(f, atoms + (size_t)at * ATOM_DOUBLES, counts[p]);
    if (fflush(f) != 0) fail("cannot flush", "the LAMMPS dump");
}

static void restart_stdio(const struct run *r, int step, const int *counts, const double *atoms) {
    char path[4096];
    snprintf(path, sizeof path, "%s/restart_%04d.bin", r->dir, step);
    FILE *f = fopen(path, "wb");
    if (!f) fail("cannot create", path);
#define PUT_FIELD(size) put(f, size);
    RESTART_HEADER(PUT_FIELD)
#undef PUT_FIELD
    for (int p = 0, at = 0; p < r->nranks; at += counts[p], p++) {
        put(f, sizeof(int)); /* the flag of a process's atoms */
        put(f, sizeof(int)); /* their count */
        put_atoms(f, atoms + (size_t)at * ATOM_DOUBLES, counts[p]);
    }
    put(f, 16); /* the closing magic string */
    if (fclose(f) != 0) fail("cannot close", path);
}

/* lammps: the calls of Debian's LAMMPS through stdio. */
static void run_stdio(const struct run *r, int *counts, double *atoms, const double *mine) {
    char path[4096];
    FILE *f = NULL;
    snprintf(path, sizeof path, "%s/dump.lammpstrj", r->dir);
    if (r->rank == 0 && !(f = fopen(path, "w"))) fail("cannot create", path);
    for (int step = 0; step < r->steps; step++) {
        compute(r);
        gather(r, step, counts, atoms, mine);
        if (r->rank != 0) continue;
        dump_stdio(r, f, step, counts, atoms);
        if (step % RESTART_EVERY == RESTART_EVERY - 1) restart_stdio(r, step, counts, atoms);
    }
    if (f && fclose(f) != 0) fail("cannot close", path);
}

/* lammps-stress: the kernel of model 1.1 through POSIX. */
static void run_posix(const struct run *r, int *counts, double *atoms, const double *mine) {
    char path[4096];
    int fd = -1;
    snprintf(path, sizeof path, "%s/dump.lammpstrj", r->dir);
    if (r->rank == 0) fd = create_file(path);
    for (int step = 0; step < r->steps; step++) {
        compute(r);
        gather(r, step, counts, atoms, mine);
        if (r->rank == 0) dump(r, fd, step, counts, atoms);
    }
    if (r->rank == 0) close_file(fd);
}

int kernel_lammps(const struct run *r) {
    int *counts = calloc((size_t)r->nranks, sizeof(int));
    double *atoms = calloc((size_t)r->nranks * MAX_ATOMS * ATOM_DOUBLES, sizeof(double));
    double mine[MAX_ATOMS * ATOM_DOUBLES];
    memset(mine, 0, sizeof mine);
    if (!counts || !atoms) fail("out of memory for", "LAMMPS atoms");
    if (r->stress)
        run_posix(r, counts, atoms, mine);
    else
        run_stdio(r, counts, atoms, mine);
    free(counts);
    free(atoms);
    return 0;
}
