/* A fixed-capacity hash table of 64-bit keys to slot indices; the values live in the caller's array, indexed by
 * slot. One piece for the MPI module's tables (MPI_File and MPI_Request handles) and the POSIX layer's
 * asynchronous requests (aiocb addresses); compiled into each library that uses it.
 *
 * Lookups take no lock and allocate nothing (they run on every data call and every MPI_Wait). Inserts and
 * removals are serialised by a mutex; a slot is published by storing its state last, with release order, so
 * a concurrent lookup sees either no entry or a complete one. */
#ifndef IOLOOM_KEY_TABLE_H
#define IOLOOM_KEY_TABLE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct key_table {
    size_t capacity;
    int *states;    /* capacity entries: free, used, deleted */
    uint64_t *keys; /* capacity entries */
    size_t used;    /* entries in use (atomic) */
    pthread_mutex_t lock;
};

/* A table of capacity_ slots, a power of two (a compile-time error otherwise). */
#define KEY_TABLE(capacity_)                                                                      \
    {.capacity = (capacity_) + 0 * sizeof(char[((capacity_) & ((capacity_) - 1)) == 0 ? 1 : -1]), \
     .states = (int[capacity_]){0},                                                               \
     .keys = (uint64_t[capacity_]){0},                                                            \
     .lock = PTHREAD_MUTEX_INITIALIZER}

enum { KEY_SLOT_FREE = 0, KEY_SLOT_USED, KEY_SLOT_DELETED, KEY_SLOT_RESERVED };

/* The slot holding key, or -1. */
long key_table_find(struct key_table *table, uint64_t key);
/* Does `slot` (found before) still hold key? A caller that looks the same key up again and again (the same
 * file on every call) checks its last answer this way before a full lookup. */
static inline int key_table_holds(struct key_table *table, long slot, uint64_t key) {
    return slot >= 0 && __atomic_load_n(&table->states[slot], __ATOMIC_ACQUIRE) == KEY_SLOT_USED &&
           table->keys[slot] == key;
}
/* Reserve a slot for key and return it, -1 when full; key_table_publish() makes it visible once the
 * caller has filled its value. */
long key_table_reserve(struct key_table *table, uint64_t key);
void key_table_publish(struct key_table *table, long slot);
void key_table_remove(struct key_table *table, long slot);

#endif
