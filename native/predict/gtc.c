/* GTC-like (Dorier's thesis, Table 7.5: "One file per node per iteration, number of particles varies"; Sec. 7.3.1:
 * "GTC writes one file per node per iteration, but the amount of data varies between files as particles move from
 * one process to another").
 *
 * gtc: GTC version 1's restart file (docs/predict.md, "GTC's own I/O": the release, its files and lines, the input,
 * the calls). At each step every rank replaces DATA_RESTART.<rank in 5 digits> with the records of GTC's
 * restart_write (restart.f90:65-74), written by gtc_restart.f90 so that libgfortran makes the POSIX calls, for as
 * many ions as GTC had on that rank at that snapshot of a measured run (gtc_counts.h): so at most that run's ranks
 * and snapshots; fewer ranks replay its ranks 0..n-1.
 *
 * gtc-stress (the gtc kernel of model 1.1): one file per node (RANKS_PER_NODE consecutive ranks) per iteration,
 * written through POSIX by the node's first rank after a reduce of the particle counts: a 64-byte header, then one
 * write per particle (7 floats); about 55 particles per rank, whose count repeats every 29 iterations (an
 * arithmetic cycle a real count does not follow). */
#include "kernels.h"

#include <mpi.h>
#include <stdio.h>
#include <string.h>

#ifdef IOLOOM_PREDICT_FORTRAN
#include "gtc_counts.h"

/* gtc_restart.f90 */
void gtc_restart_write(const char *path, int path_len, int rank, int ions, int radial, int grid, int planes);
/* libgfortran's settings, which a Fortran main program passes before anything else and a C one must pass itself
 * (gfortran's manual, "Non-Fortran Main Program"; libgfortran/runtime/compile_options.c, set_options, reads them in
 * this order): those gfortran 12's main passes by default (-std=gnu). Without them allow_std is the runtime's own
 * default, which lacks Fortran 2018, so every OPEN first stats the file (open.c, new_unit: find_file, to refuse a
 * file connected to another unit), a call GTC does not make. */
void _gfortran_set_options(int count, int options[]);
/* gfortran 12's libgfortran.h: its twelve standards' flags, those named here, and its floating-point exceptions */
enum { GFC_STD_F95_DEL = 1 << 2, GFC_STD_LEGACY = 1 << 6, GFC_STD_F2018_DEL = 1 << 11, GFC_STD_ALL = (1 << 12) - 1 };
enum { GFC_FPE_INVALID = 1, GFC_FPE_DENORMAL = 2, GFC_FPE_ZERO = 4, GFC_FPE_OVERFLOW = 8, GFC_FPE_UNDERFLOW = 16 };
static int fortran_main_options[] = {
    GFC_STD_F95_DEL | GFC_STD_LEGACY | GFC_STD_F2018_DEL, /* warn_std */
    GFC_STD_ALL,                                          /* allow_std: Fortran 2018's included, no stat */
    0,                                                    /* pedantic */
    1,                                                    /* backtrace */
    1,                                                    /* sign_zero */
    0,                                                    /* bounds_check */
    GFC_FPE_INVALID | GFC_FPE_DENORMAL | GFC_FPE_ZERO | GFC_FPE_OVERFLOW | GFC_FPE_UNDERFLOW, /* fpe_summary */
};
#else
static const char no_fortran[] = "ioloom-predict-kernels: gtc was built without a Fortran compiler\n";
#endif

/* The run measured (docs/predict.md, "GTC's own I/O"): radial grid points mpsi, points of a poloidal plane mgrid,
 * planes per rank mzeta. */
enum { MPSI = 48, MGRID = 9457, MZETA = 1 };
enum { RANKS_PER_NODE = 2, PARTICLE_FLOATS = 7, HEADER_BYTES = 64 };

static int restart_files(const struct run *r) {
#ifdef IOLOOM_PREDICT_FORTRAN
    if (r->nranks > GTC_MEASURED_RANKS || r->steps > GTC_MEASURED_SNAPSHOTS) {
        if (r->rank == 0)
            fprintf(stderr,
                    "ioloom-predict-kernels: gtc replays GTC's counts of %d ranks over %d snapshots: "
                    "run at most that many\n",
                    GTC_MEASURED_RANKS, GTC_MEASURED_SNAPSHOTS);
        return 2;
    }
    _gfortran_set_options(sizeof fortran_main_options / sizeof *fortran_main_options, fortran_main_options);
    char path[4096];
    snprintf(path, sizeof path, "%s/DATA_RESTART.%05d", r->dir, r->rank);
    for (int step = 0; step < r->steps; step++) {
        compute(r);
        gtc_restart_write(path, (int)strlen(path), r->rank, GTC_IONS_AT_START + gtc_ions_moved[r->rank][step], MPSI,
                          MGRID, MZETA);
    }
    return 0;
#else
    if (r->rank == 0) fputs(no_fortran, stderr);
    return 2;
#endif
}

static void write_particles(const struct run *r, int step, int node, int particles) {
    char path[4096], header[HEADER_BYTES] = {0};
    snprintf(path, sizeof path, "%s/gtc_%04d_%04d.dat", r->dir, step, node);
    int fd = create_file(path);
    snprintf(header, sizeof header, "GTC step %d particles %d", step, particles);
    write_all(fd, header, sizeof header);
    for (int p = 0; p < particles; p++) {
        float particle[PARTICLE_FLOATS] = {(float)p, (float)step, 0.5f, 1.5f, 2.5f, 3.5f, (float)node};
        write_all(fd, particle, sizeof particle);
    }
    close_file(fd);
}

static int node_files(const struct run *r) {
    MPI_Comm node_comm;
    int node = r->rank / RANKS_PER_NODE, node_rank;
    MPI_Comm_split(MPI_COMM_WORLD, node, r->rank, &node_comm);
    MPI_Comm_rank(node_comm, &node_rank);
    for (int step = 0; step < r->steps; step++) {
        compute(r);
        int mine = 40 + (step * 37 + r->rank * 11) % 29, total = 0;
        MPI_Reduce(&mine, &total, 1, MPI_INT, MPI_SUM, 0, node_comm);
        if (node_rank == 0) write_particles(r, step, node, total);
    }
    MPI_Comm_free(&node_comm);
    return 0;
}

int gtc_limits(void) {
#ifdef IOLOOM_PREDICT_FORTRAN
    printf("%d %d\n", GTC_MEASURED_RANKS, GTC_MEASURED_SNAPSHOTS);
    return 0;
#else
    fputs(no_fortran, stderr);
    return 2;
#endif
}

int kernel_gtc(const struct run *r) { return r->stress ? node_files(r) : restart_files(r); }
