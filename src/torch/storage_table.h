// storage_table.h - persistent ids ('storage', type, key, location, numel[, view]) to storages (internal).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "maploc/pickle/value.h"
#include "support/flat_index.h"
#include "state.h"

namespace maploc::torch {

/// Resolves the persistent ids of one pickle stream (pytorch-format.md §4.2,
/// §2.2) into State::storages and State::refs. One storage per key; the
/// first reference fixes its dtype and numel, later ones must agree on the
/// byte size (a zero-byte record may be seen under several dtypes).
class StorageTable {
 public:
  /// Called once per new storage to fill Storage::record/file_offset and the
  /// bytes present on disk (State::present_bytes). May throw.
  using Locate = std::function<void(Storage& storage, std::uint64_t& present_bytes)>;

  StorageTable(Checkpoint::State& state, std::string stream_name, Locate locate);

  /// The pickle machine's persistent_load: a storage id becomes
  /// Value::external(handle into State::refs); a legacy ('module', cls, ...)
  /// id becomes cls. Raises kTorchBadPersistentId, kTorchUnknownDType,
  /// kTorchStorageConflict.
  std::optional<pickle::Value> load(const pickle::Value& pid, std::uint64_t offset);

  /// Room for this many storages without regrowing the key index.
  void reserve(std::size_t storages) { expected_ = storages; }

  /// The storage index of a key, if seen.
  std::optional<std::size_t> find(std::string_view key) const;

  /// Adds a storage directly (tar format), returning its index.
  std::size_t add(Storage storage, std::uint64_t present_bytes);

  /// Adds a reference to a storage (a slice when byte_offset/nbytes say so) and returns its handle.
  std::uint64_t add_ref(StorageRef ref);

 private:
  [[noreturn]] void bad(const std::string& why, std::uint64_t offset) const;

  void index_keys();

  Checkpoint::State& state_;
  std::string stream_name_;
  Locate locate_;
  /// While this stream's keys are "0", "1", "2", ... in order (torch counts
  /// them up as it meets storages), key k is storage dense_[k] and no key is
  /// hashed. The first other key moves every key into by_key_.
  std::vector<std::uint32_t> dense_;
  bool hashed_ = false;
  std::size_t expected_ = 0;
  maploc::detail::FlatIndex by_key_;  ///< once hashed_: storage keys of this stream -> index into State::storages
  std::unordered_map<std::string, std::uint64_t, maploc::detail::SeededTextHash> views_;  ///< legacy view key -> handle
};

/// k for a storage key spelled the way torch counts storages ("0", "17": no
/// sign, no leading zero, at most 9 digits), else nullopt.
std::optional<std::uint32_t> counted_key(std::string_view key);

/// Text of a str (or latin-1 bytes) value, for keys and tags; nullopt for other kinds.
std::optional<std::string> text_of(const pickle::Value& v);

/// "module.name" of a kGlobal.
std::string global_path(const pickle::Value& v);

}  // namespace maploc::torch
