/* The names of an MPI runtime's files beside a program's (lf_runtime.c). */
#ifndef LF_RUNTIME_H
#define LF_RUNTIME_H

/* 1 if the last component of `path` is the name of a file an MPI runtime makes beside the program's (OMPIO's
 * NAME.locktest.RANK and NAME-JOBID-PID.lock), never its data; else 0. */
int lf_runtime_name(const char *path);

#endif
