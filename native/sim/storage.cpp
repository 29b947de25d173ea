/* The storage side of a request: a file's bytes are striped over objects (one per target of its layout); a
 * write takes an extent lock on the range it touches of each object (locks.cpp: held per client node, revoked by
 * other nodes' overlapping requests, expanded as Lustre's LDLM does), then goes into the node's write-back cache
 * (or, write-through, moves to the target); reads move from the targets; metadata requests queue at the metadata
 * server. Writers on different nodes whose locks overlap (N-1 strided, small blocks) serialise and pay a
 * revocation round trip per switch, while nodes writing disjoint ranges (N-1 segmented, N-N) write at once: the
 * N-1 strided penalty comes from this mechanism, not from a factor. Reads take no lock (a simplification:
 * docs/sim.md).
 *
 * The write-back cache is per node and target (a Lustre client's per-target dirty limit, max_dirty_mb): a write
 * copies its bytes in at `copy_bandwidth` as room allows, and, once the stream holds `flush_threshold` bytes, an
 * fsync asks or a lock over them is revoked, one flusher actor per (node, target) sends the cached bytes in flows
 * of one RPC window (rpc_size x rpcs_in_flight) at a time. Requests that bypass the cache also move in RPC windows:
 * the RPCs of a window share the same links at once, as one flow of their summed size does, and their latencies
 * overlap; a window pays one latency. */
#include <algorithm>
#include <deque>
#include <stdexcept>

#include "sim.hpp"

namespace ioloom_sim {

/* A node's write-back cache toward one target. `dirty` counts cached bytes until the target acknowledged them
 * (Lustre counts pages under write-back against the limit); `unsent` lists those not yet in a flow, per extent
 * lock, in write order. */
struct Storage::Stream {
    int node = 0, target = 0;
    bool flushing = false; /* a flusher actor is sending from it */
    uint64_t dirty = 0, unsent_bytes = 0;
    std::deque<std::pair<Grant *, uint64_t>> unsent;
    sg4::MutexPtr mutex = sg4::Mutex::create();
    sg4::ConditionVariablePtr changed = sg4::ConditionVariable::create();
};

Storage::Storage(const Input &in, const Platform &p)
    : in_(in), p_(p), mds_queue_(sg4::Semaphore::create(static_cast<unsigned>(in.get("mds_threads")))),
      window_(static_cast<uint64_t>(in.get("rpc_size") * in.get("rpcs_in_flight"))),
      dirty_limit_(static_cast<uint64_t>(in.get("dirty_limit"))), copy_bandwidth_(in.get("copy_bandwidth")),
      commit_latency_(in.get("commit_latency")),
      lock_costs_{in.get("lock_grant"), in.get("lock_revoke"),
                  [this](const Grant &g) { start_flusher(stream_of(g.node, g.resource->target)); }},
      locks_on_(in.get("extent_locks") != 0), flush_threshold_(static_cast<uint64_t>(in.get("flush_threshold"))),
      cores_(static_cast<int>(in.get("cores"))), copy_burst_(static_cast<uint64_t>(in.get("copy_burst"))),
      own_(p.nodes.size(), OwnCache(static_cast<uint64_t>(in.get("cache_capacity")))) {}

Storage::~Storage() = default;

/* Creating a resource's mutex is a simcall, which lets other actors run: the slot is filled only after, and only if
 * nobody filled it meanwhile (the spare is dropped unused), so every actor gets the same resource. */
Resource &Storage::resource_of(int file, int object) {
    auto found = resources_.find({file, object});
    if (found != resources_.end()) return *found->second;
    auto fresh = std::make_unique<Resource>();
    fresh->target = in_.files.at(file).targets[static_cast<size_t>(object)];
    return *resources_.try_emplace({file, object}, std::move(fresh)).first->second;
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
 * counts them (ranks beyond the cores share them), else as a wait of its own. With cores counted, the first
 * copy_burst bytes after the node's job waited run on the node's cores (a session that slept wakes ahead of the
 * running ones: Linux's sleeper credit), the rest on the cores its job gets beside the machine's other load
 * (Platform::job_cores). */
void Storage::copy(int node, uint64_t bytes) {
    if (copy_bandwidth_ <= 0) return;
    if (cores_ <= 0) {
        sg4::this_actor::sleep_for(static_cast<double>(bytes) / copy_bandwidth_);
        return;
    }
    uint64_t &credit = burst_left_[node];
    uint64_t ahead = std::min(credit, bytes);
    credit -= ahead;
    auto run = [](sg4::Host *on,
                  uint64_t n) { /* hosts compute copy_bandwidth flop/s per core, or their share */
                                if (n) sg4::this_actor::exec_init(static_cast<double>(n))->set_host(on)->wait();
    };
    run(p_.nodes[static_cast<size_t>(node)], ahead);
    run(p_.job_cores[static_cast<size_t>(node)], bytes - ahead);
}

void Storage::rested(int node) {
    if (copy_burst_) burst_left_[node] = copy_burst_;
}

/* A write into the node's cache, object by object, as the room under the target's dirty limit allows: each part
 * waits for room, is copied and handed to the flusher, so a write larger than the limit streams through it and
 * returns once its last part is cached. A rank holds no room while it waits, so ranks never wait for each other
 * in a cycle. */
void Storage::cache_write(int node, int file, const std::vector<Part> &parts) {
    for (const Part &p : parts) {
        Resource &r = resource_of(file, p.object);
        Stream &s = stream_of(node, r.target);
        Grant &l = p.lock ? *p.lock : r.unlocked;
        for (uint64_t left = p.bytes; left > 0;) {
            uint64_t part;
            {
                std::unique_lock<sg4::Mutex> guard(*s.mutex);
                while (s.dirty >= dirty_limit_) s.changed->wait(guard);
                part = std::min(left, dirty_limit_ - s.dirty);
                s.dirty += part;
            }
            copy(node, part);
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
        std::vector<std::pair<Grant *, uint64_t>> sent;
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
            if ((lock->unflushed -= bytes) == 0) lock->resource->changed->notify_all();
        s.changed->notify_all();
    }
    s.flushing = false;
}

/* Where a file's byte lies: its object, and its offset in the object. */
static std::pair<size_t, uint64_t> locate(const Layout &l, uint64_t at) {
    uint64_t stripe = at / l.stripe_size, n = l.targets.size();
    return {stripe % n, stripe / n * l.stripe_size + at % l.stripe_size};
}

/* [offset, offset + length) per object of the layout, in object order (the locks' order): the bytes and the range
 * of the object they touch (contiguous in the object, since the range is in the file). */
static std::vector<Part> parts_of(const Layout &l, uint64_t offset, uint64_t length) {
    std::vector<Part> per(l.targets.size(), Part{0, 0, UINT64_MAX, 0, nullptr});
    for (uint64_t at = offset, end = offset + length; at < end;) {
        uint64_t in_stripe = std::min(end - at, l.stripe_size - at % l.stripe_size);
        auto [object, from] = locate(l, at);
        Part &p = per[object];
        p.bytes += in_stripe;
        p.start = std::min(p.start, from);
        p.end = std::max(p.end, from + in_stripe);
        at += in_stripe;
    }
    std::vector<Part> out;
    for (size_t i = 0; i < per.size(); i++)
        if (per[i].bytes) out.push_back({static_cast<int>(i), per[i].bytes, per[i].start, per[i].end, nullptr});
    return out;
}

/* A read is served from the node's own cache where it holds what it wrote (a memory copy), the rest from the
 * targets; a write goes through its locks and the write-back cache, then the node holds it. */
void Storage::transfer(int node, int kind, int file, uint64_t offset, uint64_t length) {
    if (kind != OP_READ) {
        direct(node, kind, file, offset, length);
        wrote(node, file, offset, length);
        return;
    }
    uint64_t fetched = 0;
    for (auto [from, to] : own_[static_cast<size_t>(node)].missing(file, offset, offset + length)) {
        direct(node, kind, file, from, to - from);
        fetched += to - from;
    }
    copy(node, length - fetched);
}

/* The node's copy is the newest; every other node's copy of the range is stale (a node left holding nothing of the
 * file leaves its holders). Write-through (O_DIRECT) leaves nothing in the page cache, for the whole run
 * (dirty_limit_ is fixed), so no node ever holds anything then. */
void Storage::wrote(int node, int file, uint64_t offset, uint64_t length) {
    if (dirty_limit_ == 0) return;
    std::set<int> &holders = holders_[file];
    for (auto it = holders.begin(); it != holders.end();) {
        OwnCache &c = own_[static_cast<size_t>(*it)];
        if (*it != node) c.drop(file, offset, offset + length);
        it = c.holds(file) ? std::next(it) : holders.erase(it);
    }
    own_[static_cast<size_t>(node)].keep(file, offset, offset + length);
    if (own_[static_cast<size_t>(node)].holds(file)) holders.insert(node);
}

void Storage::direct(int node, int kind, int file, uint64_t offset, uint64_t length) {
    const Layout &layout = in_.files.at(file);
    auto parts = parts_of(layout, offset, length);
    bool write = kind == OP_WRITE, locked = write && locks_on_;
    /* Locks are taken in object order, so two writers never wait for each other in a cycle. */
    if (locked)
        for (Part &p : parts) p.lock = &lock_extent(resource_of(file, p.object), node, p.start, p.end, lock_costs_);
    if (write && dirty_limit_ > 0) {
        cache_write(node, file, parts);
    } else {
        std::vector<std::pair<int, uint64_t>> to_targets;
        for (const Part &p : parts) to_targets.emplace_back(layout.targets[static_cast<size_t>(p.object)], p.bytes);
        move(node, kind, to_targets);
    }
    if (locked)
        for (const Part &p : parts) unlock_extent(*p.lock);
}

/* Whether the node still has cached bytes of the resource (locks off: anyone's, as nothing records whose). */
bool Storage::unflushed(const Resource &r, int node) const {
    if (!locks_on_) return r.unlocked.unflushed > 0;
    return std::any_of(r.granted.begin(), r.granted.end(),
                       [node](const std::unique_ptr<Grant> &g) { return g->node == node && g->unflushed > 0; });
}

/* The node's cached bytes of the file reach their targets, then the targets commit: one round trip. */
void Storage::sync(int node, int file) {
    const Layout &layout = in_.files.at(file);
    for (int target : layout.targets) { /* cached bytes held below the flush threshold are sent now */
        auto stream = streams_.find({node, target});
        if (stream != streams_.end()) start_flusher(*stream->second);
    }
    for (size_t object = 0; object < layout.targets.size(); object++) {
        Resource &r = resource_of(file, static_cast<int>(object));
        std::unique_lock<sg4::Mutex> guard(*r.mutex);
        while (unflushed(r, node)) r.changed->wait(guard);
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

void Storage::send(int from, int to, uint64_t bytes) {
    if (from == to || bytes == 0) return;
    if (to < 0 || static_cast<size_t>(to) >= p_.nodes.size())
        throw std::runtime_error("a send names node " + std::to_string(to) + ", which the platform does not have");
    sg4::Host *a = p_.nodes[static_cast<size_t>(from)], *b = p_.nodes[static_cast<size_t>(to)];
    for (const Platform::Below &level : p_.below) /* under one switch: through it, not up its uplinks */
        if (from / level.per == to / level.per) {
            a = level.nodes[static_cast<size_t>(from)];
            b = level.nodes[static_cast<size_t>(to)];
            break;
        }
    sg4::Comm::sendto(a, b, bytes);
}

} // namespace ioloom_sim
