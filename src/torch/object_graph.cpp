// object_graph.cpp - the walk's object identity: cycles walked once, shared objects once per path.
#include "interpreter.h"

#include <algorithm>

namespace maploc::torch {

// Tarjan's strongly connected components, run by the naming walk itself
// (docs/torch.md, "Names"). A node met again while it is open (on the current
// path, or walked on a cycle whose first object is still being walked) is on a
// cycle with that path: not followed. When the first object of a component is
// left, the component closes: on a cycle, its objects are never walked again;
// a lone object goes back to new (walked once per path, as tied weights need),
// or to tensor-free when its walk found no tensor. Everything a closed lone
// object reaches is closed too, so a later walk of it cannot meet an open node,
// and tensor-free holds whichever path reaches it.
std::optional<Interpreter::Entered> Interpreter::enter(const void* node) {
  const auto word = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(node));
  const auto fresh = static_cast<std::uint32_t>(marks_.size());
  const auto found = mark_index_.insert_unique(detail::hash_word(word, 0x67726170), fresh,
                                               [&](std::uint32_t i) { return marks_[i].node == node; });
  if (!found) marks_.push_back(NodeMark{node});
  const std::uint32_t slot = found.value_or(fresh);
  NodeMark& m = marks_[slot];
  switch (m.mark) {
    case Mark::kOpen:
      if (current_) {
        NodeMark& outer = marks_[*current_];
        outer.low = std::min(outer.low, m.index);
        if (*current_ == slot) outer.self_loop = true;
      }
      return std::nullopt;
    case Mark::kCyclic:
    case Mark::kTensorFree:
      return std::nullopt;
    case Mark::kNew:
      break;
  }
  m.index = m.low = next_index_++;
  m.mark = Mark::kOpen;
  m.self_loop = false;
  open_.push_back(slot);
  Entered entered{slot, state_.tensors.size(), current_};
  current_ = slot;
  return entered;
}

void Interpreter::leave(const Entered& entered) {
  current_ = entered.outer;
  const NodeMark& m = marks_[entered.slot];
  if (current_) marks_[*current_].low = std::min(marks_[*current_].low, m.low);
  if (m.low < m.index) return;  // on a cycle through an object entered earlier: its component stays open
  const bool cyclic = open_.back() != entered.slot || m.self_loop;
  const bool tensor_free = state_.tensors.size() == entered.tensors_before;
  for (;;) {
    const std::uint32_t slot = open_.back();
    open_.pop_back();
    marks_[slot].mark = cyclic ? Mark::kCyclic : tensor_free ? Mark::kTensorFree : Mark::kNew;
    if (slot == entered.slot) break;
  }
}

}  // namespace maploc::torch
