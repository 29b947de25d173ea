/* Every MPI-IO access variant, each on its own file in DIR: explicit offset, individual, shared and ordered
 * pointers; independent and collective; blocking, non-blocking and split; write then read back.
 * Usage: mpiio_matrix DIR. Rank r accesses BLOCK bytes at r * BLOCK (shared and ordered pointers: wherever
 * the MPI library puts them); every read is checked against what was written, so a wrong result exits 1.
 * tests/test_trace_mpi.py holds the same variant names and layout as its oracle. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INTS 1000                       /* per rank and access: BLOCK = 4000 bytes, not page aligned */
#define BLOCK (INTS * (int)sizeof(int))

static int rank, nranks;
static char dir[4096];
static int out[INTS], in[INTS];

static void check(int rc, const char *what) {
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: %s failed (%d)\n", rank, what, rc);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

static MPI_File open_variant(const char *name) {
    char path[4200];
    MPI_File fh;
    snprintf(path, sizeof path, "%s/%s.dat", dir, name);
    check(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh), path);
    return fh;
}

/* The data of rank r: distinct per rank and position, so a misplaced block is seen. */
static void fill(int owner) {
    for (int i = 0; i < INTS; i++)
        out[i] = owner * 1000003 + i;
}

static void expect(const char *name, int owner) {
    fill(owner);
    if (memcmp(in, out, sizeof in) != 0) {
        fprintf(stderr, "rank %d: %s read wrong data\n", rank, name);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(in, 0, sizeof in);
}

/* Shared and ordered pointers: the block read back may be any rank's (shared) or the rank's own (ordered). */
static void expect_some_rank(const char *name) {
    int owner = in[0] / 1000003;
    if (owner < 0 || owner >= nranks)
        owner = -1;
    expect(name, owner);
}

static void wait_test(MPI_Request *request) {
    int done = 0;
    while (!done)
        check(MPI_Test(request, &done, MPI_STATUS_IGNORE), "MPI_Test");
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc != 2) {
        fprintf(stderr, "usage: mpiio_matrix DIR\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    snprintf(dir, sizeof dir, "%s", argv[1]);
    const MPI_Offset mine = (MPI_Offset)rank * BLOCK;
    MPI_Status status;
    MPI_Request request, requests[2];
    MPI_File fh;
    int index, flag, outcount, indices[2];

    /* Explicit offsets. */
    fh = open_variant("at");
    fill(rank);
    check(MPI_File_write_at(fh, mine, out, INTS, MPI_INT, &status), "write_at");
    check(MPI_File_read_at(fh, mine, in, INTS, MPI_INT, MPI_STATUS_IGNORE), "read_at");
    expect("at", rank);
    MPI_File_close(&fh);

    fh = open_variant("at_all");
    fill(rank);
    check(MPI_File_write_at_all(fh, mine, out, INTS, MPI_INT, MPI_STATUS_IGNORE), "write_at_all");
    check(MPI_File_read_at_all(fh, mine, in, INTS, MPI_INT, &status), "read_at_all");
    expect("at_all", rank);
    MPI_File_close(&fh);

    /* Individual pointers. */
    fh = open_variant("individual");
    fill(rank);
    check(MPI_File_seek(fh, mine, MPI_SEEK_SET), "seek");
    check(MPI_File_write(fh, out, INTS, MPI_INT, MPI_STATUS_IGNORE), "write");
    check(MPI_File_seek(fh, mine, MPI_SEEK_SET), "seek");
    check(MPI_File_read(fh, in, INTS, MPI_INT, MPI_STATUS_IGNORE), "read");
    expect("individual", rank);
    MPI_File_close(&fh);

    fh = open_variant("individual_all");
    fill(rank);
    check(MPI_File_seek(fh, mine, MPI_SEEK_SET), "seek");
    check(MPI_File_write_all(fh, out, INTS, MPI_INT, MPI_STATUS_IGNORE), "write_all");
    check(MPI_File_seek(fh, mine, MPI_SEEK_SET), "seek");
    check(MPI_File_read_all(fh, in, INTS, MPI_INT, MPI_STATUS_IGNORE), "read_all");
    expect("individual_all", rank);
    MPI_File_close(&fh);

    /* Shared pointer (order between ranks is up to the library) and ordered (rank order). */
    fh = open_variant("shared");
    fill(rank);
    check(MPI_File_write_shared(fh, out, INTS, MPI_INT, MPI_STATUS_IGNORE), "write_shared");
    MPI_Barrier(MPI_COMM_WORLD);
    check(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET), "seek_shared");
    check(MPI_File_read_shared(fh, in, INTS, MPI_INT, MPI_STATUS_IGNORE), "read_shared");
    expect_some_rank("shared");
    MPI_File_close(&fh);

    fh = open_variant("ordered");
    fill(rank);
    check(MPI_File_write_ordered(fh, out, INTS, MPI_INT, MPI_STATUS_IGNORE), "write_ordered");
    check(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET), "seek_shared");
    check(MPI_File_read_ordered(fh, in, INTS, MPI_INT, MPI_STATUS_IGNORE), "read_ordered");
    expect("ordered", rank);
    MPI_File_close(&fh);

    /* Non-blocking, completed by each member of the Wait and Test families. */
    fh = open_variant("iat");
    fill(rank);
    check(MPI_File_iwrite_at(fh, mine, out, INTS, MPI_INT, &request), "iwrite_at");
    check(MPI_Wait(&request, MPI_STATUS_IGNORE), "MPI_Wait");
    check(MPI_File_iread_at(fh, mine, in, INTS, MPI_INT, &request), "iread_at");
    wait_test(&request);
    expect("iat", rank);
    MPI_File_close(&fh);

    fh = open_variant("iat_all");
    fill(rank);
    check(MPI_File_iwrite_at_all(fh, mine, out, INTS, MPI_INT, &requests[0]), "iwrite_at_all");
    check(MPI_Waitall(1, requests, MPI_STATUSES_IGNORE), "MPI_Waitall");
    check(MPI_File_iread_at_all(fh, mine, in, INTS, MPI_INT, &requests[0]), "iread_at_all");
    check(MPI_Waitany(1, requests, &index, &status), "MPI_Waitany");
    expect("iat_all", rank);
    MPI_File_close(&fh);

    fh = open_variant("iindividual");
    fill(rank);
    check(MPI_File_seek(fh, mine, MPI_SEEK_SET), "seek");
    check(MPI_File_iwrite(fh, out, INTS, MPI_INT, &requests[0]), "iwrite");
    requests[1] = MPI_REQUEST_NULL;
    for (outcount = 0; outcount == 0;)
        check(MPI_Waitsome(2, requests, &outcount, indices, MPI_STATUSES_IGNORE), "MPI_Waitsome");
    check(MPI_File_seek(fh, mine, MPI_SEEK_SET), "seek");
    check(MPI_File_iread(fh, in, INTS, MPI_INT, &requests[0]), "iread");
    for (flag = 0; !flag;)
        check(MPI_Testany(1, requests, &index, &flag, MPI_STATUS_IGNORE), "MPI_Testany");
    expect("iindividual", rank);
    MPI_File_close(&fh);

    fh = open_variant("iindividual_all");
    fill(rank);
    check(MPI_File_seek(fh, mine, MPI_SEEK_SET), "seek");
    check(MPI_File_iwrite_all(fh, out, INTS, MPI_INT, &requests[0]), "iwrite_all");
    for (flag = 0; !flag;)
        check(MPI_Testall(1, requests, &flag, MPI_STATUSES_IGNORE), "MPI_Testall");
    check(MPI_File_seek(fh, mine, MPI_SEEK_SET), "seek");
    check(MPI_File_iread_all(fh, in, INTS, MPI_INT, &requests[0]), "iread_all");
    for (outcount = 0; outcount == 0;)
        check(MPI_Testsome(1, requests, &outcount, indices, MPI_STATUSES_IGNORE), "MPI_Testsome");
    expect("iindividual_all", rank);
    MPI_File_close(&fh);

    fh = open_variant("ishared");
    fill(rank);
    check(MPI_File_iwrite_shared(fh, out, INTS, MPI_INT, &request), "iwrite_shared");
    check(MPI_Wait(&request, &status), "MPI_Wait");
    MPI_Barrier(MPI_COMM_WORLD);
    check(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET), "seek_shared");
    check(MPI_File_iread_shared(fh, in, INTS, MPI_INT, &request), "iread_shared");
    check(MPI_Wait(&request, &status), "MPI_Wait");
    expect_some_rank("ishared");
    MPI_File_close(&fh);

    /* Split collectives. */
    fh = open_variant("split_at");
    fill(rank);
    check(MPI_File_write_at_all_begin(fh, mine, out, INTS, MPI_INT), "write_at_all_begin");
    check(MPI_File_write_at_all_end(fh, out, &status), "write_at_all_end");
    check(MPI_File_read_at_all_begin(fh, mine, in, INTS, MPI_INT), "read_at_all_begin");
    check(MPI_File_read_at_all_end(fh, in, MPI_STATUS_IGNORE), "read_at_all_end");
    expect("split_at", rank);
    MPI_File_close(&fh);

    fh = open_variant("split_individual");
    fill(rank);
    check(MPI_File_seek(fh, mine, MPI_SEEK_SET), "seek");
    check(MPI_File_write_all_begin(fh, out, INTS, MPI_INT), "write_all_begin");
    check(MPI_File_write_all_end(fh, out, MPI_STATUS_IGNORE), "write_all_end");
    check(MPI_File_seek(fh, mine, MPI_SEEK_SET), "seek");
    check(MPI_File_read_all_begin(fh, in, INTS, MPI_INT), "read_all_begin");
    check(MPI_File_read_all_end(fh, in, MPI_STATUS_IGNORE), "read_all_end");
    expect("split_individual", rank);
    MPI_File_close(&fh);

    fh = open_variant("split_ordered");
    fill(rank);
    check(MPI_File_write_ordered_begin(fh, out, INTS, MPI_INT), "write_ordered_begin");
    check(MPI_File_write_ordered_end(fh, out, MPI_STATUS_IGNORE), "write_ordered_end");
    check(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET), "seek_shared");
    check(MPI_File_read_ordered_begin(fh, in, INTS, MPI_INT), "read_ordered_begin");
    check(MPI_File_read_ordered_end(fh, in, MPI_STATUS_IGNORE), "read_ordered_end");
    expect("split_ordered", rank);
    MPI_File_close(&fh);

    /* A strided view: rank r owns every nranks-th run of RUN ints from r * RUN; INTS ints are 4 runs. The
     * collective pair goes through two-phase I/O; the independent pair through data sieving (ROMIO). */
    enum { RUN = INTS / 4 };
    MPI_Datatype runs, filetype;
    MPI_Type_vector(4, RUN, RUN * nranks, MPI_INT, &runs);
    MPI_Type_create_resized(runs, 0, (MPI_Aint)RUN * nranks * 4 * (MPI_Aint)sizeof(int), &filetype);
    MPI_Type_commit(&filetype);
    const char *strided[] = {"strided_all", "strided"};
    for (int independent = 0; independent < 2; independent++) {
        fh = open_variant(strided[independent]);
        fill(rank);
        check(MPI_File_set_view(fh, (MPI_Offset)rank * RUN * (MPI_Offset)sizeof(int), MPI_INT, filetype, "native",
                                MPI_INFO_NULL), "set_view");
        if (independent) {
            check(MPI_File_write(fh, out, INTS, MPI_INT, MPI_STATUS_IGNORE), "write (strided)");
            check(MPI_File_read_at(fh, 0, in, INTS, MPI_INT, MPI_STATUS_IGNORE), "read_at (strided)");
        } else {
            check(MPI_File_write_all(fh, out, INTS, MPI_INT, MPI_STATUS_IGNORE), "write_all (strided)");
            check(MPI_File_read_at_all(fh, 0, in, INTS, MPI_INT, MPI_STATUS_IGNORE), "read_at_all (strided)");
        }
        expect(strided[independent], rank);
        MPI_File_close(&fh);
    }
    MPI_Type_free(&filetype);
    MPI_Type_free(&runs);

#if MPI_VERSION >= 4
    /* MPI-4 large-count forms (MPICH 4; Open MPI 4.1 has none). */
    fh = open_variant("large_count");
    fill(rank);
    check(MPI_File_write_at_all_c(fh, mine, out, (MPI_Count)INTS, MPI_INT, MPI_STATUS_IGNORE), "write_at_all_c");
    check(MPI_File_read_at_c(fh, mine, in, (MPI_Count)INTS, MPI_INT, MPI_STATUS_IGNORE), "read_at_c");
    expect("large_count", rank);
    MPI_File_close(&fh);
#endif

    /* File calls that move no data. */
    fh = open_variant("file_calls");
    check(MPI_File_set_size(fh, (MPI_Offset)nranks * BLOCK), "set_size");
    check(MPI_File_preallocate(fh, (MPI_Offset)nranks * BLOCK * 2), "preallocate");
    MPI_Offset size = 0;
    check(MPI_File_get_size(fh, &size), "get_size");
    check(MPI_File_sync(fh), "sync");
    MPI_File_close(&fh);

    if (rank == 0)
        printf("mpiio_matrix: %d ranks ok\n", nranks);
    MPI_Finalize();
    return 0;
}
