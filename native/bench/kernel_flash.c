/* FLASH-IO-like kernel (the FLASH code's HDF5 checkpoint routine, as Wright's thesis runs it): each rank
 * owns --blocks (80) blocks of --cells^3 cells (24^3) and writes, through parallel HDF5 (B = all blocks),
 *   checkpoint  --variables (24) double datasets [B][n][n][n] plus the block metadata FLASH writes
 *               (coordinates, block size, refine level); 80 * 24^3 * 24 * 8 bytes = 202.5 MiB per rank,
 *               the "approximately 205 MB" per process of Wright's section 5;
 *   plot_cnt    4 single-precision variables at cell centres, [B][n][n][n];
 *   plot_crn    the same 4 variables at cell corners, [B][n+1][n+1][n+1].
 * Each rank's blocks are one hyperslab of each dataset, collective with -c. Writes only, as FLASH-IO. */
#include "backend.h"

#ifdef IOLOOM_BENCH_HDF5
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PLOT_VARIABLES 4

struct flash_file {
    const char *suffix;
    hid_t type;
    int variables, side; /* variables of side^3 values each */
    int metadata;        /* the checkpoint's block metadata datasets */
};

/* Which blocks of the global block list this rank writes: [first, first + count) of total. */
struct block_range {
    hsize_t first, count, total;
};

/* Writes this rank's blocks [first, first+count) of a dataset [total][row_dims...]; counts the call in *t.
 * Aborts the run on failure, as every I/O error does (the other ranks would wait in the next collective). */
static void write_row(hid_t file, hid_t xfer, const char *name, hid_t type, struct block_range blocks, int ndims,
                      const hsize_t *row_dims, const void *data, struct bench_times *t) {
    hsize_t dims[4] = {blocks.total, 1, 1, 1}, start[4] = {blocks.first, 0, 0, 0}, count[4] = {blocks.count, 1, 1, 1};
    uint64_t bytes = blocks.count * H5Tget_size(type);
    for (int d = 0; d < ndims; d++) {
        dims[d + 1] = count[d + 1] = row_dims[d];
        bytes *= row_dims[d];
    }
    t->bytes += bytes;
    t->calls++;
    hid_t space = H5Screate_simple(ndims + 1, dims, NULL);
    hid_t dataset = H5Dcreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t memspace = H5Screate_simple(ndims + 1, count, NULL);
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL);
    herr_t rc = dataset < 0 ? -1 : H5Dwrite(dataset, type, memspace, space, xfer, data);
    H5Sclose(memspace);
    if (dataset >= 0) H5Dclose(dataset);
    H5Sclose(space);
    if (rc < 0) {
        bench_error("HDF5 could not write dataset \"%s\" (its error stack is above)", name);
        bench_abort_io();
    }
}

/* The block metadata FLASH stores with a checkpoint: where each block is, its size, its refinement level. */
static void write_metadata(hid_t file, hid_t xfer, struct block_range blocks, struct bench_times *t) {
    size_t n = blocks.count;
    double *coordinates = bench_alloc(n * 3 * sizeof(double)), *block_size = bench_alloc(n * 3 * sizeof(double));
    int *refine_level = bench_alloc(n * sizeof(int));
    for (size_t b = 0; b < n; b++) {
        double centre[3] = {(double)(blocks.first + b) + 0.5, 0.5, 0.5}, size[3] = {1, 1, 1};
        memcpy(coordinates + 3 * b, centre, sizeof centre);
        memcpy(block_size + 3 * b, size, sizeof size);
        refine_level[b] = 1;
    }
    hsize_t three[1] = {3};
    write_row(file, xfer, "coordinates", H5T_NATIVE_DOUBLE, blocks, 1, three, coordinates, t);
    write_row(file, xfer, "block size", H5T_NATIVE_DOUBLE, blocks, 1, three, block_size, t);
    write_row(file, xfer, "refine level", H5T_NATIVE_INT, blocks, 0, NULL, refine_level, t);
    free(coordinates);
    free(block_size);
    free(refine_level);
}

static void write_file(const struct bench_options *o, MPI_Comm comm, const struct flash_file *ff, int rep,
                       struct bench_report *r) {
    int rank, nranks;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &nranks);
    char path[sizeof o->path + 16];
    bench_kernel_file(o, ff->suffix, path, sizeof path);
    struct block_range blocks = {(hsize_t)rank * o->blocks, (hsize_t)o->blocks, (hsize_t)nranks * o->blocks};
    size_t n = (size_t)ff->side * ff->side * ff->side * o->blocks, size = H5Tget_size(ff->type);
    unsigned char *values = bench_alloc(n * size);
    struct bench_times t;
    memset(&t, 0, sizeof t);

    MPI_Info info = bench_hints_info(o);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), xfer = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_fapl_mpio(fapl, comm, info);
    H5Pset_dxpl_mpio(xfer, o->collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT);
    double start = t.start = bench_phase_begin(o, comm);
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    t.open = bench_now() - start;
    if (file < 0) {
        bench_error("HDF5 could not create %s (its error stack is above)", path);
        bench_abort_io();
    }
    double d0 = t.data_begin = bench_now();
    if (ff->metadata) write_metadata(file, xfer, blocks, &t);
    hsize_t row[3] = {(hsize_t)ff->side, (hsize_t)ff->side, (hsize_t)ff->side};
    for (int v = 0; v < ff->variables; v++) {
        double p0 = bench_now();
        for (size_t i = 0; i < n; i++) { /* a distinct value per rank, variable and cell of its blocks */
            double x = (double)rank * 1e6 + v * 1e3 + (double)i / (double)n;
            if (size == sizeof(double))
                memcpy(values + i * size, &x, size);
            else
                ((float *)values)[i] = (float)x;
        }
        t.prep += bench_now() - p0;
        char name[16];
        snprintf(name, sizeof name, "var%03d", v);
        write_row(file, xfer, name, ff->type, blocks, 3, row, values, &t);
    }
    t.data_end = bench_now();
    t.data = t.data_end - d0 - t.prep;
    if (o->fsync) {
        double s0 = bench_now();
        if (H5Fflush(file, H5F_SCOPE_GLOBAL) < 0) {
            bench_error("H5Fflush %s failed (its error stack is above)", path);
            bench_abort_io();
        }
        t.sync = bench_now() - s0;
    }
    MPI_File *fh = NULL;
    MPI_Info after = MPI_INFO_NULL;
    if (H5Fget_vfd_handle(file, fapl, (void **)&fh) >= 0 && fh && MPI_File_get_info(*fh, &after) == MPI_SUCCESS) {
        bench_report_hints(r, after);
        MPI_Info_free(&after);
    }
    double c0 = bench_now();
    if (H5Fclose(file) < 0) { /* it writes what HDF5 still caches: an error here is lost data */
        bench_error("H5Fclose %s failed (its error stack is above)", path);
        bench_abort_io();
    }
    t.close = bench_now() - c0;
    t.total = bench_now() - start;
    t.end = bench_wallclock();
    H5Pclose(xfer);
    H5Pclose(fapl);
    if (info != MPI_INFO_NULL) MPI_Info_free(&info);
    free(values);
    bench_report_add(r, ff->suffix, rep, &t);
}

int bench_kernel_flash(const struct bench_options *o, MPI_Comm comm, struct bench_report *r) {
    int nranks, n = o->cells;
    MPI_Comm_size(comm, &nranks);
    const struct flash_file files[] = {
        {bench_flash_suffixes[0], H5T_NATIVE_DOUBLE, o->variables, n, 1},
        {bench_flash_suffixes[1], H5T_NATIVE_FLOAT, PLOT_VARIABLES, n, 0},
        {bench_flash_suffixes[2], H5T_NATIVE_FLOAT, PLOT_VARIABLES, n + 1, 0},
    };
    /* the data each file must hold, for the tests and the reader: file size = this + HDF5 metadata */
    double cube = (double)n * n * n, corner = (double)(n + 1) * (n + 1) * (n + 1);
    double all_blocks = (double)nranks * o->blocks;
    bench_report_param(r, "blocks_per_rank", o->blocks);
    bench_report_param(r, "checkpoint_data_bytes", all_blocks * (o->variables * cube * 8 + 6 * 8 + 4));
    bench_report_param(r, "plot_cnt_data_bytes", all_blocks * PLOT_VARIABLES * cube * 4);
    bench_report_param(r, "plot_crn_data_bytes", all_blocks * PLOT_VARIABLES * corner * 4);
    for (int rep = 0; rep < o->repetitions; rep++)
        for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) write_file(o, comm, &files[i], rep, r);
    for (size_t i = 0; i < sizeof files / sizeof files[0] && !o->keep; i++) {
        char path[sizeof o->path + 16];
        bench_kernel_file(o, files[i].suffix, path, sizeof path);
        bench_kernel_remove(comm, path);
    }
    return 0;
}

#else
/* Never reached: the options refuse --kernel flash in a build without HDF5. */
int bench_kernel_flash(const struct bench_options *o, MPI_Comm comm, struct bench_report *r) {
    (void)o, (void)comm, (void)r;
    return BENCH_EXIT_USAGE;
}
#endif
