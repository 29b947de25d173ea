/* ioloom-replay: what the script reader, the call table and the cross-process order share (docs/replay.md). */
#ifndef IOLOOM_REPLAY_H
#define IOLOOM_REPLAY_H

#include <stdio.h>

enum { REPLAY_MAX_WAITS = 64 };

/* One recorded call, as a script line holds it: its name, the trace's fields it needs and the calls of other
 * processes that must be done before it starts (process index, count of that process's calls). */
struct entry; /* a replayed call's name and how it is made (calls.c) */

struct call {
    const struct entry *entry;
    long long gap_ns, handle, file, offset, req, aux, ret;
    int waits;
    int wait_process[REPLAY_MAX_WAITS];
    long long wait_count[REPLAY_MAX_WAITS];
};

/* A process's script: its files (relative paths, by index) and its calls in order. */
struct script {
    int process, processes;
    char **paths;
    long long npaths;
    struct call *calls;
    long long ncalls;
};

/* What a replaying process keeps: recorded descriptor -> its own descriptor and stdio stream, the buffers. */
struct replayer {
    const struct script *script;
    int *fds;
    FILE **streams;
    long long nhandles;
    char *out, *in;
    long long room;
    long long diverged;
};

int script_load(const char *path, struct script *s);
const struct entry *replay_find(const char *name); /* NULL: not a call this program replays */
void replay_call(struct replayer *r, const struct call *c);
void replay_list(void);
const char *replay_path(const struct replayer *r, const struct call *c);

#endif
