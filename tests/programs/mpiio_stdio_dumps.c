/* A simulation's output as LAMMPS does it: one shared trajectory file written collectively through MPI-IO, a
 * thermo log that rank 0 prints with fprintf every step, per-rank text dumps (fprintf), a restart file that
 * rank 0 writes with fwrite, and a checksum file written with POSIX write(). Every rank first reads the input
 * script with fgets. Each output byte is written once, so every file's size is the bytes written to it.
 * usage: mpiio_stdio_dumps DIR [steps] [atoms_per_rank]   (DIR must hold an `in.script` to read) */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static FILE *open_or_abort(const char *dir, const char *name, const char *mode) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, mode);
    if (!f) {
        perror(path);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return f;
}

static long read_script(const char *dir) {
    FILE *in = open_or_abort(dir, "in.script", "r");
    char line[256];
    long lines = 0;
    while (fgets(line, sizeof line, in)) lines++;
    fclose(in);
    return lines;
}

static void write_trajectory(const char *dir, int rank, int nranks, int steps, int atoms) {
    char path[4096];
    snprintf(path, sizeof path, "%s/traj.bin", dir);
    MPI_File fh;
    if (MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh) != MPI_SUCCESS)
        MPI_Abort(MPI_COMM_WORLD, 1);
    double *xyz = malloc(sizeof(double) * 3 * (size_t)atoms);
    for (int step = 0; step < steps; step++) {
        for (int i = 0; i < 3 * atoms; i++) xyz[i] = step + rank + i * 1e-3;
        MPI_Offset frame = (MPI_Offset)sizeof(double) * 3 * atoms * nranks;
        MPI_Offset at = step * frame + (MPI_Offset)rank * sizeof(double) * 3 * atoms;
        MPI_File_write_at_all(fh, at, xyz, 3 * atoms, MPI_DOUBLE, MPI_STATUS_IGNORE);
    }
    free(xyz);
    MPI_File_close(&fh);
}

static void write_text_dumps(const char *dir, int rank, int steps, int atoms) {
    char name[64];
    snprintf(name, sizeof name, "dump.%d.txt", rank);
    FILE *dump = open_or_abort(dir, name, "w");
    FILE *thermo = rank == 0 ? open_or_abort(dir, "log.thermo", "w") : NULL;
    for (int step = 0; step < steps; step++) {
        fprintf(dump, "ITEM: TIMESTEP\n%d\nITEM: ATOMS id x y z\n", step);
        for (int i = 0; i < atoms; i++)
            fprintf(dump, "%d %.6f %.6f %.6f\n", rank * atoms + i, step + i * 1e-3, rank + i * 2e-3, i * 3e-3);
        if (thermo) fprintf(thermo, "%8d %14.6f %14.6f\n", step, -6.7 + step * 1e-4, 0.8 - step * 1e-5);
        fflush(dump);
    }
    fclose(dump);
    if (thermo) fclose(thermo);
}

static void write_restart_and_checksum(const char *dir, int steps, int atoms) {
    FILE *restart = open_or_abort(dir, "restart.bin", "wb");
    double *state = calloc((size_t)atoms * 6, sizeof(double));
    fwrite(state, sizeof(double), (size_t)atoms * 6, restart);
    fclose(restart);
    free(state);
    char path[4096], line[64];
    snprintf(path, sizeof path, "%s/checksum", dir);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    int n = snprintf(line, sizeof line, "steps %d atoms %d\n", steps, atoms);
    if (fd < 0 || write(fd, line, (size_t)n) != n || close(fd)) {
        perror(path);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc < 2) {
        if (rank == 0) fprintf(stderr, "usage: %s DIR [steps] [atoms_per_rank]\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int steps = argc > 2 ? atoi(argv[2]) : 20, atoms = argc > 3 ? atoi(argv[3]) : 500;
    read_script(argv[1]);
    write_trajectory(argv[1], rank, nranks, steps, atoms);
    write_text_dumps(argv[1], rank, steps, atoms);
    if (rank == 0) write_restart_and_checksum(argv[1], steps, atoms * nranks);
    MPI_Finalize();
    return 0;
}
