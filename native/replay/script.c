/* Reads a replay script (docs/replay.md, "Script") with raw system calls, so the tracer of the replay records
 * only the replayed calls:
 *     ioloom-replay 2 PROCESS PROCESSES
 *     file INDEX PATH
 *     group INDEX PROCESS...
 *     call NAME GAP_NS HANDLE FILE OFFSET REQ AUX RET [PROCESS:COUNT ...]
 */
#include "replay.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The whole file, NUL-terminated; NULL when it cannot be read. */
static char *slurp(const char *path) {
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    size_t size = 0, room = 1 << 16;
    char *text = malloc(room);
    for (long n = 1; text && n > 0; size += (size_t)n) {
        if (size + 1 == room) text = realloc(text, room *= 2);
        n = text ? syscall(SYS_read, fd, text + size, room - size - 1) : -1;
        if (n < 0) free(text), text = NULL;
        if (n <= 0) break;
    }
    syscall(SYS_close, fd);
    if (text) text[size] = '\0';
    return text;
}

static int parse_waits(char *rest, struct call *c) {
    char *end;
    for (c->waits = 0; *rest; rest = end) {
        while (*rest == ' ') rest++;
        if (!*rest) break;
        if (c->waits == REPLAY_MAX_WAITS) return -1;
        c->wait_process[c->waits] = (int)strtol(rest, &end, 10);
        if (*end != ':') return -1;
        c->wait_count[c->waits++] = strtoll(end + 1, &end, 10);
    }
    return 0;
}

static int parse_call(char *line, struct call *c) {
    char *name = line + 5, *space = strchr(name, ' ');
    if (!space) return -1;
    *space = '\0';
    c->entry = replay_find(name);
    if (!c->entry) return -2;
    long long *fields[] = {&c->gap_ns, &c->handle, &c->file, &c->offset, &c->req, &c->aux, &c->ret};
    char *p = space + 1, *end;
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++, p = end) {
        *fields[i] = strtoll(p, &end, 10);
        if (end == p) return -1;
    }
    return parse_waits(p, c);
}

static int parse_file(char *line, struct script *s) {
    char *end;
    long long index = strtoll(line + 5, &end, 10);
    if (index != s->npaths || *end != ' ') return -1; /* files are listed in index order */
    s->paths = realloc(s->paths, (size_t)(s->npaths + 1) * sizeof *s->paths);
    if (!s->paths) return -1;
    s->paths[s->npaths++] = end + 1;
    return 0;
}

/* A group's members: process indices in [0, processes), ascending (so equal sets are equal arrays). */
static int parse_group(char *line, struct script *s) {
    char *end, *p;
    long long index = strtoll(line + 6, &end, 10);
    if (index != s->ngroups || *end != ' ') return -1; /* groups are listed in index order */
    s->groups = realloc(s->groups, (size_t)(s->ngroups + 1) * sizeof *s->groups);
    if (!s->groups) return -1;
    struct group *g = &s->groups[s->ngroups++];
    *g = (struct group){malloc((size_t)s->processes * sizeof *g->members), 0};
    for (p = end; g->members && *p == ' ' && g->size < s->processes; p = end) {
        long member = strtol(p + 1, &end, 10);
        if (end == p + 1 || member < 0 || member >= s->processes || (g->size && member <= g->members[g->size - 1]))
            return -1;
        g->members[g->size++] = (int)member;
    }
    return g->members && g->size > 0 && *p == '\0' ? 0 : -1;
}

static int parse_line(char *line, struct script *s, long long *room) {
    if (strncmp(line, "file ", 5) == 0) return parse_file(line, s);
    if (strncmp(line, "group ", 6) == 0) return parse_group(line, s);
    if (strncmp(line, "call ", 5) != 0) return *line ? -1 : 0;
    if (s->ncalls == *room) {
        *room = *room ? 2 * *room : 1024;
        s->calls = realloc(s->calls, (size_t)*room * sizeof *s->calls);
        if (!s->calls) return -1;
    }
    return parse_call(line, &s->calls[s->ncalls++]);
}

static void complain(const char *path, long long line, int why) {
    fprintf(stderr, "ioloom-replay: %s: line %lld: %s; write the script again with `ioloom replay write`\n", path, line,
            why == -2 ? "a call this replayer does not make (see --list-ops)" : "malformed");
}

/* 0, or -1 after saying on stderr what is wrong with the script. The script's text stays allocated: its paths
 * point into it. */
int script_load(const char *path, struct script *s) {
    memset(s, 0, sizeof *s);
    char *text = slurp(path);
    if (!text || sscanf(text, "ioloom-replay 2 %d %d", &s->process, &s->processes) != 2 || s->processes <= 0) {
        fprintf(stderr, "ioloom-replay: %s: not a replay script of version 2; write it with `ioloom replay write`\n",
                path);
        return -1;
    }
    long long room = 0;
    char *rest = text;
    strsep(&rest, "\n"); /* the header, read above */
    for (long long number = 2; rest; number++) {
        int rc = parse_line(strsep(&rest, "\n"), s, &room);
        if (rc < 0) return complain(path, number, rc), -1;
    }
    return 0;
}
