/* GTC-like (Dorier's thesis, Table 7.5: "One file per node per iteration, number of particles varies"; Sec. 7.3.1:
 * "GTC writes one file per node per iteration, but the amount of data varies between files as particles move from
 * one process to another"; Sec. 7.3.3: "GTC's I/O phase consists of a loop over all particles").
 *
 * gtc: the restart file of GTC version 1 (the thesis's [43], "GTC version 1, Plasma Theory Group, UC Irvine": the
 * release of phoenix.ps.uci.edu/GTC/codes.php, kept as github.com/pradeepfn/gtc-benchmark commit 2dd182d, "The
 * original code from the site"), written as GTC writes it. At each snapshot (main.F90:143-147: every mstep/msnap
 * steps, msnap capped at mstep/ndiag by setup.F90:69) snapshot.f90:41 calls restart_write, where every rank
 * replaces its own file DATA_RESTART.<rank in 5 digits> (restart.f90:45-66; save_restart_files=0, line 33) and
 * writes three unformatted records (lines 70-72): mi, me, ntracer and the grid's profiles and potential; on rank 0
 * only, etracer and ptracer; the ions, zion(1:6,1:mi) and zion0(6,1:mi) (6 reals per ion without particle tracking,
 * setup.F90:234, then one more). One file per process, not per node as the thesis says. gtc_restart.f90 writes the same
 * records, so the POSIX calls are the Fortran runtime's, not ours: with Debian's gfortran 12 (a 131,072-byte
 * buffer) per snapshot an open, a write of the first record, a write per buffer of ions (131,064 bytes while zion's
 * 24-byte ions fill it), the rest in a last shorter write, an lseek and a 4-byte write of the record's length,
 * another of its trailing copy, a close: GTC's own calls, the same operations, offsets and sizes on all 4 ranks over
 * 300 snapshots (docs/predict.md, "GTC's own I/O").
 * The input is GTC's gtc.input with ndiag=1 and msnap=mstep (a snapshot every iteration, as the thesis says),
 * mzetamax=4 and npartdom=1 (each rank one toroidal domain of one plane, mzeta=1, as the input's 64 domains at the
 * thesis's 512 cores), and mpsi=48, mthetamax=192, micell=20 (a quarter of its grid each way and a fifth of its ions
 * per cell, to run on 4 ranks here): mgrid = 9,457 grid points, mi = micell*(mgrid-mpsi)*mzeta/npartdom = 188,180
 * ions per rank at the start (setup.F90:147-150; the input as given puts 1,852,812 on each of 512 ranks), then as
 * many as shifti moves in and out at each step (shifti.F90:213 and 319). Each rank's count at each snapshot is the
 * one GTC wrote in that run (gtc_counts.h): so at most 4 ranks and 300 snapshots. Left out, as the thesis leaves it
 * out of GTC's I/O: what rank 0 writes besides (restart.f90:77-112 copies history.out and sheareb.out, which grow by
 * every diagnosis; snapshot.f90 its snapNNNNN.out; diagnosis.F90 history.out), and the potential that each toroidal
 * domain's first rank writes through netCDF every ndiag steps (dataout3d.f90:127-153, PHI_<step>_<domain>.ncd).
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
void gtc_restart_write(const char *path, int path_len, int rank, int mi, int mpsi, int mgrid, int mzeta);
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
    if (r->rank == 0) fputs("ioloom-predict-kernels: gtc was built without a Fortran compiler\n", stderr);
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

int kernel_gtc(const struct run *r) { return r->stress ? node_files(r) : restart_files(r); }
