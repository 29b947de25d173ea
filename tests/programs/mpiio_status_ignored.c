/* Every blocking MPI-IO write, each called twice in a row with the same arguments: first with a status, whose
 * MPI_Get_count must be the count asked for (else exit 1), then with MPI_STATUS_IGNORE (the tracer then records
 * count x type size: docs/trace-format.md, mpiio). Datatypes: bytes, ints, and a vector with holes in memory;
 * then a view with holes in the file. Last, a read past the end of file, with a status and ignoring it: it reads
 * less than asked, and the status's count says how much.
 * Usage: mpiio_status_ignored FILE (any number of ranks; each writes its own blocks, shared pointers where the
 * library puts them). Prints "mpiio_status_ignored: N ranks ok" on rank 0. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define SLOT 4096 /* bytes per rank and write: rank r's explicit and individual writes land in its own slots */
#define TAIL 10   /* bytes the final read finds before the end of file */

static int rank, nranks, writes;
static char data[SLOT];

static void check(int rc, const char *what) {
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: %s failed (%d)\n", rank, what, rc);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

/* One write of `count` `type`s with a status, then the same ignoring it (each in a slot of its own). */
static void write_both(MPI_File fh, int variant, int count, MPI_Datatype type, const char *name) {
    MPI_Status status;
    for (int ignore = 0; ignore < 2; ignore++) {
        MPI_Status *s = ignore ? MPI_STATUS_IGNORE : &status;
        MPI_Offset at = (MPI_Offset)(writes++ * nranks + rank) * SLOT;
        int rc;
        if (variant == 0)
            rc = MPI_File_write_at(fh, at, data, count, type, s);
        else if (variant == 1)
            rc = MPI_File_write_at_all(fh, at, data, count, type, s);
        else if (variant == 2 || variant == 3) {
            check(MPI_File_seek(fh, at, MPI_SEEK_SET), "seek");
            rc = variant == 2 ? MPI_File_write(fh, data, count, type, s) : MPI_File_write_all(fh, data, count, type, s);
        } else if (variant == 4)
            rc = MPI_File_write_shared(fh, data, count, type, s);
        else
            rc = MPI_File_write_ordered(fh, data, count, type, s);
        check(rc, name);
        int got = -1;
        if (!ignore && (MPI_Get_count(&status, type, &got) != MPI_SUCCESS || got != count)) {
            fprintf(stderr, "rank %d: %s of %d wrote %d by its status\n", rank, name, count, got);
            exit(1);
        }
    }
}

static const char *const names[] = {"write_at", "write_at_all", "write", "write_all", "write_shared", "write_ordered"};

/* A read of SLOT bytes starting TAIL bytes before the end of file, with a status then ignoring it. */
static void read_past_end(MPI_File fh) {
    MPI_Offset size;
    MPI_Status status;
    int got = -1;
    check(MPI_File_get_size(fh, &size), "get_size");
    check(MPI_File_read_at(fh, size - TAIL, data, SLOT, MPI_BYTE, &status), "read_at");
    if (MPI_Get_count(&status, MPI_BYTE, &got) != MPI_SUCCESS || got != TAIL) {
        fprintf(stderr, "rank %d: read_at past the end read %d bytes by its status\n", rank, got);
        exit(1);
    }
    check(MPI_File_read_at(fh, size - TAIL, data, SLOT, MPI_BYTE, MPI_STATUS_IGNORE), "read_at");
}

int main(int argc, char **argv) {
    MPI_File fh;
    MPI_Datatype holes, filetype;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc != 2) MPI_Abort(MPI_COMM_WORLD, 2);
    MPI_Type_vector(3, 2, 4, MPI_INT, &holes); /* 24 bytes of data in an extent of 40 */
    MPI_Type_commit(&holes);
    check(MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh), "open");
    for (int variant = 0; variant < 6; variant++) {
        write_both(fh, variant, 100, MPI_BYTE, names[variant]);
        write_both(fh, variant, 25, MPI_INT, names[variant]);
        write_both(fh, variant, 5, holes, names[variant]);
    }
    /* A view whose filetype has holes: 8 bytes of every 32 are this view's (the data is not read). */
    MPI_Type_create_resized(MPI_LONG_LONG, 0, 32, &filetype);
    MPI_Type_commit(&filetype);
    check(MPI_File_set_view(fh, (MPI_Offset)writes * nranks * SLOT, MPI_BYTE, filetype, "native", MPI_INFO_NULL),
          "set_view");
    writes = 0;
    write_both(fh, 0, 64, MPI_BYTE, "write_at through a view with holes");
    check(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL), "set_view");
    MPI_Barrier(MPI_COMM_WORLD);
    read_past_end(fh);
    check(MPI_File_close(&fh), "close");
    MPI_Type_free(&holes);
    MPI_Type_free(&filetype);
    if (rank == 0) printf("mpiio_status_ignored: %d ranks ok\n", nranks);
    MPI_Finalize();
    return 0;
}
