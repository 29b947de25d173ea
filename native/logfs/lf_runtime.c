/* Which files an MPI runtime makes beside a program's, never its data (docs/logfs-format.md): Open MPI's OMPIO
 * tests fcntl locks on NAME.locktest.RANK at every MPI_File_open, and its lockedfile component (the shared file
 * pointer when the ranks span nodes) keeps that pointer in NAME-JOBID-PID.lock under fcntl locks, made at every
 * open and removed at close. The layer keeps them plain files (lf_paths.c); the trace analysis leaves them out
 * (python/ioloom/analysis/partition.py, mpi_runtime_name). tests/vectors/logfs/runtime-names.json holds the cases
 * for both. Compiled into the library and the tool. */
#include <string.h>

#include "lf_runtime.h"

/* Does `name` end in -DIGITS-DIGITS.lock (Open MPI's NAME-JOBID-PID.lock), with a character before the first dash? */
static int pointer_lock_name(const char *name) {
    size_t len = strlen(name), suffix = sizeof ".lock" - 1;
    if (len <= suffix || strcmp(name + len - suffix, ".lock")) return 0;
    const char *end = name + len - suffix;
    for (int run = 0; run < 2; run++) { /* the pid's digits, then the job id's, each after a dash */
        const char *digits = end;
        while (digits > name && digits[-1] >= '0' && digits[-1] <= '9') digits--;
        if (digits == end || digits - 1 <= name || digits[-1] != '-') return 0;
        end = digits - 1;
    }
    return 1;
}

int lf_runtime_name(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strstr(base, ".locktest.") != NULL || pointer_lock_name(base);
}
