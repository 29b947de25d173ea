/* Where reads and writes at "the current position" take place, known without asking the kernel on every call.
 *
 * The kernel keeps one position per open file description, shared by every descriptor dup'ed from it. The
 * tracer keeps its own copy per description (positions.c): a traced open creates one at 0, dup/dup2/dup3 and
 * fcntl(F_DUPFD) share it, close releases it; each read or write adds the bytes it moved and lseek sets it. It
 * asks the kernel (the next lseek, so that a layer below us, logfs, answers for its descriptors) only when its
 * copy cannot be trusted:
 *  - the descriptor was not opened through a traced call (inherited, made by libc's fopen, received): its
 *    description may be shared with code or processes we do not see; it is asked on every call, as are
 *    descriptions that existed when the process forked or spawned a program (both processes may move them);
 *  - the descriptor has O_APPEND (writes land at the end of file, which others may move): writes ask;
 *  - a call on the description ran at the same time as another (threads without a lock of their own): the
 *    kernel ordered them, the tracer cannot tell how, so both ask and the next call asks once more;
 *  - a call moved the position without being traced (reentrant, or before tracing started): asked once.
 * Pipes and sockets have no position: their calls record -1 without asking, as lseek (ESPIPE) would.
 *
 * A call on a tracked description runs between ioloom_move_start() and one of ioloom_move_by()/ioloom_move_to().
 * In a process with one thread both are inline loads, comparisons and stores; with threads, each call takes a
 * ticket and counts itself in flight on the description (one 64-bit word), and trusts the position only if it
 * was alone from its start to its end (positions.c). */
#ifndef IOLOOM_POSITIONS_H
#define IOLOOM_POSITIONS_H

#include <stdint.h>
#include <sys/single_threaded.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trace_internal.h"

#define IOLOOM_POSITION_UNKNOWN (-1)
#define IOLOOM_CALL_TICKET (1ull << 32) /* high half of `calls`: calls started; low half: calls in flight */
#define IOLOOM_CALLS_IN_FLIGHT 0xffffffffull

struct ioloom_description {
    int64_t position; /* the tracked position, or IOLOOM_POSITION_UNKNOWN: ask */
    uint64_t calls;   /* tickets << 32 | calls in flight (with threads only) */
    uint32_t refs;    /* descriptors sharing it (under the table's lock) */
    uint32_t epoch;   /* ioloom_spawn_epoch when it was created: an older one is shared with another process */
    int append;       /* O_APPEND: writes land at the end of file */
} __attribute__((aligned(64))); /* one cache line each: threads on different files do not share lines */

#define IOLOOM_DESCRIPTIONS 16384
extern struct ioloom_description ioloom_descriptions[IOLOOM_DESCRIPTIONS];
/* A descriptor's description (ioloom_fds[fd].description): > 0 an index into ioloom_descriptions, 0 untracked (ask),
 * -1 no position (pipe, socket). */
#define IOLOOM_FD_UNTRACKED 0
#define IOLOOM_FD_UNSEEKABLE (-1)
/* Incremented whenever another process may come to share this one's descriptions (fork, spawn, exec). */
extern volatile uint32_t ioloom_spawn_epoch;

/* ---- table upkeep (positions.c; the common open and close inline below) ---- */
/* fd was just opened by a traced call with `flags`, as the file of `state` (ioloom_fd_state's), and could not take
 * its own description inline (ioloom_fd_take_own, tried first when it has a position); st_mode tells whether it has
 * a position at all. */
void ioloom_fd_opened(int fd, int32_t state, int flags, unsigned st_mode);
void ioloom_fd_forget_slowly(int fd); /* ioloom_fd_forget's every case but a descriptor's own description */
/* fd (untracked) was named from /proc/self/fd: remember when it is a pipe or socket. */
void ioloom_fd_named(int fd, unsigned st_mode);
void ioloom_fd_share(int from, int to);        /* dup: `to` now refers to from's description */
void ioloom_fd_release(int fd);                /* closed, or its position moved by stdio from now on */
void ioloom_fd_set_append(int fd, int append); /* fcntl(F_SETFL) */
/* A call moved fd's position without being traced: the next traced call asks. */
void ioloom_fd_moved_unseen(int fd);
/* Before fork, posix_spawn, system, popen, exec: every description now may be shared with another process. */
void ioloom_positions_shared(void);
/* In the child after fork: the table's lock may have been held by a thread that does not exist here. */
void ioloom_positions_after_fork(void);

/* Descriptors below IOLOOM_OWN_DESCRIPTIONS have a description of their own, index fd + 1, taken on open whenever
 * no dup of an earlier open of that number still holds it: with one thread, an open and a close then take and
 * give it back with a few loads and stores, no lock and no list (the table's lock is not taken while the process
 * has one thread: positions.c). The other descriptions are shared out from the rest of the table. */
#define IOLOOM_OWN_DESCRIPTIONS 1024
_Static_assert(IOLOOM_OWN_DESCRIPTIONS < IOLOOM_DESCRIPTIONS, "room for the shared descriptions");

/* Has a file of this type (st_mode, 0 unknown) a position? Pipes and sockets have none. */
static inline int ioloom_mode_has_position(unsigned st_mode) { return !S_ISFIFO(st_mode) && !S_ISSOCK(st_mode); }

/* A description's state when it is created: the position at 0, one descriptor on it. */
IOLOOM_INLINE void ioloom_description_start(struct ioloom_description *d, int append) {
    d->refs = 1;
    d->epoch = ioloom_spawn_epoch;
    d->append = append;
    __atomic_store_n(&d->position, 0, __ATOMIC_RELAXED);
}

/* fd, just opened with one thread and mapped to nothing, takes its own description and the file's `state`: 1 when
 * done, 0 when the locked way must (threads, fd beyond the own ones, a dup still holding it). */
IOLOOM_INLINE int ioloom_fd_take_own(int fd, int32_t state, int append) {
    if (!__libc_single_threaded || (unsigned)fd >= IOLOOM_OWN_DESCRIPTIONS || ioloom_fds[fd].description ||
        ioloom_descriptions[fd + 1].refs)
        return 0;
    ioloom_description_start(&ioloom_descriptions[fd + 1], append);
    __atomic_store_n(&ioloom_fds[fd].slot, ioloom_state_slot(state), __ATOMIC_RELAXED);
    __atomic_store_n(&ioloom_fds[fd].description, fd + 1, __ATOMIC_RELAXED);
    return 1;
}

/* fd was closed: it names no file and no description any more. With one thread, a descriptor alone on its own
 * description gives it back inline. */
IOLOOM_INLINE void ioloom_fd_forget(int fd) {
    if ((unsigned)fd >= IOLOOM_FD_SLOTS) return;
    struct ioloom_fd_entry *e = &ioloom_fds[fd];
    int32_t own = fd + 1;
    if (__libc_single_threaded && e->description == own && own <= IOLOOM_OWN_DESCRIPTIONS &&
        ioloom_descriptions[own].refs == 1) {
        ioloom_descriptions[own].refs = 0;
        __atomic_store_n(&e->slot, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&e->description, IOLOOM_FD_UNTRACKED, __ATOMIC_RELAXED);
        return;
    }
    ioloom_fd_forget_slowly(fd);
}

/* ---- one call at the current position ---- */
struct ioloom_move {
    struct ioloom_description *d; /* NULL: untracked or unseekable (index says which) */
    uint64_t seen;                /* the description's `calls` word at the start */
    int fd, index, threads;
    int32_t slot; /* fd's file (ioloom_slot_state), read with its description */
};

IOLOOM_INLINE void ioloom_move_start(struct ioloom_move *m, int fd) {
    struct ioloom_fd_entry e = ioloom_fd_entry(fd);
    int32_t index = e.description;
    m->fd = fd;
    m->slot = e.slot;
    m->index = index;
    m->d = NULL;
    if (IOLOOM_UNLIKELY(index <= 0)) return;
    m->d = &ioloom_descriptions[index];
    m->threads = !__libc_single_threaded;
    m->seen = IOLOOM_UNLIKELY(m->threads) ? __atomic_fetch_add(&m->d->calls, IOLOOM_CALL_TICKET | 1, __ATOMIC_ACQ_REL)
                                          : __atomic_load_n(&m->d->calls, __ATOMIC_RELAXED);
}

/* The kernel's (or the layer below's) answer: where a call that moved `moved` bytes started. */
static inline int64_t ioloom_position_asked(int fd, int64_t moved) {
    int64_t now = IOLOOM_NEXT(lseek)(fd, 0, SEEK_CUR);
    return now < 0 ? IOLOOM_POSITION_UNKNOWN : moved > 0 ? now - moved : now;
}

/* How a call moves the position: reading, writing (at the end of file with O_APPEND), or writing at the end of
 * file whatever the descriptor's flags (pwritev2's RWF_APPEND). */
enum { IOLOOM_READS, IOLOOM_WRITES, IOLOOM_APPENDS };

/* Every case but a known position on a description used by one thread (positions.c). */
int64_t ioloom_move_by_slowly(struct ioloom_move *m, int64_t moved, int how);

/* After a call that started at the current position and moved `moved` bytes (< 0: failed, no move) the way
 * `how` says. Returns where it took place. The common case (one thread, the position known and trusted) is a
 * load, a few comparisons and a store. */
IOLOOM_INLINE int64_t ioloom_move_by(struct ioloom_move *m, int64_t moved, int how) {
    struct ioloom_description *d = m->d;
    if (IOLOOM_LIKELY(d != NULL && !m->threads)) {
        int64_t before = d->position;
        /* the calls word moves only when a call passed through untraced meanwhile (ioloom_fd_moved_unseen) */
        int trusted = before >= 0 && d->calls == m->seen && d->epoch == ioloom_spawn_epoch && how != IOLOOM_APPENDS &&
                      !(how == IOLOOM_WRITES && d->append);
        if (IOLOOM_LIKELY(trusted)) {
            d->position = moved > 0 ? before + moved : before;
            return before;
        }
    }
    return ioloom_move_by_slowly(m, moved, how);
}

void ioloom_move_to_slowly(struct ioloom_move *m, int64_t at);

/* After lseek: the position is its result `at` (< 0: it failed and moved nothing). */
IOLOOM_INLINE void ioloom_move_to(struct ioloom_move *m, int64_t at) {
    struct ioloom_description *d = m->d;
    if (IOLOOM_LIKELY(d != NULL && !m->threads && d->calls == m->seen)) {
        if (at >= 0) d->position = at;
        return;
    }
    if (d) ioloom_move_to_slowly(m, at);
}

#endif
