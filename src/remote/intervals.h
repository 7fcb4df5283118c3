// intervals.h - the byte ranges of an object already present, merged (internal).
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <vector>

#include "maploc/mapped_file.h"

namespace maploc::remote {

class Intervals {
 public:
  /// Adds [begin, end).
  void add(std::uint64_t begin, std::uint64_t end) {
    if (begin >= end) return;
    auto it = spans_.upper_bound(begin);
    if (it != spans_.begin() && std::prev(it)->second >= begin) {
      --it;
      begin = it->first;
      end = std::max(end, it->second);
      it = spans_.erase(it);
    }
    while (it != spans_.end() && it->first <= end) {
      end = std::max(end, it->second);
      it = spans_.erase(it);
    }
    spans_.emplace(begin, end);
  }
  /// The parts of [begin, end) not present, in order.
  std::vector<ByteRange> missing(std::uint64_t begin, std::uint64_t end) const {
    std::vector<ByteRange> out;
    auto it = spans_.upper_bound(begin);
    if (it != spans_.begin() && std::prev(it)->second > begin) begin = std::prev(it)->second;
    for (; begin < end; ++it) {
      const std::uint64_t stop = it == spans_.end() ? end : std::min(end, it->first);
      if (stop > begin) out.push_back({begin, stop - begin});
      if (it == spans_.end()) break;
      begin = std::max(begin, it->second);
    }
    return out;
  }
  bool covers(std::uint64_t begin, std::uint64_t end) const { return missing(begin, end).empty(); }

 private:
  std::map<std::uint64_t, std::uint64_t> spans_;  // begin -> end, disjoint, not touching
};

}  // namespace maploc::remote
