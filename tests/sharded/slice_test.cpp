// slice_test.cpp - rank slicing: slices put back together equal torch's tensors, and each rank reads only its bytes.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "error_of.h"
#include "maploc/remap/loaded.h"
#include "support/sha256.h"
#include "sharded/sharded_test_util.h"

using namespace maploc;
using maploc::test::sharded_dir;

namespace {

remap::Loaded load_rank(const torch::Checkpoint& c, const std::string& rules, int rank, int world,
                        remap::SliceReport* report = nullptr) {
  remap::LoadOptions o;
  o.map = remap::MapLocation::all_to("cpu");
  o.slice = remap::RankSlice{rank, world, remap::SliceSpec::parse(rules)};
  o.slice_report = report;
  return remap::load(c, o);
}

std::span<const std::uint8_t> bytes_of(const remap::Loaded& l, std::size_t tensor) {
  const auto& t = l.tensors()[tensor];
  const auto& s = l.storages()[*t.storage];
  const std::size_t e = torch::element_size(t.dtype);
  return {static_cast<const std::uint8_t*>(s.data) + t.storage_offset * e, t.numel() * e};
}

// The full tensor's row-major bytes, put back together from every rank's slice (rows: one after
// the other; columns: row by row, each rank's part of the row in rank order).
std::vector<std::uint8_t> reassemble(const std::vector<remap::Loaded>& ranks, const std::string& name, bool columns) {
  std::vector<std::uint8_t> out;
  if (!columns) {
    for (const auto& l : ranks) {
      const auto b = bytes_of(l, *l.find(name));
      out.insert(out.end(), b.begin(), b.end());
    }
    return out;
  }
  const auto& first = ranks[0].tensors()[*ranks[0].find(name)];
  for (std::int64_t r = 0; r < first.shape[0]; ++r) {
    for (const auto& l : ranks) {
      const auto& t = l.tensors()[*l.find(name)];
      const auto b = bytes_of(l, *l.find(name));
      const std::size_t row = b.size() / static_cast<std::size_t>(t.shape[0]);
      out.insert(out.end(), b.begin() + static_cast<std::ptrdiff_t>(row * r),
                 b.begin() + static_cast<std::ptrdiff_t>(row * (r + 1)));
    }
  }
  return out;
}

}  // namespace

TEST_CASE("slice bounds follow torch.chunk (DTensor Shard)", "[remap][slice]") {
  CHECK(remap::slice_bounds(5, 0, 2) == std::pair<std::int64_t, std::int64_t>{0, 3});
  CHECK(remap::slice_bounds(5, 1, 2) == std::pair<std::int64_t, std::int64_t>{3, 5});
  CHECK(remap::slice_bounds(2, 2, 3) == std::pair<std::int64_t, std::int64_t>{2, 2});
  CHECK(remap::slice_bounds(8, 3, 4) == std::pair<std::int64_t, std::int64_t>{6, 8});
}

TEST_CASE("slices of every rank put back together equal torch's tensors", "[remap][slice][sharded]") {
  const std::string rules =
      "rows:embed.weight,rows:*.up.weight,cols:*.down.weight,cols:*.q.weight,stage0:layers.0.*,stage1:layers.1.*";
  for (const std::string set : {"st_set", "bin_set", "legacy_set", "mixed_set", "dcp_two", "dcp_ranks"}) {
    const auto manifest = test::set_manifest(set);
    const auto c = torch::Checkpoint::open(sharded_dir() / set);
    for (const int world : {2, 3}) {
      INFO(set << " world " << world);
      std::vector<remap::Loaded> ranks;
      for (int r = 0; r < world; ++r) ranks.push_back(load_rank(c, rules + ",rows:rows,cols:cols", r, world));
      for (const auto& e : manifest["tensors"]) {
        const std::string name = e["name"];
        INFO(name);
        const bool cols = name.find(".down.") != std::string::npos || name.find(".q.weight") != std::string::npos ||
                          name == "cols";
        const bool rows = name == "embed.weight" || name.find(".up.") != std::string::npos || name == "rows";
        const bool stage = !rows && !cols && name.rfind("layers.", 0) == 0;
        if (rows || cols) {
          CHECK(Sha256::hex(reassemble(ranks, name, cols)) == e["sha256"].get<std::string>());
          std::int64_t parts = 0;
          for (const auto& l : ranks) parts += l.tensors()[*l.find(name)].shape[cols ? 1 : 0];
          CHECK(parts == e["shape"][cols ? 1 : 0].get<std::int64_t>());
        } else {
          int holders = 0;
          for (int r = 0; r < world; ++r) {
            const auto i = ranks[static_cast<std::size_t>(r)].find(name);
            if (!i) continue;
            ++holders;
            CHECK(ranks[static_cast<std::size_t>(r)].tensor_sha256(*i) == e["sha256"].get<std::string>());
          }
          CHECK(holders == (stage ? 1 : world));
        }
      }
    }
  }
}

TEST_CASE("each rank reads only its slices: together one copy of the payload", "[remap][slice][sharded]") {
  for (const std::string set : {"st_set", "mixed_set"}) {
    const auto c = torch::Checkpoint::open(sharded_dir() / set);
    std::uint64_t payload = 0;
    for (const auto& s : c.storages()) payload += s.nbytes;
    for (const char* rules : {"rows:*", "cols:*mlp*,rows:*"}) {
      for (const int world : {2, 4}) {
        INFO(set << " " << rules << " world " << world);
        std::uint64_t total = 0;
        for (int r = 0; r < world; ++r) {
          remap::SliceReport report;
          const auto l = load_rank(c, rules, r, world, &report);
          CHECK(report.bytes_from_memory == 0);  // stored records and safetensors: pread, not the mapping
          std::uint64_t placed = 0;
          for (const auto& s : l.storages()) placed += s.nbytes;
          CHECK(report.bytes_from_files == placed);
          CHECK(report.bytes_from_files < payload);
          total += report.bytes_from_files;
        }
        CHECK(total == payload);
      }
    }
  }
}

TEST_CASE("slice rules and ranks that do not fit are clear errors", "[remap][slice][malformed]") {
  const auto c = torch::Checkpoint::open(sharded_dir() / "st_set");
  CHECK(test::code_of([&] { (void)load_rank(c, "cols:norm.weight", 0, 2); }) == ErrorCode::kInvalidArgument);
  CHECK(test::code_of([&] { (void)load_rank(c, "stage2:*", 0, 2); }) == ErrorCode::kInvalidArgument);
  CHECK(test::code_of([&] { (void)load_rank(c, "rows:*", 2, 2); }) == ErrorCode::kInvalidArgument);
  CHECK(test::code_of([] { (void)remap::SliceSpec::parse("diagonal:*"); }) == ErrorCode::kInvalidArgument);
  CHECK(test::code_of([] { (void)remap::SliceSpec::parse("rows"); }) == ErrorCode::kInvalidArgument);
}

TEST_CASE("rank and world size come from the launcher's environment", "[remap][slice]") {
  ::setenv("RANK", "1", 1);
  ::setenv("WORLD_SIZE", "4", 1);
  const auto r = remap::RankSlice::from_environment(remap::SliceSpec::parse("rows:*"));
  CHECK(r.rank == 1);
  CHECK(r.world_size == 4);
  ::setenv("RANK", "4", 1);
  CHECK(test::code_of([] { (void)remap::RankSlice::from_environment({}); }) == ErrorCode::kInvalidArgument);
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  CHECK(test::code_of([] { (void)remap::RankSlice::from_environment({}); }) == ErrorCode::kInvalidArgument);
}
