/* One client's channel to its writer: a bounded message queue and a data ring, each with one producer (the
 * client) and one consumer (the writer), so neither needs a lock: positions only grow, the producer publishes
 * its head with release order after filling a slot, the consumer its tail after emptying one. The ring is the
 * concurrent allocator: a chunk is reserved at the head (padding to the end when it would wrap) and freed at the
 * tail once the writer has written it and the client has cleared it, in allocation order. */
#include <assert.h>
#include <string.h>
#include "async_internal.h"

static size_t round_up(size_t n) { return (n + ASYNC_ALIGN - 1) / ASYNC_ALIGN * ASYNC_ALIGN; }

size_t async_channel_size(size_t queue, size_t ring) {
    return sizeof(struct async_channel) + round_up(queue * sizeof(struct async_msg)) + round_up(ring);
}

/* Only the header: each message and chunk header is written before it is read. */
void async_channel_init(struct async_channel *ch, size_t queue, size_t ring) {
    memset(ch, 0, sizeof *ch);
    ch->queue_capacity = queue;
    ch->ring_capacity = ring / ASYNC_ALIGN * ASYNC_ALIGN;
}

void async_channel_prefault(struct async_channel *ch) {
    memset(async_channel_queue(ch), 0, round_up(ch->queue_capacity * sizeof(struct async_msg)) + ch->ring_capacity);
}

struct async_msg *async_channel_queue(struct async_channel *ch) { return (struct async_msg *)(ch + 1); }

char *async_channel_ring(struct async_channel *ch) {
    return (char *)(ch + 1) + round_up(ch->queue_capacity * sizeof(struct async_msg));
}

int async_channel_send(struct async_channel *ch, const struct async_msg *m) {
    uint64_t head = atomic_load_explicit(&ch->queue_head, memory_order_relaxed);
    if (head - atomic_load_explicit(&ch->queue_tail, memory_order_acquire) >= ch->queue_capacity) return -1;
    async_channel_queue(ch)[head % ch->queue_capacity] = *m;
    atomic_store_explicit(&ch->queue_head, head + 1, memory_order_release);
    return 0;
}

int async_channel_receive(struct async_channel *ch, struct async_msg *m) {
    uint64_t tail = atomic_load_explicit(&ch->queue_tail, memory_order_relaxed);
    if (tail == atomic_load_explicit(&ch->queue_head, memory_order_acquire)) return -1;
    *m = async_channel_queue(ch)[tail % ch->queue_capacity];
    atomic_store_explicit(&ch->queue_tail, tail + 1, memory_order_release);
    return 0;
}

struct async_chunk *async_channel_chunk(struct async_channel *ch, uint64_t position) {
    return (struct async_chunk *)(async_channel_ring(ch) + position % ch->ring_capacity);
}

/* Writes a free chunk header over the end of the ring that a chunk could not use (it would have wrapped). */
static void pad_to_end(struct async_channel *ch, uint64_t head, uint64_t room) {
    struct async_chunk *pad = async_channel_chunk(ch, head);
    pad->total = room;
    pad->nbytes = 0;
    atomic_store_explicit(&pad->state, CHUNK_FREE, memory_order_relaxed);
}

int64_t async_channel_reserve(struct async_channel *ch, size_t nbytes) {
    uint64_t need = sizeof(struct async_chunk) + round_up(nbytes);
    uint64_t head = atomic_load_explicit(&ch->ring_head, memory_order_relaxed);
    uint64_t to_end = ch->ring_capacity - head % ch->ring_capacity;
    uint64_t pad = to_end < need ? to_end : 0;
    /* A chunk never wraps; configuration checks make every block fit an empty ring. */
    assert(need <= ch->ring_capacity);
    if (head + pad + need - atomic_load_explicit(&ch->ring_tail, memory_order_acquire) > ch->ring_capacity) return -1;
    if (pad) pad_to_end(ch, head, pad);
    struct async_chunk *c = async_channel_chunk(ch, head + pad);
    c->total = need;
    c->nbytes = nbytes;
    atomic_store_explicit(&c->state, 0, memory_order_relaxed);
    atomic_store_explicit(&ch->ring_head, head + pad + need, memory_order_release);
    return (int64_t)(head + pad);
}

/* Frees, in order, the chunks at the tail that both sides are done with. */
void async_channel_release(struct async_channel *ch) {
    uint64_t tail = atomic_load_explicit(&ch->ring_tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&ch->ring_head, memory_order_acquire);
    while (tail < head) {
        struct async_chunk *c = async_channel_chunk(ch, tail);
        if (atomic_load_explicit(&c->state, memory_order_acquire) != CHUNK_FREE) break;
        tail += c->total;
    }
    atomic_store_explicit(&ch->ring_tail, tail, memory_order_release);
}
