/* Test program for libioloom-async's errors: every rank prints what ioloom_async_initialize returned and its
 * message; with "calls", a started client also prints what mistaken calls return (unknown variable, wrong size,
 * unknown event, commit without alloc), then finalizes. */
#include <stdio.h>
#include <string.h>
#include <mpi.h>
#include "ioloom_async.h"

static void show(int rank, const char *what, int rc) {
    printf("rank %d %s rc %d: %s\n", rank, what, rc, ioloom_async_error());
}

int main(int argc, char **argv) {
    int rank, is_client = 0;
    double block[4] = {0};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int rc = ioloom_async_initialize(argv[1], MPI_COMM_WORLD);
    show(rank, "initialize", rc);
    if (rc == 0 && ioloom_async_start(&is_client) == 0 && is_client && argc > 2 && !strcmp(argv[2], "calls")) {
        show(rank, "write-unknown", ioloom_async_write("nope", block, sizeof block));
        show(rank, "write-size", ioloom_async_write("u", block, sizeof block));
        show(rank, "signal-unknown", ioloom_async_signal("nope"));
        show(rank, "commit-without-alloc", ioloom_async_commit("u"));
    }
    if (rc == 0) show(rank, "finalize", ioloom_async_finalize());
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
