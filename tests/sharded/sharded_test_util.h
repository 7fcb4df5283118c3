// sharded_test_util.h - fixture paths and manifest checks shared by the sharded-set tests.
#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "maploc/torch/checkpoint.h"
#include "maploc/torch/dtype.h"
#include "maploc/torch/hash.h"

namespace maploc::test {

inline std::filesystem::path sharded_dir() { return std::filesystem::path(MAPLOC_FIXTURES_DIR) / "sharded"; }

/// A file's bytes as a string (fails the test when it cannot be read).
inline std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE(in.good());
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// The torch-made manifest of a fixture set (fails the test when it is missing).
inline nlohmann::json set_manifest(const std::string& set) {
  std::ifstream in(sharded_dir() / set / "manifest.json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

/// Every manifest tensor is in `c` once with torch's dtype, shape and values, and `c` has no other.
inline void check_against_manifest(const torch::Checkpoint& c, const nlohmann::json& manifest) {
  std::map<std::string, const torch::Tensor*> by_name;
  for (const auto& t : c.tensors()) {
    if (!t.is_component) CHECK(by_name.emplace(t.name, &t).second);
  }
  CHECK(by_name.size() == manifest["tensors"].size());
  for (const auto& e : manifest["tensors"]) {
    const std::string name = e["name"];
    INFO(name);
    const auto it = by_name.find(name);
    REQUIRE(it != by_name.end());
    const torch::Tensor& t = *it->second;
    CHECK(torch::dtype_name(t.dtype) == e["dtype"].get<std::string>());
    CHECK(t.shape == e["shape"].get<std::vector<std::int64_t>>());
    CHECK(torch::tensor_sha256(c, t) == e["sha256"].get<std::string>());
  }
}

}  // namespace maploc::test
