/* A node's cache of the data it wrote (owncache.hpp): range sets per file and the oldest-first order in which
 * they leave when the node's capacity is exceeded. */
#include "owncache.hpp"

#include <algorithm>
#include <cassert>

namespace ioloom_sim {

uint64_t RangeSet::remove(uint64_t start, uint64_t end) {
    uint64_t gone = 0;
    auto it = ranges_.upper_bound(start);
    if (it != ranges_.begin()) --it;
    while (it != ranges_.end() && it->first < end) {
        auto [from, to] = *it;
        if (to <= start) {
            ++it;
            continue;
        }
        it = ranges_.erase(it);
        if (from < start) ranges_.emplace(from, start);
        if (to > end) ranges_.emplace(end, to);
        gone += std::min(to, end) - std::max(from, start);
    }
    return gone;
}

uint64_t RangeSet::add(uint64_t start, uint64_t end) {
    /* what overlapped now ends at start or begins at end: join those */
    uint64_t fresh = (end - start) - remove(start, end);
    auto next = ranges_.find(end);
    if (next != ranges_.end()) {
        end = next->second;
        ranges_.erase(next);
    }
    auto after = ranges_.lower_bound(start);
    if (after != ranges_.begin() && std::prev(after)->second == start)
        std::prev(after)->second = end;
    else
        ranges_.emplace(start, end);
    return fresh;
}

std::vector<std::pair<uint64_t, uint64_t>> RangeSet::missing(uint64_t start, uint64_t end) const {
    std::vector<std::pair<uint64_t, uint64_t>> out;
    auto it = ranges_.upper_bound(start);
    if (it != ranges_.begin()) --it;
    for (uint64_t at = start; at < end;) {
        while (it != ranges_.end() && it->second <= at) ++it;
        uint64_t gap_end = it == ranges_.end() ? end : std::min(end, it->first);
        if (gap_end > at) out.emplace_back(at, gap_end);
        at = it == ranges_.end() ? end : std::max(gap_end, it->second);
    }
    return out;
}

bool RangeSet::overlaps(uint64_t start, uint64_t end) const {
    auto it = ranges_.upper_bound(start);
    if (it != ranges_.begin() && std::prev(it)->second > start) return true;
    return it != ranges_.end() && it->first < end;
}

void OwnCache::keep(int file, uint64_t start, uint64_t end) {
    if (capacity_ == 0 || end <= start) return;
    uint64_t size = end - start;
    if (size > capacity_) start = end - capacity_; /* only the last capacity bytes of a larger write stay */
    bytes_ += files_[file].add(start, end);
    if (!order_.empty() && order_.back().file == file && order_.back().end == start)
        order_.back().end = end;
    else
        order_.push_back({file, start, end});
    evict();
    if (order_.size() > 2 * compacted_ + 64) compact();
}

/* The oldest bytes leave first, as many as the capacity is exceeded by: the oldest record's lowest ones. */
void OwnCache::evict() {
    while (bytes_ > capacity_) {
        assert(!order_.empty()); /* the records cover every byte kept, so dropping them frees room */
        Kept &old = order_.front();
        uint64_t upto = std::min(old.end, old.start + (bytes_ - capacity_));
        bytes_ -= release(old.file, old.start, upto);
        old.start = upto;
        if (old.start == old.end) order_.pop_front();
    }
}

void OwnCache::compact() {
    auto gone = [this](const Kept &k) {
        auto it = files_.find(k.file);
        return it == files_.end() || !it->second.overlaps(k.start, k.end);
    };
    order_.erase(std::remove_if(order_.begin(), order_.end(), gone), order_.end());
    compacted_ = order_.size();
}

uint64_t OwnCache::release(int file, uint64_t start, uint64_t end) {
    auto it = files_.find(file);
    if (it == files_.end()) return 0;
    uint64_t gone = it->second.remove(start, end);
    if (it->second.empty()) files_.erase(it);
    return gone;
}

void OwnCache::drop(int file, uint64_t start, uint64_t end) { bytes_ -= release(file, start, end); }

std::vector<std::pair<uint64_t, uint64_t>> OwnCache::missing(int file, uint64_t start, uint64_t end) const {
    auto it = files_.find(file);
    if (it == files_.end()) return {{start, end}};
    return it->second.missing(start, end);
}

} // namespace ioloom_sim
