// node.h - arena-owned nodes behind boxed pickle Values (internal to src/pickle).
#pragma once

#include <cstdint>
#include <deque>
#include <new>
#include <memory_resource>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include "maploc/pickle/value.h"
#include "support/flat_index.h"
#include "support/huge_chunks.h"

namespace maploc::pickle::detail {

/// Common header. `depth` is the nesting depth known when the node was last
/// changed (exact for immutable nodes, a lower bound for mutable ones).
struct Node {
  Kind kind;
  bool has_parent = false;  ///< nested into another node at least once
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
using KeyIndex = maploc::detail::FlatIndex;

/// tuple, list, set, frozenset.
struct SeqNode : Node {
  std::pmr::vector<Value> items;
  KeyIndex* index = nullptr;  ///< sets only; owned by the Arena
  /// Tuples and frozensets never change once built, so their key hash is
  /// computed once: memo-shared nesting would otherwise make hashing
  /// exponential (a 12 KB pickle took minutes before, found by fuzz_safetensors).
  std::uint64_t key_hash = 0;
  std::uint8_t key_hash_state = 0;  ///< 0 not computed, 1 hashable, 2 unhashable
  SeqNode(Kind k, std::pmr::memory_resource* pool) : Node(k), items(pool) {}
};

struct DictNode : Node {
  std::pmr::vector<DictItem> items;
  KeyIndex* index = nullptr;  ///< owned by the Arena
  explicit DictNode(std::pmr::memory_resource* pool) : Node(Kind::kDict), items(pool) {}
};

/// The globals whose calls the machine interprets or treats as mappings,
/// recognised once when the name is read (REDUCE meets them memoized, again and again).
enum class GlobalRole : std::uint8_t { kOther, kCodecsEncode, kByteArray, kOrderedDict, kDict, kDefaultDict, kCounter };

struct GlobalNode : Node {
  std::string_view module;
  std::string_view name;
  GlobalRole role;
  GlobalNode(std::string_view m, std::string_view n, GlobalRole r)
      : Node(Kind::kGlobal), module(m), name(n), role(r) {}
};

/// What APPEND(S), SETITEM(S) and BUILD did to the result of a call.
struct CallExtras {
  std::pmr::vector<Value> appended;
  std::pmr::vector<DictItem> set_items;
  std::pmr::vector<Value> states;
  KeyIndex* index = nullptr;  ///< over set_items' keys, as a dict's (see items_set); owned by the Arena
  explicit CallExtras(std::pmr::memory_resource* pool) : appended(pool), set_items(pool), states(pool) {}
};

/// REDUCE / NEWOBJ / NEWOBJ_EX / INST / OBJ and what later opcodes did to the result.
struct CallNode : Node {
  CallOp op;
  Value callable;
  Value args;
  Value kwargs;
  /// Made by the first APPEND/SETITEM/BUILD on the result: most calls (a
  /// tensor's rebuild, its empty OrderedDict of hooks) never get one.
  CallExtras* extra = nullptr;
  CallNode(Kind k, CallOp o, Value c, Value a, Value kw) : Node(k), op(o), callable(c), args(a), kwargs(kw) {}

  std::span<const Value> appended() const noexcept { return extra ? std::span<const Value>(extra->appended) : std::span<const Value>(); }
  std::span<const DictItem> set_items() const noexcept {
    return extra ? std::span<const DictItem>(extra->set_items) : std::span<const DictItem>();
  }
  std::span<const Value> states() const noexcept { return extra ? std::span<const Value>(extra->states) : std::span<const Value>(); }
};

struct PersistentNode : Node {
  Value pid;
  explicit PersistentNode(Value p) : Node(Kind::kPersistent), pid(p) {}
};

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

/// Under AddressSanitizer every node and item array is its own malloc with
/// red zones, so that the fuzzers still see an overrun of one node's items;
/// what is still held when the Arena goes is freed then.
class TrackedMemory final : public std::pmr::memory_resource {
 public:
  TrackedMemory() = default;
  TrackedMemory(const TrackedMemory&) = delete;
  TrackedMemory& operator=(const TrackedMemory&) = delete;
  ~TrackedMemory() override {
    for (void* p : live_) ::operator delete(p);
  }

 private:
  void* do_allocate(std::size_t bytes, std::size_t) override {
    void* p = ::operator new(bytes);
    live_.insert(p);
    return p;
  }
  void do_deallocate(void* p, std::size_t, std::size_t) override {
    live_.erase(p);
    ::operator delete(p);
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }
  std::unordered_set<void*> live_;
};

/// Owns every node of one Result. Nodes and their item arrays come from one
/// monotonic pool (not a malloc per tuple: docs/performance.md, "Why the code
/// is shaped so") and are never destroyed one by one: a node holds only
/// handles and arrays of the same pool, so the Arena's end frees them all at
/// once, however deeply they nest. The few things a node owns outside the
/// pool (key indexes of large containers, decoded text) sit in deques here.
/// A growing list leaves its old arrays in the pool, at most twice its final
/// size, and Machine::account() bounds what the pickle may build.
class Arena {
 public:
  /// `expected_bytes`: the size of the first chunk (later ones double).
  explicit Arena(std::size_t expected_bytes) : pool(expected_bytes, &chunks) {}
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  /// A node of type T made in the arena's memory; never destroyed (see above).
  template <typename T, typename... Args>
  T& make(Args&&... args) {
    static_assert(std::is_trivially_destructible_v<T> || std::is_base_of_v<Node, T> ||
                  std::is_same_v<T, CallExtras>);
    return *::new (memory->allocate(sizeof(T), alignof(T))) T(std::forward<Args>(args)...);
  }

  KeyIndex* new_index() { return &indexes.emplace_back(); }

  maploc::detail::HugeChunks chunks;              // declared first: destroyed last
  std::pmr::monotonic_buffer_resource pool;
  TrackedMemory tracked;
  /// Where nodes and item arrays come from: the pool, or under AddressSanitizer `tracked`.
  std::pmr::memory_resource* const memory = kSanitized ? static_cast<std::pmr::memory_resource*>(&tracked) : &pool;
  std::deque<KeyIndex> indexes;                 ///< behind the index pointers of large dicts and sets
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
