/* Every MPI-IO access variant, each on its own file in DIR: explicit offset, individual, shared and ordered
 * pointers; independent and collective; blocking, non-blocking and split; write then read back.
 * Usage: mpiio_matrix DIR [SKIP]: SKIP lists variants not to run, comma-separated (Open MPI's romio321
 * component has no MPI-3.1 non-blocking collectives: it crashes on them). Rank r accesses BLOCK bytes at r * BLOCK
 * (shared and ordered pointers: wherever the MPI library puts them); every read is checked against what was written, so
 * a wrong result exits 1. tests/test_trace_mpi.py holds the same variant names and layout as its oracle. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INTS 1000 /* per rank and access: BLOCK = 4000 bytes, not page aligned */
#define BLOCK (INTS * (int)sizeof(int))

static int rank, nranks;
static char dir[4096];
static int out[INTS], in[INTS];
static MPI_Offset mine; /* this rank's block: rank * BLOCK */
static MPI_Status status;
static MPI_Request requests[2];

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

/* Move the shared file pointer back to 0 once every rank is done with it. ROMIO and OMPIO reset it on rank 0 before
 * seek_shared's own barrier, and an ordered access increments it on each rank as its turn comes, so a rank reaching
 * the seek first could reset the pointer before a slower rank's increment (then two ranks write one block). */
static void rewind_shared(MPI_File fh) {
    MPI_Barrier(MPI_COMM_WORLD);
    check(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET), "seek_shared");
}

/* The data of rank r: distinct per rank and position, so a misplaced block is seen. */
static void fill(int owner) {
    for (int i = 0; i < INTS; i++) out[i] = owner * 1000003 + i;
}

/* Close the variant's file and check what was read back: owner's data, or any rank's when owner is -1
 * (shared pointers). Then reset for the next variant. */
static void close_variant(MPI_File *fh, const char *name, int owner) {
    check(MPI_File_close(fh), "close");
    if (owner < 0) {
        owner = in[0] / 1000003;
        if (owner >= nranks) owner = 0;
    }
    fill(owner);
    if (memcmp(in, out, sizeof in) != 0) {
        fprintf(stderr, "rank %d: %s read wrong data\n", rank, name);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(in, 0, sizeof in);
}

/* Each variant opens its own file, writes its block, reads it back and closes. */
static void variant_at(void) {
    MPI_File fh = open_variant("at");
    check(MPI_File_write_at(fh, mine, out, INTS, MPI_INT, &status), "write_at");
    check(MPI_File_read_at(fh, mine, in, INTS, MPI_INT, MPI_STATUS_IGNORE), "read_at");
    close_variant(&fh, "at", rank);
}

static void variant_at_all(void) {
    MPI_File fh = open_variant("at_all");
    check(MPI_File_write_at_all(fh, mine, out, INTS, MPI_INT, MPI_STATUS_IGNORE), "write_at_all");
    check(MPI_File_read_at_all(fh, mine, in, INTS, MPI_INT, &status), "read_at_all");
    close_variant(&fh, "at_all", rank);
}

static void variant_individual(void) {
    MPI_File fh = open_variant("individual");
    check(MPI_File_seek(fh, mine, MPI_SEEK_SET), "seek");
    check(MPI_File_write(fh, out, INTS, MPI_INT, MPI_STATUS_IGNORE), "write");
    check(MPI_File_seek(fh, mine, MPI_SEEK_SET), "seek");
    check(MPI_File_read(fh, in, INTS, MPI_INT, MPI_STATUS_IGNORE), "read");
    close_variant(&fh, "individual", rank);
}

static void variant_individual_all(void) {
    MPI_File fh = open_variant("individual_all");
    check(MPI_File_seek(fh, mine, MPI_SEEK_SET), "seek");
    check(MPI_File_write_all(fh, out, INTS, MPI_INT, MPI_STATUS_IGNORE), "write_all");
    check(MPI_File_seek(fh, mine, MPI_SEEK_SET), "seek");
    check(MPI_File_read_all(fh, in, INTS, MPI_INT, MPI_STATUS_IGNORE), "read_all");
    close_variant(&fh, "individual_all", rank);
}

/* Shared pointer: the order between ranks is up to the library, so the block read back may be anyone's. */
static void variant_shared(void) {
    MPI_File fh = open_variant("shared");
    check(MPI_File_write_shared(fh, out, INTS, MPI_INT, MPI_STATUS_IGNORE), "write_shared");
    MPI_Barrier(MPI_COMM_WORLD);
    rewind_shared(fh);
    check(MPI_File_read_shared(fh, in, INTS, MPI_INT, MPI_STATUS_IGNORE), "read_shared");
    close_variant(&fh, "shared", -1);
}

/* Ordered: rank order. */
static void variant_ordered(void) {
    MPI_File fh = open_variant("ordered");
    check(MPI_File_write_ordered(fh, out, INTS, MPI_INT, MPI_STATUS_IGNORE), "write_ordered");
    rewind_shared(fh);
    check(MPI_File_read_ordered(fh, in, INTS, MPI_INT, MPI_STATUS_IGNORE), "read_ordered");
    close_variant(&fh, "ordered", rank);
}

/* Non-blocking, completed by each member of the Wait and Test families. */
static void variant_iat(void) {
    MPI_File fh = open_variant("iat");
    check(MPI_File_iwrite_at(fh, mine, out, INTS, MPI_INT, &requests[0]), "iwrite_at");
    check(MPI_Wait(&requests[0], MPI_STATUS_IGNORE), "MPI_Wait");
    check(MPI_File_iread_at(fh, mine, in, INTS, MPI_INT, &requests[0]), "iread_at");
    for (int done = 0; !done;) check(MPI_Test(&requests[0], &done, MPI_STATUS_IGNORE), "MPI_Test");
    close_variant(&fh, "iat", rank);
}

static void variant_iat_all(void) {
    MPI_File fh = open_variant("iat_all");
    int index;
    check(MPI_File_iwrite_at_all(fh, mine, out, INTS, MPI_INT, &requests[0]), "iwrite_at_all");
    check(MPI_Waitall(1, requests, MPI_STATUSES_IGNORE), "MPI_Waitall");
    check(MPI_File_iread_at_all(fh, mine, in, INTS, MPI_INT, &requests[0]), "iread_at_all");
    check(MPI_Waitany(1, requests, &index, &status), "MPI_Waitany");
    close_variant(&fh, "iat_all", rank);
}

static void variant_iindividual(void) {
    MPI_File fh = open_variant("iindividual");
    int index, flag, outcount, indices[2];
    check(MPI_File_seek(fh, mine, MPI_SEEK_SET), "seek");
    check(MPI_File_iwrite(fh, out, INTS, MPI_INT, &requests[0]), "iwrite");
    requests[1] = MPI_REQUEST_NULL;
    for (outcount = 0; outcount == 0;)
        check(MPI_Waitsome(2, requests, &outcount, indices, MPI_STATUSES_IGNORE), "MPI_Waitsome");
    check(MPI_File_seek(fh, mine, MPI_SEEK_SET), "seek");
    check(MPI_File_iread(fh, in, INTS, MPI_INT, &requests[0]), "iread");
    for (flag = 0; !flag;) check(MPI_Testany(1, requests, &index, &flag, MPI_STATUS_IGNORE), "MPI_Testany");
    close_variant(&fh, "iindividual", rank);
}

static void variant_iindividual_all(void) {
    MPI_File fh = open_variant("iindividual_all");
    int flag, outcount, indices[1];
    check(MPI_File_seek(fh, mine, MPI_SEEK_SET), "seek");
    check(MPI_File_iwrite_all(fh, out, INTS, MPI_INT, &requests[0]), "iwrite_all");
    for (flag = 0; !flag;) check(MPI_Testall(1, requests, &flag, MPI_STATUSES_IGNORE), "MPI_Testall");
    check(MPI_File_seek(fh, mine, MPI_SEEK_SET), "seek");
    check(MPI_File_iread_all(fh, in, INTS, MPI_INT, &requests[0]), "iread_all");
    for (outcount = 0; outcount == 0;)
        check(MPI_Testsome(1, requests, &outcount, indices, MPI_STATUSES_IGNORE), "MPI_Testsome");
    close_variant(&fh, "iindividual_all", rank);
}

static void variant_ishared(void) {
    MPI_File fh = open_variant("ishared");
    check(MPI_File_iwrite_shared(fh, out, INTS, MPI_INT, &requests[0]), "iwrite_shared");
    check(MPI_Wait(&requests[0], &status), "MPI_Wait");
    MPI_Barrier(MPI_COMM_WORLD);
    rewind_shared(fh);
    check(MPI_File_iread_shared(fh, in, INTS, MPI_INT, &requests[0]), "iread_shared");
    check(MPI_Wait(&requests[0], &status), "MPI_Wait");
    close_variant(&fh, "ishared", -1);
}

/* Split collectives. */
static void variant_split_at(void) {
    MPI_File fh = open_variant("split_at");
    check(MPI_File_write_at_all_begin(fh, mine, out, INTS, MPI_INT), "write_at_all_begin");
    check(MPI_File_write_at_all_end(fh, out, &status), "write_at_all_end");
    check(MPI_File_read_at_all_begin(fh, mine, in, INTS, MPI_INT), "read_at_all_begin");
    check(MPI_File_read_at_all_end(fh, in, MPI_STATUS_IGNORE), "read_at_all_end");
    close_variant(&fh, "split_at", rank);
}

static void variant_split_individual(void) {
    MPI_File fh = open_variant("split_individual");
    check(MPI_File_seek(fh, mine, MPI_SEEK_SET), "seek");
    check(MPI_File_write_all_begin(fh, out, INTS, MPI_INT), "write_all_begin");
    check(MPI_File_write_all_end(fh, out, MPI_STATUS_IGNORE), "write_all_end");
    check(MPI_File_seek(fh, mine, MPI_SEEK_SET), "seek");
    check(MPI_File_read_all_begin(fh, in, INTS, MPI_INT), "read_all_begin");
    check(MPI_File_read_all_end(fh, in, MPI_STATUS_IGNORE), "read_all_end");
    close_variant(&fh, "split_individual", rank);
}

static void variant_split_ordered(void) {
    MPI_File fh = open_variant("split_ordered");
    check(MPI_File_write_ordered_begin(fh, out, INTS, MPI_INT), "write_ordered_begin");
    check(MPI_File_write_ordered_end(fh, out, MPI_STATUS_IGNORE), "write_ordered_end");
    rewind_shared(fh);
    check(MPI_File_read_ordered_begin(fh, in, INTS, MPI_INT), "read_ordered_begin");
    check(MPI_File_read_ordered_end(fh, in, MPI_STATUS_IGNORE), "read_ordered_end");
    close_variant(&fh, "split_ordered", rank);
}

/* A strided view: rank r owns every nranks-th run of RUN ints from r * RUN; INTS ints are 4 runs. The
 * collective pair goes through two-phase I/O; the independent pair through data sieving (ROMIO). */
static void strided(const char *name, int independent) {
    enum { RUN = INTS / 4 };
    MPI_Datatype runs, filetype;
    MPI_Type_vector(4, RUN, RUN * nranks, MPI_INT, &runs);
    MPI_Type_create_resized(runs, 0, (MPI_Aint)RUN * nranks * 4 * (MPI_Aint)sizeof(int), &filetype);
    MPI_Type_commit(&filetype);
    MPI_File fh = open_variant(name);
    check(MPI_File_set_view(fh, (MPI_Offset)rank * RUN * (MPI_Offset)sizeof(int), MPI_INT, filetype, "native",
                            MPI_INFO_NULL),
          "set_view");
    if (independent) {
        check(MPI_File_write(fh, out, INTS, MPI_INT, MPI_STATUS_IGNORE), "write (strided)");
        check(MPI_File_read_at(fh, 0, in, INTS, MPI_INT, MPI_STATUS_IGNORE), "read_at (strided)");
    } else {
        check(MPI_File_write_all(fh, out, INTS, MPI_INT, MPI_STATUS_IGNORE), "write_all (strided)");
        check(MPI_File_read_at_all(fh, 0, in, INTS, MPI_INT, MPI_STATUS_IGNORE), "read_at_all (strided)");
    }
    close_variant(&fh, name, rank);
    MPI_Type_free(&filetype);
    MPI_Type_free(&runs);
}
static void variant_strided_all(void) { strided("strided_all", 0); }
static void variant_strided(void) { strided("strided", 1); }

#if MPI_VERSION >= 4
/* MPI-4 large-count forms (MPICH 4; Open MPI 4.1 has none). */
static void variant_large_count(void) {
    MPI_File fh = open_variant("large_count");
    check(MPI_File_write_at_all_c(fh, mine, out, (MPI_Count)INTS, MPI_INT, MPI_STATUS_IGNORE), "write_at_all_c");
    check(MPI_File_read_at_c(fh, mine, in, (MPI_Count)INTS, MPI_INT, MPI_STATUS_IGNORE), "read_at_c");
    close_variant(&fh, "large_count", rank);
}
#endif

/* File calls that move no data. */
static void variant_file_calls(void) {
    MPI_File fh = open_variant("file_calls");
    MPI_Offset size = 0;
    check(MPI_File_set_size(fh, (MPI_Offset)nranks * BLOCK), "set_size");
    check(MPI_File_preallocate(fh, (MPI_Offset)nranks * BLOCK * 2), "preallocate");
    check(MPI_File_get_size(fh, &size), "get_size");
    check(MPI_File_sync(fh), "sync");
    MPI_File_close(&fh);
}

static const struct {
    const char *name;
    void (*run)(void);
} variants[] = {
#define VARIANT(name) {#name, variant_##name}
    VARIANT(at),
    VARIANT(at_all),
    VARIANT(individual),
    VARIANT(individual_all),
    VARIANT(shared),
    VARIANT(ordered),
    VARIANT(iat),
    VARIANT(iat_all),
    VARIANT(iindividual),
    VARIANT(iindividual_all),
    VARIANT(ishared),
    VARIANT(split_at),
    VARIANT(split_individual),
    VARIANT(split_ordered),
    VARIANT(strided_all),
    VARIANT(strided),
#if MPI_VERSION >= 4
    VARIANT(large_count),
#endif
    VARIANT(file_calls),
#undef VARIANT
};

/* Is name in the comma-separated list? */
static int listed(const char *list, const char *name) {
    size_t len = strlen(name);
    for (const char *at = list; (at = strstr(at, name)); at += len)
        if ((at == list || at[-1] == ',') && (at[len] == ',' || at[len] == '\0')) return 1;
    return 0;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: mpiio_matrix DIR [SKIP,VARIANTS]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    snprintf(dir, sizeof dir, "%s", argv[1]);
    mine = (MPI_Offset)rank * BLOCK;
    int ran = 0;
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++)
        if (argc < 3 || !listed(argv[2], variants[i].name)) {
            fill(rank);
            variants[i].run();
            ran++;
        }
    if (rank == 0) printf("mpiio_matrix: %d ranks ok, %d variants\n", nranks, ran);
    MPI_Finalize();
    return 0;
}
