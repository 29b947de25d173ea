/* The storage side of a request: a file's bytes are striped over objects (one per target of its layout); a
 * write takes each object's extent lock, then moves its bytes to the target in RPCs; metadata requests queue
 * at the metadata server.
 *
 * Extent locks are held per client node, as Lustre's are: a node that holds an object's lock writes without
 * asking again; another node must first wait until the holder's transfers on the object end, then pay the
 * revocation round trip (`lock_revoke` seconds) and take the lock. So writers on different nodes that
 * interleave within an object (N-1 strided) serialise and pay a round trip per switch, while a node writing its
 * own objects (N-N, or N-1 segmented with large segments) pays once: the N-1 strided penalty comes from this
 * mechanism, not from a factor. Reads take no lock (a simplification: docs/sim.md). Invariant: while
 * `active` > 0 every active transfer on the object belongs to `owner`. */
#include <algorithm>

#include "sim.hpp"

namespace ioloom_sim {

struct Storage::Lock {
    int owner = -1;   /* node holding the lock, -1: none yet */
    int active = 0;   /* transfers of the owner under way */
    int pending = 0;  /* other nodes waiting to take it: the owner's new transfers queue behind them */
    sg4::MutexPtr mutex = sg4::Mutex::create();
    sg4::ConditionVariablePtr drained = sg4::ConditionVariable::create();
};

Storage::Storage(const Input& in, const Platform& p)
    : in_(in), p_(p), mds_queue_(sg4::Semaphore::create(static_cast<unsigned>(in.get("mds_threads")))),
      rpc_size_(static_cast<uint64_t>(in.get("rpc_size"))), rpcs_in_flight_(static_cast<int>(in.get("rpcs_in_flight"))) {}

Storage::~Storage() = default;

/* Creating a lock's mutex is a simcall, which lets other actors run: the slot is filled only after, and only if
 * nobody filled it meanwhile (the spare is dropped unused), so every actor gets the same lock. */
Storage::Lock& Storage::lock_of(int file, int object) {
    auto found = locks_.find({file, object});
    if (found != locks_.end()) return *found->second;
    auto fresh = std::make_unique<Lock>();
    return *locks_.try_emplace({file, object}, std::move(fresh)).first->second;
}

void Storage::acquire(Lock& l, int node) {
    if (l.owner == node && l.pending == 0) {
        l.active++;
        return;
    }
    std::unique_lock<sg4::Mutex> guard(*l.mutex);
    l.pending++;
    while (l.active > 0 && l.owner != node) l.drained->wait(guard);
    if (l.owner != node) {
        sg4::this_actor::sleep_for(l.owner < 0 ? in_.get("lock_grant") : in_.get("lock_revoke"));
        l.owner = node;
    }
    l.pending--;
    l.active++;
}

void Storage::release(Lock& l) {
    if (--l.active == 0) l.drained->notify_all();
}

/* Moves each object's bytes between a node and its target, all objects at once, in RPCs of at most rpc_size
 * with at most rpcs_in_flight under way per target (a Lustre client's per-target limit). */
void Storage::move(int node, int kind, const std::vector<std::pair<int, uint64_t>>& to_targets) {
    std::vector<uint64_t> left;
    std::vector<sg4::CommPtr> flying;
    std::vector<size_t> flying_target, flying_piece;
    auto issue = [&](size_t i) {
        int target = to_targets[i].first;
        uint64_t n = std::min(rpc_size_, left[i]);
        left[i] -= n;
        sg4::Host *node_host = p_.nodes[node], *target_host = p_.targets[target];
        pieces.push_back({target, kind, sg4::Engine::get_clock(), 0, static_cast<double>(n)});
        flying_piece.push_back(pieces.size() - 1);
        flying_target.push_back(i);
        flying.push_back(kind == OP_WRITE ? sg4::Comm::sendto_async(node_host, target_host, n)
                                          : sg4::Comm::sendto_async(target_host, node_host, n));
    };
    for (size_t i = 0; i < to_targets.size(); i++) {
        left.push_back(to_targets[i].second);
        for (int k = 0; k < rpcs_in_flight_ && left[i]; k++) issue(i);
    }
    while (!flying.empty()) {
        auto done = static_cast<size_t>(sg4::Comm::wait_any(flying));
        size_t i = flying_target[done];
        pieces[flying_piece[done]].end = sg4::Engine::get_clock();
        for (auto* v : {&flying_target, &flying_piece}) v->erase(v->begin() + static_cast<long>(done));
        flying.erase(flying.begin() + static_cast<long>(done));
        if (left[i]) issue(i);
    }
}

/* Bytes of [offset, offset + length) per object of the layout, in object order (the locks' order). */
static std::vector<std::pair<int, uint64_t>> per_object(const Layout& l, uint64_t offset, uint64_t length) {
    std::vector<uint64_t> bytes(l.targets.size());
    for (uint64_t at = offset, end = offset + length; at < end;) {
        uint64_t in_stripe = std::min(end - at, l.stripe_size - at % l.stripe_size);
        bytes[(at / l.stripe_size) % l.targets.size()] += in_stripe;
        at += in_stripe;
    }
    std::vector<std::pair<int, uint64_t>> out;
    for (size_t i = 0; i < bytes.size(); i++)
        if (bytes[i]) out.emplace_back(static_cast<int>(i), bytes[i]);
    return out;
}

void Storage::transfer(int node, int kind, int file, uint64_t offset, uint64_t length) {
    const Layout& layout = in_.files.at(file);
    auto objects = per_object(layout, offset, length);
    bool locked = kind == OP_WRITE && in_.get("extent_locks") != 0;
    /* Locks are taken in object order, so two writers never wait for each other in a cycle. */
    if (locked)
        for (auto& [object, bytes] : objects) acquire(lock_of(file, object), node);
    std::vector<std::pair<int, uint64_t>> to_targets;
    for (auto& [object, bytes] : objects) to_targets.emplace_back(layout.targets[static_cast<size_t>(object)], bytes);
    move(node, kind, to_targets);
    if (locked)
        for (auto& [object, bytes] : objects) release(lock_of(file, object));
}

void Storage::metadata(int kind, bool create) {
    const char* cost = create ? "mds_create" : kind == OP_STAT ? "mds_stat" : kind == OP_CLOSE ? "mds_close" : "mds_open";
    mds_queue_->acquire();
    sg4::this_actor::sleep_for(in_.get(cost));
    mds_queue_->release();
}

} // namespace ioloom_sim
