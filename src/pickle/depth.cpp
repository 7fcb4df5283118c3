// depth.cpp - the Machine's final walk bounding how deep the finished tree nests.
#include "stack_machine.h"

namespace maploc::pickle {

/// The incremental depths are exact for immutable values but only lower
/// bounds for lists/dicts filled through the memo, so the finished tree is
/// walked once (iteratively, each node once) to bound the depth any
/// recursive consumer will see.
void Machine::check_depth(const Value& root) {
  struct Frame {
    Node* node;
    std::size_t next;
  };
  auto child = [](Node* node, std::size_t i) -> Node* {
    auto pick = [](const Value& v) { return Builder::node(v); };
    switch (node->kind) {
      case Kind::kTuple:
      case Kind::kList:
      case Kind::kSet:
      case Kind::kFrozenSet: {
        auto& items = static_cast<SeqNode*>(node)->items;
        return i < items.size() ? pick(items[i]) : reinterpret_cast<Node*>(-1);
      }
      case Kind::kDict: {
        auto& items = static_cast<DictNode*>(node)->items;
        if (i >= items.size() * 2) return reinterpret_cast<Node*>(-1);
        return pick(i % 2 ? items[i / 2].value : items[i / 2].key);
      }
      case Kind::kReduce:
      case Kind::kObject: {
        auto* c = static_cast<CallNode*>(node);
        if (i == 0) return pick(c->callable);
        if (i == 1) return pick(c->args);
        if (i == 2) return pick(c->kwargs);
        i -= 3;
        const auto appended = c->appended();
        const auto set_items = c->set_items();
        const auto states = c->states();
        if (i < appended.size()) return pick(appended[i]);
        i -= appended.size();
        if (i < set_items.size() * 2) return pick(i % 2 ? set_items[i / 2].value : set_items[i / 2].key);
        i -= set_items.size() * 2;
        if (i < states.size()) return pick(states[i]);
        return reinterpret_cast<Node*>(-1);
      }
      case Kind::kPersistent:
        return i == 0 ? pick(static_cast<PersistentNode*>(node)->pid) : reinterpret_cast<Node*>(-1);
      default: return reinterpret_cast<Node*>(-1);
    }
  };
  Node* start = Builder::node(root);
  if (start == nullptr) return;
  const Node* kEnd = reinterpret_cast<Node*>(-1);
  std::vector<Frame> path{{start, 0}};
  start->visit = 1;
  while (!path.empty()) {
    Frame& f = path.back();
    Node* c = child(f.node, f.next++);
    if (c == kEnd) {
      path.pop_back();
      continue;
    }
    if (c == nullptr || c->visit == 1) continue;
    c->visit = 1;
    if (path.size() >= limits_.pickle_max_nesting_depth)
      throw Error(ErrorCode::kPickleLimitNesting, Stage::kPickle,
                  "STOP: the value nests deeper than " + decimal(limits_.pickle_max_nesting_depth) +
                      " (raise Limits::pickle_max_nesting_depth)",
                  result_.end_offset_ - 1, options_.stream_name);
    path.push_back({c, 0});
  }
}

}  // namespace maploc::pickle
