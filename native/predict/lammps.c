/* LAMMPS-like (Dorier's thesis, Table 7.5: "I/O phase executed by rank 0 after a reduce phase"; Sec. 7.3.1: "This
 * process then writes each set of particles (of potentially different sizes) contiguously in a single file"): after
 * a gather, rank 0 appends a dump to one trajectory file through POSIX: a text header, then the atoms of each
 * process in one write per process, whose size changes at almost every dump as atoms move between processes.
 * Every fifth dump also writes a restart file (header, all atoms).
 *
 * lammps: 512 atoms per process, varying by up to 12 either way without period (Sec. 7.3.3: "the number of
 * particles written (and thus the size of each write) varies slightly from one write to another. Thus, after trying
 * to build a local size grammar out of those random sizes, Omnisc'IO falls back to keeping track of the average
 * only"): a standard deviation of 1.0% of the mean, as each rank's block of Debian's LAMMPS melt (2 ranks, 1,024
 * atoms each: 0.97%, docs/predict.md). lammps-stress: 100 to 156 atoms, +-22% around their mean, repeating every
 * 57 dumps. */
#include "kernels.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ATOM_DOUBLES = 5, RESTART_EVERY = 5, MAX_ATOMS = 1024, ATOMS = 512, ATOMS_JITTER = 12 };

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
    MPI_Gather(&n, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (r->rank == 0) {
        sizes = calloc((size_t)r->nranks, sizeof(int));
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

int kernel_lammps(const struct run *r) {
    int *counts = calloc((size_t)r->nranks, sizeof(int)), fd = -1;
    double *atoms = calloc((size_t)r->nranks * MAX_ATOMS * ATOM_DOUBLES, sizeof(double));
    double mine[MAX_ATOMS * ATOM_DOUBLES];
    char path[4096];
    memset(mine, 0, sizeof mine);
    if (!counts || !atoms) fail("out of memory for", "LAMMPS atoms");
    snprintf(path, sizeof path, "%s/dump.lammpstrj", r->dir);
    if (r->rank == 0) fd = create_file(path);
    for (int step = 0; step < r->steps; step++) {
        compute(r);
        gather(r, step, counts, atoms, mine);
        if (r->rank == 0) dump(r, fd, step, counts, atoms);
    }
    if (r->rank == 0) close_file(fd);
    free(counts);
    free(atoms);
    return 0;
}
