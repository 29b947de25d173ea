/* ioloom coord's client API: an application (or a library) tells the coordinator (`ioloom coord serve`,
 * docs/coord.md) about its I/O phases and writes when the coordinator's policy says so. The calls are those of
 * CALCioM (Dorier Ch. 6.2.3): prepare/complete stack what is known of the phase, inform announces it, check asks
 * without blocking, wait blocks (bounded), release ends a step between two atomic writes.
 *
 * Fail-open: a client that cannot reach the coordinator, loses it, or waits past its bound goes on writing;
 * each case is counted (ioloom_coord_counters). Every function is thread-safe and accepts a NULL handle
 * (then it authorises everything). Depends on libc and pthreads only. */
#ifndef IOLOOM_COORD_H
#define IOLOOM_COORD_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ioloom_coord ioloom_coord;

struct ioloom_coord_counters {
    uint64_t phases;       /* phases announced (first inform after the stack was empty) */
    uint64_t waits;        /* times the client was told to wait (inform or check answered WAIT) */
    double waited_seconds; /* time spent in ioloom_coord_wait */
    uint64_t timeouts;     /* waits that passed their bound: the client wrote anyway */
    uint64_t lost;         /* 1 once the coordinator could not be reached or went away: writes went on */
};

/* Connect to the coordinator at `address` (a Unix socket path, "unix:PATH"; NULL: $IOLOOM_COORD, else
 * $XDG_RUNTIME_DIR/ioloom-coord.sock, else /tmp/ioloom-coord-<uid>.sock) as application `name` on `cores`
 * cores. Returns NULL only when out of memory; an unreachable coordinator gives a handle counted as lost. */
ioloom_coord *ioloom_coord_open(const char *address, const char *name, int cores);
/* End the phase if one is open and disconnect; frees the handle. */
void ioloom_coord_close(ioloom_coord *c);
/* In a forked child: drop the parent's connection (inherited) without a word to the coordinator, and free the
 * handle; the parent's phase stays the parent's. */
void ioloom_coord_abandon(ioloom_coord *c);
/* Bound of one wait in seconds (default $IOLOOM_COORD_WAIT, else 60). */
void ioloom_coord_set_bound(ioloom_coord *c, double seconds);

/* Push a level of knowledge about the coming I/O: `bytes` it will write and `seconds` it should take alone
 * (0 when unknown). The phase's estimates are those of the outermost level that gives them. */
void ioloom_coord_prepare(ioloom_coord *c, uint64_t bytes, double seconds);
/* Replace the innermost level's estimates (what the phase's first calls measured, say); the next inform sends
 * them when they are the phase's. No effect without a level. */
void ioloom_coord_revise(ioloom_coord *c, uint64_t bytes, double seconds);
/* Pop the innermost level; popping the last one ends the phase (the coordinator lets the next one write). */
void ioloom_coord_complete(ioloom_coord *c);
/* Announce the phase (or its new estimates); returns 1 if this client may write now, 0 if it should wait.
 * Only a new phase's announcement waits for the coordinator's answer; with new estimates it is the latest one
 * received, and a new place behind another phase is learnt at a later inform.
 * A prepare level must give bytes or seconds first: the coordinator refuses a phase with neither, and the
 * client then goes on uncoordinated (counted as lost). */
int ioloom_coord_inform(ioloom_coord *c);
/* Ask without blocking whether this client may write now: *authorized = 1 or 0. Returns 0. */
int ioloom_coord_check(ioloom_coord *c, int *authorized);
/* Block until this client may write, at most the bound. Returns 1 if authorised, 0 if it goes on anyway
 * (bound passed or coordinator lost; counted). */
int ioloom_coord_wait(ioloom_coord *c);
/* End a step: `bytes` more were written (the coordinator's remaining-time estimate; reported once the bytes not
 * reported reach 1/8 of the phase's, a second after the last request, or with the next request). Call inform
 * again before the next write. */
void ioloom_coord_release(ioloom_coord *c, uint64_t bytes);
/* A copy of the counters. */
void ioloom_coord_counters(ioloom_coord *c, struct ioloom_coord_counters *out);

#ifdef __cplusplus
}
#endif
#endif
