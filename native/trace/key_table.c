/* Open addressing with linear probing and tombstones (key_table.h says why it is lock-free to read). */
#include "key_table.h"

/* capacity is a power of two (MPIIO_TABLE checks): a mask, not a division, on every lookup */
static size_t home(const struct key_table *table, uint64_t key) {
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & (table->capacity - 1);
}

long key_table_find(struct key_table *table, uint64_t key) {
    size_t start = home(table, key);
    for (size_t probe = 0; probe < table->capacity; probe++) {
        size_t slot = (start + probe) & (table->capacity - 1);
        int state = __atomic_load_n(&table->states[slot], __ATOMIC_ACQUIRE);
        if (state == KEY_SLOT_FREE) return -1;
        if (state == KEY_SLOT_USED && table->keys[slot] == key) return (long)slot;
    }
    return -1;
}

long key_table_reserve(struct key_table *table, uint64_t key) {
    long found = -1;
    pthread_mutex_lock(&table->lock);
    size_t start = home(table, key);
    for (size_t probe = 0; probe < table->capacity && found < 0; probe++) {
        size_t slot = (start + probe) & (table->capacity - 1);
        if (table->states[slot] == KEY_SLOT_FREE || table->states[slot] == KEY_SLOT_DELETED) {
            table->keys[slot] = key;
            table->states[slot] = KEY_SLOT_RESERVED;
            found = (long)slot;
        }
    }
    pthread_mutex_unlock(&table->lock);
    return found;
}

void key_table_publish(struct key_table *table, long slot) {
    __atomic_fetch_add(&table->used, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&table->states[slot], KEY_SLOT_USED, __ATOMIC_RELEASE);
}

void key_table_remove(struct key_table *table, long slot) {
    pthread_mutex_lock(&table->lock);
    __atomic_store_n(&table->states[slot], KEY_SLOT_DELETED, __ATOMIC_RELEASE);
    /* Tombstones lengthen every probe for a missing key; when the table is empty, clear them all. */
    if (__atomic_sub_fetch(&table->used, 1, __ATOMIC_RELAXED) == 0)
        for (size_t i = 0; i < table->capacity; i++)
            if (table->states[i] == KEY_SLOT_DELETED)
                __atomic_store_n(&table->states[i], KEY_SLOT_FREE, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&table->lock);
}
