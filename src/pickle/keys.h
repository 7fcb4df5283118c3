// keys.h - Python's dict-key and set-element equality over inert values (internal).
#pragma once

#include <cstdint>

#include "node.h"

namespace maploc::pickle::detail {

/// Hash of a hashable value; false for unhashable kinds (list, dict, set, bytearray).
/// Equal keys (Python ==: True == 1 == 1.0, str by content, tuples elementwise,
/// globals by name, objects by identity) hash equally.
bool key_hash(const Value& v, std::uint64_t& out);
/// Python == for hashable values (NaN is never equal, frozensets as sets).
bool keys_equal(const Value& a, const Value& b);

/// The inserting functions build a container's hash index in `arena` once it holds a few keys.
/// dict[key] = value: a new key is appended, an existing key keeps its
/// position and takes the new value. Returns false when the key is unhashable.
bool dict_set(Arena& arena, DictNode& dict, const Value& key, const Value& value);
/// The same on the items SETITEM(S) gave a mapping rebuilt by a call (an OrderedDict).
bool items_set(Arena& arena, std::pmr::vector<DictItem>& items, KeyIndex*& index, const Value& key,
               const Value& value);
/// set.add(element): an element already present is kept. Returns false when unhashable.
bool set_add(Arena& arena, SeqNode& set, const Value& element);

}  // namespace maploc::pickle::detail
