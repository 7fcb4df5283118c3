// verify_test.cpp - verify passes every fixture and names cut downloads and flipped bytes.
#include <catch2/catch.hpp>

#include <fstream>

#include "maploc/torch/verify.h"
#include "write/write_test_util.h"

using namespace maploc;

namespace {

bool any_contains(const std::vector<std::string>& v, std::string_view needle) {
  return std::any_of(v.begin(), v.end(), [&](const std::string& s) { return s.find(needle) != std::string::npos; });
}

std::filesystem::path write_copy(const test::TempDir& d, const std::string& name, const test::Buffer& b) {
  const auto p = d.path / name;
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  return p;
}

}  // namespace

TEST_CASE("verify passes every fixture", "[torch]") {
  for (const auto& entry : test::checkpoint_index()) {
    const std::string file = entry["file"];
    CAPTURE(file);
    const auto r = torch::verify(test::checkpoints_dir() / file);
    CAPTURE(r.problems);
    CHECK(r.ok());
    CHECK_FALSE(r.checks.empty());
  }
}

TEST_CASE("verify: a cut download, a flipped byte, a cut legacy file", "[torch][malformed]") {
  test::TempDir dir("verify");
  const auto big = test::read_file(test::checkpoints_dir() / "shufflenet_v2_x0_5.t113.pt");
  const auto cut = write_copy(dir, "cut.pt", test::Buffer(big.begin(), big.begin() + static_cast<long>(big.size() / 3)));
  const auto r = torch::verify(cut);
  CAPTURE(r.problems);
  CHECK_FALSE(r.ok());
  CHECK(any_contains(r.problems, "truncated download"));
  CHECK(any_contains(r.problems, "present"));

  // One byte of a storage flipped: the zip is whole, the CRC is not.
  auto flipped = test::read_file(test::checkpoints_dir() / "gpu_tagged.t113.pt");
  const auto ck = torch::Checkpoint::open(test::checkpoints_dir() / "gpu_tagged.t113.pt");
  flipped[ck.storages()[0].file_offset + 3] ^= 0x40;
  const auto r2 = torch::verify(write_copy(dir, "flip.pt", flipped));
  CHECK_FALSE(r2.ok());
  CHECK(any_contains(r2.problems, "CRC-32"));

  auto legacy = test::read_file(test::checkpoints_dir() / "legacy_state_dict.t113.pt");
  legacy.resize(legacy.size() - 10);
  CHECK_FALSE(torch::verify(write_copy(dir, "legacy.pt", legacy)).ok());

  const auto st = test::read_file(std::filesystem::path(MAPLOC_FIXTURES_DIR) / "safetensors" / "shapes.safetensors");
  CHECK(torch::verify(write_copy(dir, "ok.safetensors", st)).ok());
  CHECK_FALSE(torch::verify(write_copy(dir, "cut.safetensors", test::Buffer(st.begin(), st.end() - 4))).ok());
}
