/* ioloom-coord-writer: one application's I/O phase for `ioloom bench coord` and the tests. It writes --bytes in
 * steps of --weight chunks of --chunk bytes (a step stands for one round of --weight writers) onto the emulated
 * storage (storage.h) and into --out, asking the coordinator at --coord before each step (inform, then wait if
 * told to) and releasing after it, as CALCioM's clients do between two atomic writes. Prints one JSON line:
 * its start and end (CLOCK_MONOTONIC seconds), the phase's time and the client's counters. */
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ioloom_coord.h"
#include "storage.h"

struct options {
    const char *name, *coord, *storage, *out;
    unsigned long long bytes, chunk;
    int weight, cores;
    double bandwidth, bound, start_at;
};

static void refuse(const char *what) {
    fprintf(stderr,
            "ioloom-coord-writer: %s; usage: ioloom-coord-writer --bytes N --chunk N --storage FILE "
            "--bandwidth BYTES_PER_S [--weight W] [--name NAME] [--cores N] [--coord ADDR] [--bound S] "
            "[--start-at MONOTONIC_S] [--out FILE]\n",
            what);
    exit(2);
}

static double positive(const char *text, const char *what) {
    char *end;
    double v = strtod(text, &end);
    if (*end || !(v > 0)) refuse(what);
    return v;
}

static void parse(int argc, char **argv, struct options *o) {
    static const struct option longs[] = {{"bytes", 1, 0, 'b'},     {"chunk", 1, 0, 'c'},  {"storage", 1, 0, 's'},
                                          {"bandwidth", 1, 0, 'w'}, {"weight", 1, 0, 'W'}, {"name", 1, 0, 'n'},
                                          {"cores", 1, 0, 'C'},     {"coord", 1, 0, 'k'},  {"bound", 1, 0, 'B'},
                                          {"start-at", 1, 0, 't'},  {"out", 1, 0, 'o'},    {0, 0, 0, 0}};
    *o = (struct options){.name = "writer", .out = "/dev/null", .weight = 1, .cores = 1};
    for (int opt; (opt = getopt_long(argc, argv, "", longs, NULL)) != -1;) {
        switch (opt) {
            case 'b':
                o->bytes = (unsigned long long)positive(optarg, "--bytes must be > 0");
                break;
            case 'c':
                o->chunk = (unsigned long long)positive(optarg, "--chunk must be > 0");
                break;
            case 's':
                o->storage = optarg;
                break;
            case 'w':
                o->bandwidth = positive(optarg, "--bandwidth must be > 0");
                break;
            case 'W':
                o->weight = (int)positive(optarg, "--weight must be >= 1");
                break;
            case 'n':
                o->name = optarg;
                break;
            case 'C':
                o->cores = (int)positive(optarg, "--cores must be >= 1");
                break;
            case 'k':
                o->coord = optarg;
                break;
            case 'B':
                o->bound = positive(optarg, "--bound must be > 0");
                break;
            case 't':
                o->start_at = positive(optarg, "--start-at must be > 0");
                break;
            case 'o':
                o->out = optarg;
                break;
            default:
                refuse("unknown option");
        }
    }
    if (!o->bytes || !o->chunk || !o->storage || !o->bandwidth)
        refuse("--bytes, --chunk, --storage and --bandwidth are required");
}

/* Write one step of n bytes: reserve it on the emulated storage, write it, wait for the transfer's end. */
static int write_step(int storage, int out, const char *buf, const struct options *o, unsigned long long n,
                      unsigned long long offset) {
    double end = storage_reserve(storage, n, o->bandwidth);
    for (unsigned long long done = 0; end >= 0 && done < n; done += o->chunk) {
        size_t len = n - done < o->chunk ? n - done : o->chunk;
        if (pwrite(out, buf, len, (off_t)(offset + done)) != (ssize_t)len) return -1;
    }
    storage_sleep_until(end);
    return end >= 0 ? 0 : -1;
}

static int run_phase(ioloom_coord *c, int storage, int out, const struct options *o) {
    char *buf = calloc(1, o->chunk);
    unsigned long long step = o->chunk * (unsigned long long)o->weight;
    int rc = buf ? 0 : -1;
    ioloom_coord_prepare(c, o->bytes, (double)o->bytes / o->bandwidth);
    for (unsigned long long offset = 0; rc == 0 && offset < o->bytes; offset += step) {
        unsigned long long n = o->bytes - offset < step ? o->bytes - offset : step;
        if (!ioloom_coord_inform(c)) ioloom_coord_wait(c);
        rc = write_step(storage, out, buf, o, n, offset);
        ioloom_coord_release(c, n);
    }
    ioloom_coord_complete(c);
    free(buf);
    return rc;
}

int main(int argc, char **argv) {
    struct options o;
    parse(argc, argv, &o);
    int storage = storage_open(o.storage), out = open(o.out, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (storage < 0 || out < 0) refuse(storage < 0 ? "cannot open --storage" : "cannot open --out");
    ioloom_coord *c = o.coord ? ioloom_coord_open(o.coord, o.name, o.cores) : NULL;
    if (o.bound > 0) ioloom_coord_set_bound(c, o.bound);
    if (o.start_at > 0) storage_sleep_until(o.start_at);
    double start = storage_now();
    int rc = run_phase(c, storage, out, &o);
    double end = storage_now();
    struct ioloom_coord_counters k;
    ioloom_coord_counters(c, &k);
    ioloom_coord_close(c);
    printf("{\"name\": \"%s\", \"start\": %.6f, \"end\": %.6f, \"seconds\": %.6f, \"bytes\": %llu, "
           "\"phases\": %llu, \"waits\": %llu, \"waited_seconds\": %.6f, \"timeouts\": %llu, \"lost\": %llu}\n",
           o.name, start, end, end - start, o.bytes, (unsigned long long)k.phases, (unsigned long long)k.waits,
           k.waited_seconds, (unsigned long long)k.timeouts, (unsigned long long)k.lost);
    if (rc != 0) fprintf(stderr, "ioloom-coord-writer: a write to %s or %s failed\n", o.out, o.storage);
    return rc == 0 ? 0 : 1;
}
