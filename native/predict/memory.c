/* The memory budget (memory.h): each block carries its size in a header, so resizing and freeing give back
 * exactly what it took. */
#include "memory.h"

#include <stdlib.h>
#include <string.h>

typedef union {
    size_t bytes;
    max_align_t align; /* the block after the header is aligned as malloc's */
} header;

static header *header_of(void *block) { return block ? (header *)block - 1 : NULL; }

/* Whether `memory` may go from `old` to `bytes` for one block; counts a refusal. */
static int allowed(struct pg_memory *memory, size_t old, size_t bytes) {
    if (!memory || !memory->cap || bytes <= old || memory->used - old + bytes <= memory->cap) return 1;
    memory->refused++;
    return 0;
}

static void account(struct pg_memory *memory, size_t old, size_t bytes) {
    if (!memory) return;
    memory->used = memory->used - old + bytes;
    if (memory->used > memory->peak) memory->peak = memory->used;
}

void *pg_resize(struct pg_memory *memory, void *block, size_t bytes) {
    header *h = header_of(block);
    size_t old = h ? h->bytes : 0, whole = bytes + sizeof(header);
    if (whole < bytes || !allowed(memory, old, whole)) return NULL;
    header *moved = realloc(h, whole);
    if (!moved) {
        if (memory) memory->refused++;
        return NULL;
    }
    moved->bytes = whole;
    account(memory, old, whole);
    return moved + 1;
}

void *pg_alloc(struct pg_memory *memory, size_t bytes) {
    void *block = pg_resize(memory, NULL, bytes);
    if (block) memset(block, 0, bytes);
    return block;
}

void pg_free(struct pg_memory *memory, void *block) {
    header *h = header_of(block);
    if (!h) return;
    account(memory, h->bytes, 0);
    free(h);
}
