/* ioloom-bench: parse and check the options (refusing bad ones before any I/O), run the repetitions of the
 * write and read phases or a kernel, print the report. Exit 0, 2 (bad parameters), 3 (--verify found
 * differing bytes) or 4 (an I/O call failed). */
#include "bench.h"

#include <stdio.h>

static int run_pattern(const struct bench_options *o, MPI_Comm comm, struct bench_report *r) {
    for (int rep = 0; rep < o->repetitions; rep++) {
        struct bench_times t;
        MPI_Info hints = MPI_INFO_NULL;
        if (o->write) {
            bench_remove_files(o, comm); /* a stale, longer file would hide what this run wrote */
            bench_run_phase(o, PHASE_WRITE, comm, &t, &hints);
            bench_report_add(r, "write", rep, &t);
        }
        for (int k = 0; o->read && k < o->reads; k++) {
            bench_run_phase(o, PHASE_READ, comm, &t, hints == MPI_INFO_NULL ? &hints : NULL);
            bench_report_add(r, "read", rep, &t);
        }
        bench_report_hints(r, hints);
        if (hints != MPI_INFO_NULL) MPI_Info_free(&hints);
    }
    char files[sizeof o->path + 8];
    snprintf(files, sizeof files, bench_shared_file(o) ? "%s" : "%s.*", o->path);
    if (!bench_files_stay(o, r, files)) bench_remove_files(o, comm);
    return 0;
}

static int run(const struct bench_options *o, MPI_Comm comm) {
    struct bench_report *r = bench_report_new(o, comm);
    int rc;
    switch (o->kernel) {
        case KERNEL_FLASH:
            rc = bench_kernel_flash(o, comm, r);
            break;
        case KERNEL_BTIO:
            rc = bench_kernel_btio(o, comm, r);
            break;
        case KERNEL_RIOT:
            rc = bench_kernel_riot(o, comm, r);
            break;
        default:
            rc = run_pattern(o, comm, r);
            break;
    }
    uint64_t errors = bench_report_finish(r);
    return rc ? rc : errors ? BENCH_EXIT_VERIFY : 0;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    struct bench_options o;
    int rc = bench_parse_options(argc, argv, &o, MPI_COMM_WORLD);
    if (rc == 0) rc = run(&o, MPI_COMM_WORLD);
    MPI_Finalize();
    return rc < 0 ? 0 : rc;
}
