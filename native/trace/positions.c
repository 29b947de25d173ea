/* The table of open file descriptions whose positions the tracer follows (see positions.h): which descriptor
 * refers to which description, created on traced opens, shared by dups, released on close. Changes take a lock
 * (they come with open, dup and close, which are system calls anyway); reads on the data path take none. */
#include <assert.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "positions.h"

struct ioloom_description ioloom_descriptions[IOLOOM_DESCRIPTIONS];
volatile uint32_t ioloom_spawn_epoch;

/* Changes are a few stores long: a spin lock, cheaper than a mutex on every open and close, and none while the
 * process has one thread (a signal handler's calls are not traced while a traced call runs: ioloom_enter). Returns
 * whether it locked, for unlock_table. */
static int table_lock;
static int lock_table(void) {
    if (__libc_single_threaded) return 0;
    while (__atomic_exchange_n(&table_lock, 1, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(&table_lock, __ATOMIC_RELAXED)) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        }
    return 1;
}
static void unlock_table(int locked) {
    if (locked) __atomic_store_n(&table_lock, 0, __ATOMIC_RELEASE);
}
static int32_t free_list[IOLOOM_DESCRIPTIONS];                        /* released shared indices, reused first */
static int32_t free_count, next_unused = IOLOOM_OWN_DESCRIPTIONS + 1; /* index 0 is IOLOOM_FD_UNTRACKED */

static int in_table(int fd) { return fd >= 0 && fd < IOLOOM_FD_SLOTS; }

/* A fresh description at position 0 for fd, or IOLOOM_FD_UNTRACKED when the table is full (its calls then ask). */
static int32_t new_description_locked(int fd, int append) {
    int32_t own = fd < IOLOOM_OWN_DESCRIPTIONS ? fd + 1 : IOLOOM_FD_UNTRACKED;
    int32_t index = own && !ioloom_descriptions[own].refs ? own
                    : free_count                          ? free_list[--free_count]
                    : next_unused < IOLOOM_DESCRIPTIONS   ? next_unused++
                                                          : IOLOOM_FD_UNTRACKED;
    if (index != IOLOOM_FD_UNTRACKED) ioloom_description_start(&ioloom_descriptions[index], append);
    return index;
}

static void release_locked(int32_t index) {
    if (index <= 0) return;
    struct ioloom_description *d = &ioloom_descriptions[index];
    /* Invariant: refs counts the descriptors mapped to index; the last one returns a shared one to the free list
     * (a descriptor's own is free again when its refs are 0). */
    if (d->refs > 0 && --d->refs == 0 && index > IOLOOM_OWN_DESCRIPTIONS) free_list[free_count++] = index;
}

/* Maps fd to `index` (a new reference already counted), releasing what fd referred to before. */
static void map_locked(int fd, int32_t index) {
    release_locked(ioloom_fds[fd].description);
    __atomic_store_n(&ioloom_fds[fd].description, index, __ATOMIC_RELAXED);
}

void ioloom_fd_opened(int fd, int32_t state, int flags, unsigned st_mode) {
    if (!in_table(fd)) return;
    __atomic_store_n(&ioloom_fds[fd].slot, ioloom_state_slot(state), __ATOMIC_RELAXED);
    int seekable = ioloom_mode_has_position(st_mode), locked = lock_table();
    map_locked(fd, seekable ? new_description_locked(fd, (flags & O_APPEND) != 0) : IOLOOM_FD_UNSEEKABLE);
    unlock_table(locked);
}

void ioloom_fd_named(int fd, unsigned st_mode) {
    if (!in_table(fd) || ioloom_mode_has_position(st_mode)) return;
    int locked = lock_table();
    map_locked(fd, IOLOOM_FD_UNSEEKABLE);
    unlock_table(locked);
}

void ioloom_fd_share(int from, int to) {
    if (!in_table(to) || from == to) return;
    int locked = lock_table();
    int32_t index = in_table(from) ? ioloom_fds[from].description : IOLOOM_FD_UNTRACKED;
    if (index > 0) ioloom_descriptions[index].refs++;
    map_locked(to, index);
    unlock_table(locked);
}

static void release(int fd) {
    if (!__atomic_load_n(&ioloom_fds[fd].description, __ATOMIC_RELAXED)) return;
    int locked = lock_table();
    map_locked(fd, IOLOOM_FD_UNTRACKED);
    unlock_table(locked);
}

void ioloom_fd_release(int fd) {
    if (in_table(fd)) release(fd);
}

void ioloom_fd_forget_slowly(int fd) {
    assert(in_table(fd)); /* ioloom_fd_forget looked */
    __atomic_store_n(&ioloom_fds[fd].slot, 0, __ATOMIC_RELAXED);
    release(fd);
}

void ioloom_fd_set_append(int fd, int append) {
    int32_t index = in_table(fd) ? __atomic_load_n(&ioloom_fds[fd].description, __ATOMIC_RELAXED) : 0;
    if (index > 0) __atomic_store_n(&ioloom_descriptions[index].append, append, __ATOMIC_RELAXED);
}

void ioloom_fd_moved_unseen(int fd) {
    int32_t index = in_table(fd) ? __atomic_load_n(&ioloom_fds[fd].description, __ATOMIC_RELAXED) : 0;
    if (index <= 0) return;
    struct ioloom_description *d = &ioloom_descriptions[index];
    __atomic_fetch_add(&d->calls, IOLOOM_CALL_TICKET, __ATOMIC_ACQ_REL); /* a call in flight is no longer alone */
    __atomic_store_n(&d->position, IOLOOM_POSITION_UNKNOWN, __ATOMIC_RELAXED);
}

void ioloom_positions_shared(void) { __atomic_add_fetch(&ioloom_spawn_epoch, 1, __ATOMIC_RELAXED); }

void ioloom_positions_after_fork(void) { unlock_table(1); }

/* ---- calls at the current position: what ioloom_move_by does not do inline ---- */

/* Was the call alone on its description from start to now (no other call started, none in flight)? */
static int move_alone(const struct ioloom_move *m) {
    uint64_t now = __atomic_load_n(&m->d->calls, __ATOMIC_ACQUIRE);
    return m->threads ? (m->seen & IOLOOM_CALLS_IN_FLIGHT) == 0 && now == m->seen + IOLOOM_CALL_TICKET + 1
                      : now == m->seen;
}

/* Ends the call, leaving the position at `after` if the call was alone (else unknown: the next call asks). */
static void move_end(struct ioloom_move *m, int alone, int64_t after) {
    struct ioloom_description *d = m->d;
    __atomic_store_n(&d->position, alone ? after : IOLOOM_POSITION_UNKNOWN, __ATOMIC_RELAXED);
    if (!m->threads) return;
    uint64_t expected = m->seen + IOLOOM_CALL_TICKET + 1;
    /* Invariant: a known position was stored by a call that nobody overlapped up to its end; a call that
     * started after our check makes the exchange fail, and its own end stores unknown too. */
    if (alone && __atomic_compare_exchange_n(&d->calls, &expected, expected - 1, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
        return;
    __atomic_store_n(&d->position, IOLOOM_POSITION_UNKNOWN, __ATOMIC_RELAXED);
    __atomic_fetch_sub(&d->calls, 1, __ATOMIC_RELEASE);
}

int64_t ioloom_move_by_slowly(struct ioloom_move *m, int64_t moved, int how) {
    if (!m->d) return m->index == IOLOOM_FD_UNSEEKABLE ? IOLOOM_POSITION_UNKNOWN : ioloom_position_asked(m->fd, moved);
    struct ioloom_description *d = m->d;
    int alone = move_alone(m);
    int64_t before = __atomic_load_n(&d->position, __ATOMIC_RELAXED);
    int at_end = how == IOLOOM_APPENDS || (how == IOLOOM_WRITES && d->append);
    int trusted = alone && d->epoch == ioloom_spawn_epoch && !at_end;
    if (!trusted || before < 0) before = ioloom_position_asked(m->fd, moved);
    move_end(m, alone && before >= 0, before >= 0 && moved > 0 ? before + moved : before);
    return before;
}

void ioloom_move_to_slowly(struct ioloom_move *m, int64_t at) {
    int alone = move_alone(m);
    move_end(m, alone, at >= 0 ? at : __atomic_load_n(&m->d->position, __ATOMIC_RELAXED));
}
