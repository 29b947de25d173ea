/* The synthetic programs of `ioloom bench predict`: each runs `steps` iterations of computation (a sleep of
 * compute_ms) followed by an I/O phase shaped like one of the applications of Dorier's thesis, Table 7.5. */
#ifndef IOLOOM_PREDICT_KERNELS_H
#define IOLOOM_PREDICT_KERNELS_H

#include <stddef.h>

struct run {
    const char *kernel; /* cm1-posix, cm1-gzip, cm1-mpiio, gtc, nek5000, lammps, each of the last three -stress */
    const char *dir;    /* where the files go */
    int steps;
    int compute_ms;
    int rank, nranks;
    int stress; /* the -stress variant: harsher than the thesis describes the application (each kernel says how) */
};

int kernel_cm1(const struct run *r);
int kernel_gtc(const struct run *r);
/* --gtc-limits: prints the most ranks and steps gtc can run (its measured run's), or refuses (2) built without
 * Fortran */
int gtc_limits(void);
int kernel_nek(const struct run *r);
int kernel_lammps(const struct run *r);

/* util.c */
void compute(const struct run *r);
int create_file(const char *path);
void write_all(int fd, const void *buf, size_t len);
void close_file(int fd);
void fail(const char *what, const char *path);
unsigned next_random(unsigned *state);
int jitter(unsigned seed, int half_width);

#endif
