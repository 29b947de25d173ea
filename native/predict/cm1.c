/* CM1-like (Dorier's thesis, Table 7.5): every process writes one HDF5 file per output step, the same fields of
 * the same domain size in every process: an attribute (the model time), then six 3-D float fields. Variants:
 * cm1-posix (HDF5's sec2 driver), cm1-gzip (chunked fields through the deflate filter: the compressed sizes vary
 * with the data) and cm1-mpiio (HDF5's MPI-IO driver on MPI_COMM_SELF). */
#include "kernels.h"

#include <stdio.h>
#include <string.h>

#ifdef IOLOOM_PREDICT_HDF5
#include <hdf5.h>
#include <math.h>
#include <stdlib.h>

enum { NZ = 16, NY = 32, NX = 32, FIELDS = 6 };
static const char *const field_names[FIELDS] = {"u", "v", "w", "theta", "qv", "prs"};

static hid_t file_access(const struct run *r) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (strcmp(r->kernel, "cm1-mpiio") == 0) H5Pset_fapl_mpio(fapl, MPI_COMM_SELF, MPI_INFO_NULL);
    return fapl;
}

static hid_t dataset_creation(const struct run *r) {
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (strcmp(r->kernel, "cm1-gzip") == 0) {
        hsize_t chunk[3] = {NZ / 2, NY, NX};
        H5Pset_chunk(dcpl, 3, chunk);
        H5Pset_deflate(dcpl, 4);
    }
    return dcpl;
}

/* A smooth wave with noise whose amplitude drifts with the step: compressible, never by the same amount. */
static void fill(float *field, int step, int f, unsigned *seed) {
    for (int i = 0; i < NZ * NY * NX; i++) {
        float noise = (float)(next_random(seed) % (unsigned)(1 + (step * 7 + f) % 23)) * 1e-3f;
        field[i] = sinf((float)i * 0.01f + (float)step) * (float)(f + 1) + noise;
    }
}

static void write_field(hid_t file, hid_t dcpl, const char *name, const float *field) {
    hsize_t dims[3] = {NZ, NY, NX};
    hid_t space = H5Screate_simple(3, dims, NULL);
    hid_t set = H5Dcreate2(file, name, H5T_NATIVE_FLOAT, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (set < 0 || H5Dwrite(set, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, field) < 0)
        fail("HDF5 cannot write field", name);
    H5Dclose(set);
    H5Sclose(space);
}

static void write_time(hid_t file, double model_time) {
    hid_t scalar = H5Screate(H5S_SCALAR);
    hid_t attr = H5Acreate2(file, "time", H5T_NATIVE_DOUBLE, scalar, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(attr, H5T_NATIVE_DOUBLE, &model_time);
    H5Aclose(attr);
    H5Sclose(scalar);
}

static void output_step(const struct run *r, int step, float *field, unsigned *seed) {
    char path[4096];
    snprintf(path, sizeof path, "%s/cm1_%04d_%05d.h5", r->dir, step, r->rank);
    hid_t fapl = file_access(r), dcpl = dataset_creation(r);
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (file < 0) fail("HDF5 cannot create", path);
    write_time(file, step * 60.0);
    for (int f = 0; f < FIELDS; f++) {
        fill(field, step, f, seed);
        write_field(file, dcpl, field_names[f], field);
    }
    H5Fclose(file);
    H5Pclose(dcpl);
    H5Pclose(fapl);
}

int kernel_cm1(const struct run *r) {
    float *field = malloc(sizeof(float) * NZ * NY * NX);
    unsigned seed = 1234u + (unsigned)r->rank;
    if (!field) fail("out of memory for", "a CM1 field");
    for (int step = 0; step < r->steps; step++) {
        compute(r);
        output_step(r, step, field, &seed);
    }
    free(field);
    return 0;
}
#else
int kernel_cm1(const struct run *r) {
    if (r->rank == 0)
        fprintf(stderr,
                "ioloom-predict-kernels: %s needs HDF5, which only the MPICH build has (Debian's parallel "
                "HDF5 is built against MPICH): run ioloom-predict-kernels-mpich\n",
                r->kernel);
    return 2;
}
#endif
