/* Configuration from the environment. Read with getenv, which does no I/O and is safe before main. */
#include <ctype.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ioloom_core.h"

const char *ioloom_env_str(const char *name, const char *fallback) {
    const char *value = getenv(name);
    return value && *value ? value : fallback;
}

int ioloom_env_bool(const char *name, int fallback) {
    const char *v = getenv(name);
    if (!v || !*v) return fallback;
    if (!strcmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "true") || !strcasecmp(v, "on")) return 1;
    if (!strcmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "false") || !strcasecmp(v, "off")) return 0;
    return fallback;
}

/* The unsigned decimal number at the start of v; *end after it. 0 (and *end == v) when there is none, or when
 * it is negative (strtoull would wrap it) or out of range. */
static unsigned long long leading_number(const char *v, char **end) {
    *end = (char *)v;
    if (*v == '-') return 0;
    unsigned long long n = strtoull(v, end, 10); /* ULLONG_MAX: out of range (errno left alone) */
    if (n == ULLONG_MAX) *end = (char *)v;
    return n;
}

size_t ioloom_env_size(const char *name, size_t fallback) {
    const char *v = getenv(name);
    if (!v || !*v) return fallback;
    char *end;
    unsigned long long n = leading_number(v, &end);
    if (end == v) return fallback;
    int shift = 0;
    switch (toupper((unsigned char)*end)) {
        case 'G':
            shift += 10; /* fall through */
        case 'M':
            shift += 10; /* fall through */
        case 'K':
            shift += 10;
            end++;
            break;
        case '\0':
            break;
        default:
            return fallback;
    }
    if (toupper((unsigned char)*end) == 'I') end++; /* accept KiB, MiB, GiB */
    if (toupper((unsigned char)*end) == 'B') end++;
    if (*end || n > (unsigned long long)SIZE_MAX >> shift) return fallback;
    return (size_t)n << shift;
}

uint64_t ioloom_env_uint(const char *name, uint64_t fallback) {
    const char *v = getenv(name);
    if (!v || !*v) return fallback;
    char *end;
    unsigned long long n = leading_number(v, &end);
    return end == v || *end ? fallback : (uint64_t)n;
}

void ioloom_for_each_item(const char *list, char sep, void (*fn)(const char *item, size_t len, void *arg), void *arg) {
    while (list && *list) {
        const char *end = strchr(list, sep);
        size_t len = end ? (size_t)(end - list) : strlen(list);
        if (len) fn(list, len, arg);
        list = end ? end + 1 : NULL;
    }
}

static void match_program(const char *item, size_t len, void *arg) {
    const char *name = arg;
    if (strlen(name) == len && !strncmp(item, name, len)) *(char *)arg = 0;
}

int ioloom_program_skipped(void) {
    char exe[4096];
    ssize_t n = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", exe, sizeof exe - 1); /* direct: not traced */
    if (n <= 0) return 0;
    exe[n] = 0;
    char *name = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
    ioloom_for_each_item(ioloom_env_str("IOLOOM_SKIP_PROGRAMS", ""), ',', match_program, name);
    return *name == 0;
}
