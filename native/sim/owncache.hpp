/* What a client node keeps of the data it wrote (Lustre's client page cache: pages a node wrote stay cached, clean
 * once flushed, until memory runs short or another node's write makes them stale): per file, the byte ranges the
 * node holds, at most `capacity` bytes in all, the oldest written dropped first. A read of those ranges by the
 * node is served from memory (docs/sim.md, "Client cache"). */
#ifndef IOLOOM_SIM_OWNCACHE_HPP
#define IOLOOM_SIM_OWNCACHE_HPP

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <utility>
#include <vector>

namespace ioloom_sim {

/* Disjoint byte ranges [start, end), keyed by start. */
class RangeSet {
  public:
    uint64_t add(uint64_t start, uint64_t end);    /* the bytes newly covered */
    uint64_t remove(uint64_t start, uint64_t end); /* the bytes no longer covered */
    /* The parts of [start, end) not covered, in order. */
    std::vector<std::pair<uint64_t, uint64_t>> missing(uint64_t start, uint64_t end) const;
    bool overlaps(uint64_t start, uint64_t end) const; /* covers some byte of [start, end) */
    bool empty() const { return ranges_.empty(); }

  private:
    std::map<uint64_t, uint64_t> ranges_;
};

class OwnCache {
  public:
    explicit OwnCache(uint64_t capacity) : capacity_(capacity) {}
    void keep(int file, uint64_t start, uint64_t end); /* the node wrote [start, end) of the file */
    void drop(int file, uint64_t start, uint64_t end); /* someone else wrote it: stale */
    std::vector<std::pair<uint64_t, uint64_t>> missing(int file, uint64_t start, uint64_t end) const;
    bool holds(int file) const { return files_.count(file) != 0; } /* some byte of the file */

  private:
    struct Kept {
        int file;
        uint64_t start, end;
    };
    uint64_t release(int file, uint64_t start, uint64_t end);
    void evict();
    void compact();
    uint64_t capacity_, bytes_ = 0;
    std::map<int, RangeSet> files_; /* only files it holds bytes of */
    /* What was kept, oldest first (parts of it may be gone already); a write right after the newest record's end in
     * the same file extends it. Records of which nothing is held are dropped when the deque has doubled since the
     * last such pass, so it stays within twice the records that still hold bytes. */
    std::deque<Kept> order_;
    std::size_t compacted_ = 0; /* records after the last pass */
};

} // namespace ioloom_sim

#endif
