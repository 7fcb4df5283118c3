// node.h - arena-owned nodes behind boxed pickle Values (internal to src/pickle).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "maploc/pickle/value.h"

namespace maploc::pickle::detail {

/// Common header. `depth` is the nesting depth known when the node was last
/// changed (exact for immutable nodes, a lower bound for mutable ones).
struct Node {
  Kind kind;
  std::uint32_t depth = 1;
  std::uint32_t visit = 0;  ///< scratch stamp for the final depth walk
  explicit Node(Kind k) : kind(k) {}
};

/// str, bytes, bytearray and big ints: bytes viewed in the stream or owned by the arena.
struct BlobNode : Node {
  std::span<const std::uint8_t> data;  ///< big int: little-endian two's complement
  BlobNode(Kind k, std::span<const std::uint8_t> d) : Node(k), data(d) {}
};

/// Hash index over keys/elements, built once a container grows past a few
/// items so that dict/set insertion stays linear (CPython semantics: a dict
/// key set twice keeps its first position and its last value).
using KeyIndex = std::unordered_multimap<std::uint64_t, std::uint32_t>;

/// tuple, list, set, frozenset.
struct SeqNode : Node {
  std::vector<Value> items;
  std::unique_ptr<KeyIndex> index;  ///< sets only
  /// Tuples and frozensets never change once built, so their key hash is
  /// computed once: memo-shared nesting would otherwise make hashing
  /// exponential (a 12 KB pickle took minutes before, found by fuzz_safetensors).
  std::uint64_t key_hash = 0;
  std::uint8_t key_hash_state = 0;  ///< 0 not computed, 1 hashable, 2 unhashable
  explicit SeqNode(Kind k) : Node(k) {}
};

struct DictNode : Node {
  std::vector<DictItem> items;
  std::unique_ptr<KeyIndex> index;
  DictNode() : Node(Kind::kDict) {}
};

struct GlobalNode : Node {
  std::string_view module;
  std::string_view name;
  GlobalNode(std::string_view m, std::string_view n) : Node(Kind::kGlobal), module(m), name(n) {}
};

/// REDUCE / NEWOBJ / NEWOBJ_EX / INST / OBJ and what later opcodes did to the result.
struct CallNode : Node {
  CallOp op;
  Value callable;
  Value args;
  Value kwargs;
  std::vector<Value> appended;
  std::vector<DictItem> set_items;
  std::vector<Value> states;
  CallNode(Kind k, CallOp o, Value c, Value a, Value kw)
      : Node(k), op(o), callable(c), args(a), kwargs(kw) {}
};

struct PersistentNode : Node {
  Value pid;
  explicit PersistentNode(Value p) : Node(Kind::kPersistent), pid(p) {}
};

/// Owns every node of one Result. Deques keep node addresses stable and
/// allocate in chunks; nodes hold only flat vectors of handles, so tearing
/// down a deeply nested tree never recurses.
class Arena {
 public:
  std::deque<BlobNode> blobs;
  std::deque<SeqNode> seqs;
  std::deque<DictNode> dicts;
  std::deque<GlobalNode> globals;
  std::deque<CallNode> calls;
  std::deque<PersistentNode> persistents;
  std::deque<std::vector<std::uint8_t>> owned;  ///< decoded text that is not a view of the stream
  std::vector<Value> global_values;             ///< every kGlobal, in stream order
};

/// The only code that makes boxed Values (friend of Value).
class Builder {
 public:
  static Value box(Kind kind, Node* node) noexcept { return Value(kind, node); }
  static Node* node(const Value& v) noexcept { return v.node(); }
};

template <typename T>
T& node_as(const Value& v) noexcept {
  return *static_cast<T*>(Builder::node(v));
}

}  // namespace maploc::pickle::detail
