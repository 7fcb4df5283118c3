// write_test_util.h - helpers of the write tests: temporary folders, fixture index, outputs by name.
#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <string>
#include <unistd.h>

#include "torch/manifest_view.h"
#include "torch/torch_test_util.h"

namespace maploc::test {

/// A fresh folder under the build's temp dir, removed at scope exit.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag) {
    path = std::filesystem::temp_directory_path() / ("maploc-write-" + tag + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  /// Names of the files inside (to prove no partial or temporary file stayed).
  std::vector<std::string> listing() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

/// name -> sha256 of the tensors a Checkpoint lists in manifest shape.
inline std::map<std::string, std::string> hashes_of(const torch::Checkpoint& c) {
  std::map<std::string, std::string> out;
  for (const auto& t : manifest_view(c).tensors) out[t["name"].get<std::string>()] = t["sha256"].get<std::string>();
  return out;
}

/// The fixtures/checkpoints/index.json entries.
inline nlohmann::json checkpoint_index() { return read_json(checkpoints_dir() / "index.json"); }

}  // namespace maploc::test
