// origins.cpp - the origins table (which pickle object made which tensor) and the two directions derived from it.
#include "state.h"

namespace maploc::torch {

void index_origins(Checkpoint::State& st) {
  st.tensor_origin.assign(st.tensors.size(), kNoOrigin);
  st.object_tensors.clear();
  for (std::size_t k = 0; k < st.origins.size(); ++k) {
    const Origin& o = st.origins[k];
    // Rows of one tensor come inner call first (an argument is rebuilt before its caller returns):
    // the last is the outermost call, the tensor's node.
    if (o.rebuilt && o.tensor < st.tensor_origin.size()) st.tensor_origin[o.tensor] = k;
    if (o.named) st.object_tensors.push_back({o.node.is_none() ? nullptr : o.node.identity(), o.handle, o.tensor});
  }
}

const pickle::Value* Checkpoint::tensor_node(std::size_t i) const noexcept {
  if (state_->format == Format::kSet || i >= state_->tensor_origin.size()) return nullptr;
  const std::size_t k = state_->tensor_origin[i];
  return k == kNoOrigin ? nullptr : &state_->origins[k].node;
}

const std::vector<ObjectTensor>& Checkpoint::object_tensors() const noexcept { return state_->object_tensors; }

}  // namespace maploc::torch
