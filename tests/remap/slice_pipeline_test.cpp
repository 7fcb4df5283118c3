// slice_pipeline_test.cpp - a rank-sliced load is the same pipeline as a whole load: the same limits, the same progress.
#include <catch2/catch.hpp>

#include <memory>

#include "error_of.h"
#include "manifest.h"
#include "maploc/error.h"
#include "maploc/remap/loaded.h"
#include "simulated_backend.h"

namespace maploc::test {
namespace {

using remap::HostMemory;
using remap::LoadOptions;
using remap::MapLocation;

const remap::DeviceInventory kCpuOnly{0, false, {}, {}};

LoadOptions on_cpu(HostMemory host = HostMemory::kMappedView) {
  LoadOptions o;
  o.map = MapLocation::all_to("cpu");
  o.host = host;
  o.inventory = &kCpuOnly;
  return o;
}

remap::RankSlice rank_of(int rank, int world, const std::string& rules) {
  return remap::RankSlice{rank, world, remap::SliceSpec::parse(rules)};
}

using Calls = std::vector<std::pair<std::uint64_t, std::uint64_t>>;

// The calls end at done == total == `copied`, never going back.
void check_progress(const Calls& calls, std::uint64_t copied) {
  REQUIRE_FALSE(calls.empty());
  for (std::size_t i = 1; i < calls.size(); ++i) CHECK(calls[i].first >= calls[i - 1].first);
  CHECK(calls.back() == std::make_pair(copied, copied));
}

std::uint64_t placed_bytes(const remap::Loaded& loaded) {
  std::uint64_t n = 0;
  for (const auto& s : loaded.storages()) n += s.nbytes;
  return n;
}

}  // namespace

TEST_CASE("a sliced load refuses what the same load unsliced refuses under the same limits", "[remap][slice][limits]") {
  // 16 KiB of values from 16 stored bytes: over a torch_max_expanded_bytes of 4096.
  torch::Options low;
  low.limits.torch_max_expanded_bytes = 4096;
  const auto checkpoint = torch::Checkpoint::open(fixture("malicious/attacks/expand_16k.pt"), low);
  REQUIRE(checkpoint.tensors().size() == 1);
  const torch::Tensor& t = checkpoint.tensors()[0];
  std::vector<std::uint8_t> room(t.numel() * torch::element_size(t.dtype));
  const std::vector<remap::Destination> into = {{t.name, remap::Device::cpu(), room.data(), t.dtype, t.shape}};

  const auto whole = remap::load(checkpoint, on_cpu());
  CHECK(code_of([&] { (void)whole.tensor_sha256(0); }) == ErrorCode::kTorchLimitExpandedBytes);
  CHECK(code_of([&] { (void)whole.load_into(into); }) == ErrorCode::kTorchLimitExpandedBytes);

  for (const char* rules : {"all:*", "stage0:*"}) {
    INFO(rules);
    LoadOptions o = on_cpu();
    o.slice = rank_of(0, 2, rules);
    const auto sliced = remap::load(checkpoint, o);
    REQUIRE(sliced.find(t.name).has_value());
    CHECK(code_of([&] { (void)sliced.tensor_sha256(*sliced.find(t.name)); }) == ErrorCode::kTorchLimitExpandedBytes);
    CHECK(code_of([&] { (void)sliced.load_into(into); }) == ErrorCode::kTorchLimitExpandedBytes);
  }
}

TEST_CASE("a sliced load reports progress as the whole load does", "[remap][slice]") {
  const auto checkpoint = torch::Checkpoint::open(fixture("checkpoints/shufflenet_v2_x0_5.t113.pt"));
  Calls calls;
  auto record = [&](std::uint64_t done, std::uint64_t total) { calls.emplace_back(done, total); };

  SECTION("whole load: every storage copied is counted") {
    LoadOptions o = on_cpu(HostMemory::kOwnedCopy);
    o.progress = record;
    const auto loaded = remap::load(checkpoint, o);
    check_progress(calls, placed_bytes(loaded));
  }
  SECTION("rows, columns and whole tensors of rank 1 of 2: the copies are counted") {
    LoadOptions o = on_cpu(HostMemory::kOwnedCopy);
    o.progress = record;
    o.slice = rank_of(1, 2, "all:*num_batches_tracked,cols:conv1.0.weight,rows:*");
    const auto loaded = remap::load(checkpoint, o);
    REQUIRE(placed_bytes(loaded) != 0);
    check_progress(calls, placed_bytes(loaded));
  }
  SECTION("rows of rank 0 of 2 to a simulated device: the uploads are counted") {
    remap::detail::SimulatedBackend::Options so;
    so.capacities = {std::uint64_t{64} << 20};
    remap::DeviceInventory inventory;
    inventory.cuda_built = true;
    inventory.cuda_device_count = 1;
    inventory.backend = std::make_shared<remap::detail::SimulatedBackend>(so);
    LoadOptions o;
    o.map = MapLocation::all_to("cuda:0");
    o.inventory = &inventory;
    o.progress = record;
    o.slice = rank_of(0, 2, "all:*num_batches_tracked,rows:*");
    const auto loaded = remap::load(checkpoint, o);
    REQUIRE(placed_bytes(loaded) != 0);
    check_progress(calls, placed_bytes(loaded));
  }
}

TEST_CASE("a sliced load places whole tensors as the whole load does, under every host option", "[remap][slice]") {
  const auto checkpoint = torch::Checkpoint::open(fixture("checkpoints/shufflenet_v2_x0_5.t113.pt"));
  const auto manifest = read_json(fixture("checkpoints/shufflenet_v2_x0_5.t113.pt.manifest.json"));
  struct Case {
    HostMemory host;
    bool writable;
    bool populate;
    bool whole_writable;  // what a whole tensor's storage is; slices are always private copies
  };
  for (const Case c : {Case{HostMemory::kMappedView, false, false, false}, Case{HostMemory::kMappedView, false, true, false},
                       Case{HostMemory::kMappedView, true, false, true}, Case{HostMemory::kOwnedCopy, false, false, true}}) {
    INFO("host " << static_cast<int>(c.host) << " writable " << c.writable << " populate " << c.populate);
    LoadOptions o = on_cpu(c.host);
    o.writable = c.writable;
    o.populate = c.populate;
    o.slice = rank_of(1, 2, "all:conv1.*,all:*num_batches_tracked,rows:*");
    const auto loaded = remap::load(checkpoint, o);
    for (const auto& e : manifest["tensors"]) {
      const std::string name = e["name"];
      INFO(name);
      const auto i = loaded.find(name);
      REQUIRE(i.has_value());
      const auto& placed = loaded.storages()[*loaded.tensors()[*i].storage];
      if (name.rfind("conv1.", 0) == 0 || name.ends_with("num_batches_tracked")) {
        CHECK(placed.writable == c.whole_writable);
        CHECK(loaded.tensor_sha256(*i) == e["sha256"].get<std::string>());
      } else {
        CHECK(placed.writable);
      }
    }
  }
}

TEST_CASE("rows and columns of a big-endian file are swapped as its whole tensors are", "[remap][slice]") {
  const auto checkpoint = torch::Checkpoint::open(fixture("checkpoints/dtypes_be.t113.pt"));
  const auto manifest = read_json(fixture("checkpoints/dtypes_be.t113.pt.manifest.json"));
  for (const char* rules : {"rows:*", "rows:int64_big,cols:*"}) {
    INFO(rules);
    LoadOptions o = on_cpu();
    o.slice = rank_of(0, 1, rules);  // one rank: every slice is the whole tensor, read segment by segment
    remap::SliceReport report;
    o.slice_report = &report;
    const auto loaded = remap::load(checkpoint, o);
    CHECK(report.tensors_sliced == manifest["tensors"].size());
    for (const auto& e : manifest["tensors"]) {
      INFO(e["name"].get<std::string>());
      CHECK(loaded.tensor_sha256(*loaded.find(e["name"].get<std::string>())) == e["sha256"].get<std::string>());
    }
  }
}

}  // namespace maploc::test
