/* Offset arithmetic of the access patterns (Boito et al., section 4: SFSA strided and non-strided, MFWA;
 * plus many files per process). Everything here is a pure function of the options, so the Python tests
 * can check the files against the same arithmetic (docs/bench.md). */
#include "bench.h"

#include <stdio.h>

struct bench_place bench_place(const struct bench_options *o, int nranks, int owner, uint64_t segment,
                               uint64_t transfer) {
    uint64_t B = o->block_size, S = o->segment_count, within = transfer * o->transfer_size;
    struct bench_place p = {0, 0};
    switch (o->pattern) {
        case PATTERN_STRIDED:
            p.offset = (segment * (uint64_t)nranks + (uint64_t)owner) * B + within;
            break;
        case PATTERN_CONTIGUOUS:
            p.offset = ((uint64_t)owner * S + segment) * B + within;
            break;
        case PATTERN_FPP:
            p.file_index = owner;
            p.offset = segment * B + within;
            break;
        case PATTERN_NFILES:
            p.file_index = (int)((uint64_t)owner * S + segment);
            p.offset = within;
            break;
    }
    return p;
}

int bench_shared_file(const struct bench_options *o) {
    return o->pattern == PATTERN_STRIDED || o->pattern == PATTERN_CONTIGUOUS;
}

void bench_file_name(const struct bench_options *o, int file_index, char *out, size_t outlen) {
    if (bench_shared_file(o))
        snprintf(out, outlen, "%s", o->path);
    else if (o->pattern == PATTERN_FPP)
        snprintf(out, outlen, "%s.%08d", o->path, file_index);
    else
        snprintf(out, outlen, "%s.%08d.%08llu", o->path, (int)(file_index / o->segment_count),
                 (unsigned long long)(file_index % o->segment_count));
}

uint64_t bench_file_size(const struct bench_options *o, int nranks) {
    switch (o->pattern) {
        case PATTERN_STRIDED:
        case PATTERN_CONTIGUOUS:
            return o->block_size * o->segment_count * (uint64_t)nranks;
        case PATTERN_FPP:
            return o->block_size * o->segment_count;
        case PATTERN_NFILES:
            return o->block_size;
    }
    return 0;
}

int bench_file_count(const struct bench_options *o, int nranks) {
    switch (o->pattern) {
        case PATTERN_STRIDED:
        case PATTERN_CONTIGUOUS:
            return 1;
        case PATTERN_FPP:
            return nranks;
        case PATTERN_NFILES:
            return (int)(o->segment_count * (uint64_t)nranks);
    }
    return 0;
}
