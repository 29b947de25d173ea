/* Extent locks as Lustre's LDLM grants them on one object (a resource): a client node holds a write lock on a byte
 * range of the object, [start, end); requests of other nodes that overlap it revoke it (the holder's requests on it
 * end, its cached bytes under it reach the target, then it is cancelled and the requester pays the revocation round
 * trip), and a new lock is expanded to the largest range around the request that overlaps no other lock, limited by
 * the requests still waiting (ldlm_extent_policy; docs/sim.md, "Extent locks"). Writers of different nodes on
 * disjoint ranges of one object thus write at once; writers whose expanded locks overlap serialise. */
#ifndef IOLOOM_SIM_LOCKS_HPP
#define IOLOOM_SIM_LOCKS_HPP

#include <cstdint>
#include <functional>
#include <list>
#include <memory>

#include <simgrid/s4u.hpp>

namespace ioloom_sim {

namespace sg4 = simgrid::s4u;

struct Resource;

/* A lock a node holds (or, node -1, the bytes cached while locks are off). */
struct Grant {
    Resource *resource;
    int node;
    uint64_t start, end;    /* the object's bytes [start, end) it covers */
    double ready = 0;       /* simulated time its grant (or revocation) round trip ends */
    int active = 0;         /* the holder's requests under way under it */
    uint64_t unflushed = 0; /* the holder's bytes under it in its write-back cache, not yet on the target */
    bool revoking = false;  /* another node asked for it: no new request may use it */
    bool busy() const { return active > 0 || unflushed > 0; }
};

/* A request waiting for a lock (Lustre's waiting queue): it limits other locks' expansion. */
struct Request {
    int node;
    uint64_t start, end;
};

/* One object's locks. Invariant: two grants of different nodes never overlap, unless one of them is revoking. */
struct Resource {
    int target; /* the object's target */
    std::list<std::unique_ptr<Grant>> granted;
    std::list<const Request *> waiting;      /* in arrival order */
    Grant unlocked{this, -1, 0, UINT64_MAX}; /* cached bytes when locks are off */
    sg4::MutexPtr mutex = sg4::Mutex::create();
    sg4::ConditionVariablePtr changed = sg4::ConditionVariable::create(); /* a grant went idle or was cancelled */
};

struct LockCosts {
    double grant, revoke;                     /* seconds: a lock nobody held, a lock revoked first */
    std::function<void(const Grant &)> flush; /* sends a revoked lock's cached bytes now */
};

/* A write lock on [start, end) of the resource for `node`, with one request of the caller counted active. */
Grant &lock_extent(Resource &r, int node, uint64_t start, uint64_t end, const LockCosts &costs);
void unlock_extent(Grant &g);

} // namespace ioloom_sim

#endif
