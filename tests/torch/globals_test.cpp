// globals_test.cpp - the globals table (src/torch/globals.cpp) against torch's own weights_only allowlist.
#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <string>

#include "globals.h"

namespace maploc::test {
namespace {

// torch._weights_only_unpickler._get_allowed_globals() of torch 2.15, as torch listed it
// (fixtures/globals/make_allowlist.py).
std::set<std::string> torch_allowlist() {
  std::ifstream in(std::string(MAPLOC_FIXTURES_DIR) + "/globals/weights_only_allowlist.t215.txt");
  REQUIRE(in.good());
  std::set<std::string> names;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') names.insert(line);
  }
  REQUIRE(names.size() > 100);
  return names;
}

bool allowed(const std::string& path) {
  const auto dot = path.rfind('.');
  REQUIRE(dot != std::string::npos);
  return (torch::global_entry(path.substr(0, dot), path.substr(dot + 1)).allowed & torch::kWeightsOnly) != 0;
}

}  // namespace

TEST_CASE("every global torch 2.15's weights_only allows, the table allows", "[torch]") {
  for (const std::string& name : torch_allowlist()) {
    INFO(name);
    CHECK(allowed(name));
  }
}

TEST_CASE("every row the table marks weights_only-allowed, torch 2.15 allows", "[torch]") {
  const auto torch_names = torch_allowlist();
  for (const torch::GlobalEntry& row : torch::global_table()) {
    if ((row.allowed & torch::kWeightsOnly) == 0 || row.name == "<dtype>" || row.name == "*") continue;
    const std::string path = std::string(row.module) + "." + std::string(row.name);
    INFO(path);
    CHECK(torch_names.count(path) == 1);
  }
}

TEST_CASE("globals outside torch's allowlist are reported, not allowed", "[torch]") {
  CHECK_FALSE(allowed("builtins.eval"));
  CHECK_FALSE(allowed("os.system"));
  CHECK_FALSE(allowed("torch.load"));               // the torch module's default row: a leaf call, not allowed
  CHECK_FALSE(allowed("torch.ComplexFloatTensor")); // a tensor class torch leaves out
  CHECK_FALSE(allowed("torch.sparse.BoolTensor"));
  CHECK(allowed("torch.float8_e5m2"));              // the dtype family
  CHECK(torch::global_entry("torch._utils", "_rebuild_tensor_v2").use == torch::GlobalUse::kRebuild);
  CHECK(torch::global_entry("numpy.core.multiarray", "_reconstruct").use == torch::GlobalUse::kLeaf);
  CHECK(torch::global_entry("mymodel", "Net").use == torch::GlobalUse::kNone);
}

}  // namespace maploc::test
