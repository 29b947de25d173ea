/* Extent locks on one object, as Lustre's LDLM grants them (locks.hpp). The expansion follows ldlm_extent.c's
 * policy: the largest range containing the request that overlaps no other granted lock and no waiting request of
 * another node; past 4 conflicting locks it does not grow downwards, past 32 granted it grows at most to 32 MiB
 * from the request's start (LDLM_MAX_GROWN_EXTENT). */
#include <algorithm>
#include <vector>

#include "locks.hpp"

namespace ioloom_sim {

static const uint64_t MAX_GROWN_EXTENT = 32ULL << 20;

static bool overlap(uint64_t s1, uint64_t e1, uint64_t s2, uint64_t e2) { return s1 < e2 && s2 < e1; }

/* The node's own lock covering the range, usable now (not being revoked), or null. */
static Grant *covering(Resource &r, int node, uint64_t start, uint64_t end) {
    for (auto &g : r.granted)
        if (g->node == node && !g->revoking && g->start <= start && end <= g->end) return g.get();
    return nullptr;
}

/* An earlier waiting request of another node overlapping this one: it is served first (Lustre's FIFO). */
static bool behind_another(const Resource &r, const Request &me) {
    for (const Request *w : r.waiting) {
        if (w == &me) return false;
        if (w->node != me.node && overlap(w->start, w->end, me.start, me.end)) return true;
    }
    return false;
}

static std::vector<Grant *> conflicts(Resource &r, const Request &me) {
    std::vector<Grant *> out;
    for (auto &g : r.granted)
        if (g->node != me.node && overlap(g->start, g->end, me.start, me.end)) out.push_back(g.get());
    return out;
}

/* Revokes the other nodes' locks overlapping the request: each is marked (its holder's new requests ask again)
 * and its cached bytes are sent, and once none is busy they are cancelled. Returns whether any was. */
static bool revoke(Resource &r, const Request &me, const LockCosts &costs, std::unique_lock<sg4::Mutex> &guard) {
    bool revoked = false;
    for (auto found = conflicts(r, me); !found.empty(); found = conflicts(r, me)) {
        revoked = true;
        for (Grant *g : found) {
            if (!g->revoking && g->unflushed > 0) costs.flush(*g);
            g->revoking = true;
        }
        if (std::any_of(found.begin(), found.end(), [](Grant *g) { return g->busy(); })) {
            r.changed->wait(guard);
            continue;
        }
        r.granted.remove_if([&](const std::unique_ptr<Grant> &g) {
            return std::find(found.begin(), found.end(), g.get()) != found.end();
        });
    }
    return revoked;
}

/* The granted range: the request grown up to the nearest other locks and other nodes' waiting requests. */
static std::pair<uint64_t, uint64_t> expand(const Resource &r, const Request &me) {
    uint64_t lo = 0, hi = UINT64_MAX;
    for (auto &g : r.granted) {
        if (g->end <= me.start) lo = std::max(lo, g->end);
        if (g->start >= me.end) hi = std::min(hi, g->start);
    }
    size_t waiting = 0;
    for (const Request *w : r.waiting) {
        if (w->node == me.node) continue;
        waiting++;
        if (overlap(w->start, w->end, me.start, me.end)) continue; /* a ping-pong either way: no limit */
        if (w->end <= me.start) lo = std::max(lo, w->end);
        if (w->start >= me.end) hi = std::min(hi, w->start);
    }
    if (r.granted.size() > 4 || waiting > 4) lo = me.start; /* a busy resource: no growing downwards */
    if (r.granted.size() > 32 && me.end < me.start + MAX_GROWN_EXTENT) hi = std::min(hi, me.start + MAX_GROWN_EXTENT);
    return {lo, hi};
}

/* The lock, once its grant (or revocation) round trip has ended. */
static Grant &when_ready(Grant &g) {
    if (g.ready > sg4::Engine::get_clock()) sg4::this_actor::sleep_until(g.ready);
    return g;
}

Grant &lock_extent(Resource &r, int node, uint64_t start, uint64_t end, const LockCosts &costs) {
    if (Grant *g = covering(r, node, start, end)) { /* the node's lock: no request */
        g->active++;
        return when_ready(*g);
    }
    std::unique_lock<sg4::Mutex> guard(*r.mutex);
    Request me{node, start, end};
    r.waiting.push_back(&me);
    Grant *own = nullptr;
    while (!(own = covering(r, node, start, end)) && behind_another(r, me)) r.changed->wait(guard);
    if (!own) {
        bool revoked = revoke(r, me, costs, guard);
        auto [lo, hi] = expand(r, me);
        double ready = sg4::Engine::get_clock() + (revoked ? costs.revoke : costs.grant);
        r.granted.push_back(std::make_unique<Grant>(Grant{&r, node, lo, hi, ready}));
        own = r.granted.back().get();
    }
    r.waiting.remove(&me);
    own->active++; /* counted before the simcalls below, so that nobody cancels it meanwhile */
    r.changed->notify_all();
    guard.unlock();
    return when_ready(*own);
}

void unlock_extent(Grant &g) {
    if (--g.active == 0 && g.revoking) g.resource->changed->notify_all();
}

} // namespace ioloom_sim
