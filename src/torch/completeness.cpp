// completeness.cpp - nothing silently dropped: every storage the file holds is reached by a named
// tensor, or is reported (docs/torch.md, "Nothing silently dropped").
#include <string>
#include <vector>

#include "state.h"

namespace maploc::torch {

void check_completeness(Checkpoint::State& st) {
  std::vector<bool> reached(st.storages.size(), false);
  for (const Tensor& t : st.tensors) {
    if (!t.storage || *t.storage >= reached.size()) continue;
    reached[*t.storage] = true;
    // A view storage (legacy view_metadata, tar views) reaches its root.
    if (const auto& root = st.storages[*t.storage].view_of; root && *root < reached.size()) reached[*root] = true;
  }
  for (std::size_t s : st.consumed) {
    if (s < reached.size()) reached[s] = true;
  }
  st.unreferenced.clear();
  for (std::size_t i = 0; i < reached.size(); ++i) {
    if (!reached[i]) st.unreferenced.push_back(i);
  }
  const auto about = [&](const Storage& s) {
    return "storage '" + s.key + "' (" + s.record + ", " + std::to_string(s.nbytes) + " bytes, " + s.location + ")";
  };
  for (std::size_t i : st.unreferenced) {
    const Storage& s = st.storages[i];
    const std::string what = st.path + ": " + about(s) +
                             " is reached by no tensor maploc names: torch.load returns it inside an object maploc does "
                             "not walk ('maploc dis " + st.path + "' shows where its persistent id is)";
    if (st.options.strict) fail(ErrorCode::kTorchIncomplete, what + " (strict)", s.key);
    st.diagnose(what);
  }
  for (const std::string& r : st.unknown_rebuilds) {
    const std::string what = st.path + ": a call of " + r + ", a rebuild function maploc does not know: what it builds is not "
                             "listed (its storages are reported if no other tensor reaches them)";
    if (st.options.strict) fail(ErrorCode::kTorchIncomplete, what + " (strict)", r);
    st.diagnose(what);
  }
}

}  // namespace maploc::torch
