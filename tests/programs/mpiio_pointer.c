/* Individual-pointer MPI-IO calls in a random order, each preceded by MPI_File_get_position and
 * MPI_File_get_byte_offset (which the tracer does not trace): the tracer follows the pointer instead of asking for it
 * (or asks for it, under MPI_THREAD_MULTIPLE), and each data call's aux and offset must be the position and byte
 * offset noted for it. Writes and reads, collective, non-blocking, split, of ints and of a 3-int type, one call in
 * eight failing (a negative count or a null datatype), seeks from the start, the current place and to the end, reads
 * that stop short at the end of file, views with and without holes, and MPI_File_sync (which mpiio_view_tool.c,
 * preloaded after the tracer, turns into a view set inside it, untraced).
 * Three files: FILE.0 opened plain, FILE.1 MPI_MODE_APPEND over data written before (its pointer starts at the end),
 * FILE.2 MPI_MODE_SEQUENTIAL, which has no individual pointer: its individual-pointer calls (erroneous; MPICH refuses
 * them, Open MPI 4.1 runs them) come between shared-pointer writes and views, and are noted -1:-1, the trace's
 * "none". `serial`: the three files one after another; `threads`: at once, a thread each, under MPI_THREAD_MULTIPLE
 * (under Open MPI taking turns, call by call).
 * No non-blocking or split read: Open MPI 4.1's MPI_Wait on an iread, and read_all_end, can spin for ever when the
 * read reaches the end of file, untraced too.
 * Usage: mpiio_pointer FILE CALLS SEED serial|threads. One rank. Prints for each file a line
 * "positions FILE.N: P:B P:B ..." (one pair per individual-pointer data call). */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MOST 64 /* ints per call at most */

enum mode { PLAIN, APPEND, SEQUENTIAL, FILES };

struct worker {
    enum mode mode;
    char path[4200];
    MPI_File fh;
    unsigned seed;
    long calls;
    long long (*noted)[2]; /* position and byte offset before each data call */
    int data[3 * MOST];
};

static MPI_Datatype three_ints, holes;

static void check(int rc, const char *what) {
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "mpiio_pointer: %s failed (%d)\n", what, rc);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

static int pick(struct worker *w, int n) { return (int)(rand_r(&w->seed) % (unsigned)n); }

/* Where the individual pointer is before a data call; -1 on a sequential file (it has none). */
static void note_position(struct worker *w, long call) {
    MPI_Offset at = -1, byte = -1;
    if (w->mode != SEQUENTIAL) {
        check(MPI_File_get_position(w->fh, &at), "get_position");
        check(MPI_File_get_byte_offset(w->fh, at, &byte), "get_byte_offset");
    }
    w->noted[call][0] = at;
    w->noted[call][1] = byte;
}

/* One data call through the individual pointer (what = 0..5); one in eight is made to fail (a negative count or a
 * null datatype). On a sequential file, whether a call fails is the library's. */
static void data_call(struct worker *w, int what, int count) {
    MPI_Request request;
    MPI_Datatype type = pick(w, 3) ? MPI_INT : three_ints;
    int fails = pick(w, 8) == 0, rc;
    if (fails && pick(w, 2))
        count = -1;
    else if (fails)
        type = MPI_DATATYPE_NULL;
    switch (what) {
        case 0:
            rc = MPI_File_write(w->fh, w->data, count, type, MPI_STATUS_IGNORE);
            break;
        case 1:
            rc = MPI_File_read(w->fh, w->data, count, type, MPI_STATUS_IGNORE);
            break;
        case 2:
            rc = MPI_File_write_all(w->fh, w->data, count, type, MPI_STATUS_IGNORE);
            break;
        case 3:
            rc = MPI_File_read_all(w->fh, w->data, count, type, MPI_STATUS_IGNORE);
            break;
        case 4:
            if ((rc = MPI_File_iwrite(w->fh, w->data, count, type, &request)) == MPI_SUCCESS)
                check(MPI_Wait(&request, MPI_STATUS_IGNORE), "wait");
            break;
        default:
            if ((rc = MPI_File_write_all_begin(w->fh, w->data, count, type)) == MPI_SUCCESS)
                check(MPI_File_write_all_end(w->fh, w->data, MPI_STATUS_IGNORE), "write_all_end");
    }
    if (w->mode != SEQUENTIAL && (rc == MPI_SUCCESS) == fails) {
        fprintf(stderr, "mpiio_pointer: call %d of %d returned %d\n", what, count, rc);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

/* Something else that moves the pointer: a seek (from the start, here, the end), a new view, or a sync (a new view
 * under mpiio_view_tool.c). A sequential file takes no seek: a view from where it is, or a shared-pointer write. */
static void move(struct worker *w) {
    int how = pick(w, 5);
    MPI_Datatype filetype = pick(w, 2) ? MPI_INT : holes;
    if (w->mode == SEQUENTIAL && how < 2) {
        check(MPI_File_set_view(w->fh, MPI_DISPLACEMENT_CURRENT, MPI_INT, filetype, "native", MPI_INFO_NULL), "view");
    } else if (w->mode == SEQUENTIAL) {
        check(MPI_File_write_shared(w->fh, w->data, 1 + pick(w, MOST), MPI_INT, MPI_STATUS_IGNORE), "write_shared");
    } else if (how == 4) {
        check(MPI_File_sync(w->fh), "sync");
    } else if (how == 3) {
        check(MPI_File_set_view(w->fh, 4 * pick(w, 8), MPI_INT, filetype, "native", MPI_INFO_NULL), "view");
    } else {
        MPI_Offset at;
        check(MPI_File_get_position(w->fh, &at), "get_position");
        MPI_Offset by = how == 0 ? pick(w, 200) : how == 1 ? (at > 20 ? pick(w, 40) - 20 : pick(w, 20)) : 0;
        check(MPI_File_seek(w->fh, by, how == 0 ? MPI_SEEK_SET : how == 1 ? MPI_SEEK_CUR : MPI_SEEK_END), "seek");
    }
}

/* A new file in the worker's mode; an append file over up to MOST ints written before. */
static void open_file(struct worker *w) {
    int amode = w->mode == SEQUENTIAL ? MPI_MODE_WRONLY | MPI_MODE_SEQUENTIAL : MPI_MODE_RDWR;
    MPI_File_delete(w->path, MPI_INFO_NULL); /* fails if there is none: MPI_ERRORS_RETURN */
    if (w->mode == APPEND) {
        check(MPI_File_open(MPI_COMM_SELF, w->path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &w->fh), "open");
        check(MPI_File_write_at(w->fh, 0, w->data, 1 + pick(w, MOST), MPI_INT, MPI_STATUS_IGNORE), "write_at");
        check(MPI_File_close(&w->fh), "close");
        amode |= MPI_MODE_APPEND;
    }
    check(MPI_File_open(MPI_COMM_SELF, w->path, amode | MPI_MODE_CREATE, MPI_INFO_NULL, &w->fh), "open");
}

/* Open MPI 4.1's MPI-IO is not safe with calls on different files at once (untraced: MPI_File_sync fails, or the
 * program crashes): its threads take turns, step by step; MPICH's run at once. */
static pthread_mutex_t turns = PTHREAD_MUTEX_INITIALIZER;
static void turn(int take) {
#ifdef OPEN_MPI
    (take ? pthread_mutex_lock : pthread_mutex_unlock)(&turns);
#else
    (void)take;
#endif
}

static void *work(void *arg) {
    struct worker *w = arg;
    turn(1);
    open_file(w);
    turn(0);
    for (long i = 0; i < w->calls; i++) {
        turn(1);
        if (i > 0 && pick(w, 4) == 0) move(w); /* the first call sees where the file opened */
        note_position(w, i);
        data_call(w, pick(w, 6), 1 + pick(w, MOST / 3));
        turn(0);
    }
    turn(1);
    check(MPI_File_close(&w->fh), "close");
    turn(0);
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc == 5 && strcmp(argv[4], "threads") == 0, provided = MPI_THREAD_SINGLE;
    if (threads)
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    else
        MPI_Init(&argc, &argv);
    if (argc != 5 || (threads && provided != MPI_THREAD_MULTIPLE)) MPI_Abort(MPI_COMM_WORLD, 2);
    MPI_Type_contiguous(3, MPI_INT, &three_ints);
    MPI_Type_commit(&three_ints);
    MPI_Type_vector(1, 2, 3, MPI_INT, &holes); /* 2 ints of every 3 */
    MPI_Type_create_resized(holes, 0, 12, &holes);
    MPI_Type_commit(&holes);
    struct worker *workers = calloc(FILES, sizeof *workers);
    pthread_t thread[FILES];
    for (int f = 0; f < FILES; f++) {
        struct worker *w = &workers[f];
        w->mode = (enum mode)f;
        snprintf(w->path, sizeof w->path, "%s.%d", argv[1], f);
        w->seed = (unsigned)atol(argv[3]) * FILES + (unsigned)f;
        w->calls = atol(argv[2]);
        w->noted = calloc((size_t)w->calls, sizeof *w->noted);
        if (!w->noted || (threads && pthread_create(&thread[f], NULL, work, w) != 0)) MPI_Abort(MPI_COMM_WORLD, 2);
        if (!threads) work(w);
    }
    for (int f = 0; threads && f < FILES; f++) pthread_join(thread[f], NULL);
    for (int f = 0; f < FILES; f++) {
        printf("positions %s:", workers[f].path);
        for (long i = 0; i < workers[f].calls; i++)
            printf(" %lld:%lld", workers[f].noted[i][0], workers[f].noted[i][1]);
        printf("\n");
        free(workers[f].noted);
    }
    free(workers);
    MPI_Type_free(&three_ints);
    MPI_Type_free(&holes);
    MPI_Finalize();
    return 0;
}
