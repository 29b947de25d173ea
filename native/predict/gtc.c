/* GTC-like (Dorier's thesis, Table 7.5): one file per node per iteration, written through POSIX by the node's
 * first rank, with a number of particles that varies from iteration to iteration: a header, then one write per
 * particle (7 floats). Nodes are groups of RANKS_PER_NODE consecutive ranks, each rank contributing a varying
 * number of particles (summed on the node's first rank). */
#include "kernels.h"

#include <mpi.h>
#include <stdio.h>

enum { RANKS_PER_NODE = 2, PARTICLE_FLOATS = 7, HEADER_BYTES = 64 };

static int my_particles(const struct run *r, int step) { return 40 + (step * 37 + r->rank * 11) % 29; }

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
