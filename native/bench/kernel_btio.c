/* BT-IO-like kernel (NAS BT's I/O, "full" MPI-IO variant): a G^3 grid of 5 doubles per point, decomposed in
 * 3-D over the ranks; every step each rank writes its block collectively through a subarray file view, the
 * step's array appended after the previous one. The read phase reads every step back the same way (BT
 * verifies its solution this way) and, with --verify, checks every value. File size: steps * G^3 * 40. */
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COMPONENTS 5

struct btio_block {
    int global[3], local[3], start[3];
    size_t points;
    MPI_Datatype point, filetype;
};

/* This rank's block of the grid; returns 0, or 2 when the grid is too small for the decomposition. */
static int decompose(const struct bench_options *o, MPI_Comm comm, struct btio_block *b) {
    int rank, nranks, dims[3] = {0, 0, 0};
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &nranks);
    MPI_Dims_create(nranks, 3, dims);
    int coord[3] = {rank / (dims[1] * dims[2]), (rank / dims[2]) % dims[1], rank % dims[2]};
    b->points = 1;
    for (int d = 0; d < 3; d++) {
        int n = o->cells, q = n / dims[d], rem = n % dims[d];
        if (q == 0) {
            if (rank == 0)
                bench_error("--cells %d: the grid needs at least %d points per side for %d ranks (%dx%dx%d)", n,
                            dims[d], nranks, dims[0], dims[1], dims[2]);
            return BENCH_EXIT_USAGE;
        }
        b->global[d] = n;
        b->local[d] = q + (coord[d] < rem);
        b->start[d] = coord[d] * q + (coord[d] < rem ? coord[d] : rem);
        b->points *= (size_t)b->local[d];
    }
    MPI_Type_contiguous(COMPONENTS, MPI_DOUBLE, &b->point);
    MPI_Type_commit(&b->point);
    MPI_Type_create_subarray(3, b->global, b->local, b->start, MPI_ORDER_C, b->point, &b->filetype);
    MPI_Type_commit(&b->filetype);
    return 0;
}

/* The value of component c at global point (x, y, z) of step s: its own index, so any misplaced value shows. */
static double value_at(const struct btio_block *b, int s, int x, int y, int z, int c) {
    return (double)(((((int64_t)s * b->global[0] + x) * b->global[1] + y) * b->global[2] + z) * COMPONENTS + c);
}

/* Fills (check = 0) or checks (check = 1, returns values that differ) this rank's block of step s. */
static uint64_t visit(const struct btio_block *b, int s, double *buf, int check) {
    uint64_t errors = 0;
    size_t i = 0;
    for (int x = 0; x < b->local[0]; x++)
        for (int y = 0; y < b->local[1]; y++)
            for (int z = 0; z < b->local[2]; z++)
                for (int c = 0; c < COMPONENTS; c++, i++) {
                    double v = value_at(b, s, b->start[0] + x, b->start[1] + y, b->start[2] + z, c);
                    if (!check)
                        buf[i] = v;
                    else if (buf[i] != v && errors++ < 10)
                        bench_error("verify: step %d point (%d,%d,%d) component %d: read %.17g, expected %.17g", s,
                                    b->start[0] + x, b->start[1] + y, b->start[2] + z, c, buf[i], v);
                }
    return errors;
}

static void phase(const struct bench_options *o, MPI_Comm comm, const struct btio_block *b, const char *name,
                  int writing, double *buf, struct bench_times *t, struct bench_report *r) {
    MPI_Offset step_bytes = (MPI_Offset)b->global[0] * b->global[1] * b->global[2] * COMPONENTS * 8;
    MPI_File fh;
    bench_kernel_open(o, comm, name, writing, r, &fh, t);
    for (int s = 0; s < o->steps; s++) {
        double p0 = bench_now();
        if (writing) visit(b, s, buf, 0);
        t->prep += bench_now() - p0;
        double d0 = bench_now();
        bench_mpi_check(MPI_File_set_view(fh, s * step_bytes, b->point, b->filetype, "native", MPI_INFO_NULL),
                        "MPI_File_set_view", name);
        MPI_Status st;
        int err = writing ? MPI_File_write_all(fh, buf, (int)b->points, b->point, &st)
                          : MPI_File_read_all(fh, buf, (int)b->points, b->point, &st);
        bench_mpi_check(err, writing ? "MPI_File_write_all" : "MPI_File_read_all", name);
        bench_count_call(t, d0, bench_now(), b->points * COMPONENTS * 8);
        if (!writing && o->verify) {
            double v0 = bench_now();
            t->errors += visit(b, s, buf, 1);
            t->prep += bench_now() - v0;
        }
    }
    bench_kernel_close(o, &fh, writing, t);
}

int bench_kernel_btio(const struct bench_options *o, MPI_Comm comm, struct bench_report *r) {
    struct btio_block b;
    int rc = decompose(o, comm, &b);
    if (rc) return rc;
    char name[sizeof o->path + 16];
    bench_kernel_file(o, BENCH_BTIO_SUFFIX, name, sizeof name);
    double *buf = bench_alloc(b.points * COMPONENTS * sizeof(double));
    bench_report_param(r, "grid", o->cells);
    bench_report_param(r, "steps", o->steps);
    bench_report_param(r, "file_bytes", (double)o->steps * o->cells * o->cells * o->cells * COMPONENTS * 8);
    struct bench_times t;
    if (o->write) bench_kernel_remove(comm, name); /* a stale, longer file would hide what this run wrote */
    for (int rep = 0; rep < o->repetitions; rep++) {
        if (o->write) {
            phase(o, comm, &b, name, 1, buf, &t, r);
            bench_report_add(r, "write", rep, &t);
        }
        if (o->read) {
            phase(o, comm, &b, name, 0, buf, &t, r);
            bench_report_add(r, "read", rep, &t);
        }
    }
    free(buf);
    MPI_Type_free(&b.filetype);
    MPI_Type_free(&b.point);
    if (!bench_files_stay(o, r, name)) bench_kernel_remove(comm, name);
    return 0;
}
