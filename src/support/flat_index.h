// flat_index.h - hash -> position index with open addressing (internal).
// The one lookup structure behind zip record names, storage keys and pickle
// dict/set keys: a slot holds a 64-bit hash and a position in the caller's
// own array, so there is no allocation per entry and no per-node pointer
// chasing (std::unordered_map cost a third of opening a 30,000-tensor file).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

namespace maploc::detail {

/// The hash FlatIndex users key names with.
inline std::uint64_t hash_text(std::string_view text) noexcept { return std::hash<std::string_view>{}(text); }

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

  /// Adds a position (duplicates allowed: find() returns the first added).
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
