/* Reduction and output. Each phase's per-rank times are gathered on rank 0, which prints either one JSON
 * document (--json; the schema is in docs/bench.md) or a readable table.
 *   span                = latest close minus earliest open over ranks (IOR's total time), on the wall clock
 *   effective bandwidth = bytes of all ranks / (span less the --wait idle time and buffer filling and checking
 *                         (our work, not I/O) of the rank that had least of them)
 *   raw bandwidth       = bytes of all ranks / slowest rank's time inside data calls
 *   access bandwidth    = bytes of all ranks / (end of the last data call - start of the first, over ranks,
 *                         each rank's clock read from the phase's common barrier): IOR's access time, which
 *                         holds when ranks could not all run at once (more ranks than CPUs)
 * (fs_test's "effective" and "raw"; Boito deducts the idle time of TMP tests the same way). Over repetitions:
 * min, median, mean and max of each bandwidth. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The doubles gathered per rank: the times, then bytes, calls and errors. */
enum {
    F_OPEN,
    F_DATA,
    F_SYNC,
    F_CLOSE,
    F_WAIT,
    F_PREP,
    F_TOTAL,
    F_DATA_BEGIN,
    F_DATA_END,
    NTIMES,
    F_BYTES = NTIMES,
    F_CALLS,
    F_ERRORS,
    F_END,
    NFIELDS
};
static const char *const field_names[NTIMES] = {"open", "data",  "sync",       "close",   "wait",
                                                "prep", "total", "data_begin", "data_end"};
/* The bandwidths of a phase. */
enum { BW_EFFECTIVE, BW_RAW, BW_ACCESS, NBW };
static const char *const bw_names[NBW] = {"effective_bw", "raw_bw", "access_bw"};

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
    bench_wallclock_start(comm);
    return r;
}

/* data_begin and data_end become seconds from the rank's own barrier exit: MPI_Wtime's origin differs between
 * processes (Open MPI's is each process's first call), the barrier is common. */
static void times_to_fields(const struct bench_times *t, double *f) {
    double begin = t->calls ? t->data_begin - t->start : 0, end = t->calls ? t->data_end - t->start : 0;
    double v[NFIELDS] = {t->open, t->data, t->sync,          t->close,         t->wait,           t->prep, t->total,
                         begin,   end,     (double)t->bytes, (double)t->calls, (double)t->errors, t->end};
    memcpy(f, v, sizeof v);
}

void bench_report_add(struct bench_report *r, const char *op, int rep, const struct bench_times *t) {
    double mine[NFIELDS];
    times_to_fields(t, mine);
    double *all = r->rank == 0 ? malloc(sizeof(double) * NFIELDS * (size_t)r->nranks) : NULL;
    MPI_Gather(mine, NFIELDS, MPI_DOUBLE, all, NFIELDS, MPI_DOUBLE, 0, r->comm);
    if (r->rank != 0) return;
    r->phases = realloc(r->phases, sizeof *r->phases * (size_t)(r->nphases + 1));
    struct phase_record *p = &r->phases[r->nphases++];
    snprintf(p->op, sizeof p->op, "%s", op);
    p->rep = rep;
    p->ranks = all;
}

uint64_t bench_report_errors(struct bench_report *r) {
    double errors = 0;
    for (int i = 0; i < r->nphases; i++) /* phases are recorded on rank 0 only */
        for (int k = 0; k < r->nranks; k++) errors += r->phases[i].ranks[(size_t)k * NFIELDS + F_ERRORS];
    MPI_Bcast(&errors, 1, MPI_DOUBLE, 0, r->comm);
    return (uint64_t)errors;
}

void bench_report_hints(struct bench_report *r, MPI_Info info) {
    if (r->rank == 0 && r->hints == MPI_INFO_NULL && info != MPI_INFO_NULL) MPI_Info_dup(info, &r->hints);
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
    if (n == 0 || v < s->min) s->min = v;
    if (n == 0 || v > s->max) s->max = v;
    s->mean += (v - s->mean) / (n + 1);
}

struct phase_figures {
    double bytes, calls, errors, span, bw[NBW];
    struct stats time[NTIMES];
};

static struct phase_figures figures(const struct bench_report *r, const struct phase_record *p) {
    struct phase_figures f;
    memset(&f, 0, sizeof f);
    double first_open = 0, last_close = 0, least_idle = 0, slowest_data = 0, first_begin = 0, last_end = 0;
    int moved = 0; /* ranks with data calls, whose data window counts */
    for (int k = 0; k < r->nranks; k++) {
        const double *v = p->ranks + (size_t)k * NFIELDS;
        for (int i = 0; i < NTIMES; i++) stats_add(&f.time[i], v[i], k);
        f.bytes += v[F_BYTES];
        f.calls += v[F_CALLS];
        f.errors += v[F_ERRORS];
        double open = v[F_END] - v[F_TOTAL], idle = v[F_WAIT] + v[F_PREP];
        if (k == 0 || open < first_open) first_open = open;
        if (k == 0 || v[F_END] > last_close) last_close = v[F_END];
        if (k == 0 || idle < least_idle) least_idle = idle;
        if (v[F_DATA] > slowest_data) slowest_data = v[F_DATA];
        if (v[F_CALLS] > 0) {
            first_begin = moved && first_begin < v[F_DATA_BEGIN] ? first_begin : v[F_DATA_BEGIN];
            last_end = moved++ && last_end > v[F_DATA_END] ? last_end : v[F_DATA_END];
        }
    }
    f.span = last_close - first_open;
    double effective = f.span - least_idle; /* only idle time every rank had is taken out of the span */
    f.bw[BW_EFFECTIVE] = effective > 0 ? f.bytes / effective : 0;
    f.bw[BW_RAW] = slowest_data > 0 ? f.bytes / slowest_data : 0;
    f.bw[BW_ACCESS] = last_end > first_begin ? f.bytes / (last_end - first_begin) : 0;
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
    if (info != MPI_INFO_NULL) MPI_Info_get_nkeys(info, &n);
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
    fprintf(out,
            "\"params\": {\"api\": \"%s\", \"pattern\": \"%s\", \"kernel\": \"%s\", \"collective\": %s, "
            "\"block_size\": %llu, \"transfer_size\": %llu, \"segment_count\": %llu, \"fsync\": %s, "
            "\"random\": %s, \"reorder\": %s, \"shift\": %d, \"repetitions\": %d, \"reads\": %d, \"wait_ms\": %.9g, "
            "\"delay_s\": %.9g, \"verify\": %s, \"path\": ",
            bench_api_name(o->api), bench_pattern_name(o->pattern), bench_kernel_name(o->kernel),
            json_bool(o->collective), (unsigned long long)o->block_size, (unsigned long long)o->transfer_size,
            (unsigned long long)o->segment_count, json_bool(o->fsync), json_bool(o->random), json_bool(o->reorder),
            o->shift, o->repetitions, o->reads, o->wait_ms, o->delay_s, json_bool(o->verify));
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
    fprintf(out, ", \"rep\": %d, \"bytes\": %.0f, \"calls\": %.0f, \"errors\": %.0f, \"span\": %.9g", p->rep, f.bytes,
            f.calls, f.errors, f.span);
    for (int b = 0; b < NBW; b++) fprintf(out, ", \"%s\": %.9g", bw_names[b], f.bw[b]);
    fputs(", \"time\": {", out);
    for (int i = 0; i < NTIMES; i++) {
        fputs(i ? ", " : "", out);
        json_stats(out, field_names[i], &f.time[i]);
    }
    fputs("}, \"ranks\": [", out);
    for (int k = 0; k < r->nranks; k++) {
        const double *v = p->ranks + (size_t)k * NFIELDS;
        fprintf(out, "%s{\"rank\": %d", k ? ", " : "", k);
        for (int i = 0; i < NTIMES; i++) fprintf(out, ", \"%s\": %.9g", field_names[i], v[i]);
        fprintf(out, ", \"end\": %.9f, \"bytes\": %.0f, \"calls\": %.0f, \"errors\": %.0f}", v[F_END], v[F_BYTES],
                v[F_CALLS], v[F_ERRORS]);
    }
    fputs("]}", out);
}

/* Summary of every op over repetitions: each bandwidth per repetition, the times over repetitions and ranks. */
struct op_summary {
    const char *op;
    int reps;
    double *bw[NBW]; /* one value per repetition */
    struct stats time[NTIMES];
    int samples;
};

struct bw_stats {
    double min, median, mean, max;
};

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static struct bw_stats bw_stats(const double *values, int n) {
    double *sorted = bench_alloc(sizeof *sorted * (size_t)n);
    memcpy(sorted, values, sizeof *sorted * (size_t)n);
    qsort(sorted, (size_t)n, sizeof *sorted, by_value);
    struct bw_stats s = {sorted[0], (sorted[(n - 1) / 2] + sorted[n / 2]) / 2, 0, sorted[n - 1]};
    for (int i = 0; i < n; i++) s.mean += sorted[i] / n;
    free(sorted);
    return s;
}

static struct op_summary *summary_of(struct op_summary *sums, int *nsums, const char *op, int capacity) {
    for (int j = 0; j < *nsums; j++)
        if (!strcmp(sums[j].op, op)) return &sums[j];
    struct op_summary *s = &sums[(*nsums)++];
    memset(s, 0, sizeof *s);
    s->op = op;
    for (int b = 0; b < NBW; b++) s->bw[b] = bench_alloc(sizeof(double) * (size_t)capacity);
    return s;
}

static int summarise(const struct bench_report *r, struct op_summary *sums) {
    int nsums = 0;
    for (int i = 0; i < r->nphases; i++) {
        const struct phase_record *p = &r->phases[i];
        struct op_summary *s = summary_of(sums, &nsums, p->op, r->nphases);
        struct phase_figures f = figures(r, p);
        for (int b = 0; b < NBW; b++) s->bw[b][s->reps] = f.bw[b];
        for (int k = 0; k < r->nranks; k++, s->samples++)
            for (int t = 0; t < NTIMES; t++)
                stats_add(&s->time[t], p->ranks[(size_t)k * NFIELDS + (size_t)t], s->samples);
        s->reps++;
    }
    return nsums;
}

static void json_notes(FILE *out) {
    fputs("\"notes\": [", out);
    for (int i = 0; i < bench_note_count(); i++) {
        fputs(i ? ", " : "", out);
        json_string(out, bench_note_text(i));
    }
    fputc(']', out);
}

static void json_summary(FILE *out, const struct op_summary *s) {
    fputs("{\"op\": ", out);
    json_string(out, s->op);
    fprintf(out, ", \"reps\": %d", s->reps);
    for (int b = 0; b < NBW; b++) {
        struct bw_stats st = bw_stats(s->bw[b], s->reps);
        fprintf(out, ", \"%s\": {\"min\": %.9g, \"median\": %.9g, \"mean\": %.9g, \"max\": %.9g}", bw_names[b], st.min,
                st.median, st.mean, st.max);
    }
    fputs(", \"time\": {", out);
    for (int t = 0; t < NTIMES; t++) {
        fputs(t ? ", " : "", out);
        json_stats(out, field_names[t], &s->time[t]);
    }
    fputs("}}", out);
}

static void print_json(FILE *out, const struct bench_report *r, const struct op_summary *sums, int nsums,
                       double errors) {
    const struct bench_options *o = r->o;
    fprintf(out,
            "{\"ioloom_bench\": 2, \"mpi\": \"%s\", \"nranks\": %d, \"ranks_per_node\": %d, "
            "\"node\": {\"ranks\": %d, \"cpus\": %d}, \"oversubscribed\": %s, ",
            IOLOOM_MPI_IMPL, r->nranks, o->ranks_per_node, o->node_ranks, o->node_cpus, json_bool(o->oversubscribed));
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
        fputs(i ? ", " : "", out);
        json_summary(out, &sums[i]);
    }
    fprintf(out, "], \"verify\": {\"enabled\": %s, \"errors\": %.0f}, ", json_bool(o->verify), errors);
    json_notes(out);
    fputs("}\n", out);
}

/* ---- text ---- */

#define MIB (1024.0 * 1024.0)

/* -v: every rank's times of a phase, seconds, and its data window from the barrier. */
static void print_ranks(FILE *out, const struct bench_report *r, const struct phase_record *p) {
    for (int k = 0; k < r->nranks; k++) {
        const double *v = p->ranks + (size_t)k * NFIELDS;
        fprintf(out,
                "    rank %-5d open %.4f data %.4f sync %.4f close %.4f total %.4f prep %.4f, data calls "
                "%.4f-%.4f s after the barrier\n",
                k, v[F_OPEN], v[F_DATA], v[F_SYNC], v[F_CLOSE], v[F_TOTAL], v[F_PREP], v[F_DATA_BEGIN], v[F_DATA_END]);
    }
}

static void print_bw_range(FILE *out, const char *label, const double *values, int n) {
    struct bw_stats st = bw_stats(values, n);
    fprintf(out, " %s %10.2f %10.2f %10.2f", label, st.min / MIB, st.median / MIB, st.max / MIB);
}

static void print_text(FILE *out, const struct bench_report *r, const struct op_summary *sums, int nsums,
                       double errors) {
    const struct bench_options *o = r->o;
    fprintf(out, "ioloom-bench (%s): %d ranks (%d per node), ", IOLOOM_MPI_IMPL, r->nranks, o->ranks_per_node);
    if (o->kernel != KERNEL_NONE)
        fprintf(out, "kernel %s%s\n", bench_kernel_name(o->kernel), o->collective ? " collective" : "");
    else
        fprintf(out, "api %s%s, pattern %s, block %llu, transfer %llu, segments %llu\n", bench_api_name(o->api),
                o->collective ? " collective" : "", bench_pattern_name(o->pattern), (unsigned long long)o->block_size,
                (unsigned long long)o->transfer_size, (unsigned long long)o->segment_count);
    fprintf(out, "%-22s %4s %12s %12s %12s %10s %10s %10s %10s %10s\n", "op", "rep", "eff MiB/s", "raw MiB/s",
            "access MiB/s", "open s", "data s", "sync s", "close s", "total s");
    for (int i = 0; i < r->nphases; i++) {
        struct phase_figures f = figures(r, &r->phases[i]);
        fprintf(out, "%-22s %4d %12.2f %12.2f %12.2f %10.4f %10.4f %10.4f %10.4f %10.4f\n", r->phases[i].op,
                r->phases[i].rep, f.bw[BW_EFFECTIVE] / MIB, f.bw[BW_RAW] / MIB, f.bw[BW_ACCESS] / MIB,
                f.time[F_OPEN].max, f.time[F_DATA].max, f.time[F_SYNC].max, f.time[F_CLOSE].max, f.time[F_TOTAL].max);
        if (o->verbose) print_ranks(out, r, &r->phases[i]);
    }
    fprintf(out, "summary over repetitions (MiB/s min / median / max):\n");
    for (int i = 0; i < nsums; i++) {
        fprintf(out, "  %-22s", sums[i].op);
        for (int b = 0; b < NBW; b++)
            print_bw_range(out,
                           b == BW_EFFECTIVE ? "effective"
                           : b == BW_RAW     ? " raw"
                                             : " access",
                           sums[i].bw[b], sums[i].reps);
        fputc('\n', out);
    }
    if (o->verify) fprintf(out, "verify: %.0f bytes differ from the pattern\n", errors);
    fputs("hints after open: ", out);
    json_info(out, r->hints);
    fputc('\n', out);
    for (int i = 0; i < bench_note_count(); i++) fprintf(out, "note: %s\n", bench_note_text(i));
}

uint64_t bench_report_finish(struct bench_report *r) {
    double errors = (double)bench_report_errors(r);
    if (r->rank == 0) {
        struct op_summary *sums = calloc((size_t)r->nphases + 1, sizeof *sums);
        int nsums = summarise(r, sums);
        (r->o->json ? print_json : print_text)(stdout, r, sums, nsums, errors);
        fflush(stdout);
        for (int i = 0; i < nsums; i++)
            for (int b = 0; b < NBW; b++) free(sums[i].bw[b]);
        free(sums);
        for (int i = 0; i < r->nphases; i++) free(r->phases[i].ranks);
        free(r->phases);
        if (r->hints != MPI_INFO_NULL) MPI_Info_free(&r->hints);
    }
    free(r);
    return (uint64_t)errors;
}
