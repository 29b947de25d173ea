/* One actor per rank of every job, on its node (job.first_node + rank / ranks_per_node). It waits for its job's
 * start, then replays its operations in program order: the computation gap as a sleep, the operation through
 * the storage model, its start and end time recorded. */
#include <algorithm>
#include <stdexcept>

#include "coord.hpp"
#include "sim.hpp"

namespace ioloom_sim {

namespace {

struct RankWork {
    const Input *in;
    Storage *storage;
    sg4::BarrierPtr barrier;
    int node;
    size_t first, last; /* its operations: in->ops[first, last) */
    std::vector<double> *times;
};

void run_op(const RankWork &w, const Op &op) {
    switch (op.kind) {
        case OP_WRITE:
        case OP_READ:
            w.storage->transfer(w.node, op.kind, op.file, static_cast<uint64_t>(op.offset),
                                static_cast<uint64_t>(op.length));
            break;
        case OP_OPEN:
            w.storage->metadata(op.kind, op.offset & 1);
            w.storage->load_indexes(op.length);
            break;
        case OP_CLOSE:
            w.storage->metadata(op.kind, false);
            break;
        case OP_STAT:
            w.storage->metadata(op.kind, false);
            w.storage->load_indexes(op.offset);
            break;
        case OP_SYNC:
            w.storage->sync(w.node, op.file);
            w.storage->load_indexes(op.offset);
            break;
        case OP_BARRIER:
            w.barrier->wait();
            break;
        case OP_SEND:
            w.storage->send(w.node, static_cast<int>(op.offset), static_cast<uint64_t>(op.length));
            break;
        default:
            throw std::runtime_error("unknown operation kind " + std::to_string(op.kind));
    }
}

void rank_actor(RankWork w, double start) {
    sg4::this_actor::sleep_until(start);
    for (size_t i = w.first; i < w.last; i++) {
        const Op &op = w.in->ops[i];
        if (op.gap > 0) sg4::this_actor::sleep_for(op.gap);
        if (op.kind == OP_WRITE) coordinate_before_write(i);
        (*w.times)[2 * i] = sg4::Engine::get_clock();
        run_op(w, op);
        (*w.times)[2 * i + 1] = sg4::Engine::get_clock();
        if (op.kind != OP_WRITE) w.storage->rested(w.node); /* everything but a write (into the cache) waits */
        if (op.kind == OP_WRITE) coordinate_after_write(i);
    }
}

/* Where each rank's operations start in the array (sorted by job, then rank): ranks[job][rank] is the first, and
 * ranks[job][rank + 1] one past its last. A rank without operations starts and ends where the one before ended;
 * a job's first rank where the previous job ended. */
std::vector<std::vector<size_t>> rank_ranges(const Input &in) {
    std::vector<std::vector<size_t>> ends(in.jobs.size());
    for (size_t j = 0; j < in.jobs.size(); j++) ends[j].assign(static_cast<size_t>(in.jobs[j].nranks), 0);
    for (size_t i = 0; i < in.ops.size(); i++) {
        const Op &op = in.ops[i];
        if (op.job < 0 || static_cast<size_t>(op.job) >= in.jobs.size() || op.rank < 0 ||
            op.rank >= in.jobs[op.job].nranks)
            throw std::runtime_error("operation " + std::to_string(i) + " names no rank of a job");
        if (i && (in.ops[i - 1].job > op.job || (in.ops[i - 1].job == op.job && in.ops[i - 1].rank > op.rank)))
            throw std::runtime_error("operations are not grouped by job and rank");
        ends[static_cast<size_t>(op.job)][static_cast<size_t>(op.rank)] = i + 1;
    }
    std::vector<std::vector<size_t>> first(in.jobs.size());
    size_t at = 0;
    for (size_t j = 0; j < in.jobs.size(); j++) {
        first[j].push_back(at);
        for (size_t end : ends[j]) first[j].push_back(at = std::max(at, end));
    }
    return first;
}

} // namespace

void start_ranks(const Input &in, const Platform &p, Storage &s, std::vector<double> &times) {
    auto ranges = rank_ranges(in);
    for (size_t j = 0; j < in.jobs.size(); j++) {
        const Job &job = in.jobs[j];
        auto barrier = sg4::Barrier::create(static_cast<unsigned>(job.nranks));
        for (int r = 0; r < job.nranks; r++) {
            size_t node = static_cast<size_t>(job.first_node + r / job.ranks_per_node);
            if (node >= p.nodes.size())
                throw std::runtime_error("job " + std::to_string(j) + " needs more nodes than the platform has");
            RankWork w{&in,
                       &s,
                       barrier,
                       static_cast<int>(node),
                       ranges[j][static_cast<size_t>(r)],
                       ranges[j][static_cast<size_t>(r) + 1],
                       &times};
            sg4::Actor::create("job" + std::to_string(j) + "-rank" + std::to_string(r), p.nodes[node], rank_actor, w,
                               job.start);
        }
    }
}

} // namespace ioloom_sim
