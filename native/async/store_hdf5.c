/* The HDF5 stores of libioloom-async (the MPICH build only, as Debian's parallel HDF5 is built against MPICH).
 * writer.format hdf5: each writer writes one HDF5 file, <directory>/<name>.<id>.h5, a dataset per block at
 * /<variable>/<iteration>/<block> with the layout's type and dimensions (Damaris's file-per-core HDF5 output).
 * writer.format hdf5-shared: the servers write one file, <directory>/<name>.h5, together through MPI-IO: each
 * iteration is a group, each variable one dataset /<iteration>/<variable> of every client's block, created and
 * written collectively: of the layout's global extents, each block at its position, when the layout has them;
 * else its first dimension is the block (the client's rank among clients).
 * The index records where each block's contiguous bytes start in the file (the dataset's address, plus the
 * block's place in it), or of a positioned layout where the global array starts (the block's position is in the
 * global index). Only a server or the simulation's own thread (synchronous mode) calls HDF5: the library is
 * not thread-safe, so a helper thread never does (initialize refuses the helper-thread mode with these formats). */
#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <hdf5.h>
#include "async_internal.h"

struct h5_output {
    hid_t file, lcpl; /* lcpl: a link creation list that makes the /<variable>/<iteration> groups */
    hid_t dcpl, dxpl; /* hdf5-shared: storage allocated at creation and never filled, collective transfers */
    char *staging;    /* hdf5-shared: a server's blocks of one variable, in block order, when it has several */
    size_t staging_size;
    char reserve[1220]; /* the room kept for closing (see keep_room); "" when none could be kept */
    off_t allocated;    /* hdf5: the file's space is allocated up to here (room_for) */
    int failed;         /* the first failed write's errno (0: none); the output then takes no more blocks */
    int writer;         /* its writer's id, for messages */
};

/* HDF5 cannot close a file whose metadata it cannot flush, and HDF5 1.10.8 then crashes closing it again at
 * MPI_Finalize. So each output keeps room beside it, a file of RESERVE_BYTES (or what the disk had). After a
 * failed write (a full disk) the output takes no more blocks, and at close it gives the room back just before
 * HDF5 flushes the metadata of the blocks written before (close_output). */
enum { RESERVE_BYTES = 16 << 10 };

static void keep_room(struct h5_output *o, const char *path, int id) {
    snprintf(o->reserve, sizeof o->reserve, "%s.%d.reserve", path, id);
    int fd = open(o->reserve, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        o->reserve[0] = '\0';
        return;
    }
    for (off_t bytes = RESERVE_BYTES; bytes >= 4096 && posix_fallocate(fd, 0, bytes) != 0; bytes /= 2) continue;
    close(fd);
}

/* Room for a block's metadata and for what closing flushes after it (room_for). */
enum { METADATA_ROOM = 16 << 10 };

/* Allocates the file's space (fallocate, its size kept) up to its end of allocation plus `bytes` and METADATA_ROOM
 * before a block is written: HDF5 then writes the block and flushes its metadata into space the file holds. A disk
 * that fills meanwhile (other writers write on it) so fails here, before HDF5 is called, never in the flush after
 * the block, which HDF5 1.10.8 cannot recover from (each later flush fails, "slist already enabled", so the file
 * can be neither flushed nor closed, and MPI_Finalize then crashes closing it again). Asked again before the
 * flush, when the end of allocation holds the block's new metadata. Up to METADATA_ROOM stays allocated past the
 * file's end. 0 (also where the file system cannot allocate ahead: then never asked again), or -1 with errno. */
static int room_for(struct h5_output *o, size_t bytes) {
    haddr_t eoa;
    int *fd = NULL;
    if (H5Fget_eoa(o->file, &eoa) < 0 || H5Fget_vfd_handle(o->file, H5P_DEFAULT, (void **)&fd) < 0 || !fd)
        return errno = EIO, -1;
    off_t end = (off_t)eoa + (off_t)bytes + METADATA_ROOM;
    if (end <= o->allocated) return 0;
    int rc;
    while ((rc = fallocate(*fd, FALLOC_FL_KEEP_SIZE, o->allocated, end - o->allocated)) != 0 && errno == EINTR)
        continue;
    if (rc != 0 && errno != EOPNOTSUPP && errno != ENOSYS) return -1;
    o->allocated = rc == 0 ? end : INT64_MAX; /* from 0 on: every page HDF5 may write below is the file's */
    return 0;
}

/* Closes the output, the room given back first: HDF5 flushes the metadata left at close, which after a failed write
 * (a full disk) needs it. */
static int close_output(struct h5_output *o) {
    if (o->reserve[0]) unlink(o->reserve);
    return o->file >= 0 ? H5Fclose(o->file) : 0;
}

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
    keep_room(o, path, w->id);
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
    if (o->failed) return errno = o->failed, -1;
    /* nbytes: the block whole (the client checks its size, and the hdf5 format refuses compression) */
    if (room_for(o, nbytes) != 0) return o->failed = errno, -1;
    errno = 0;
    for (int d = 0; d < l->ndims; d++) dims[d] = (hsize_t)l->dims[d];
    dataset_path(path, sizeof path, cfg, variable, block, iteration);
    struct quiet q = hush();
    hid_t space = H5Screate_simple(l->ndims, dims, NULL), type = file_type(l->type);
    hid_t set = H5Dcreate2(o->file, path, type, space, o->lcpl, H5P_DEFAULT, H5P_DEFAULT);
    int rc = set >= 0 && H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0 ? 0 : -1;
    /* the metadata on disk after each block, so that what a full disk leaves to flush at close is this block's */
    if (rc == 0 && (room_for(o, 0) != 0 || H5Fflush(o->file, H5F_SCOPE_LOCAL) < 0)) rc = -1;
    haddr_t address = rc == 0 ? H5Dget_offset(set) : HADDR_UNDEF;
    if (set >= 0) H5Dclose(set);
    H5Sclose(space);
    unhush(q);
    *where = (uint64_t)address;
    if (rc == 0 && address != HADDR_UNDEF) return 0;
    o->failed = errno = errno ? errno : EIO;
    return -1;
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
    if (close_output(o) < 0) fprintf(stderr, "ioloom-async: writer %d: closing its HDF5 output failed\n", w->id);
    H5Pclose(o->lcpl);
    free(o);
    w->handle = NULL;
}

const struct async_store async_store_hdf5 = {"hdf5", hdf5_open, hdf5_put, hdf5_undo, hdf5_sync, hdf5_close, NULL};

/* hdf5-shared: collective over the servers (every server opens together, or none: see async_writer_open). */
static int shared_open(struct async_writer *w, const struct async_config *cfg, char msg[ASYNC_MSG_MAX]) {
    char path[1200];
    struct h5_output *o = calloc(1, sizeof *o);
    struct quiet q = hush();
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, async_g.servers, MPI_INFO_NULL);
    snprintf(path, sizeof path, "%s/%s.h5", cfg->directory, cfg->name);
    o->file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    keep_room(o, path, w->id);
    o->lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(o->lcpl, 1);
    o->dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_alloc_time(o->dcpl, H5D_ALLOC_TIME_EARLY); /* an address for the index before any write */
    H5Pset_fill_time(o->dcpl, H5D_FILL_TIME_NEVER);   /* a block no client gave is not written twice */
    o->dxpl = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(o->dxpl, H5FD_MPIO_COLLECTIVE);
    o->writer = w->id;
    unhush(q);
    w->handle = o;
    if (o->file >= 0) return 0;
    snprintf(msg, ASYNC_MSG_MAX, "%.400s: the servers cannot create the shared HDF5 output", path);
    return -1;
}

/* The file selection of this server's blocks of `variable` (the pieces are in block order), and how many. */
static int select_blocks(hid_t space, const struct async_layout *l, int variable, const struct async_piece *pieces,
                         int n) {
    hsize_t start[ASYNC_DIMS_MAX + 1] = {0}, count[ASYNC_DIMS_MAX + 1];
    int selected = 0;
    for (int d = 0; d < l->ndims; d++) count[d + 1] = (hsize_t)l->dims[d];
    count[0] = 1;
    H5Sselect_none(space);
    for (int k = 0; k < n; k++) {
        if (pieces[k].variable != variable) continue;
        start[0] = (hsize_t)pieces[k].block;
        H5Sselect_hyperslab(space, H5S_SELECT_OR, start, NULL, count, NULL);
        selected++;
    }
    return selected;
}

/* This server's blocks of `variable`, contiguous in block order: the one block where it is, or copied. */
static const void *gather(struct h5_output *o, const struct async_layout *l, int variable,
                          const struct async_piece *pieces, int n, int selected) {
    const void *only = o; /* any address: HDF5 reads nothing from a buffer with nothing selected */
    size_t at = 0;
    if (selected > 1 && o->staging_size < (size_t)selected * l->bytes) {
        free(o->staging);
        o->staging = malloc((size_t)selected * l->bytes);
        o->staging_size = (size_t)selected * l->bytes;
    }
    for (int k = 0; k < n; k++) {
        if (pieces[k].variable != variable) continue;
        only = pieces[k].data;
        if (selected > 1) memcpy(o->staging + at, pieces[k].data, l->bytes), at += l->bytes;
    }
    return selected > 1 ? o->staging : only;
}

/* Without positions: the blocks stacked along a first dimension (the block), in one collective write. */
static int write_stacked(struct h5_output *o, const struct async_layout *l, hid_t set, hid_t space, int variable,
                         const struct async_piece *pieces, int n) {
    int selected = select_blocks(space, l, variable, pieces, n);
    hsize_t nvalues = (hsize_t)selected * (hsize_t)(l->bytes / l->element);
    hid_t memory = H5Screate_simple(1, nvalues ? &nvalues : (hsize_t[]){1}, NULL);
    if (!selected) H5Sselect_none(memory);
    const void *data = gather(o, l, variable, pieces, n, selected);
    int failed = H5Dwrite(set, file_type(l->type), memory, space, o->dxpl, data) < 0;
    H5Sclose(memory);
    return failed;
}

/* A positioned layout: each block at its position in the global extents. A union of blocks' hyperslabs is not in
 * block order in the file, so a server writes one block per collective write, in `rounds` writes (the most blocks
 * any server has of the variable), with nothing selected once it has written all of its. */
static int write_positioned(struct h5_output *o, const struct async_layout *l, hid_t set, hid_t space, int variable,
                            const struct async_piece *pieces, int n, int rounds) {
    hsize_t start[ASYNC_DIMS_MAX], count[ASYNC_DIMS_MAX];
    int failed = 0, k = 0;
    for (int d = 0; d < l->ndims; d++) count[d] = (hsize_t)l->dims[d];
    hid_t memory = H5Screate_simple(l->ndims, count, NULL);
    for (int round = 0; round < rounds; round++) {
        while (k < n && pieces[k].variable != variable) k++;
        const void *data = o; /* any address: HDF5 reads nothing from a buffer with nothing selected */
        H5Sselect_all(memory);
        if (k < n) {
            for (int d = 0; d < l->ndims; d++) start[d] = (hsize_t)l->offsets[(size_t)pieces[k].block * l->ndims + d];
            H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL);
            data = pieces[k++].data;
        } else {
            H5Sselect_none(space), H5Sselect_none(memory);
        }
        failed |= H5Dwrite(set, file_type(l->type), memory, space, o->dxpl, data) < 0;
    }
    H5Sclose(memory);
    return failed;
}

/* Whether every server's call succeeded (ok on this one), agreed by all. */
static int everywhere(int ok) {
    int all;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, async_g.servers);
    return all;
}

/* A variable's dataset of an iteration, created on this server. HDF5's changes of metadata are collective: every
 * server must make the same ones, so a server whose creation failed tries once more (after a passing failure its
 * metadata are then the same as the others'). */
static hid_t create_dataset(struct h5_output *o, const char *path, hid_t type, hid_t space) {
    hid_t set = H5Dcreate2(o->file, path, type, space, o->lcpl, o->dcpl, H5P_DEFAULT);
    if (set >= 0) return set;
    fprintf(stderr, "ioloom-async: writer %d: HDF5 could not create %s in the shared output; trying once more\n",
            o->writer, path);
    return H5Dcreate2(o->file, path, type, space, o->lcpl, o->dcpl, H5P_DEFAULT);
}

/* How long a server whose creation failed waits for the others to agree on it: they may be waiting for it inside
 * their own H5Dcreate2 (HDF5 reads and flushes metadata collectively), which it will not enter again. */
enum { AGREE_SECONDS = 5 };
static const char METADATA_DIFFER[] =
    "ioloom-async: writer %d: HDF5 could not create %s in the shared output, which the other servers did; their HDF5 "
    "metadata now differ and the file cannot be closed: aborting the job (the file is incomplete; writer.format hdf5 "
    "writes a file per writer)\n";

/* Whether every server created the dataset (made: this one did), agreed by all. When some did and others could
 * not, their HDF5 metadata differ for good: HDF5 1.10 can neither remove the dataset on some servers only nor close
 * the file (each server's H5Fclose would wait in collective calls the others never make, a hang at finalize), so
 * the job ends here, with one line from each server that could not. */
static int made_everywhere(struct h5_output *o, const char *path, int made) {
    int mine[2] = {made, !made}, all[2]; /* all: {every server made it, none did} */
    MPI_Request request;
    MPI_Iallreduce(mine, all, 2, MPI_INT, MPI_MIN, async_g.servers, &request);
    int agreed =
        made ? MPI_Wait(&request, MPI_STATUS_IGNORE) == MPI_SUCCESS : async_completes_within(&request, AGREE_SECONDS);
    if (agreed && (all[0] || all[1])) return all[0];
    if (!made) fprintf(stderr, METADATA_DIFFER, o->writer, path);
    MPI_Abort(async_g.comm, 3);
    return 0;
}

/* One variable's dataset of an iteration, created and written by every server (rounds: the most blocks of it any
 * server has); its address, or HADDR_UNDEF when every server's creation or any server's write failed (then the
 * dataset is removed, so the file holds only whole datasets). */
static haddr_t write_variable(struct h5_output *o, const struct async_config *cfg, int64_t iteration, int variable,
                              const struct async_piece *pieces, int n, int rounds) {
    const struct async_layout *l = &cfg->layouts[cfg->variables[variable].layout];
    hsize_t dims[ASYNC_DIMS_MAX + 1] = {(hsize_t)async_g.nclients}; /* stacked: a block per client */
    char path[ASYNC_NAME_MAX + 32];
    int rank = l->positioned ? l->ndims : l->ndims + 1;
    for (int d = 0; d < l->ndims; d++)
        dims[l->positioned ? d : d + 1] = (hsize_t)(l->positioned ? l->global[d] : l->dims[d]);
    snprintf(path, sizeof path, "/%lld/%s", (long long)iteration, cfg->variables[variable].name);
    hid_t space = H5Screate_simple(rank, dims, NULL), type = file_type(l->type);
    hid_t set = create_dataset(o, path, type, space);
    /* Agreed before the collective writes: a server whose creation failed skips them, so the others must too, or
     * they would wait in those writes for it while it waits in the agreement on them. */
    int made = made_everywhere(o, path, set >= 0);
    int written = made && !(l->positioned ? write_positioned(o, l, set, space, variable, pieces, n, rounds)
                                          : write_stacked(o, l, set, space, variable, pieces, n));
    int lost = !(made && everywhere(written));
    haddr_t address = lost ? HADDR_UNDEF : H5Dget_offset(set);
    H5Sclose(space);
    if (set >= 0) H5Dclose(set);
    if (!lost) return address;
    /* by every server, as HDF5's changes of metadata are collective (where every creation failed, maybe no link) */
    H5Ldelete(o->file, path, H5P_DEFAULT);
    o->failed = EIO; /* on every server: lost is agreed */
    return HADDR_UNDEF;
}

/* The most blocks of each variable any server has at this iteration, agreed by all (datasets are made together,
 * those of no block not at all). */
static void variables_present(const struct async_config *cfg, const struct async_piece *pieces, int n, int *present) {
    int *mine = calloc((size_t)cfg->nvariables, sizeof *mine);
    for (int k = 0; k < n; k++) mine[pieces[k].variable]++;
    MPI_Allreduce(mine, present, cfg->nvariables, MPI_INT, MPI_MAX, async_g.servers);
    free(mine);
}

static int by_block(const void *a, const void *b) {
    const struct async_piece *x = a, *y = b;
    return (x->block > y->block) - (x->block < y->block);
}

static void shared_put_iteration(struct async_writer *w, const struct async_config *cfg, int64_t iteration,
                                 const struct async_piece *pieces, int n, uint64_t *where) {
    struct h5_output *o = w->handle;
    struct async_piece *sorted = malloc((size_t)(n + 1) * sizeof *sorted);
    int *present = malloc((size_t)cfg->nvariables * sizeof *present);
    memcpy(sorted, pieces, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, by_block); /* the order of a hyperslab union: by block */
    variables_present(cfg, pieces, n, present);
    struct quiet q = hush();
    for (int v = 0; v < cfg->nvariables; v++) {
        /* o->failed is the same on every server, so they skip the collective writes together */
        int write = present[v] && !o->failed;
        haddr_t address = write ? write_variable(o, cfg, iteration, v, sorted, n, present[v]) : HADDR_UNDEF;
        const struct async_layout *l = &cfg->layouts[cfg->variables[v].layout];
        /* stacked: where the block's contiguous bytes start; positioned: where the global array starts */
        uint64_t stride = l->positioned ? 0 : l->bytes;
        for (int k = 0; k < n; k++)
            if (pieces[k].variable == v)
                where[k] = address == HADDR_UNDEF ? UINT64_MAX : (uint64_t)address + (uint64_t)pieces[k].block * stride;
    }
    if (cfg->fsync && !o->failed) H5Fflush(o->file, H5F_SCOPE_GLOBAL); /* collective: durable together */
    unhush(q);
    free(present);
    free(sorted);
}

/* hdf5-shared is made durable in put_iteration, by every server together. */
static int shared_sync(struct async_writer *w) {
    (void)w;
    return 0;
}

static void shared_close(struct async_writer *w) {
    struct h5_output *o = w->handle;
    if (!o) return;
    if (close_output(o) < 0) fprintf(stderr, "ioloom-async: writer %d: closing the shared HDF5 output failed\n", w->id);
    H5Pclose(o->lcpl), H5Pclose(o->dcpl), H5Pclose(o->dxpl);
    free(o->staging);
    free(o);
    w->handle = NULL;
}

const struct async_store async_store_hdf5_shared = {"hdf5-shared", shared_open,         NULL, NULL, shared_sync,
                                                    shared_close,  shared_put_iteration};
