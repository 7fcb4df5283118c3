// torch_test_util.h - helpers shared by the torch tests: fixture paths, manifests, byte patching.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "maploc/error.h"
#include "error_of.h"
#include "maploc/torch/checkpoint.h"

namespace maploc::test {

using Buffer = std::vector<std::uint8_t>;

inline std::filesystem::path checkpoints_dir() { return std::filesystem::path(MAPLOC_FIXTURES_DIR) / "checkpoints"; }

/// Calls f(path, checkpoint) for every file and directory under fixtures/ (sorted) that
/// Checkpoint::open accepts (malicious files, bare pickles and zips that are not checkpoints are
/// refused, as they should be, and skipped); returns how many opened, for the caller to require
/// that the walk saw the corpus.
template <class F>
std::size_t for_each_fixture_that_opens(F f) {
  std::vector<std::filesystem::path> paths;
  for (const auto& e : std::filesystem::recursive_directory_iterator(MAPLOC_FIXTURES_DIR)) {
    if (e.is_regular_file() || e.is_directory()) paths.push_back(e.path());
  }
  std::sort(paths.begin(), paths.end());
  std::size_t opened = 0;
  for (const auto& p : paths) {
    std::optional<torch::Checkpoint> c;
    try {
      c.emplace(torch::Checkpoint::open(p));
    } catch (const Error&) {
      continue;
    }
    ++opened;
    f(p, *c);
  }
  return opened;
}

inline Buffer read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE(in.good());
  return Buffer(std::istreambuf_iterator<char>(in), {});
}

inline nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

inline torch::Checkpoint open_bytes(const Buffer& bytes, const torch::Options& options = {}) {
  return torch::Checkpoint::from_file(MappedFile::from_bytes(Bytes::owned(bytes), "test.pt"), options);
}

/// Replaces the first occurrence of `from` by `to` (same length) in b.
inline void patch(Buffer& b, const std::string& from, const std::string& to) {
  REQUIRE(from.size() == to.size());
  auto it = std::search(b.begin(), b.end(), from.begin(), from.end());
  REQUIRE(it != b.end());
  std::copy(to.begin(), to.end(), it);
}

}  // namespace maploc::test
