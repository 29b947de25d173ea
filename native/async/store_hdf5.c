/* The HDF5 store of libioloom-async (writer.format: hdf5; the MPICH build only, as Debian's parallel HDF5 is built
 * against MPICH): each writer writes one HDF5 file, <directory>/<name>.<id>.h5, a dataset per block at
 * /<variable>/<iteration>/<block> with the layout's type and dimensions (Damaris's file-per-core HDF5 output).
 * The index records the dataset's address in the file, where its contiguous bytes start. Only a dedicated core or
 * the simulation's own thread (synchronous mode) calls HDF5: the library is not thread-safe, so a helper thread
 * never does (initialize refuses the helper-thread mode with this format). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <hdf5.h>
#include "async_internal.h"

struct h5_output {
    hid_t file, lcpl; /* lcpl: a link creation list that makes the /<variable>/<iteration> groups */
};

/* The file type of a layout's type (little-endian, as the reader's numpy dtypes are). */
static hid_t file_type(const char *type) {
    static const char *const names[] = {"int8",   "uint8", "int16",  "uint16",  "int32",
                                        "uint32", "int64", "uint64", "float32", "float64"};
    const hid_t types[] = {H5T_STD_I8LE,  H5T_STD_U8LE,  H5T_STD_I16LE, H5T_STD_U16LE,  H5T_STD_I32LE,
                           H5T_STD_U32LE, H5T_STD_I64LE, H5T_STD_U64LE, H5T_IEEE_F32LE, H5T_IEEE_F64LE};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(type, names[i]) == 0) return types[i];
    return H5I_INVALID_HID; /* the configuration admits no other type */
}

/* HDF5 prints its error stack by default; the store reports failures itself, and leaves the setting as it was. */
struct quiet {
    H5E_auto2_t func;
    void *data;
};
static struct quiet hush(void) {
    struct quiet q;
    H5Eget_auto2(H5E_DEFAULT, &q.func, &q.data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return q;
}
static void unhush(struct quiet q) { H5Eset_auto2(H5E_DEFAULT, q.func, q.data); }

static int hdf5_open(struct async_writer *w, const struct async_config *cfg, char msg[ASYNC_MSG_MAX]) {
    char path[1200];
    struct h5_output *o = calloc(1, sizeof *o);
    struct quiet q = hush();
    snprintf(path, sizeof path, "%s/%s.%d.h5", cfg->directory, cfg->name, w->id);
    o->file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    o->lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(o->lcpl, 1);
    unhush(q);
    w->handle = o;
    if (o->file >= 0) return 0;
    snprintf(msg, ASYNC_MSG_MAX, "%.400s: cannot create the HDF5 output", path);
    return -1;
}

static void dataset_path(char *out, size_t size, const struct async_config *cfg, int variable, int block,
                         int64_t iteration) {
    snprintf(out, size, "/%s/%lld/%d", cfg->variables[variable].name, (long long)iteration, block);
}

static int hdf5_put(struct async_writer *w, const struct async_config *cfg, int variable, int block, int64_t iteration,
                    const void *data, size_t nbytes, uint64_t *where) {
    const struct async_layout *l = &cfg->layouts[cfg->variables[variable].layout];
    struct h5_output *o = w->handle;
    hsize_t dims[ASYNC_DIMS_MAX];
    char path[ASYNC_NAME_MAX + 48];
    (void)nbytes; /* the block is whole: the client checks its size, and the hdf5 format refuses compression */
    errno = 0;
    for (int d = 0; d < l->ndims; d++) dims[d] = (hsize_t)l->dims[d];
    dataset_path(path, sizeof path, cfg, variable, block, iteration);
    struct quiet q = hush();
    hid_t space = H5Screate_simple(l->ndims, dims, NULL), type = file_type(l->type);
    hid_t set = H5Dcreate2(o->file, path, type, space, o->lcpl, H5P_DEFAULT, H5P_DEFAULT);
    int rc = set >= 0 && H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0 ? 0 : -1;
    haddr_t address = rc == 0 ? H5Dget_offset(set) : HADDR_UNDEF;
    if (set >= 0) H5Dclose(set);
    H5Sclose(space);
    unhush(q);
    *where = (uint64_t)address;
    return rc == 0 && address != HADDR_UNDEF ? 0 : (errno = errno ? errno : EIO, -1);
}

/* A dataset that failed is unlinked, so the file holds only whole blocks under their names. */
static int hdf5_undo(struct async_writer *w, const struct async_config *cfg, int variable, int block,
                     int64_t iteration) {
    struct h5_output *o = w->handle;
    char path[ASYNC_NAME_MAX + 48];
    dataset_path(path, sizeof path, cfg, variable, block, iteration);
    struct quiet q = hush();
    if (H5Lexists(o->file, path, H5P_DEFAULT) > 0) H5Ldelete(o->file, path, H5P_DEFAULT);
    unhush(q);
    return 0;
}

static int hdf5_sync(struct async_writer *w) {
    struct h5_output *o = w->handle;
    int *fd = NULL;
    if (H5Fflush(o->file, H5F_SCOPE_LOCAL) < 0 || H5Fget_vfd_handle(o->file, H5P_DEFAULT, (void **)&fd) < 0 || !fd)
        return errno = EIO, -1;
    return fdatasync(*fd);
}

static void hdf5_close(struct async_writer *w) {
    struct h5_output *o = w->handle;
    if (!o) return;
    if (o->file >= 0 && H5Fclose(o->file) < 0)
        fprintf(stderr, "ioloom-async: writer %d: closing its HDF5 output failed\n", w->id);
    H5Pclose(o->lcpl);
    free(o);
    w->handle = NULL;
}

const struct async_store async_store_hdf5 = {"hdf5", hdf5_open, hdf5_put, hdf5_undo, hdf5_sync, hdf5_close};
