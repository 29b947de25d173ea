/* ioloom-async-cm1: a CM1-like compute-and-output kernel over libioloom-async. Each client computes for a set
 * time per iteration (a 3-D stencil sweep over its fields, or a sleep with --sleep), then outputs every listed
 * variable through the library (write, or alloc/commit/clear with --zero-copy) and ends the iteration. Block b of
 * variable v at iteration i holds i*1e6 + b*1e3 + v + (k % 7)*1e-3 at element k, so readers can check it.
 * Rank 0 prints one JSON line: per iteration, the slowest client's output time and iteration time; then one with
 * the run's times and the servers' largest peak resident memory (0 without servers).
 *   ioloom-async-cm1 CONFIG --variables u,v,w --iterations N --compute SECONDS [--jitter F] [--seed S]
 *                    [--early RANK:ITERATIONS] [--zero-copy] [--sleep] [--signal EVENT] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include "ioloom_async.h"

#define MAX_VARIABLES 16

struct options {
    const char *config, *signal;
    char *names[MAX_VARIABLES];
    int nvariables, iterations, zero_copy, sleep, early_rank, early_iterations;
    double compute, jitter;
    unsigned seed;
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int usage(const char *what) {
    fprintf(stderr,
            "ioloom-async-cm1: %s\nusage: ioloom-async-cm1 CONFIG --variables u,v --iterations N "
            "--compute SECONDS [--jitter F] [--seed S] [--early RANK:ITERATIONS] [--zero-copy] [--sleep] "
            "[--signal EVENT]\n",
            what);
    return 2;
}

static void split_names(struct options *o, char *list) {
    char *rest = NULL;
    for (char *name = strtok_r(list, ",", &rest); name && o->nvariables < MAX_VARIABLES;
         name = strtok_r(NULL, ",", &rest))
        o->names[o->nvariables++] = name;
}

static int parse(int argc, char **argv, struct options *o) {
    *o = (struct options){.iterations = 10, .early_rank = -1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--zero-copy") || !strcmp(a, "--sleep"))
            *(a[2] == 'z' ? &o->zero_copy : &o->sleep) = 1;
        else if (!v && a[0] == '-')
            return usage("an option lacks its value");
        else if (!strcmp(a, "--variables") && ++i)
            split_names(o, argv[i]);
        else if (!strcmp(a, "--iterations") && ++i)
            o->iterations = atoi(v);
        else if (!strcmp(a, "--compute") && ++i)
            o->compute = atof(v);
        else if (!strcmp(a, "--jitter") && ++i)
            o->jitter = atof(v);
        else if (!strcmp(a, "--seed") && ++i)
            o->seed = (unsigned)atoi(v);
        else if (!strcmp(a, "--signal") && ++i)
            o->signal = v;
        else if (!strcmp(a, "--early") && ++i && sscanf(v, "%d:%d", &o->early_rank, &o->early_iterations) != 2)
            return usage("--early takes RANK:ITERATIONS");
        else if (a[0] == '-' && i < argc && strcmp(argv[i], v ? v : ""))
            return usage(a);
        else if (a[0] != '-')
            o->config = a;
    }
    return o->config && o->nvariables && o->iterations > 0 ? 0 : usage("give CONFIG, --variables and --iterations");
}

/* One sweep of a 7-point-like smoothing over a field, the kind of work CM1's dynamics does per step. */
static void sweep(double *f, size_t n) {
    for (size_t k = 1; k + 1 < n; k++) f[k] = 0.25 * f[k - 1] + 0.5 * f[k] + 0.25 * f[k + 1];
}

static void compute(double seconds, int sleeping, double *field, size_t n) {
    double end = now() + seconds;
    if (sleeping) {
        struct timespec t = {(time_t)seconds, (long)((seconds - floor(seconds)) * 1e9)};
        nanosleep(&t, NULL);
        return;
    }
    while (now() < end) sweep(field, n < 4096 ? n : 4096);
}

static void fill(double *block, size_t n, int iteration, int client, int variable) {
    for (size_t k = 0; k < n; k++) block[k] = iteration * 1e6 + client * 1e3 + variable + (double)(k % 7) * 1e-3;
}

static int output(const struct options *o, int iteration, int client, double *scratch) {
    for (int v = 0; v < o->nvariables; v++) {
        size_t bytes = ioloom_async_block_size(o->names[v]);
        double *block = o->zero_copy ? ioloom_async_alloc(o->names[v]) : scratch;
        if (!bytes || !block)
            return fprintf(stderr, "ioloom-async-cm1: %s\n",
                           bytes ? ioloom_async_error() : "a variable is not in the configuration"),
                   1;
        fill(block, bytes / sizeof(double), iteration, client, v);
        int rc = o->zero_copy ? ioloom_async_commit(o->names[v]) || ioloom_async_clear(o->names[v])
                              : ioloom_async_write(o->names[v], block, bytes);
        if (rc) return fprintf(stderr, "ioloom-async-cm1: %s\n", ioloom_async_error()), 1;
    }
    if (o->signal && ioloom_async_signal(o->signal))
        return fprintf(stderr, "ioloom-async-cm1: %s\n", ioloom_async_error()), 1;
    return ioloom_async_end_iteration();
}

static size_t largest(const struct options *o) {
    size_t n = 0;
    for (int v = 0; v < o->nvariables; v++)
        n = ioloom_async_block_size(o->names[v]) > n ? ioloom_async_block_size(o->names[v]) : n;
    return n;
}

/* The client's iterations; per iteration its output time and its iteration time. */
static int simulate(const struct options *o, MPI_Comm clients, double *visible, double *period) {
    int client, iterations = o->iterations;
    MPI_Comm_rank(clients, &client);
    if (client == o->early_rank) iterations = o->early_iterations;
    srand(o->seed * 7919u + (unsigned)client);
    size_t bytes = largest(o);
    double *scratch = calloc(1, bytes), *field = calloc(1, bytes);
    int rc = 0;
    for (int i = 0; i < iterations && !rc; i++) {
        double t0 = now(), c = o->compute * (1 + o->jitter * (2.0 * rand() / RAND_MAX - 1));
        compute(c > 0 ? c : 0, o->sleep, field, bytes / sizeof(double));
        double t1 = now();
        rc = output(o, i, client, scratch);
        visible[i] = now() - t1;
        period[i] = now() - t0;
    }
    free(scratch);
    free(field);
    return rc;
}

static void report(const struct options *o, MPI_Comm clients, double *visible, double *period, double run) {
    int rank, n;
    MPI_Comm_rank(clients, &rank);
    MPI_Comm_size(clients, &n);
    MPI_Reduce(rank ? visible : MPI_IN_PLACE, visible, o->iterations, MPI_DOUBLE, MPI_MAX, 0, clients);
    MPI_Reduce(rank ? period : MPI_IN_PLACE, period, o->iterations, MPI_DOUBLE, MPI_MAX, 0, clients);
    MPI_Reduce(rank ? &run : MPI_IN_PLACE, &run, 1, MPI_DOUBLE, MPI_MAX, 0, clients);
    struct rusage use;
    getrusage(RUSAGE_SELF, &use);
    long rss = use.ru_maxrss;
    MPI_Reduce(rank ? &rss : MPI_IN_PLACE, &rss, 1, MPI_LONG, MPI_MAX, 0, clients);
    if (rank) return;
    printf("{\"clients\": %d, \"iterations\": %d, \"run_seconds\": %.6f, \"max_rss_kib\": %ld, \"visible\": [", n,
           o->iterations, run, rss);
    for (int i = 0; i < o->iterations; i++) printf("%s%.6f", i ? ", " : "", visible[i]);
    printf("], \"iteration_seconds\": [");
    for (int i = 0; i < o->iterations; i++) printf("%s%.6f", i ? ", " : "", period[i]);
    printf("]}\n");
    fflush(stdout);
}

/* The clients' part: iterations, then the report (rank 0 prints it); run_seconds spans the iterations only. */
static int client(const struct options *o) {
    double start = now();
    MPI_Comm clients;
    double *visible = calloc((size_t)o->iterations, sizeof *visible);
    double *period = calloc((size_t)o->iterations, sizeof *period);
    ioloom_async_client_comm(&clients);
    int rc = simulate(o, clients, visible, period);
    report(o, clients, visible, period, now() - start);
    free(visible);
    free(period);
    return rc;
}

/* The servers' largest peak resident memory (their clients' is in the report), at rank 0, after finalize. */
static long servers_rss(int is_client) {
    struct rusage use;
    long rss, largest = 0;
    getrusage(RUSAGE_SELF, &use);
    rss = is_client ? 0 : use.ru_maxrss;
    MPI_Reduce(&rss, &largest, 1, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
    return largest;
}

int main(int argc, char **argv) {
    struct options o;
    int is_client = 0, rank, rc;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double start = now();
    if ((rc = parse(argc, argv, &o)) == 0 && (rc = ioloom_async_initialize(o.config, MPI_COMM_WORLD)) == 0 &&
        (rc = ioloom_async_start(&is_client)) == 0 && is_client)
        rc = client(&o);
    double finalize = now();
    if (rc != IOLOOM_ASYNC_ECONFIG && rc != 2 && ioloom_async_finalize() != 0) {
        fprintf(stderr, "ioloom-async-cm1: %s\n", ioloom_async_error());
        rc = 1;
    }
    double total = now() - start;
    long server_rss = servers_rss(is_client); /* every rank reaches it, whatever rc */
    /* Rank 0 is a client (servers are the last ranks of a node): the run's whole time, writes drained. */
    if (rank == 0 && rc == 0)
        printf("{\"finalize_seconds\": %.6f, \"total_seconds\": %.6f, \"server_max_rss_kib\": %ld}\n",
               total - (finalize - start), total, server_rss);
    MPI_Finalize();
    return rc;
}
