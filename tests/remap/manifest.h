// manifest.h - reading the torch-made fixture manifests in remap tests.
#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

namespace maploc::test {

inline std::filesystem::path fixture(const std::string& rel) {
  return std::filesystem::path(MAPLOC_FIXTURES_DIR) / rel;
}

inline nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE(in.good());
  return nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
}

/// The fixtures of index.json, as {file, manifest json}.
inline std::vector<std::pair<std::string, nlohmann::json>> all_fixtures() {
  std::vector<std::pair<std::string, nlohmann::json>> out;
  for (const auto& e : read_json(fixture("checkpoints/index.json"))) {
    const std::string file = e["file"];
    out.emplace_back(file, read_json(fixture("checkpoints/" + e["manifest"].get<std::string>())));
  }
  return out;
}

/// True when any storage of the manifest is tagged other than "cpu".
inline bool has_non_cpu_tag(const nlohmann::json& manifest) {
  for (const auto& s : manifest["storages"]) {
    if (s["location"] != "cpu") return true;
  }
  return false;
}

}  // namespace maploc::test
