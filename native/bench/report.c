/* Reduction and output. Each phase's per-rank times are gathered on rank 0, which prints either one JSON
 * document (--json; the schema is in docs/bench.md) or a readable table.
 *   effective bandwidth = bytes of all ranks / slowest rank's open-to-close time less its --wait idle time
 *                         and the time it spent filling and checking buffers (our work, not I/O)
 *   raw bandwidth       = bytes of all ranks / slowest rank's time inside data calls
 * (fs_test's "effective" and "raw"; Boito deducts the idle time of TMP tests the same way). */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The doubles gathered per rank: the times, then bytes, calls and errors. */
enum { F_OPEN, F_DATA, F_SYNC, F_CLOSE, F_WAIT, F_PREP, F_TOTAL, NTIMES, F_BYTES = NTIMES, F_CALLS, F_ERRORS,
       NFIELDS };
static const char *const field_names[NTIMES] = {"open", "data", "sync", "close", "wait", "prep", "total"};

struct phase_record {
    char op[40];
    int rep;
    double *ranks; /* nranks * NFIELDS */
};

struct bench_report {
    const struct bench_options *o;
    MPI_Comm comm;
    int rank, nranks;
    struct phase_record *phases;
    int nphases;
    MPI_Info hints;
    char params[2048]; /* extra JSON members "key": value, from kernels */
};

struct bench_report *bench_report_new(const struct bench_options *o, MPI_Comm comm) {
    struct bench_report *r = calloc(1, sizeof *r);
    r->o = o;
    r->comm = comm;
    r->hints = MPI_INFO_NULL;
    MPI_Comm_rank(comm, &r->rank);
    MPI_Comm_size(comm, &r->nranks);
    return r;
}

static void times_to_fields(const struct bench_times *t, double *f) {
    double v[NFIELDS] = {t->open, t->data, t->sync, t->close, t->wait, t->prep, t->total, (double)t->bytes,
                         (double)t->calls, (double)t->errors};
    memcpy(f, v, sizeof v);
}

void bench_report_add(struct bench_report *r, const char *op, int rep, const struct bench_times *t) {
    double mine[NFIELDS];
    times_to_fields(t, mine);
    double *all = r->rank == 0 ? malloc(sizeof(double) * NFIELDS * (size_t)r->nranks) : NULL;
    MPI_Gather(mine, NFIELDS, MPI_DOUBLE, all, NFIELDS, MPI_DOUBLE, 0, r->comm);
    if (r->rank != 0)
        return;
    r->phases = realloc(r->phases, sizeof *r->phases * (size_t)(r->nphases + 1));
    struct phase_record *p = &r->phases[r->nphases++];
    snprintf(p->op, sizeof p->op, "%s", op);
    p->rep = rep;
    p->ranks = all;
}

void bench_report_hints(struct bench_report *r, MPI_Info info) {
    if (r->rank == 0 && r->hints == MPI_INFO_NULL && info != MPI_INFO_NULL)
        MPI_Info_dup(info, &r->hints);
}

void bench_report_param(struct bench_report *r, const char *key, double value) {
    size_t used = strlen(r->params);
    snprintf(r->params + used, sizeof r->params - used, ", \"%s\": %.17g", key, value);
}

/* ---- figures of one phase ---- */

struct stats {
    double min, mean, max;
};

static void stats_add(struct stats *s, double v, int n) {
    if (n == 0 || v < s->min)
        s->min = v;
    if (n == 0 || v > s->max)
        s->max = v;
    s->mean += (v - s->mean) / (n + 1);
}

struct phase_figures {
    double bytes, calls, errors, effective_bw, raw_bw;
    struct stats time[NTIMES];
};

static struct phase_figures figures(const struct bench_report *r, const struct phase_record *p) {
    struct phase_figures f;
    memset(&f, 0, sizeof f);
    double slowest_effective = 0, slowest_data = 0;
    for (int k = 0; k < r->nranks; k++) {
        const double *v = p->ranks + (size_t)k * NFIELDS;
        for (int i = 0; i < NTIMES; i++)
            stats_add(&f.time[i], v[i], k);
        f.bytes += v[F_BYTES];
        f.calls += v[F_CALLS];
        f.errors += v[F_ERRORS];
        double effective = v[F_TOTAL] - v[F_WAIT] - v[F_PREP];
        if (effective > slowest_effective)
            slowest_effective = effective;
        if (v[F_DATA] > slowest_data)
            slowest_data = v[F_DATA];
    }
    f.effective_bw = slowest_effective > 0 ? f.bytes / slowest_effective : 0;
    f.raw_bw = slowest_data > 0 ? f.bytes / slowest_data : 0;
    return f;
}

/* ---- JSON ---- */

static void json_string(FILE *out, const char *s) {
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

static void json_stats(FILE *out, const char *name, const struct stats *s) {
    fprintf(out, "\"%s\": {\"min\": %.9g, \"mean\": %.9g, \"max\": %.9g}", name, s->min, s->mean, s->max);
}

static void json_info(FILE *out, MPI_Info info) {
    fputc('{', out);
    int n = 0;
    if (info != MPI_INFO_NULL)
        MPI_Info_get_nkeys(info, &n);
    for (int i = 0; i < n; i++) {
        char key[MPI_MAX_INFO_KEY + 1], value[MPI_MAX_INFO_VAL + 1];
        int flag = 0;
        MPI_Info_get_nthkey(info, i, key);
        MPI_Info_get(info, key, MPI_MAX_INFO_VAL, value, &flag);
        fputs(i ? ", " : "", out);
        json_string(out, key);
        fputs(": ", out);
        json_string(out, flag ? value : "");
    }
    fputc('}', out);
}

static const char *json_bool(int value) { return value ? "true" : "false"; }

static void json_params(FILE *out, const struct bench_report *r) {
    const struct bench_options *o = r->o;
    fprintf(out, "\"params\": {\"api\": \"%s\", \"pattern\": \"%s\", \"kernel\": \"%s\", \"collective\": %s, "
                 "\"block_size\": %llu, \"transfer_size\": %llu, \"segment_count\": %llu, \"fsync\": %s, "
                 "\"random\": %s, \"reorder\": %s, \"shift\": %d, \"repetitions\": %d, \"wait_ms\": %.9g, "
                 "\"verify\": %s, \"path\": ",
            bench_api_name(o->api), bench_pattern_name(o->pattern), bench_kernel_name(o->kernel),
            json_bool(o->collective), (unsigned long long)o->block_size, (unsigned long long)o->transfer_size,
            (unsigned long long)o->segment_count, json_bool(o->fsync), json_bool(o->random), json_bool(o->reorder),
            o->shift, o->repetitions, o->wait_ms, json_bool(o->verify));
    json_string(out, o->path);
    fputs(", \"hints_requested\": {", out);
    for (int i = 0; i < o->nhints; i++) {
        fputs(i ? ", " : "", out);
        json_string(out, o->hints[i].key);
        fputs(": ", out);
        json_string(out, o->hints[i].value);
    }
    fprintf(out, "}, \"emulated_nodes\": %d%s}", o->emulated_nodes, r->params);
}

static void json_phase(FILE *out, const struct bench_report *r, const struct phase_record *p) {
    struct phase_figures f = figures(r, p);
    fputs("{\"op\": ", out);
    json_string(out, p->op);
    fprintf(out, ", \"rep\": %d, \"bytes\": %.0f, \"calls\": %.0f, \"errors\": %.0f, \"effective_bw\": %.9g, "
                 "\"raw_bw\": %.9g, \"time\": {", p->rep, f.bytes, f.calls, f.errors, f.effective_bw, f.raw_bw);
    for (int i = 0; i < NTIMES; i++) {
        fputs(i ? ", " : "", out);
        json_stats(out, field_names[i], &f.time[i]);
    }
    fputs("}, \"ranks\": [", out);
    for (int k = 0; k < r->nranks; k++) {
        const double *v = p->ranks + (size_t)k * NFIELDS;
        fprintf(out, "%s{\"rank\": %d", k ? ", " : "", k);
        for (int i = 0; i < NTIMES; i++)
            fprintf(out, ", \"%s\": %.9g", field_names[i], v[i]);
        fprintf(out, ", \"bytes\": %.0f, \"calls\": %.0f, \"errors\": %.0f}", v[F_BYTES], v[F_CALLS], v[F_ERRORS]);
    }
    fputs("]}", out);
}

/* Summary of every op over repetitions: bandwidth min/mean/max over repetitions, times over reps and ranks. */
struct op_summary {
    const char *op;
    int reps;
    struct stats effective_bw, raw_bw, time[NTIMES];
    int samples;
};

static int summarise(const struct bench_report *r, struct op_summary *sums) {
    int nsums = 0;
    for (int i = 0; i < r->nphases; i++) {
        const struct phase_record *p = &r->phases[i];
        int j = 0;
        while (j < nsums && strcmp(sums[j].op, p->op))
            j++;
        if (j == nsums) {
            memset(&sums[nsums], 0, sizeof sums[nsums]);
            sums[nsums++].op = p->op;
        }
        struct op_summary *s = &sums[j];
        struct phase_figures f = figures(r, p);
        stats_add(&s->effective_bw, f.effective_bw, s->reps);
        stats_add(&s->raw_bw, f.raw_bw, s->reps);
        for (int k = 0; k < r->nranks; k++, s->samples++)
            for (int t = 0; t < NTIMES; t++)
                stats_add(&s->time[t], p->ranks[(size_t)k * NFIELDS + (size_t)t], s->samples);
        s->reps++;
    }
    return nsums;
}

static void print_json(FILE *out, const struct bench_report *r, const struct op_summary *sums, int nsums,
                       double errors) {
    fprintf(out, "{\"ioloom_bench\": 1, \"mpi\": \"%s\", \"nranks\": %d, \"ranks_per_node\": %d, ",
            IOLOOM_MPI_IMPL, r->nranks, r->o->ranks_per_node);
    json_params(out, r);
    fputs(", \"hints\": ", out);
    json_info(out, r->hints);
    fputs(", \"phases\": [", out);
    for (int i = 0; i < r->nphases; i++) {
        fputs(i ? ", " : "", out);
        json_phase(out, r, &r->phases[i]);
    }
    fputs("], \"summary\": [", out);
    for (int i = 0; i < nsums; i++) {
        fprintf(out, "%s{\"op\": ", i ? ", " : "");
        json_string(out, sums[i].op);
        fprintf(out, ", \"reps\": %d, ", sums[i].reps);
        json_stats(out, "effective_bw", &sums[i].effective_bw);
        fputs(", ", out);
        json_stats(out, "raw_bw", &sums[i].raw_bw);
        fputs(", \"time\": {", out);
        for (int t = 0; t < NTIMES; t++) {
            fputs(t ? ", " : "", out);
            json_stats(out, field_names[t], &sums[i].time[t]);
        }
        fputs("}}", out);
    }
    fprintf(out, "], \"verify\": {\"enabled\": %s, \"errors\": %.0f}}\n", json_bool(r->o->verify), errors);
}

/* ---- text ---- */

#define MIB (1024.0 * 1024.0)

static void print_text(FILE *out, const struct bench_report *r, const struct op_summary *sums, int nsums,
                       double errors) {
    const struct bench_options *o = r->o;
    fprintf(out, "ioloom-bench (%s): %d ranks (%d per node), ", IOLOOM_MPI_IMPL, r->nranks, o->ranks_per_node);
    if (o->kernel != KERNEL_NONE)
        fprintf(out, "kernel %s%s\n", bench_kernel_name(o->kernel), o->collective ? " collective" : "");
    else
        fprintf(out, "api %s%s, pattern %s, block %llu, transfer %llu, segments %llu\n", bench_api_name(o->api),
                o->collective ? " collective" : "", bench_pattern_name(o->pattern),
                (unsigned long long)o->block_size, (unsigned long long)o->transfer_size,
                (unsigned long long)o->segment_count);
    fprintf(out, "%-22s %4s %12s %12s %10s %10s %10s %10s %10s\n", "op", "rep", "eff MiB/s", "raw MiB/s",
            "open s", "data s", "sync s", "close s", "total s");
    for (int i = 0; i < r->nphases; i++) {
        struct phase_figures f = figures(r, &r->phases[i]);
        fprintf(out, "%-22s %4d %12.2f %12.2f %10.4f %10.4f %10.4f %10.4f %10.4f\n", r->phases[i].op,
                r->phases[i].rep, f.effective_bw / MIB, f.raw_bw / MIB, f.time[F_OPEN].max,
                f.time[F_DATA].max, f.time[F_SYNC].max, f.time[F_CLOSE].max, f.time[F_TOTAL].max);
    }
    fprintf(out, "summary over repetitions (effective MiB/s min/mean/max):\n");
    for (int i = 0; i < nsums; i++)
        fprintf(out, "  %-22s %10.2f %10.2f %10.2f  (raw %10.2f %10.2f %10.2f)\n", sums[i].op,
                sums[i].effective_bw.min / MIB, sums[i].effective_bw.mean / MIB, sums[i].effective_bw.max / MIB,
                sums[i].raw_bw.min / MIB, sums[i].raw_bw.mean / MIB, sums[i].raw_bw.max / MIB);
    if (o->verify)
        fprintf(out, "verify: %.0f bytes differ from the pattern\n", errors);
    fputs("hints after open: ", out);
    json_info(out, r->hints);
    fputc('\n', out);
}

uint64_t bench_report_finish(struct bench_report *r) {
    double errors = 0;
    if (r->rank == 0) {
        struct op_summary *sums = calloc((size_t)r->nphases + 1, sizeof *sums);
        int nsums = summarise(r, sums);
        for (int i = 0; i < r->nphases; i++)
            errors += figures(r, &r->phases[i]).errors;
        (r->o->json ? print_json : print_text)(stdout, r, sums, nsums, errors);
        fflush(stdout);
        free(sums);
        for (int i = 0; i < r->nphases; i++)
            free(r->phases[i].ranks);
        free(r->phases);
        if (r->hints != MPI_INFO_NULL)
            MPI_Info_free(&r->hints);
    }
    MPI_Bcast(&errors, 1, MPI_DOUBLE, 0, r->comm);
    free(r);
    return (uint64_t)errors;
}
