/* MPI-IO backend: explicit offsets, independent (MPI_File_write_at) or collective (MPI_File_write_at_all).
 * Every rank makes the same number of calls in every pattern, so the collective calls always match. */
#include "backend.h"

#include <stdlib.h>

static struct bench_file *mpiio_open(const struct bench_options *o, const char *name, MPI_Comm comm, int writing,
                                     uint64_t extent) {
    (void)extent;
    MPI_Info info = bench_hints_info(o);
    MPI_File fh;
    int amode = writing ? MPI_MODE_WRONLY | MPI_MODE_CREATE : MPI_MODE_RDONLY;
    int err = MPI_File_open(comm, name, amode, info, &fh);
    if (info != MPI_INFO_NULL) MPI_Info_free(&info);
    if (err != MPI_SUCCESS) {
        bench_mpi_failed("MPI_File_open", name, err);
        return NULL;
    }
    struct bench_file *f = calloc(1, sizeof *f);
    f->fh = fh;
    f->collective = o->collective;
    return f;
}

static int mpiio_transfer(struct bench_file *f, void *buf, size_t len, uint64_t offset, int writing) {
    MPI_Status st;
    int err;
    if (writing)
        err = f->collective ? MPI_File_write_at_all(f->fh, (MPI_Offset)offset, buf, (int)len, MPI_BYTE, &st)
                            : MPI_File_write_at(f->fh, (MPI_Offset)offset, buf, (int)len, MPI_BYTE, &st);
    else
        err = f->collective ? MPI_File_read_at_all(f->fh, (MPI_Offset)offset, buf, (int)len, MPI_BYTE, &st)
                            : MPI_File_read_at(f->fh, (MPI_Offset)offset, buf, (int)len, MPI_BYTE, &st);
    if (err != MPI_SUCCESS) return bench_mpi_failed(writing ? "MPI_File_write_at" : "MPI_File_read_at", "", err);
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    if ((size_t)count != len) {
        bench_error("%s moved %d of %zu bytes at offset %llu", writing ? "MPI_File_write_at" : "MPI_File_read_at",
                    count, len, (unsigned long long)offset);
        return BENCH_EXIT_IO;
    }
    return 0;
}

static int mpiio_sync(struct bench_file *f) {
    int err = MPI_File_sync(f->fh);
    return err == MPI_SUCCESS ? 0 : bench_mpi_failed("MPI_File_sync", "", err);
}

static int mpiio_close(struct bench_file *f) {
    int err = MPI_File_close(&f->fh);
    free(f);
    return err == MPI_SUCCESS ? 0 : bench_mpi_failed("MPI_File_close", "", err);
}

static MPI_Info mpiio_info(struct bench_file *f) {
    MPI_Info info = MPI_INFO_NULL;
    MPI_File_get_info(f->fh, &info);
    return info;
}

const struct bench_backend bench_mpiio_backend = {"mpiio",    mpiio_open,  mpiio_transfer,
                                                  mpiio_sync, mpiio_close, mpiio_info};
