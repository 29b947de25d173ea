/* The table of open file descriptions whose positions the tracer follows (see positions.h): which descriptor
 * refers to which description, created on traced opens, shared by dups, released on close. Changes take a lock
 * (they come with open, dup and close, which are system calls anyway); reads on the data path take none. */
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>

#include "positions.h"

struct ioloom_description ioloom_descriptions[IOLOOM_DESCRIPTIONS];
int32_t ioloom_fd_descriptions[IOLOOM_FD_SLOTS];
volatile uint32_t ioloom_spawn_epoch;

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static int32_t free_list[IOLOOM_DESCRIPTIONS]; /* released indices, reused first */
static int32_t free_count, next_unused = 1;    /* index 0 is IOLOOM_FD_UNTRACKED */

static int in_table(int fd) { return fd >= 0 && fd < IOLOOM_FD_SLOTS; }

/* A fresh description at position 0, or IOLOOM_FD_UNTRACKED when the table is full (its calls then ask). */
static int32_t new_description_locked(int append) {
    int32_t index = free_count ? free_list[--free_count]
                  : next_unused < IOLOOM_DESCRIPTIONS ? next_unused++ : IOLOOM_FD_UNTRACKED;
    if (index == IOLOOM_FD_UNTRACKED) return index;
    struct ioloom_description *d = &ioloom_descriptions[index];
    d->refs = 1;
    d->epoch = ioloom_spawn_epoch;
    d->append = append;
    __atomic_store_n(&d->position, 0, __ATOMIC_RELAXED);
    return index;
}

static void release_locked(int32_t index) {
    if (index <= 0) return;
    struct ioloom_description *d = &ioloom_descriptions[index];
    /* Invariant: refs counts the descriptors mapped to index; the last one returns it to the free list. */
    if (d->refs > 0 && --d->refs == 0) free_list[free_count++] = index;
}

/* Maps fd to `index` (a new reference already counted), releasing what fd referred to before. */
static void map_locked(int fd, int32_t index) {
    release_locked(ioloom_fd_descriptions[fd]);
    __atomic_store_n(&ioloom_fd_descriptions[fd], index, __ATOMIC_RELAXED);
}

static int has_no_position(unsigned st_mode) { return S_ISFIFO(st_mode) || S_ISSOCK(st_mode); }

void ioloom_fd_opened(int fd, int flags, unsigned st_mode) {
    if (!in_table(fd)) return;
    pthread_mutex_lock(&table_lock);
    map_locked(fd, has_no_position(st_mode) ? IOLOOM_FD_UNSEEKABLE : new_description_locked((flags & O_APPEND) != 0));
    pthread_mutex_unlock(&table_lock);
}

void ioloom_fd_named(int fd, unsigned st_mode) {
    if (!in_table(fd) || !has_no_position(st_mode)) return;
    pthread_mutex_lock(&table_lock);
    map_locked(fd, IOLOOM_FD_UNSEEKABLE);
    pthread_mutex_unlock(&table_lock);
}

void ioloom_fd_share(int from, int to) {
    if (!in_table(to) || from == to) return;
    pthread_mutex_lock(&table_lock);
    int32_t index = in_table(from) ? ioloom_fd_descriptions[from] : IOLOOM_FD_UNTRACKED;
    if (index > 0) ioloom_descriptions[index].refs++;
    map_locked(to, index);
    pthread_mutex_unlock(&table_lock);
}

void ioloom_fd_release(int fd) {
    if (!in_table(fd) || !__atomic_load_n(&ioloom_fd_descriptions[fd], __ATOMIC_RELAXED)) return;
    pthread_mutex_lock(&table_lock);
    map_locked(fd, IOLOOM_FD_UNTRACKED);
    pthread_mutex_unlock(&table_lock);
}


void ioloom_fd_set_append(int fd, int append) {
    int32_t index = in_table(fd) ? __atomic_load_n(&ioloom_fd_descriptions[fd], __ATOMIC_RELAXED) : 0;
    if (index > 0) __atomic_store_n(&ioloom_descriptions[index].append, append, __ATOMIC_RELAXED);
}

void ioloom_fd_moved_unseen(int fd) {
    int32_t index = in_table(fd) ? __atomic_load_n(&ioloom_fd_descriptions[fd], __ATOMIC_RELAXED) : 0;
    if (index <= 0) return;
    struct ioloom_description *d = &ioloom_descriptions[index];
    __atomic_fetch_add(&d->calls, IOLOOM_CALL_TICKET, __ATOMIC_ACQ_REL); /* a call in flight is no longer alone */
    __atomic_store_n(&d->position, IOLOOM_POSITION_UNKNOWN, __ATOMIC_RELAXED);
}

void ioloom_positions_shared(void) { __atomic_add_fetch(&ioloom_spawn_epoch, 1, __ATOMIC_RELAXED); }

void ioloom_positions_after_fork(void) { pthread_mutex_init(&table_lock, NULL); }
