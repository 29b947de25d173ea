/* The simulator's model, shared by its sources: the parameters and workload read from the driver's input
 * (input.cpp), the platform built from them (platform.cpp), the storage mechanisms a request goes through
 * (storage.cpp: striping, extent locks, the metadata server) and the rank actors that replay the operations
 * (ranks.cpp). docs/sim.md specifies the input and output formats and the model. */
#ifndef IOLOOM_SIM_HPP
#define IOLOOM_SIM_HPP

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <simgrid/s4u.hpp>

#include "locks.hpp"
#include "owncache.hpp"

namespace sg4 = simgrid::s4u;

namespace ioloom_sim {

/* One operation of one rank, as the driver wrote it (40 bytes, little-endian; docs/sim.md). */
struct Op {
    int32_t job, rank, kind, file;
    int64_t offset, length; /* open: offset 1 creates the file; index journals loaded: open's length, sync's and
                             * stat's offset (the log layer's index load, Storage::load_indexes) */
    double gap;             /* seconds of computation before the operation */
};
static_assert(sizeof(Op) == 40, "operation record layout");

enum OpKind {
    OP_WRITE = 1,
    OP_READ = 2,
    OP_OPEN = 3,
    OP_CLOSE = 4,
    OP_SYNC = 5,
    OP_BARRIER = 6,
    OP_STAT = 7,
    OP_SEND = 8 /* collective buffering's exchange: `length` bytes to node `offset` over the network */
};

/* A file's layout: stripes of stripe_size bytes dealt round robin over its targets (object i on targets[i]). */
struct Layout {
    uint64_t stripe_size = 0;
    std::vector<int> targets;
};

struct Job {
    double start = 0;
    int nranks = 0, ranks_per_node = 1, first_node = 0;
};

/* Everything the input says: named scalar parameters, layouts, jobs, each target's bandwidth profile, the
 * operations (grouped by job and rank, each rank's in program order). */
struct Input {
    std::map<std::string, double> param;
    std::map<int, Layout> files;
    std::vector<Job> jobs;
    std::map<int, std::vector<std::pair<double, double>>> profiles; /* target -> (time, capacity ratio) steps */
    double profile_period = -1;
    std::vector<Op> ops;
    std::string ops_path, times_path, pieces_path;
    double get(const std::string &name) const;
};

Input read_input(const std::string &path);

/* The simulated machine: client nodes, storage targets (each a host whose access link is its disk), and the
 * metadata server. */
struct Platform {
    std::vector<sg4::Host *> nodes, targets;
    std::vector<sg4::Host *> job_cores; /* per node: the cores its job gets beside the machine's other load */
    sg4::Host *mds = nullptr;
    /* Per switch level with uplinks (leaf or switch group, then pod): how many consecutive nodes share one of its
     * switches, and each node's host whose route climbs only the levels below it. Two nodes under one switch
     * exchange through it, not through its uplinks (Storage::send). */
    struct Below {
        int per;
        std::vector<sg4::Host *> nodes;
    };
    std::vector<Below> below;
};

Platform build_platform(const Input &in);

/* What one flow did (an RPC window of a request, or a write-back flush): per-target throughput over time is
 * binned from these. */
struct Piece {
    int32_t target, kind;
    double start, end, bytes;
};

/* A request's bytes on one object of its file's layout. */
struct Part {
    int object;
    uint64_t bytes, start, end; /* [start, end): the range of the object's bytes it touches */
    Grant *lock;                /* the extent lock it writes under (null: none) */
};

/* Shared state of the storage side, used by every rank actor. */
class Storage {
  public:
    Storage(const Input &in, const Platform &p);
    ~Storage();
    /* A write or read of [offset, offset + length) of `file` by a rank on `node`: pieces per object, each behind
     * the object's extent lock; a write goes into the node's write-back cache when there is one, otherwise (and
     * a read of what the node does not hold of its own writes) moves to the targets in RPC windows. */
    void transfer(int node, int kind, int file, uint64_t offset, uint64_t length);
    /* fsync: the node's cached data of `file` reaches its targets, then one commit round trip. */
    void sync(int node, int file);
    /* A rank of the node waited (for the storage, a barrier, the metadata server): the node's next copies start a
     * burst. */
    void rested(int node);
    /* A metadata request (open, create, stat, close) queued at the metadata server. */
    void metadata(int kind, bool create);
    /* The log layer's index load: list the container, then open, read and close `journals` index journals. */
    void load_indexes(int64_t journals);
    /* `bytes` from node `from` to node `to` over the network (a collective's two-phase exchange); nothing within
     * a node (a copy in memory, left out). */
    void send(int from, int to, uint64_t bytes);
    std::vector<Piece> pieces;

  private:
    struct Stream;
    Resource &resource_of(int file, int object);
    void direct(int node, int kind, int file, uint64_t offset, uint64_t length);
    void wrote(int node, int file, uint64_t offset, uint64_t length);
    bool unflushed(const Resource &r, int node) const;
    void move(int node, int kind, const std::vector<std::pair<int, uint64_t>> &to_targets);
    void cache_write(int node, int file, const std::vector<Part> &parts);
    Stream &stream_of(int node, int target);
    void hand_over(Stream &s);
    void start_flusher(Stream &s);
    void copy(int node, uint64_t bytes);
    void flush_loop(Stream &s);
    const Input &in_;
    const Platform &p_;
    std::map<std::pair<int, int>, std::unique_ptr<Resource>> resources_; /* (file, object) -> its extent locks */
    std::map<std::pair<int, int>, std::unique_ptr<Stream>> streams_;     /* (node, target) -> its write-back cache */
    sg4::SemaphorePtr mds_queue_;
    uint64_t window_;      /* bytes of one flow: rpc_size x rpcs_in_flight (the RPCs a node keeps under way) */
    uint64_t dirty_limit_; /* bytes a node may cache per target; 0: write-through */
    double copy_bandwidth_, commit_latency_;
    LockCosts lock_costs_;
    bool locks_on_;
    uint64_t flush_threshold_;             /* cached bytes of a stream before its flusher starts without an fsync */
    int cores_;                            /* a node's cores that copies into the cache share (0: a core per rank) */
    uint64_t copy_burst_;                  /* bytes a rank copies ahead of the node's other load after it waited */
    std::map<aid_t, uint64_t> burst_left_; /* per rank actor: bytes of its burst left */
    std::vector<OwnCache> own_;            /* per node: what it holds of its own writes */
    std::map<int, std::set<int>> holders_; /* file -> the nodes holding some of it in their OwnCache */
};

/* Starts one actor per rank of every job; each fills its operations' start and end times. */
void start_ranks(const Input &in, const Platform &p, Storage &s, std::vector<double> &times);

} // namespace ioloom_sim

#endif
