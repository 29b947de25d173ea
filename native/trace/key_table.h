/* A fixed-capacity hash table of 64-bit keys (MPI_File and MPI_Request handles) to slot indices; the
 * values live in the caller's array, indexed by slot. One piece for both tables of the MPI module.
 *
 * Lookups take no lock and allocate nothing (they run on every data call and every MPI_Wait). Inserts and
 * removals are serialised by a mutex; a slot is published by storing its state last, with release order, so
 * a concurrent lookup sees either no entry or a complete one. */
#ifndef IOLOOM_MPIIO_TABLE_H
#define IOLOOM_MPIIO_TABLE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct mpiio_table {
    size_t capacity;
    int *states;       /* capacity entries: free, used, deleted */
    uint64_t *keys;    /* capacity entries */
    size_t used;       /* entries in use (atomic) */
    pthread_mutex_t lock;
};

/* A table of capacity_ slots, a power of two (a compile-time error otherwise). */
#define MPIIO_TABLE(capacity_)                                                                          \
    {.capacity = (capacity_) + 0 * sizeof(char[((capacity_) & ((capacity_) - 1)) == 0 ? 1 : -1]),       \
     .states = (int[capacity_]){0}, .keys = (uint64_t[capacity_]){0}, .lock = PTHREAD_MUTEX_INITIALIZER}

/* The slot holding key, or -1. */
long mpiio_table_find(struct mpiio_table *table, uint64_t key);
/* Reserve a slot for key and return it, -1 when full; mpiio_table_publish() makes it visible once the
 * caller has filled its value. */
long mpiio_table_reserve(struct mpiio_table *table, uint64_t key);
void mpiio_table_publish(struct mpiio_table *table, long slot);
void mpiio_table_remove(struct mpiio_table *table, long slot);

#endif
