// flat_index.h - hash -> position index with open addressing (internal).
// The one lookup structure behind zip record names, storage keys and pickle
// dict/set keys: a slot holds a 64-bit hash and a position in the caller's
// own array, so there is no allocation per entry and no per-node pointer
// chasing (docs/performance.md, "Why the code is shaped so").
//
// Worst case: hashes come from support/seeded_hash.h (SipHash-1-3 under a
// per-process random key), so a file cannot choose colliding hashes, and
// callers insert each distinct key once (insert_unique), so no probe run is
// made of equal hashes either. At most half the slots are used: a lookup
// probes O(1) slots on average and O(log n) at most with high probability.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "support/seeded_hash.h"

namespace maploc::detail {

class FlatIndex {
 public:
  FlatIndex() = default;
  explicit FlatIndex(std::size_t expected) { reserve(expected); }

  /// First position with this hash for which `equal(position)` holds.
  template <typename Equal>
  std::optional<std::uint32_t> find(std::uint64_t hash, Equal equal) const {
    if (slots_.empty()) return std::nullopt;
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = hash & mask; slots_[i].pos_plus_1 != 0; i = (i + 1) & mask) {
      if (slots_[i].hash == hash && equal(slots_[i].pos_plus_1 - 1)) return slots_[i].pos_plus_1 - 1;
    }
    return std::nullopt;
  }

  /// The position of an equal key if there is one; else adds `position` and
  /// returns nullopt. Keeps equal keys out of the table, so that a file
  /// naming one key a million times cannot build a million-slot probe run.
  template <typename Equal>
  std::optional<std::uint32_t> insert_unique(std::uint64_t hash, std::uint32_t position, Equal equal) {
    if (auto at = find(hash, equal)) return at;
    insert(hash, position);
    return std::nullopt;
  }

  /// Adds a position whose key the caller knows is not in the table yet.
  void insert(std::uint64_t hash, std::uint32_t position) {
    if ((used_ + 1) * 2 > slots_.size()) grow(std::max<std::size_t>(16, slots_.size() * 2));
    place(hash, position);
    ++used_;
  }

  /// Room for `entries` without regrowth (at most half the slots are used).
  void reserve(std::size_t entries) {
    std::size_t n = 16;
    while (n < entries * 2) n *= 2;
    if (n > slots_.size()) grow(n);
  }

  std::size_t size() const noexcept { return used_; }

 private:
  struct Slot {
    std::uint64_t hash = 0;
    std::uint32_t pos_plus_1 = 0;  ///< 0: empty
  };

  void place(std::uint64_t hash, std::uint32_t position) {
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = hash & mask;
    while (slots_[i].pos_plus_1 != 0) i = (i + 1) & mask;
    slots_[i] = {hash, position + 1};
  }

  void grow(std::size_t n) {
    std::vector<Slot> old(n);
    old.swap(slots_);
    for (const Slot& s : old) {
      if (s.pos_plus_1 != 0) place(s.hash, s.pos_plus_1 - 1);
    }
  }

  std::vector<Slot> slots_;
  std::size_t used_ = 0;
};

}  // namespace maploc::detail
