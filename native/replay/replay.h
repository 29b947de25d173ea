/* ioloom-replay: what the script reader, the call tables (calls.c: POSIX and stdio; mpiio.c: MPI-IO, in the MPI
 * replayers only) and the cross-process order share (docs/replay.md). */
#ifndef IOLOOM_REPLAY_H
#define IOLOOM_REPLAY_H

#include <stdio.h>

enum { REPLAY_MAX_WAITS = 64 };

/* One recorded call, as a script line holds it: its name, the trace's fields it needs and the calls of other
 * processes that must be done before it starts (process index, count of that process's calls). */
struct entry; /* a replayed call's name and how it is made (calls.c, mpiio.c) */

struct call {
    const struct entry *entry;
    long long gap_ns, handle, file, offset, req, aux, ret;
    int waits;
    int wait_process[REPLAY_MAX_WAITS];
    long long wait_count[REPLAY_MAX_WAITS];
};

/* A group of processes that opened a file together (MPI-IO replays: the communicator of an MPI_File_open). */
struct group {
    int *members, size; /* process indices, ascending */
};

/* A process's script: its files (relative paths, by index), the groups and its calls in order. */
struct script {
    int process, processes;
    char **paths;
    long long npaths;
    struct group *groups;
    int ngroups;
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
    long long approximated;    /* MPI-IO calls made otherwise than recorded so that a collective is still made */
    struct mpiio_state *mpiio; /* MPI-IO files and requests (mpiio.c); NULL until an MPI-IO call */
};

typedef long long (*handler)(struct replayer *r, const struct call *c, void *fn);

struct entry {
    const char *name;
    handler run;
    void *fn;
    int moves; /* 1: the result is a count of bytes moved, compared with the recorded one */
};

/* The MPI-IO calls the MPI replayers make (mpiio.c); none in the serial one. */
extern const struct entry replay_mpiio_table[];
extern const int replay_mpiio_entries;

int script_load(const char *path, struct script *s);
const struct entry *replay_find(const char *name); /* NULL: not a call this program replays */
void replay_call(struct replayer *r, const struct call *c);
void replay_list(void);
const char *replay_path(const struct replayer *r, const struct call *c);
size_t replay_bytes(struct replayer *r, const struct call *c); /* the request's size, with room in both buffers */

#endif
