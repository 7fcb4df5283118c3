// storage_table.cpp - persistent-id parsing and storage sharing (pytorch-format.md §2.2, §4.2).
#include "storage_table.h"

#include <algorithm>
#include <limits>
#include <string_view>

namespace maploc::torch {
namespace {

constexpr std::uint64_t kMaxI64 = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());

// Multiplies with an overflow check against int64's range (torch's sizes are int64).
bool checked_mul(std::uint64_t a, std::uint64_t b, std::uint64_t& out) {
  if (a != 0 && b > kMaxI64 / a) return false;
  out = a * b;
  return true;
}

}  // namespace

std::optional<std::uint32_t> counted_key(std::string_view key) {
  if (key.empty() || key.size() > 9 || (key.size() > 1 && key[0] == '0')) return std::nullopt;
  std::uint32_t k = 0;
  for (const char c : key) {
    if (c < '0' || c > '9') return std::nullopt;
    k = k * 10 + static_cast<std::uint32_t>(c - '0');
  }
  return k;
}

std::optional<std::string> text_of(const pickle::Value& v) {
  if (v.is(pickle::Kind::kStr)) return std::string(v.as_str());
  if (v.is(pickle::Kind::kBytes)) {
    // encoding='bytes' Python 2 strings: torch's _maybe_decode_ascii.
    auto b = v.as_bytes();
    return std::string(b.begin(), b.end());
  }
  if (v.is(pickle::Kind::kInt) && !v.is_big_int()) return std::to_string(v.as_int());
  return std::nullopt;
}

namespace {
// text_of() without a copy: a view of the str or bytes in the stream, or of
// `scratch` for an int's decimal.
std::optional<std::string_view> text_view(const pickle::Value& v, std::string& scratch) {
  if (v.is(pickle::Kind::kStr)) return v.as_str();
  if (v.is(pickle::Kind::kBytes)) {
    const auto b = v.as_bytes();
    return std::string_view(reinterpret_cast<const char*>(b.data()), b.size());
  }
  if (v.is(pickle::Kind::kInt) && !v.is_big_int()) return scratch = std::to_string(v.as_int());
  return std::nullopt;
}
}  // namespace

std::string global_path(const pickle::Value& v) {
  if (!v.is(pickle::Kind::kGlobal)) return std::string(pickle::kind_name(v.kind()));
  std::string out(v.global_module());
  out += '.';
  out += v.global_name();
  return out;
}

StorageTable::StorageTable(Checkpoint::State& state, std::string stream_name, Locate locate)
    : state_(state), stream_name_(std::move(stream_name)), locate_(std::move(locate)) {}

void StorageTable::bad(const std::string& why, std::uint64_t offset) const {
  fail(ErrorCode::kTorchBadPersistentId, "persistent id " + why, stream_name_, offset);
}

std::optional<std::size_t> StorageTable::find(std::string_view key) const {
  if (!hashed_) {
    // Every key so far is a count below dense_.size(): nothing else can match.
    const auto k = counted_key(key);
    if (k && *k < dense_.size()) return dense_[*k];
    return std::nullopt;
  }
  const auto at = by_key_.find(maploc::detail::hash_text(key), [&](std::uint32_t i) { return state_.storages[i].key == key; });
  if (!at) return std::nullopt;
  return *at;
}

void StorageTable::index_keys() {
  by_key_.reserve(std::max(expected_, dense_.size() + 1));
  for (const std::uint32_t i : dense_) by_key_.insert(maploc::detail::hash_text(state_.storages[i].key), i);
  dense_ = {};
  hashed_ = true;
}

std::size_t StorageTable::add(Storage storage, std::uint64_t present_bytes) {
  const std::size_t index = state_.storages.size();
  if (index >= std::numeric_limits<std::uint32_t>::max()) {
    fail(ErrorCode::kTorchBadPersistentId, "more than 2^32 storages", stream_name_);
  }
  if (!hashed_ && counted_key(storage.key) == dense_.size()) {
    if (dense_.empty()) dense_.reserve(expected_);
    dense_.push_back(static_cast<std::uint32_t>(index));
  } else {
    if (!hashed_) index_keys();
    // A repeated key (the tar format allows one) stays unindexed: find() returns the first.
    by_key_.insert_unique(maploc::detail::hash_text(storage.key), static_cast<std::uint32_t>(index),
                          [&](std::uint32_t i) { return state_.storages[i].key == storage.key; });
  }
  state_.storages.push_back(std::move(storage));
  state_.present_bytes.push_back(present_bytes);
  return index;
}

std::uint64_t StorageTable::add_ref(StorageRef ref) {
  state_.refs.push_back(ref);
  return state_.refs.size() - 1;
}

std::optional<pickle::Value> StorageTable::load(const pickle::Value& pid, std::uint64_t offset) {
  using pickle::Kind;
  if (!pid.is(Kind::kTuple) || pid.size() == 0) {
    bad(std::string("is a ") + std::string(pickle::kind_name(pid.kind())) +
            ", not a ('storage', type, key, location, numel) tuple",
        offset);
  }
  const auto items = pid.elements();
  std::string scratch[3];
  const auto typename_ = text_view(items[0], scratch[0]);
  if (typename_ == "module" && items.size() == 4) return items[1];  // legacy ('module', cls, file, source)
  if (typename_ != "storage") {
    bad("has typename '" + std::string(typename_.value_or(pickle::kind_name(items[0].kind()))) +
            "', expected 'storage'",
        offset);
  }
  if (items.size() != 5 && items.size() != 6) {
    bad("('storage', ...) has " + std::to_string(items.size()) + " items, expected 5 (or 6 in legacy files)",
        offset);
  }
  const pickle::Value& type = items[1];
  if (!type.is(Kind::kGlobal)) bad("storage type is a " + std::string(pickle::kind_name(type.kind())), offset);
  const auto dtype = dtype_from_storage_type(type.global_module(), type.global_name());
  if (!dtype) {
    fail(ErrorCode::kTorchUnknownDType, "unknown storage type " + global_path(type), stream_name_, offset);
  }
  const auto key_view = text_view(items[2], scratch[1]);
  const auto location = text_view(items[3], scratch[2]);
  if (!key_view || !location || items[3].is(Kind::kInt)) bad("has a key or location that is not a string", offset);
  const std::string_view key = *key_view;
  const pickle::Value& numel_v = items[4];
  if (!numel_v.is(Kind::kInt) || numel_v.is_big_int() || numel_v.as_int() < 0) {
    bad("numel of storage '" + std::string(key) + "' is not a non-negative int64", offset);
  }
  const auto numel = static_cast<std::uint64_t>(numel_v.as_int());
  std::uint64_t nbytes = 0;
  if (!checked_mul(numel, element_size(*dtype), nbytes)) {
    bad("numel " + std::to_string(numel) + " of storage '" + std::string(key) + "' overflows its byte size", offset);
  }

  std::size_t index = 0;
  if (const auto found = find(key)) {
    index = *found;
    const Storage& s = state_.storages[index];
    if (s.nbytes != nbytes) {
      fail(ErrorCode::kTorchStorageConflict,
           "storage '" + std::string(key) + "' is referenced as " + std::to_string(s.nbytes) + " bytes of " +
               std::string(dtype_name(s.dtype)) + " and as " + std::to_string(nbytes) + " bytes of " +
               std::string(dtype_name(*dtype)),
           stream_name_, offset);
    }
  } else {
    Storage s;
    s.key = key;
    s.dtype = *dtype;
    s.numel = numel;
    s.nbytes = nbytes;
    s.location = *location;
    std::uint64_t present = nbytes;
    if (locate_) locate_(s, present);
    index = add(std::move(s), present);
  }

  StorageRef ref{index, *dtype};
  if (items.size() == 6 && !items[5].is_none()) {
    // Legacy view_metadata (view_key, offset, size) in elements (§2.2): a
    // storage of its own, sharing the root's bytes.
    const pickle::Value& view = items[5];
    if (!view.is(Kind::kTuple) || view.size() != 3 || !view[1].is(Kind::kInt) || !view[2].is(Kind::kInt) ||
        view[1].is_big_int() || view[2].is_big_int() || view[1].as_int() < 0 || view[2].as_int() < 0) {
      bad("view_metadata of storage '" + std::string(key) + "' is not (view_key, offset, size)", offset);
    }
    const auto view_key = text_of(view[0]).value_or("");
    if (auto it = views_.find(view_key); it != views_.end()) return pickle::Value::external(it->second);
    const auto view_off = static_cast<std::uint64_t>(view[1].as_int());
    const auto view_len = static_cast<std::uint64_t>(view[2].as_int());
    if (view_off > numel || view_len > numel - view_off) {
      fail(ErrorCode::kTorchTensorOutOfBounds,
           "view '" + view_key + "' [" + std::to_string(view_off) + ", +" + std::to_string(view_len) +
               ") of storage '" + std::string(key) + "' lies outside its " + std::to_string(numel) + " elements",
           stream_name_, offset);
    }
    const Storage& root = state_.storages[index];
    Storage v;
    v.key = view_key;
    v.dtype = *dtype;
    v.numel = view_len;
    v.nbytes = view_len * element_size(*dtype);
    v.location = root.location;
    v.record = root.record;
    v.view_of = index;
    v.view_offset = view_off;
    const std::size_t vi = state_.storages.size();
    state_.storages.push_back(std::move(v));
    state_.present_bytes.push_back(view_len * element_size(*dtype));
    const auto handle = add_ref({vi, *dtype});
    views_.emplace(view_key, handle);
    return pickle::Value::external(handle);
  }
  return pickle::Value::external(add_ref(ref));
}

}  // namespace maploc::torch
