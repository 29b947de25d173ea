/* See parallel.h. Threads are started per call: a call decodes or checks megabytes, so starting one (tens of
 * microseconds) is small beside it, and nothing lingers in the Python process between calls. */
#include "parallel.h"

#include <pthread.h>

void ioloom_run_parts(void *(*work)(void *), void *parts, size_t size, size_t n) {
    pthread_t thread[IOLOOM_MAX_PARTS];
    int started[IOLOOM_MAX_PARTS] = {0};
    char *part = parts;
    for (size_t j = 1; j < n; j++) started[j] = pthread_create(&thread[j], NULL, work, part + j * size) == 0;
    if (n) work(part);
    for (size_t j = 1; j < n; j++) {
        if (started[j])
            pthread_join(thread[j], NULL);
        else
            work(part + j * size);
    }
}

size_t ioloom_part_count(size_t amount, size_t least, int threads) {
    size_t parts = amount / least;
    if (threads < 1) threads = 1;
    parts = parts<1 ? 1 : parts>(size_t) threads ? (size_t)threads : parts;
    return parts > IOLOOM_MAX_PARTS ? IOLOOM_MAX_PARTS : parts;
}
