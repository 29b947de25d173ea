/* Command line of ioloom-bench. IOR's letters where the meaning is the same (-a -b -t -s -F -c -e -C -Q -w -r
 * -i -o -k -d -v -K -R -W -N -O summaryFormat=JSON), long options for the rest; IOR's letters that scripts use
 * and we do not implement are refused with a line naming what to use instead. Every rank parses the same argv
 * and so reaches the same verdict; what the options mean together is checked by validate.c, before any I/O. */
#include "bench.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char usage[] =
    "usage: ioloom-bench [options]   (IOR's letters where the meaning is the same)\n"
    "  -a API          posix | mpiio | hdf5 (hdf5: MPICH build only)            [posix]\n"
    "  -b SIZE         block size: bytes per rank per segment (k, m, g = 1024^n) [1m]\n"
    "  -t SIZE         transfer size: bytes per data call; divides -b           [256k]\n"
    "  -s N            segment count                                             [1]\n"
    "  --pattern P     strided (shared file, segment = one block of every rank) |\n"
    "                  contiguous (shared file, each rank one region of -s blocks) |\n"
    "                  fpp (file per process) | nfiles (one file per segment per process) [strided]\n"
    "  -F              file per process (= --pattern fpp)\n"
    "  -c              collective data calls (mpiio, hdf5)\n"
    "  -e              fsync before close (MPI_File_sync, H5Fflush)\n"
    "  -z              random offsets: each rank moves its transfers in a shuffled order\n"
    "  -w / -r         write / read phase (both when neither is given)\n"
    "  -C              read the data of another node: rank r reads what rank r + Q * ranks-per-node wrote\n"
    "  -Q N            for -C: how many nodes away (as IOR's -Q)                 [1]\n"
    "  --ranks-per-node N  emulated ranks per node: consecutive ranks share a node [ranks on this node]\n"
    "  -i N            repetitions                                               [1]\n"
    "  --reads N       read phases per repetition, each timed apart (a short read phase\n"
    "                  repeated: the summary's median takes every one)           [1]\n"
    "  --wait MS       idle time between two data calls (Boito's TMP); deducted from the effective time\n"
    "  --hint KEY=VAL  an MPI_Info hint for open (repeatable), e.g. romio_cb_write=enable\n"
    "  --verify        check every byte read against the pattern (needs -r); files that fail it are kept\n"
    "  -R / -W         as IOR: check what is read / read back and check what was written (= -r --verify)\n"
    "  -o PATH         test file name; its directory must be writable           [ioloom-bench.dat]\n"
    "  --dir DIR       target directory: a relative -o is taken inside it        [.]\n"
    "  -k              keep the files after the run (-K, IOR's keep-on-error, is always on)\n"
    "  -d S            idle seconds before each phase (IOR's interTestDelay)                [0]\n"
    "  -v              the text report also lists every rank's times\n"
    "  -N N            as IOR: must equal the ranks launched (launch N ranks instead)\n"
    "  --json          print the results as one JSON document (= IOR's -O summaryFormat=JSON)\n"
    "  --kernel K      flash (HDF5 checkpoint and plot files) | btio (3-D subarray, collective write\n"
    "                  every step) | riot (N operations of -t bytes for six MPI-IO functions)\n"
    "  --cells N       flash: cells per side per process [24]; btio: global grid points per side [64]\n"
    "  --variables N   flash: variables in the checkpoint file                   [24]\n"
    "  --blocks N      flash: blocks per process                                 [80]\n"
    "  --steps N       btio: time steps written [5]; riot: operations per function [100]\n";

/* "4m" -> 4194304. Returns 0 on success. */
static int parse_size(const char *text, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text || text[0] == '-') return -1;
    int shift = 0;
    switch (tolower((unsigned char)*end)) {
        case 'k':
            shift = 10;
            end++;
            break;
        case 'm':
            shift = 20;
            end++;
            break;
        case 'g':
            shift = 30;
            end++;
            break;
        case 't':
            shift = 40;
            end++;
            break;
    }
    if (*end == 'i' || *end == 'I') end++;
    if (*end == 'b' || *end == 'B') end++;
    if (*end || (shift && v > (UINT64_MAX >> shift))) return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

static int parse_count(const char *text, long min, long max, long *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < min || v > max) return -1;
    *out = v;
    return 0;
}

static int parse_hint(struct bench_options *o, const char *text) {
    const char *eq = strchr(text, '=');
    if (!eq || eq == text || !eq[1])
        return bench_refuse("--hint '%s': expected KEY=VALUE with a non-empty key and value, "
                            "e.g. --hint romio_cb_write=enable",
                            text);
    size_t klen = (size_t)(eq - text);
    if (klen >= sizeof o->hints[0].key || strlen(eq + 1) >= sizeof o->hints[0].value)
        return bench_refuse("--hint '%s': key and value must each be shorter than %zu characters", text,
                            sizeof o->hints[0].key);
    for (size_t i = 0; i < klen; i++)
        if (isspace((unsigned char)text[i]))
            return bench_refuse("--hint '%s': the key contains a space; write KEY=VALUE without spaces", text);
    if (o->nhints == BENCH_MAX_HINTS) return bench_refuse("--hint: at most %d hints", BENCH_MAX_HINTS);
    struct bench_hint *h = &o->hints[o->nhints++];
    memcpy(h->key, text, klen);
    h->key[klen] = 0;
    strcpy(h->value, eq + 1);
    return 0;
}

static int parse_api(struct bench_options *o, const char *text) {
    if (!strcasecmp(text, "posix"))
        o->api = API_POSIX;
    else if (!strcasecmp(text, "mpiio"))
        o->api = API_MPIIO;
    else if (!strcasecmp(text, "hdf5"))
        o->api = API_HDF5;
    else
        return bench_refuse("-a/--api '%s': expected posix, mpiio or hdf5", text);
    return 0;
}

static const char *const pattern_names[] = {"strided", "contiguous", "fpp", "nfiles"};

static int parse_pattern(struct bench_options *o, const char *text) {
    for (int i = 0; i < 4; i++)
        if (!strcasecmp(text, pattern_names[i])) {
            o->pattern = (enum bench_pattern)i;
            return 0;
        }
    return bench_refuse("--pattern '%s': expected strided, contiguous, fpp or nfiles", text);
}

static const char *const kernel_names[] = {"none", "flash", "btio", "riot"};

const char *bench_kernel_name(enum bench_kernel k) { return kernel_names[k]; }

static int parse_kernel(struct bench_options *o, const char *text) {
    for (int i = KERNEL_FLASH; i <= KERNEL_RIOT; i++)
        if (!strcasecmp(text, kernel_names[i])) {
            o->kernel = (enum bench_kernel)i;
            return 0;
        }
    return bench_refuse("--kernel '%s': expected flash, btio or riot", text);
}

const char *bench_api_name(enum bench_api api) {
    return api == API_POSIX ? "posix" : api == API_MPIIO ? "mpiio" : "hdf5";
}

const char *bench_pattern_name(enum bench_pattern p) { return pattern_names[p]; }

/* The CPUs the ranks of a node may run on: the union of their affinity masks (a launcher may bind each rank to
 * one CPU, or the node may hold fewer CPUs than ranks). */
static int node_cpu_count(MPI_Comm node) {
    cpu_set_t mine, all;
    CPU_ZERO(&mine);
    if (sched_getaffinity(0, sizeof mine, &mine) != 0)
        CPU_SET(0, &mine); /* unknown: count one CPU per rank at least once */
    MPI_Allreduce(&mine, &all, (int)sizeof mine, MPI_BYTE, MPI_BOR, node);
    return CPU_COUNT(&all);
}

/* Ranks and CPUs of rank 0's node, and whether any node has more ranks than CPUs. */
static void node_shape(struct bench_options *o, MPI_Comm comm) {
    MPI_Comm node;
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int shape[2], over;
    MPI_Comm_size(node, &shape[0]);
    shape[1] = node_cpu_count(node);
    MPI_Comm_free(&node);
    over = shape[0] > shape[1];
    MPI_Bcast(shape, 2, MPI_INT, 0, comm);
    MPI_Allreduce(MPI_IN_PLACE, &over, 1, MPI_INT, MPI_LOR, comm);
    o->node_ranks = o->ranks_per_node = shape[0];
    o->node_cpus = shape[1];
    o->oversubscribed = over;
}

enum {
    OPT_PATTERN = 1000,
    OPT_RPN,
    OPT_WAIT,
    OPT_HINT,
    OPT_VERIFY,
    OPT_JSON,
    OPT_KERNEL,
    OPT_CELLS,
    OPT_VARIABLES,
    OPT_STEPS,
    OPT_BLOCKS,
    OPT_DIR,
    OPT_READS
};

static const struct option long_options[] = {
    {"api", required_argument, 0, 'a'},
    {"block-size", required_argument, 0, 'b'},
    {"transfer-size", required_argument, 0, 't'},
    {"segments", required_argument, 0, 's'},
    {"file-per-proc", no_argument, 0, 'F'},
    {"collective", no_argument, 0, 'c'},
    {"fsync", no_argument, 0, 'e'},
    {"random", no_argument, 0, 'z'},
    {"reorder", no_argument, 0, 'C'},
    {"node-offset", required_argument, 0, 'Q'},
    {"write", no_argument, 0, 'w'},
    {"read", no_argument, 0, 'r'},
    {"repetitions", required_argument, 0, 'i'},
    {"output", required_argument, 0, 'o'},
    {"keep", no_argument, 0, 'k'},
    {"help", no_argument, 0, 'h'},
    {"pattern", required_argument, 0, OPT_PATTERN},
    {"ranks-per-node", required_argument, 0, OPT_RPN},
    {"wait", required_argument, 0, OPT_WAIT},
    {"hint", required_argument, 0, OPT_HINT},
    {"verify", no_argument, 0, OPT_VERIFY},
    {"json", no_argument, 0, OPT_JSON},
    {"kernel", required_argument, 0, OPT_KERNEL},
    {"cells", required_argument, 0, OPT_CELLS},
    {"variables", required_argument, 0, OPT_VARIABLES},
    {"steps", required_argument, 0, OPT_STEPS},
    {"blocks", required_argument, 0, OPT_BLOCKS},
    {"dir", required_argument, 0, OPT_DIR},
    {"reads", required_argument, 0, OPT_READS},
    {0, 0, 0, 0},
};

static void set_defaults(struct bench_options *o, MPI_Comm comm) {
    memset(o, 0, sizeof *o);
    o->api = API_POSIX;
    o->pattern = PATTERN_STRIDED;
    o->block_size = 1 << 20;
    o->transfer_size = 256 << 10;
    o->segment_count = 1;
    o->repetitions = 1;
    o->reads = 1;
    o->node_offset = 1;
    node_shape(o, comm);
    strcpy(o->path, "ioloom-bench.dat");
}

/* IOR's -O directives: only summaryFormat (JSON or default) has a meaning here. */
static int apply_directives(struct bench_options *o, const char *arg) {
    char copy[512], *save = NULL;
    snprintf(copy, sizeof copy, "%s", arg);
    for (char *d = strtok_r(copy, ",", &save); d; d = strtok_r(NULL, ",", &save)) {
        if (!strcasecmp(d, "summaryFormat=JSON"))
            o->json = 1;
        else if (strcasecmp(d, "summaryFormat=default"))
            return bench_refuse("-O %s: only -O summaryFormat=JSON (= --json) is understood; IOR's other "
                                "directives have options of their own here (ioloom-bench --help)",
                                d);
    }
    return 0;
}

/* IOR's letters that ioloom-bench takes but that change nothing, or that it refuses, saying what to use. */
static int apply_ior_letter(struct bench_options *o, int c, const char *arg) {
    long n;
    int nranks;
    switch (c) {
        case 'K':
            return 0; /* keep files that fail --verify: always done */
        case 'G':
            bench_note("-G %s (IOR's data signature) changes nothing: each 8-byte word ioloom-bench writes holds its "
                       "offset and the writer's rank (docs/bench.md)",
                       arg);
            return 0;
        case 'R':
        case 'W':
            o->verify = o->check = 1;
            return 0;
        case 'N':
            MPI_Comm_size(MPI_COMM_WORLD, &nranks);
            if (parse_count(arg, -1, INT_MAX, &n) || (n != -1 && n != nranks))
                return bench_refuse("-N %s: ioloom-bench runs on every rank launched (%d here); launch that many "
                                    "instead (mpiexec -n N, or ioloom bench io -n N)",
                                    arg, nranks);
            return 0;
        case 'x':
            return bench_refuse("-x (IOR's single transfer attempt) is not supported: ioloom-bench completes a short "
                                "transfer with further calls, as a careful program does; drop -x");
        case 'D':
            return bench_refuse("-D %s (IOR's stonewalling deadline) is not supported: every rank moves all its bytes; "
                                "choose -s for the length of run you want",
                                arg);
        case 'f':
            return bench_refuse("-f %s: IOR scripts are not read; `ioloom bench sweep CONFIG.toml` runs a grid of "
                                "parameters (docs/bench.md)",
                                arg);
        case 'O':
            return apply_directives(o, arg);
    }
    return bench_refuse("unknown option or missing value (getopt said which, above)");
}

/* One option; returns 0 or BENCH_EXIT_USAGE. */
static int apply_option(struct bench_options *o, int c, const char *arg, int *kernel_sizes_given) {
    long n;
    switch (c) {
        case 'a':
            return parse_api(o, arg);
        case 'b':
            if (parse_size(arg, &o->block_size))
                return bench_refuse("-b/--block-size '%s': expected a size such as 4m, 64k or 1048576", arg);
            return 0;
        case 't':
            if (parse_size(arg, &o->transfer_size))
                return bench_refuse("-t/--transfer-size '%s': expected a size such as 1m, 64k or 4096", arg);
            *kernel_sizes_given = 1;
            return 0;
        case 's':
            if (parse_count(arg, 1, LONG_MAX, &n))
                return bench_refuse("-s/--segments '%s': expected a whole number >= 1", arg);
            o->segment_count = (uint64_t)n;
            return 0;
        case 'F':
            o->pattern = PATTERN_FPP;
            return 0;
        case 'c':
            o->collective = 1;
            return 0;
        case 'e':
            o->fsync = 1;
            return 0;
        case 'z':
            o->random = 1;
            return 0;
        case 'C':
            o->reorder = 1;
            return 0;
        case 'Q':
            if (parse_count(arg, 0, INT_MAX, &n))
                return bench_refuse("-Q/--node-offset '%s': expected a whole number of nodes >= 0", arg);
            o->node_offset = (int)n;
            o->reorder = 1;
            return 0;
        case 'w':
            o->write = 1;
            return 0;
        case 'r':
            o->read = 1;
            return 0;
        case 'i':
            if (parse_count(arg, 1, 1000000, &n))
                return bench_refuse("-i/--repetitions '%s': expected a whole number >= 1", arg);
            o->repetitions = (int)n;
            return 0;
        case OPT_READS:
            if (parse_count(arg, 1, 1000, &n))
                return bench_refuse("--reads '%s': expected a whole number from 1 to 1000", arg);
            o->reads = (int)n;
            return 0;
        case 'o':
            if (!*arg || strlen(arg) >= sizeof o->path - 32)
                return bench_refuse("-o/--output: expected a file name shorter than %zu characters",
                                    sizeof o->path - 32);
            strcpy(o->path, arg);
            return 0;
        case OPT_DIR:
            if (!*arg || strlen(arg) >= sizeof o->dir)
                return bench_refuse("--dir: expected a directory name shorter than %zu characters", sizeof o->dir);
            strcpy(o->dir, arg);
            return 0;
        case 'k':
            o->keep = 1;
            return 0;
        case 'v':
            o->verbose++;
            return 0;
        case 'd': {
            char *end;
            o->delay_s = strtod(arg, &end);
            if (end == arg || *end || !(o->delay_s >= 0) || o->delay_s > 3600)
                return bench_refuse("-d '%s': expected seconds between 0 and 3600 (the idle delay before each phase)",
                                    arg);
            return 0;
        }
        case OPT_PATTERN:
            return parse_pattern(o, arg);
        case OPT_RPN:
            if (parse_count(arg, 1, INT_MAX, &n))
                return bench_refuse("--ranks-per-node '%s': expected a whole number >= 1", arg);
            o->ranks_per_node = (int)n;
            o->ranks_per_node_given = 1;
            return 0;
        case OPT_WAIT: {
            char *end;
            o->wait_ms = strtod(arg, &end);
            if (end == arg || *end || !(o->wait_ms >= 0) || o->wait_ms > 3.6e6)
                return bench_refuse("--wait '%s': expected milliseconds between 0 and 3600000", arg);
            return 0;
        }
        case OPT_HINT:
            return parse_hint(o, arg);
        case OPT_VERIFY:
            o->verify = 1;
            return 0;
        case OPT_JSON:
            o->json = 1;
            return 0;
        case OPT_KERNEL:
            return parse_kernel(o, arg);
        case OPT_CELLS:
        case OPT_VARIABLES:
        case OPT_STEPS:
        case OPT_BLOCKS: {
            static const char *const names[] = {"cells", "variables", "steps", "blocks"};
            int *fields[] = {&o->cells, &o->variables, &o->steps, &o->blocks};
            if (parse_count(arg, 1, 100000, &n))
                return bench_refuse("--%s '%s': expected a whole number between 1 and 100000", names[c - OPT_CELLS],
                                    arg);
            *fields[c - OPT_CELLS] = (int)n;
            return 0;
        }
        case 'h':
            if (bench_is_root()) fputs(usage, stdout);
            return -1;
        default:
            return apply_ior_letter(o, c, arg);
    }
}

/* Kernel sizes that were not given: the documents' configurations. */
static void kernel_defaults(struct bench_options *o, int transfer_given) {
    if (o->kernel == KERNEL_FLASH) {
        o->cells = o->cells ? o->cells : 24;
        o->variables = o->variables ? o->variables : 24;
        o->blocks = o->blocks ? o->blocks : 80;
    } else if (o->kernel == KERNEL_BTIO) {
        o->cells = o->cells ? o->cells : 64;
        o->steps = o->steps ? o->steps : 5;
    } else if (o->kernel == KERNEL_RIOT) {
        o->steps = o->steps ? o->steps : 100;
        if (!transfer_given) o->transfer_size = 4 << 20;
    }
}

int bench_parse_options(int argc, char **argv, struct bench_options *o, MPI_Comm comm) {
    set_defaults(o, comm);
    int nranks, c, rc, transfer_given = 0;
    MPI_Comm_size(comm, &nranks);
    opterr = bench_is_root();
    while ((c = getopt_long(argc, argv, "a:b:t:s:FcezCQ:wri:o:khKG:RWxd:D:N:vf:O:", long_options, NULL)) != -1)
        if ((rc = apply_option(o, c, optarg, &transfer_given))) return rc < 0 ? -1 : rc;
    if (optind < argc) return bench_refuse("unexpected argument '%s'", argv[optind]);
    if (!o->write && !o->read) o->write = o->read = 1;
    o->read |= o->check; /* -R, -W: checking means reading */
    if (o->dir[0] && o->path[0] != '/') {
        char joined[sizeof o->path];
        if (snprintf(joined, sizeof joined, "%s/%s", o->dir, o->path) >= (int)sizeof o->path - 32)
            return bench_refuse("--dir %s with -o %s: the path is too long", o->dir, o->path);
        strcpy(o->path, joined);
    }
    kernel_defaults(o, transfer_given);
    return bench_validate_options(o, nranks, comm);
}
