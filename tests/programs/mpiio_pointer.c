/* Individual-pointer MPI-IO calls in a random order, each preceded by MPI_File_get_position and
 * MPI_File_get_byte_offset (which the tracer does not trace): the tracer follows the pointer instead of asking for it,
 * and each data call's aux and offset must be the position and byte offset printed for it. Writes and reads,
 * collective, non-blocking, split, of ints and of a 3-int type, seeks from the start, the current place and to the
 * end, reads that stop short at the end of file, views with and without holes, and MPI_File_sync (which
 * mpiio_view_tool.c, preloaded after the tracer, turns into a view set inside it, untraced).
 * Usage: mpiio_pointer FILE CALLS SEED. One rank. Prints "positions: P1:B1 P2:B2 ..." (one per data call). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define MOST 64 /* ints per call at most */

static MPI_File fh;
static MPI_Datatype three_ints, holes;
static int data[3 * MOST];
static unsigned seed;

static void check(int rc, const char *what) {
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "mpiio_pointer: %s failed (%d)\n", what, rc);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

static int pick(int n) { return (int)(rand_r(&seed) % (unsigned)n); }

static void print_position(void) {
    MPI_Offset at, byte;
    check(MPI_File_get_position(fh, &at), "get_position");
    check(MPI_File_get_byte_offset(fh, at, &byte), "get_byte_offset");
    printf(" %lld:%lld", (long long)at, (long long)byte);
}

/* One data call through the individual pointer (what = 0..5; no non-blocking or split read: Open MPI 4.1's
 * MPI_Wait and read_all_end can spin for ever on one that reaches the end of file). */
static void data_call(int what, int count) {
    MPI_Request request;
    MPI_Datatype type = pick(3) ? MPI_INT : three_ints;
    print_position();
    switch (what) {
    case 0: check(MPI_File_write(fh, data, count, type, MPI_STATUS_IGNORE), "write"); break;
    case 1: check(MPI_File_read(fh, data, count, type, MPI_STATUS_IGNORE), "read"); break;
    case 2: check(MPI_File_write_all(fh, data, count, type, MPI_STATUS_IGNORE), "write_all"); break;
    case 3: check(MPI_File_read_all(fh, data, count, type, MPI_STATUS_IGNORE), "read_all"); break;
    case 4: check(MPI_File_iwrite(fh, data, count, type, &request), "iwrite"); break;
    default:
        check(MPI_File_write_all_begin(fh, data, count, type), "write_all_begin");
        check(MPI_File_write_all_end(fh, data, MPI_STATUS_IGNORE), "write_all_end");
        return;
    }
    if (what == 4) check(MPI_Wait(&request, MPI_STATUS_IGNORE), "wait");
}

/* Something else that moves the pointer: a seek (from the start, here, the end), a new view, or a sync (a new view
 * under mpiio_view_tool.c). */
static void move(void) {
    int how = pick(5);
    if (how == 4) {
        check(MPI_File_sync(fh), "sync");
    } else if (how == 3) {
        MPI_Offset disp = 4 * pick(8);
        check(MPI_File_set_view(fh, disp, MPI_INT, pick(2) ? MPI_INT : holes, "native", MPI_INFO_NULL), "view");
    } else {
        MPI_Offset at;
        check(MPI_File_get_position(fh, &at), "get_position");
        MPI_Offset by = how == 0 ? pick(200) : how == 1 ? (at > 20 ? pick(40) - 20 : pick(20)) : 0;
        check(MPI_File_seek(fh, by, how == 0 ? MPI_SEEK_SET : how == 1 ? MPI_SEEK_CUR : MPI_SEEK_END), "seek");
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    if (argc != 4) MPI_Abort(MPI_COMM_WORLD, 2);
    long calls = atol(argv[2]);
    seed = (unsigned)atol(argv[3]);
    MPI_Type_contiguous(3, MPI_INT, &three_ints);
    MPI_Type_commit(&three_ints);
    MPI_Type_vector(1, 2, 3, MPI_INT, &holes); /* 2 ints of every 3 */
    MPI_Type_create_resized(holes, 0, 12, &holes);
    MPI_Type_commit(&holes);
    check(MPI_File_open(MPI_COMM_SELF, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh), "open");
    printf("positions:");
    for (long i = 0; i < calls; i++) {
        if (pick(4) == 0) move();
        data_call(pick(6), 1 + pick(MOST / 3));
    }
    printf("\n");
    check(MPI_File_close(&fh), "close");
    MPI_Type_free(&three_ints);
    MPI_Type_free(&holes);
    MPI_Finalize();
    return 0;
}
