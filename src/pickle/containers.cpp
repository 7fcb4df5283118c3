// containers.cpp - the Machine mutating containers: SETITEM(S) on dicts and mapping calls, APPEND(S), ADDITEMS.
#include "stack_machine.h"

#include "keys.h"

namespace maploc::pickle {

detail::CallExtras& Machine::extras(CallNode& c) {
  if (c.extra == nullptr) {
    account(sizeof(detail::CallExtras));
    c.extra = &arena_.make<detail::CallExtras>(arena_.memory);
  }
  return *c.extra;
}

void Machine::add_to_set(SeqNode& set, const Value& e) {
  check_items(set.items.size(), 1);
  account(sizeof(Value));
  if (!detail::set_add(arena_, set, e))
    in_.fail(ErrorCode::kPickleTypeError,
             "unhashable " + std::string(kind_name(e.kind())) + " in a set");
  nest(set, e);
}

void Machine::set_item(Value& target, const Value& key, const Value& value) {
  if (target.kind() == Kind::kDict) {
    auto& d = node_as<DictNode>(target);
    check_items(d.items.size(), 1);
    account(sizeof(DictItem));
    if (!detail::dict_set(arena_, d, key, value))
      in_.fail(ErrorCode::kPickleTypeError,
               "unhashable dict key of kind " + std::string(kind_name(key.kind())));
    nest(d, key);
    nest(d, value);
  } else if (target.kind() == Kind::kReduce || target.kind() == Kind::kObject) {
    // An OrderedDict or other mapping rebuilt by a call: record the items
    // as a dict keeps them (a key set twice keeps its place, takes the new value).
    auto& c = node_as<CallNode>(target);
    auto& extra = extras(c);
    check_items(extra.set_items.size(), 1);
    account(sizeof(DictItem));
    if (!detail::items_set(arena_, extra.set_items, extra.index, key, value)) {
      if (is_dict_class(c.callable))
        in_.fail(ErrorCode::kPickleTypeError,
                 "unhashable dict key of kind " + std::string(kind_name(key.kind())));
      extra.set_items.push_back({key, value});  // an unknown class's __setitem__: keep every item
    }
    nest(c, key);
    nest(c, value);
  } else {
    in_.fail(ErrorCode::kPickleTypeError,
             "cannot set items on a " + std::string(kind_name(target.kind())));
  }
}

void Machine::append(Value& target, std::span<const Value> items) {
  std::pmr::vector<Value>* dest = nullptr;
  Node* node = Builder::node(target);
  if (target.kind() == Kind::kList)
    dest = &node_as<SeqNode>(target).items;
  else if (target.kind() == Kind::kReduce || target.kind() == Kind::kObject)
    dest = &extras(node_as<CallNode>(target)).appended;  // a list subclass rebuilt by a call
  else
    in_.fail(ErrorCode::kPickleTypeError,
             "cannot append to a " + std::string(kind_name(target.kind())));
  check_items(dest->size(), items.size());
  account(items.size() * sizeof(Value));
  for (const auto& e : items) nest(*node, e);
  dest->insert(dest->end(), items.begin(), items.end());
}

}  // namespace maploc::pickle
