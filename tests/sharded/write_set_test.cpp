// write_set_test.cpp - sets written back out (shards + index) read back equal to torch's tensors; safetensors alignment.
#include <catch2/catch.hpp>

#include "maploc/torch/write_set.h"
#include "sharded/sharded_test_util.h"

using namespace maploc;
using maploc::test::sharded_dir;

namespace {

std::filesystem::path scratch(const std::string& tag) {
  const auto dir = std::filesystem::temp_directory_path() / ("maploc_write_set_test_" + tag);
  std::filesystem::remove_all(dir);
  return dir;
}

}  // namespace

TEST_CASE("a set written as safetensors or torch shards reads back as torch saved it", "[write][sharded]") {
  for (const std::string set : {"st_set", "bin_set", "legacy_set", "mixed_set", "dcp_two"}) {
    for (const bool st : {true, false}) {
      INFO(set << (st ? " -> safetensors" : " -> torch"));
      const auto manifest = test::set_manifest(set);
      const auto in = torch::Checkpoint::open(sharded_dir() / set);
      const auto dir = scratch(set + (st ? "_st" : "_pt"));
      torch::SetWriteOptions o;
      o.safetensors = st;
      o.max_shard_bytes = set == "dcp_two" ? 100 : 700;
      o.st.duplicate_tied = true;  // every manifest name stays a tensor of the set
      const auto report = torch::save_set(in, dir, o);
      CHECK(report.files.size() > 1);
      const auto back = torch::Checkpoint::open(dir);
      CHECK(back.format() == torch::Format::kSet);
      CHECK(back.members().size() == report.files.size());
      test::check_against_manifest(back, manifest);
      // No shard above the limit unless it holds one group (a storage larger than the limit).
      for (const auto& m : back.members()) {
        std::uint64_t bytes = 0;
        for (std::size_t s = m.first_storage; s < m.first_storage + m.storage_count; ++s) bytes += back.storages()[s].nbytes;
        // (bin_set's tied pair is one group; with duplicate_tied its safetensors shard holds two copies)
        CHECK((bytes <= o.max_shard_bytes || m.storage_count == 1 || (st && set == "bin_set")));
      }
      CHECK(back.metadata()[0].second == std::to_string(report.data_bytes));
      std::filesystem::remove_all(dir);
    }
  }
}

TEST_CASE("tensors sharing a storage stay in one shard", "[write][sharded]") {
  const auto in = torch::Checkpoint::open(sharded_dir() / "bin_set");
  const auto dir = scratch("tied");
  torch::SetWriteOptions o;
  o.safetensors = false;
  o.max_shard_bytes = 1;  // every group its own shard
  torch::save_set(in, dir, o);
  const auto back = torch::Checkpoint::open(dir);
  const torch::Tensor* embed = nullptr;
  const torch::Tensor* head = nullptr;
  for (const auto& t : back.tensors()) {
    if (t.name == "embed.weight") embed = &t;
    if (t.name == "lm_head.weight") head = &t;
  }
  REQUIRE(embed != nullptr);
  REQUIRE(head != nullptr);
  CHECK(embed->storage == head->storage);
  CHECK(back.members().size() == in.storages().size());
  std::filesystem::remove_all(dir);
}

TEST_CASE("convert to safetensors: data starts at 64, every tensor at a multiple of its element size",
          "[write][sharded]") {
  const auto in = torch::Checkpoint::open(sharded_dir() / "mixed_set");
  const auto dir = scratch("align");
  std::filesystem::create_directories(dir);
  torch::save_safetensors(in, dir / "all.safetensors");
  const auto back = torch::Checkpoint::open(dir / "all.safetensors");
  std::uint64_t first = UINT64_MAX;
  for (std::size_t i = 0; i < back.storages().size(); ++i) {
    const auto range = back.storage_file_range(i);
    REQUIRE(range);
    CHECK(range->offset % torch::element_size(back.storages()[i].dtype) == 0);
    first = std::min(first, range->offset);
  }
  CHECK(first % 64 == 0);
  test::check_against_manifest(back, test::set_manifest("mixed_set"));
  std::filesystem::remove_all(dir);
}
