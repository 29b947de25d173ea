/* Sharing one call's work among threads: the reader's decoder and indexer split their chunks into parts and
 * run each part on a thread of its own. */
#ifndef IOLOOM_PARALLEL_H
#define IOLOOM_PARALLEL_H

#include <stddef.h>

enum { IOLOOM_MAX_PARTS = 8 };

/* Runs work(parts + j * size) for every part j < n (n <= IOLOOM_MAX_PARTS): part 0 on the calling thread, the
 * others on threads of their own, or on the calling thread when no thread can be started. Returns when all
 * are done. */
void ioloom_run_parts(void *(*work)(void *), void *parts, size_t size, size_t n);

/* How many parts `amount` of work makes when a part should get at least `least` of it, for up to `threads`. */
size_t ioloom_part_count(size_t amount, size_t least, int threads);

#endif
