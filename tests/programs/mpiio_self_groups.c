/* Opens of one path that share an open number without being one collective open (docs/replay.md, "MPI-IO replayed
 * as MPI-IO"), on 3 ranks in DIR:
 *   self.dat   every rank opens it on MPI_COMM_SELF and makes rank+1 collective writes on it;
 *   pair.dat   ranks {0,1} open it on one communicator, then (after a barrier) ranks {1,2} on another, both
 *              that communicator's first open;
 *   c.dat/d.dat every rank opens both on MPI_COMM_SELF and writes collectively to c then d (rank 0) or d then c.
 * Replayed as opens of all the ranks together, each phase's collectives would not match and MPI would hang. */
#include <mpi.h>
#include <stdio.h>

static MPI_File open_on(MPI_Comm comm, const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    MPI_File fh;
    MPI_File_open(comm, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    return fh;
}

static void write_all(MPI_File fh, int rank, int i) {
    char buf[64] = {0};
    MPI_File_write_at_all(fh, (MPI_Offset)(64 * (rank * 4 + i)), buf, 64, MPI_BYTE, MPI_STATUS_IGNORE);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_File fh = open_on(MPI_COMM_SELF, argv[1], "self.dat");
    for (int i = 0; i <= rank; i++) write_all(fh, rank, i);
    MPI_File_close(&fh);
    MPI_Comm pair[2]; /* {0,1} and {1,2}: two communicators, so each counts its first open 0 */
    for (int first = 0; first < 2; first++) {
        int in = rank == first || rank == first + 1;
        MPI_Comm_split(MPI_COMM_WORLD, in ? 0 : MPI_UNDEFINED, rank, &pair[first]);
    }
    for (int first = 0; first < 2; first++) {
        if (pair[first] != MPI_COMM_NULL) {
            fh = open_on(pair[first], argv[1], "pair.dat");
            write_all(fh, rank, first);
            MPI_File_close(&fh);
            MPI_Comm_free(&pair[first]);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_File c = open_on(MPI_COMM_SELF, argv[1], "c.dat"), d = open_on(MPI_COMM_SELF, argv[1], "d.dat");
    write_all(rank == 0 ? c : d, rank, 0);
    write_all(rank == 0 ? d : c, rank, 0);
    MPI_File_close(&c);
    MPI_File_close(&d);
    MPI_Finalize();
    return 0;
}
