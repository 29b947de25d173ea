/* GTC-like (Dorier's thesis, Table 7.5: "One file per node per iteration, number of particles varies"; Sec. 7.3.1:
 * "GTC writes one file per node per iteration, but the amount of data varies between files as particles move from
 * one process to another"; Sec. 7.3.3: "GTC's I/O phase consists of a loop over all particles"): one file per node
 * per iteration, written through POSIX by the node's first rank: a header, then one write per particle (7 floats).
 * Nodes are groups of RANKS_PER_NODE consecutive ranks, each rank contributing a number of particles that varies
 * from iteration to iteration (summed on the node's first rank).
 *
 * gtc: about 1,000 particles per rank, varying by up to 2% without period (the thesis gives no count; its 100.0%
 * hit ratio, rounded, allows one mispredicted loop end per 2,000 operations, so files of thousands of particles).
 * gtc-stress: about 55 particles per rank, whose count repeats every 29 iterations (an arithmetic cycle a real
 * count does not follow, and files twenty times smaller: every loop end weighs twenty times more). */
#include "kernels.h"

#include <mpi.h>
#include <stdio.h>

enum { RANKS_PER_NODE = 2, PARTICLE_FLOATS = 7, HEADER_BYTES = 64, PARTICLES = 1000, PARTICLES_JITTER = 20 };

static int my_particles(const struct run *r, int step) {
    if (r->stress) return 40 + (step * 37 + r->rank * 11) % 29;
    return PARTICLES + jitter(1u + (unsigned)step * 7919u + (unsigned)r->rank * 104729u, PARTICLES_JITTER);
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

int kernel_gtc(const struct run *r) {
    MPI_Comm node_comm;
    int node = r->rank / RANKS_PER_NODE, node_rank;
    MPI_Comm_split(MPI_COMM_WORLD, node, r->rank, &node_comm);
    MPI_Comm_rank(node_comm, &node_rank);
    for (int step = 0; step < r->steps; step++) {
        compute(r);
        int mine = my_particles(r, step), total = 0;
        MPI_Reduce(&mine, &total, 1, MPI_INT, MPI_SUM, 0, node_comm);
        if (node_rank == 0) write_particles(r, step, node, total);
    }
    MPI_Comm_free(&node_comm);
    return 0;
}
