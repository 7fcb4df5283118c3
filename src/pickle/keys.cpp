// keys.cpp - hashing and equality for dict keys and set elements, with a lazily built index.
#include "keys.h"

#include <cmath>
#include <cstring>
#include <string_view>

namespace maploc::pickle::detail {

namespace {

constexpr std::size_t kLinearBelow = 8;  // small containers compare linearly

using maploc::detail::hash_bytes;
using maploc::detail::hash_combine;
using maploc::detail::hash_word;

std::uint64_t hash_view(std::string_view s, std::uint64_t domain) noexcept {
  return maploc::detail::hash_text(s, domain);
}

// Numbers that Python considers equal share one representation.
bool small_number(const Value& v, std::int64_t& out) noexcept {
  switch (v.kind()) {
    case Kind::kBool: out = v.as_bool() ? 1 : 0; return true;
    case Kind::kInt:
      if (v.is_big_int()) return false;
      out = v.as_int();
      return true;
    case Kind::kFloat: {
      const double f = v.as_float();
      if (std::trunc(f) != f || !(f >= -9.2233720368547758e18 && f < 9.2233720368547758e18))
        return false;
      out = static_cast<std::int64_t>(f);
      return true;
    }
    default: return false;
  }
}

bool is_number(Kind k) noexcept { return k == Kind::kBool || k == Kind::kInt || k == Kind::kFloat; }

}  // namespace

bool key_hash(const Value& v, std::uint64_t& out) {
  std::int64_t n = 0;
  if (small_number(v, n)) {
    out = hash_word(static_cast<std::uint64_t>(n), 0x11);  // keyed: `i << 32` keys do not collide
    return true;
  }
  switch (v.kind()) {
    case Kind::kNone: out = hash_word(0, 0x5); return true;
    case Kind::kInt: out = hash_bytes(node_as<BlobNode>(v).data, 0x12); return true;
    case Kind::kFloat: {
      const double f = v.as_float();
      std::uint64_t bits;
      std::memcpy(&bits, &f, 8);
      out = hash_word(bits, 0x13);
      return true;
    }
    case Kind::kStr: out = hash_bytes(node_as<BlobNode>(v).data, 0x21); return true;
    case Kind::kBytes: out = hash_bytes(node_as<BlobNode>(v).data, 0x22); return true;
    case Kind::kGlobal: {
      const auto& g = node_as<GlobalNode>(v);
      const std::string_view m = g.module, nm = g.name;
      out = hash_combine(hash_view(m, 0x31), hash_view(nm, 0x32));
      return true;
    }
    case Kind::kTuple:
    case Kind::kFrozenSet: {
      // Immutable: hash once per node (depth is bounded by the nesting limit,
      // and the cache keeps memo-shared subtrees from being hashed again).
      auto& node = node_as<SeqNode>(v);
      if (node.key_hash_state != 0) {
        out = node.key_hash;
        return node.key_hash_state == 1;
      }
      const bool ordered = v.kind() == Kind::kTuple;
      std::uint64_t h = hash_word(node.items.size(), ordered ? 0x41 : 0x42);
      std::uint64_t sum = 0;
      for (const auto& e : node.items) {
        std::uint64_t eh;
        if (!key_hash(e, eh)) {
          node.key_hash_state = 2;
          return false;
        }
        if (ordered)
          h = hash_combine(h, eh);
        else
          sum += eh;
      }
      out = node.key_hash = ordered ? h : hash_combine(h, sum);
      node.key_hash_state = 1;
      return true;
    }
    case Kind::kReduce:
    case Kind::kObject:
    case Kind::kPersistent:
      out = hash_word(reinterpret_cast<std::uintptr_t>(v.identity()), 0x51);
      return true;
    case Kind::kExternal: out = hash_word(v.external_handle(), 0x52); return true;
    default: return false;  // list, dict, set, bytearray: unhashable
  }
}

namespace {
template <typename KeyOf>
std::int64_t lookup(const KeyIndex* index, std::size_t size, KeyOf key_of, const Value& key, std::uint64_t h);
}  // namespace

bool keys_equal(const Value& a, const Value& b) {
  if (is_number(a.kind()) && is_number(b.kind())) {
    std::int64_t x = 0, y = 0;
    const bool sx = small_number(a, x), sy = small_number(b, y);
    if (sx && sy) return x == y;
    if (sx || sy) return false;
    if (a.kind() == Kind::kFloat && b.kind() == Kind::kFloat) return a.as_float() == b.as_float();
    if (a.is_big_int() && b.is_big_int()) {
      const auto da = node_as<BlobNode>(a).data, db = node_as<BlobNode>(b).data;
      return da.size() == db.size() && std::memcmp(da.data(), db.data(), da.size()) == 0;
    }
    return false;
  }
  if (a.kind() != b.kind()) return false;
  if (a.same_node(b)) return true;  // one memoized node: equal without a deep walk
  if (a.kind() == Kind::kTuple || a.kind() == Kind::kFrozenSet) {
    std::uint64_t ha = 0, hb = 0;  // cached after the first time: a cheap early "no"
    if (key_hash(a, ha) && key_hash(b, hb) && ha != hb) return false;
  }
  switch (a.kind()) {
    case Kind::kNone: return true;
    case Kind::kStr:
    case Kind::kBytes: {
      const auto da = node_as<BlobNode>(a).data, db = node_as<BlobNode>(b).data;
      return da.size() == db.size() && (da.empty() || std::memcmp(da.data(), db.data(), da.size()) == 0);
    }
    case Kind::kGlobal: {
      const auto &ga = node_as<GlobalNode>(a), &gb = node_as<GlobalNode>(b);
      return ga.module == gb.module && ga.name == gb.name;
    }
    case Kind::kTuple: {
      const auto &ia = node_as<SeqNode>(a).items, &ib = node_as<SeqNode>(b).items;
      if (ia.size() != ib.size()) return false;
      for (std::size_t k = 0; k < ia.size(); ++k)
        if (!keys_equal(ia[k], ib[k])) return false;
      return true;
    }
    case Kind::kFrozenSet: {
      // Elements are distinct (built by set_add): equal when every element
      // of a is in b, looked up through b's hash index (linear, not n^2).
      auto& nb = node_as<SeqNode>(b);
      const auto& ia = node_as<SeqNode>(a).items;
      if (ia.size() != nb.items.size()) return false;
      auto key_of = [&](std::size_t k) -> const Value& { return nb.items[k]; };
      for (const auto& x : ia) {
        std::uint64_t hx = 0;
        key_hash(x, hx);  // every element was hashable
        if (lookup(nb.index, nb.items.size(), key_of, x, hx) < 0) return false;
      }
      return true;
    }
    case Kind::kExternal: return a.external_handle() == b.external_handle();
    default: return a.same_node(b);
  }
}

namespace {
// Finds the position of an equal key through the hash index, or linearly in
// a container too small to have one; returns -1 when absent.
template <typename KeyOf>
std::int64_t lookup(const KeyIndex* index, std::size_t size, KeyOf key_of, const Value& key, std::uint64_t h) {
  if (index == nullptr) {
    for (std::size_t k = 0; k < size; ++k)
      if (keys_equal(key_of(k), key)) return static_cast<std::int64_t>(k);
    return -1;
  }
  const auto at = index->find(h, [&](std::uint32_t pos) { return keys_equal(key_of(pos), key); });
  return at ? static_cast<std::int64_t>(*at) : -1;
}

// After an insertion: adds the new key to the index, or builds the index once
// the container has grown to kLinearBelow keys (a container that size always has one).
// Keys that cannot be hashed (an unknown class's __setitem__ keeps them) stay out of it:
// no hashable key equals them, and given one hash they would make one long probe run.
template <typename KeyOf>
void index_new_key(Arena& arena, KeyIndex*& index, std::size_t size, KeyOf key_of, std::uint64_t h) {
  if (index != nullptr) {
    index->insert(h, static_cast<std::uint32_t>(size - 1));
    return;
  }
  if (size < kLinearBelow) return;
  index = arena.new_index();
  index->reserve(size * 2);
  for (std::size_t k = 0; k < size; ++k) {
    std::uint64_t kh = 0;
    if (key_hash(key_of(k), kh)) index->insert(kh, static_cast<std::uint32_t>(k));
  }
}
}  // namespace

bool items_set(Arena& arena, std::pmr::vector<DictItem>& items, KeyIndex*& index, const Value& key,
               const Value& value) {
  std::uint64_t h = 0;
  if (!key_hash(key, h)) return false;
  auto key_of = [&](std::size_t k) -> const Value& { return items[k].key; };
  const std::int64_t at = lookup(index, items.size(), key_of, key, h);
  if (at >= 0) {
    items[static_cast<std::size_t>(at)].value = value;
    return true;
  }
  items.push_back({key, value});
  index_new_key(arena, index, items.size(), key_of, h);
  return true;
}

bool dict_set(Arena& arena, DictNode& dict, const Value& key, const Value& value) {
  return items_set(arena, dict.items, dict.index, key, value);
}

bool set_add(Arena& arena, SeqNode& set, const Value& element) {
  std::uint64_t h = 0;
  if (!key_hash(element, h)) return false;
  auto key_of = [&](std::size_t k) -> const Value& { return set.items[k]; };
  if (lookup(set.index, set.items.size(), key_of, element, h) >= 0) return true;
  set.items.push_back(element);
  index_new_key(arena, set.index, set.items.size(), key_of, h);
  return true;
}

}  // namespace maploc::pickle::detail
