/* MPI_THREAD_MULTIPLE: THREADS threads per rank, each opening its own file on MPI_COMM_SELF and writing
 * WRITES blocks of BLOCK bytes with MPI_File_write_at, at the same time. The tracer must keep each thread's
 * calls, and the POSIX calls inside them, apart. Usage: mpiio_threads DIR */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 4
#define WRITES 20
#define BLOCK 4000

static const char *dir;
static int rank;

static void *writer(void *arg) {
    int thread = (int)(long)arg;
    char path[4200], block[BLOCK];
    MPI_File fh;
    for (int i = 0; i < BLOCK; i++) block[i] = (char)(thread + i);
    snprintf(path, sizeof path, "%s/rank%d-thread%d.dat", dir, rank, thread);
    if (MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh) != MPI_SUCCESS)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 0; i < WRITES; i++)
        MPI_File_write_at(fh, (MPI_Offset)i * BLOCK, block, BLOCK, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_close(&fh);
    return NULL;
}

int main(int argc, char **argv) {
    int provided;
    pthread_t threads[THREADS];
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc != 2 || provided != MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "mpiio_threads: usage: mpiio_threads DIR (needs MPI_THREAD_MULTIPLE, got %d)\n", provided);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    dir = argv[1];
    /* MPICH's ROMIO sets itself up at the first MPI_File_open, and that is not thread-safe: threads opening
     * their first files at once can see MPI_OP_NULL in its internal Allreduce (1 run in 30 here, untraced). So
     * the main thread opens one file first. */
    char warmup[4200];
    MPI_File fh;
    snprintf(warmup, sizeof warmup, "%s/rank%d-warmup.dat", dir, rank);
    if (MPI_File_open(MPI_COMM_SELF, warmup, MPI_MODE_CREATE | MPI_MODE_WRONLY | MPI_MODE_DELETE_ON_CLOSE,
                      MPI_INFO_NULL, &fh) != MPI_SUCCESS ||
        MPI_File_close(&fh) != MPI_SUCCESS)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (long t = 0; t < THREADS; t++) pthread_create(&threads[t], NULL, writer, (void *)t);
    for (int t = 0; t < THREADS; t++) pthread_join(threads[t], NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("mpiio_threads: ok\n");
    MPI_Finalize();
    return 0;
}
