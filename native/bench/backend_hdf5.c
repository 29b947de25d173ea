/* HDF5 backend (MPICH build only: Debian's parallel HDF5 links MPICH). One 1-D dataset of bytes, "data",
 * as long as the pattern's file; each transfer is a hyperslab at the pattern's offset in the dataset, moved
 * with H5FD_MPIO_COLLECTIVE or _INDEPENDENT. The file is larger than the data by HDF5's metadata. */
#ifdef IOLOOM_BENCH_HDF5
#include "backend.h"

#include <hdf5.h>
#include <stdlib.h>

static struct bench_file *hdf5_open(const struct bench_options *o, const char *name, MPI_Comm comm, int writing,
                                    uint64_t extent) {
    MPI_Info info = bench_hints_info(o);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, comm, info);
    hid_t file = writing ? H5Fcreate(name, H5F_ACC_TRUNC, H5P_DEFAULT, fapl) : H5Fopen(name, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (info != MPI_INFO_NULL) MPI_Info_free(&info);
    if (file < 0) {
        bench_error("HDF5 could not %s %s (its error stack is above)", writing ? "create" : "open", name);
        return NULL;
    }
    hid_t dataset;
    if (writing) {
        hsize_t dims[1] = {extent};
        hid_t space = H5Screate_simple(1, dims, NULL);
        dataset = H5Dcreate2(file, "data", H5T_NATIVE_UCHAR, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        H5Sclose(space);
    } else {
        dataset = H5Dopen2(file, "data", H5P_DEFAULT);
    }
    if (dataset < 0) {
        bench_error("HDF5 could not %s dataset \"data\" in %s", writing ? "create" : "open", name);
        H5Fclose(file);
        return NULL;
    }
    struct bench_file *f = calloc(1, sizeof *f);
    f->h5_file = file;
    f->h5_dataset = dataset;
    f->h5_filespace = H5Dget_space(dataset);
    f->h5_xfer = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(f->h5_xfer, o->collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT);
    return f;
}

static int hdf5_transfer(struct bench_file *f, void *buf, size_t len, uint64_t offset, int writing) {
    hsize_t start[1] = {offset}, count[1] = {len};
    H5Sselect_hyperslab(f->h5_filespace, H5S_SELECT_SET, start, NULL, count, NULL);
    hid_t memspace = H5Screate_simple(1, count, NULL);
    herr_t rc = writing ? H5Dwrite(f->h5_dataset, H5T_NATIVE_UCHAR, memspace, f->h5_filespace, f->h5_xfer, buf)
                        : H5Dread(f->h5_dataset, H5T_NATIVE_UCHAR, memspace, f->h5_filespace, f->h5_xfer, buf);
    H5Sclose(memspace);
    if (rc >= 0) return 0;
    bench_error("%s of %zu bytes at dataset offset %llu failed", writing ? "H5Dwrite" : "H5Dread", len,
                (unsigned long long)offset);
    return BENCH_EXIT_IO;
}

static int hdf5_sync(struct bench_file *f) {
    if (H5Fflush(f->h5_file, H5F_SCOPE_GLOBAL) >= 0) return 0;
    bench_error("H5Fflush failed");
    return BENCH_EXIT_IO;
}

static int hdf5_close(struct bench_file *f) {
    H5Pclose(f->h5_xfer);
    H5Sclose(f->h5_filespace);
    H5Dclose(f->h5_dataset);
    herr_t rc = H5Fclose(f->h5_file);
    free(f);
    if (rc >= 0) return 0;
    bench_error("H5Fclose failed");
    return BENCH_EXIT_IO;
}

/* The MPI-IO hints under HDF5: the MPI_File the MPI-IO driver opened. */
static MPI_Info hdf5_info(struct bench_file *f) {
    MPI_File *fh = NULL;
    MPI_Info info = MPI_INFO_NULL;
    if (H5Fget_vfd_handle(f->h5_file, H5P_DEFAULT, (void **)&fh) >= 0 && fh) MPI_File_get_info(*fh, &info);
    return info;
}

const struct bench_backend bench_hdf5_backend = {"hdf5", hdf5_open, hdf5_transfer, hdf5_sync, hdf5_close, hdf5_info};
#endif
