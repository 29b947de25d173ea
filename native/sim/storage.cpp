/* The storage side of a request: a file's bytes are striped over objects (one per target of its layout); a
 * write takes each object's extent lock, then goes into the node's write-back cache (or, write-through, moves
 * to the target); reads move from the targets; metadata requests queue at the metadata server.
 *
 * Extent locks are held per client node, as Lustre's are: a node that holds an object's lock writes without
 * asking again; another node must first wait until the holder's requests on the object end and its cached bytes
 * of the object reached the target (a revoked lock flushes its dirty pages), then pay the revocation round trip
 * (`lock_revoke` seconds) and take the lock; a holder asked for its lock yields before writing again. So writers
 * on different nodes that interleave within an object (N-1 strided) serialise and pay a round trip per switch,
 * while a node writing its own objects (N-N, or N-1 segmented with large segments) pays once: the N-1 strided
 * penalty comes from this mechanism, not from a factor. Reads take no lock (a simplification: docs/sim.md).
 * Invariant: while the lock is busy (requests under way or bytes unflushed) they all belong to `owner`.
 *
 * The write-back cache is per node and target (a Lustre client's per-target dirty limit, max_dirty_mb): a write
 * copies its bytes in at `copy_bandwidth` as room allows, and, once the stream holds `flush_threshold` bytes or
 * an fsync asks, one flusher actor per (node, target) sends the cached bytes in flows of one RPC window (rpc_size x
 * rpcs_in_flight) at a time. Requests that bypass the cache also move in RPC windows: the RPCs of a window share the
 * same links at once, as one flow of their summed size does, and their latencies overlap; a window pays one latency. */
#include <algorithm>
#include <deque>

#include "sim.hpp"

namespace ioloom_sim {

struct Storage::Lock {
    int owner = -1;         /* node holding the lock, -1: none yet */
    int active = 0;         /* the owner's requests under way on the object */
    uint64_t unflushed = 0; /* the owner's bytes of the object in its write-back cache, not yet on the target */
    int waiting = 0;        /* other nodes waiting to take it */
    sg4::MutexPtr mutex = sg4::Mutex::create();
    sg4::ConditionVariablePtr drained = sg4::ConditionVariable::create(); /* busy() fell, or the owner changed */
    bool busy() const { return active > 0 || unflushed > 0; }
};

/* A node's write-back cache toward one target. `dirty` counts cached bytes until the target acknowledged them
 * (Lustre counts pages under write-back against the limit); `unsent` lists those not yet in a flow, per object
 * lock, in write order. */
struct Storage::Stream {
    int node = 0, target = 0;
    bool flushing = false; /* a flusher actor is sending from it */
    uint64_t dirty = 0, unsent_bytes = 0;
    std::deque<std::pair<Lock *, uint64_t>> unsent;
    sg4::MutexPtr mutex = sg4::Mutex::create();
    sg4::ConditionVariablePtr changed = sg4::ConditionVariable::create();
};

Storage::Storage(const Input &in, const Platform &p)
    : in_(in), p_(p), mds_queue_(sg4::Semaphore::create(static_cast<unsigned>(in.get("mds_threads")))),
      window_(static_cast<uint64_t>(in.get("rpc_size") * in.get("rpcs_in_flight"))),
      dirty_limit_(static_cast<uint64_t>(in.get("dirty_limit"))), copy_bandwidth_(in.get("copy_bandwidth")),
      lock_grant_(in.get("lock_grant")), lock_revoke_(in.get("lock_revoke")), commit_latency_(in.get("commit_latency")),
      locks_on_(in.get("extent_locks") != 0), flush_threshold_(static_cast<uint64_t>(in.get("flush_threshold"))),
      cores_(static_cast<int>(in.get("cores"))) {}

Storage::~Storage() = default;

/* Creating a lock's mutex is a simcall, which lets other actors run: the slot is filled only after, and only if
 * nobody filled it meanwhile (the spare is dropped unused), so every actor gets the same lock. */
Storage::Lock &Storage::lock_of(int file, int object) {
    auto found = locks_.find({file, object});
    if (found != locks_.end()) return *found->second;
    auto fresh = std::make_unique<Lock>();
    return *locks_.try_emplace({file, object}, std::move(fresh)).first->second;
}

void Storage::acquire(Lock &l, int node) {
    if (l.owner == node && l.waiting == 0) {
        l.active++;
        return;
    }
    std::unique_lock<sg4::Mutex> guard(*l.mutex);
    while (l.owner == node && l.waiting > 0) l.drained->wait(guard); /* the holder yields to nodes asking for it */
    if (l.owner != node) {
        l.waiting++;
        while (l.owner != node && l.busy()) l.drained->wait(guard);
        sg4::this_actor::sleep_for(l.owner < 0 ? lock_grant_ : lock_revoke_); /* under the mutex: one taker */
        l.owner = node;
        l.waiting--;
        l.drained->notify_all();
    }
    l.active++;
}

void Storage::release(Lock &l) {
    if (--l.active == 0) l.drained->notify_all();
}

/* One flow of `bytes` between a node and a target, recorded as a piece (its end filled when it completes). */
static sg4::CommPtr start_flow(const Platform &p, std::vector<Piece> &pieces, int node, int target, int kind,
                               uint64_t bytes) {
    pieces.push_back({target, kind, sg4::Engine::get_clock(), 0, static_cast<double>(bytes)});
    sg4::Host *node_host = p.nodes[static_cast<size_t>(node)], *target_host = p.targets[static_cast<size_t>(target)];
    return kind == OP_WRITE ? sg4::Comm::sendto_async(node_host, target_host, bytes)
                            : sg4::Comm::sendto_async(target_host, node_host, bytes);
}

/* Moves each target's bytes between a node and the target, all targets at once, one RPC window per target at a
 * time. */
void Storage::move(int node, int kind, const std::vector<std::pair<int, uint64_t>> &to_targets) {
    std::vector<uint64_t> left;
    std::vector<sg4::CommPtr> flying;
    std::vector<size_t> flying_target, flying_piece;
    auto issue = [&](size_t i) {
        uint64_t n = std::min(window_, left[i]);
        left[i] -= n;
        flying.push_back(start_flow(p_, pieces, node, to_targets[i].first, kind, n));
        flying_piece.push_back(pieces.size() - 1);
        flying_target.push_back(i);
    };
    for (size_t i = 0; i < to_targets.size(); i++) {
        left.push_back(to_targets[i].second);
        if (left[i]) issue(i);
    }
    while (!flying.empty()) {
        auto done = static_cast<size_t>(sg4::Comm::wait_any(flying));
        size_t i = flying_target[done];
        pieces[flying_piece[done]].end = sg4::Engine::get_clock();
        for (auto *v : {&flying_target, &flying_piece}) v->erase(v->begin() + static_cast<long>(done));
        flying.erase(flying.begin() + static_cast<long>(done));
        if (left[i]) issue(i);
    }
}

Storage::Stream &Storage::stream_of(int node, int target) {
    auto found = streams_.find({node, target});
    if (found != streams_.end()) return *found->second;
    auto fresh = std::make_unique<Stream>();
    fresh->node = node;
    fresh->target = target;
    return *streams_.try_emplace({node, target}, std::move(fresh)).first->second;
}

/* Bytes were cached for the stream: a flusher starts once the stream holds `flush_threshold` bytes (0: at once)
 * unless one is already sending (it ends when the cache it sends from is empty, so flusher actors are as many as
 * the streams with data under way, not all streams: 256 nodes x 480 targets would be 122,880 actors, past the
 * kernel's limit on one process's memory maps). */
void Storage::hand_over(Stream &s) {
    s.changed->notify_all();
    if (s.dirty >= flush_threshold_) start_flusher(s);
}

void Storage::start_flusher(Stream &s) {
    if (s.flushing || s.unsent_bytes == 0) return;
    s.flushing = true;
    sg4::Actor::create("flush-" + std::to_string(s.node) + "-" + std::to_string(s.target),
                       p_.nodes[static_cast<size_t>(s.node)], [this, &s] { flush_loop(s); });
}

/* A rank copies `bytes` into its node's cache at copy_bandwidth: on one of the node's cores when the platform
 * counts them (ranks beyond the cores share them), else as a wait of its own. */
void Storage::copy(uint64_t bytes) {
    if (copy_bandwidth_ <= 0) return;
    if (cores_ > 0)
        sg4::this_actor::execute(static_cast<double>(bytes)); /* the node computes copy_bandwidth flop/s per core */
    else
        sg4::this_actor::sleep_for(static_cast<double>(bytes) / copy_bandwidth_);
}

/* A write into the node's cache, object by object, as the room under the target's dirty limit allows: each part
 * waits for room, is copied and handed to the flusher, so a write larger than the limit streams through it and
 * returns once its last part is cached. A rank holds no room while it waits, so ranks never wait for each other
 * in a cycle. */
void Storage::cache_write(int node, int file, const Objects &objects) {
    const Layout &layout = in_.files.at(file);
    for (auto &[object, bytes] : objects) {
        Stream &s = stream_of(node, layout.targets[static_cast<size_t>(object)]);
        Lock &l = lock_of(file, object);
        for (uint64_t left = bytes; left > 0;) {
            uint64_t part;
            {
                std::unique_lock<sg4::Mutex> guard(*s.mutex);
                while (s.dirty >= dirty_limit_) s.changed->wait(guard);
                part = std::min(left, dirty_limit_ - s.dirty);
                s.dirty += part;
            }
            copy(part);
            l.unflushed += part;
            s.unsent.emplace_back(&l, part);
            s.unsent_bytes += part;
            hand_over(s);
            left -= part;
        }
    }
}

/* A (node, target) flusher: sends the cached bytes one RPC window at a time until none is left unsent (checked
 * and marked without a simcall between, so no cached byte is left without a flusher); each acknowledged window
 * frees room and may let a lock change hands. */
void Storage::flush_loop(Stream &s) {
    while (s.unsent_bytes > 0) {
        uint64_t n = std::min(s.unsent_bytes, window_);
        std::vector<std::pair<Lock *, uint64_t>> sent;
        for (uint64_t take = n; take > 0;) {
            auto &[lock, bytes] = s.unsent.front();
            uint64_t part = std::min(bytes, take);
            sent.emplace_back(lock, part);
            take -= part;
            if ((bytes -= part) == 0) s.unsent.pop_front();
        }
        s.unsent_bytes -= n;
        sg4::CommPtr flow = start_flow(p_, pieces, s.node, s.target, OP_WRITE, n);
        size_t piece = pieces.size() - 1;
        flow->wait();
        pieces[piece].end = sg4::Engine::get_clock();
        s.dirty -= n;
        for (auto [lock, bytes] : sent)
            if ((lock->unflushed -= bytes) == 0) lock->drained->notify_all();
        s.changed->notify_all();
    }
    s.flushing = false;
}

/* Bytes of [offset, offset + length) per object of the layout, in object order (the locks' order). */
static std::vector<std::pair<int, uint64_t>> per_object(const Layout &l, uint64_t offset, uint64_t length) {
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
    const Layout &layout = in_.files.at(file);
    auto objects = per_object(layout, offset, length);
    bool write = kind == OP_WRITE, locked = write && locks_on_;
    /* Locks are taken in object order, so two writers never wait for each other in a cycle. */
    if (locked)
        for (auto &[object, bytes] : objects) acquire(lock_of(file, object), node);
    if (write && dirty_limit_ > 0) {
        cache_write(node, file, objects);
    } else {
        std::vector<std::pair<int, uint64_t>> to_targets;
        for (auto &[object, bytes] : objects)
            to_targets.emplace_back(layout.targets[static_cast<size_t>(object)], bytes);
        move(node, kind, to_targets);
    }
    if (locked)
        for (auto &[object, bytes] : objects) release(lock_of(file, object));
}

/* The node's cached bytes of the file reach their targets (only the lock holder caches an object's bytes), then
 * the targets commit: one round trip. */
void Storage::sync(int node, int file) {
    const Layout &layout = in_.files.at(file);
    for (int target : layout.targets) { /* cached bytes held below the flush threshold are sent now */
        auto stream = streams_.find({node, target});
        if (stream != streams_.end()) start_flusher(*stream->second);
    }
    for (size_t object = 0; object < layout.targets.size(); object++) {
        Lock &l = lock_of(file, static_cast<int>(object));
        std::unique_lock<sg4::Mutex> guard(*l.mutex);
        while ((l.owner == node || !locks_on_) && l.unflushed > 0) l.drained->wait(guard); /* locks off: anyone's */
    }
    sg4::this_actor::sleep_for(commit_latency_);
}

void Storage::metadata(int kind, bool create) {
    const char *cost = create             ? "mds_create"
                       : kind == OP_STAT  ? "mds_stat"
                       : kind == OP_CLOSE ? "mds_close"
                                          : "mds_open";
    mds_queue_->acquire();
    sg4::this_actor::sleep_for(in_.get(cost));
    mds_queue_->release();
}

/* The log layer's index load (logfs at a sync point, a read-only open or a size query; PLFS at open): one
 * process lists the container (an open at the metadata server), then opens, reads and closes each index journal
 * in turn. Its metadata requests are one after another, so they hold one service slot for their summed time (the
 * server's throughput is that of the requests one by one); each journal read is one small request at a target
 * (its latency; the bytes, 80 per entry, are left out). N writers loading N journals each cost the metadata
 * server N^2 opens and closes: the mechanism that makes the log layer lose at scale (docs/sim.md). */
void Storage::load_indexes(int64_t journals) {
    if (journals <= 0) return;
    double per_journal = in_.get("mds_open") + in_.get("mds_close");
    mds_queue_->acquire();
    sg4::this_actor::sleep_for(in_.get("mds_open") + static_cast<double>(journals) * per_journal);
    mds_queue_->release();
    sg4::this_actor::sleep_for(static_cast<double>(journals) * in_.get("target_latency"));
}

} // namespace ioloom_sim
