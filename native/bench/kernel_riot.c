/* RIOT's overhead mode (Wright's thesis, Appendix A, Table A.2): --steps operations (100) of -t bytes (4 MB)
 * for each of six MPI-IO functions, so a tracer's cost per call can be measured by running this with and
 * without it. Every rank works on its own region of one shared file: rank r's region starts at r*steps*t.
 * The individual-file-pointer functions (write, read, write_all, read_all) see that region through a file
 * view; the explicit-offset ones (write_at_all, read_at_all) address it directly. */
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum riot_call { WRITE, READ, WRITE_ALL, READ_ALL, WRITE_AT_ALL, READ_AT_ALL, NCALLS };
static const char *const call_names[NCALLS] = {"MPI_File_write",    "MPI_File_read",         "MPI_File_write_all",
                                               "MPI_File_read_all", "MPI_File_write_at_all", "MPI_File_read_at_all"};

static int is_write(enum riot_call c) { return c == WRITE || c == WRITE_ALL || c == WRITE_AT_ALL; }

static int call(enum riot_call c, MPI_File fh, MPI_Offset offset, void *buf, int len) {
    MPI_Status st;
    switch (c) {
        case WRITE:
            return MPI_File_write(fh, buf, len, MPI_BYTE, &st);
        case READ:
            return MPI_File_read(fh, buf, len, MPI_BYTE, &st);
        case WRITE_ALL:
            return MPI_File_write_all(fh, buf, len, MPI_BYTE, &st);
        case READ_ALL:
            return MPI_File_read_all(fh, buf, len, MPI_BYTE, &st);
        case WRITE_AT_ALL:
            return MPI_File_write_at_all(fh, offset, buf, len, MPI_BYTE, &st);
        default:
            return MPI_File_read_at_all(fh, offset, buf, len, MPI_BYTE, &st);
    }
}

/* One function: open, `steps` calls, optional sync, close; the times go to the report under its name. */
static void run_call(const struct bench_options *o, MPI_Comm comm, enum riot_call c, int rep, const char *name,
                     unsigned char *buf, struct bench_report *r) {
    int rank;
    MPI_Comm_rank(comm, &rank);
    size_t len = o->transfer_size;
    MPI_Offset region = (MPI_Offset)rank * o->steps * (MPI_Offset)len;
    int explicit_offset = c == WRITE_AT_ALL || c == READ_AT_ALL, writing = is_write(c);
    struct bench_times t;
    MPI_File fh;
    bench_kernel_open(o, comm, name, writing, r, &fh, &t);
    if (!explicit_offset)
        bench_mpi_check(MPI_File_set_view(fh, region, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL), "MPI_File_set_view",
                        name);
    for (int i = 0; i < o->steps; i++) {
        uint64_t offset = (uint64_t)region + (uint64_t)i * len;
        double p0 = bench_now();
        if (writing) bench_fill(buf, len, offset, rank);
        t.prep += bench_now() - p0;
        double d0 = bench_now();
        bench_mpi_check(call(c, fh, (MPI_Offset)offset, buf, (int)len), call_names[c], name);
        bench_count_call(&t, d0, bench_now(), len);
        if (!writing && o->verify) {
            double v0 = bench_now();
            t.errors += bench_verify(buf, len, offset, rank, name, t.errors);
            t.prep += bench_now() - v0;
        }
    }
    bench_kernel_close(o, &fh, writing, &t);
    bench_report_add(r, call_names[c], rep, &t);
}

int bench_kernel_riot(const struct bench_options *o, MPI_Comm comm, struct bench_report *r) {
    char name[sizeof o->path + 16];
    bench_kernel_file(o, BENCH_RIOT_SUFFIX, name, sizeof name);
    unsigned char *buf = bench_alloc(o->transfer_size);
    bench_report_param(r, "operations", o->steps);
    for (int rep = 0; rep < o->repetitions; rep++)
        for (enum riot_call c = WRITE; c < NCALLS; c++) run_call(o, comm, c, rep, name, buf, r);
    free(buf);
    if (!bench_files_stay(o, r, name)) bench_kernel_remove(comm, name);
    return 0;
}
