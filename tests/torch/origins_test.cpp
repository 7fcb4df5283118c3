// origins_test.cpp - tensor_node() and object_tensors() are two directions of one origins table: on every fixture they agree.
#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "maploc/torch/checkpoint.h"
#include "torch/torch_test_util.h"

namespace maploc::test {
namespace {

namespace fs = std::filesystem;

struct Agreement {
  std::size_t nodes = 0;    ///< tensors with a tensor_node
  std::size_t entries = 0;  ///< object_tensors entries with a node
  std::vector<std::string> broken;
};

// What holds (docs/torch.md, "Origins"):
//  * node -> tensor: every tensor i with tensor_node(i) != nullptr that the walk names (not a
//    component of another tensor, not held in another tensor's state) has an object_tensors()
//    entry whose node is tensor_node(i)'s identity and whose tensor is i;
//  * tensor -> node: every object_tensors() entry with a node has tensor_node(entry.tensor) !=
//    nullptr, and it is that very node. (An old-style tensor, a tensor class and BUILD, is named at
//    a row of its own whose node is not its rebuild call's; no fixture holds one that differs.)
//    Tied weights: one entry per path (several entries, one node).
Agreement agree(const torch::Checkpoint& c) {
  Agreement a;
  const auto& tensors = c.tensors();
  std::set<std::pair<const void*, std::size_t>> entries;
  for (const auto& e : c.object_tensors()) {
    if (e.node != nullptr) entries.emplace(e.node, e.tensor);
    if (e.tensor >= tensors.size()) a.broken.push_back("entry names tensor " + std::to_string(e.tensor));
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const pickle::Value* node = c.tensor_node(i);
    if (node == nullptr) continue;
    ++a.nodes;
    if (tensors[i].is_component || tensors[i].held_by) continue;
    if (!entries.count({node->identity(), i})) {
      a.broken.push_back("tensor " + std::to_string(i) + " '" + tensors[i].name + "' has a node and no entry");
    }
  }
  for (const auto& e : c.object_tensors()) {
    if (e.node == nullptr || e.tensor >= tensors.size()) continue;
    ++a.entries;
    const pickle::Value* node = c.tensor_node(e.tensor);
    if (node == nullptr) {
      a.broken.push_back("entry of tensor " + std::to_string(e.tensor) + " '" + tensors[e.tensor].name +
                         "' maps back to no node");
    } else if (node->identity() != e.node) {
      a.broken.push_back("entry of tensor " + std::to_string(e.tensor) + " '" + tensors[e.tensor].name +
                         "' maps back to another node");
    }
  }
  return a;
}

}  // namespace

TEST_CASE("tensor_node and object_tensors agree on every fixture that opens", "[torch]") {
  std::size_t nodes = 0, entries = 0;
  const std::size_t opened = for_each_fixture_that_opens([&](const fs::path& p, const torch::Checkpoint& c) {
    const Agreement a = agree(c);
    nodes += a.nodes;
    entries += a.entries;
    INFO(p.string() << ": " << a.broken.size() << " disagreements; the first: "
                    << (a.broken.empty() ? std::string() : a.broken.front()));
    CHECK(a.broken.empty());
  });
  // The walk must have seen the corpus: fixtures of every generation hold rebuilt tensors.
  WARN(opened << " fixtures opened, " << nodes << " tensors with a node, " << entries << " entries with a node");
  CHECK(opened > 100);
  CHECK(nodes > 1000);
  CHECK(entries >= nodes / 2);
}

}  // namespace maploc::test
