// simulated_load_test.cpp - every CUDA placement path against simulated devices, checked against
// torch's manifests: load, two devices, to() between devices, load_into, failures, map_location.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

#include "error_of.h"
#include "manifest.h"
#include "maploc/remap/loaded.h"
#include "maploc/remap/plan.h"
#include "support/sha256.h"
#include "simulated_backend.h"
#include "upload.h"

namespace maploc::test {
namespace {

using remap::Device;
using remap::LoadOptions;
using remap::MapLocation;
using remap::detail::SimulatedBackend;

struct Simulated {
  std::shared_ptr<SimulatedBackend> sim;
  remap::DeviceInventory inventory;
};

Simulated simulated(std::vector<std::uint64_t> capacities, std::uint64_t piece = 65536) {
  SimulatedBackend::Options o;
  o.capacities = capacities;
  o.piece_bytes = piece;
  Simulated s{std::make_shared<SimulatedBackend>(o), {}};
  s.inventory.cuda_built = true;
  s.inventory.cuda_device_count = static_cast<int>(capacities.size());
  s.inventory.backend = s.sim;
  return s;
}

LoadOptions on(const Simulated& s, const std::string& spec, const remap::CudaOptions& cuda = {}) {
  LoadOptions o;
  o.map = MapLocation::parse(spec);
  o.inventory = &s.inventory;
  o.cuda = cuda;
  return o;
}

remap::CudaOptions geometry(bool arena, std::uint64_t staging, unsigned buffers, unsigned readers) {
  remap::CudaOptions c;
  c.arena = arena;
  c.staging_bytes = staging;
  c.staging_buffers = buffers;
  c.reader_threads = readers;
  return c;
}

void check_manifest(const remap::Loaded& loaded, const nlohmann::json& manifest, std::optional<Device> device) {
  for (const auto& t : manifest["tensors"]) {
    const std::string name = t["name"];
    INFO(name);
    const auto idx = loaded.find(name);
    REQUIRE(idx.has_value());
    if (device && loaded.tensors()[*idx].storage) CHECK(loaded.device_of(*idx) == *device);
    CHECK(loaded.tensor_sha256(*idx) == t["sha256"].get<std::string>());
  }
}

// Nothing but the cached staging ring is left.
void check_nothing_left(SimulatedBackend& sim) {
  const auto live = sim.live();
  CHECK(live.device_allocations == 0);
  CHECK(live.streams == 0);
  CHECK(live.events == 0);
  sim.release_staging();
  CHECK(sim.live().pinned_buffers == 0);
}

torch::Checkpoint open_fixture(const std::string& file) {
  return torch::Checkpoint::open(fixture("checkpoints/" + file));
}

}  // namespace

TEST_CASE("every fixture to a simulated cuda:0 equals torch's manifest, for every pipeline shape", "[remap][cuda-sim]") {
  auto s = simulated({std::uint64_t{4} << 30});
  const std::vector<remap::CudaOptions> shapes = {
      remap::CudaOptions{},             // the defaults (arena, 8 x 16 MiB, 8 readers)
      geometry(true, 16 << 20, 4, 4),   // the defaults before the GPU run
      geometry(false, 4096, 1, 1),      // per storage, one small buffer, one reader
      geometry(true, 4096, 8, 8),       // many small buffers, many readers
      geometry(false, 64 << 20, 2, 3),  // one big buffer pair
      geometry(true, 256, 3, 2),        // every storage larger than a buffer
  };
  int files = 0;
  for (const auto& [file, manifest] : all_fixtures()) {
    const auto checkpoint = open_fixture(file);
    for (std::size_t k = 0; k < shapes.size(); ++k) {
      INFO(file << " shape " << k);
      check_manifest(remap::load(checkpoint, on(s, "cuda:0", shapes[k])), manifest,
                     Device::cuda(0));
    }
    ++files;
  }
  CHECK(files >= 20);
  check_nothing_left(*s.sim);
}

TEST_CASE("big-endian storages and deflated records larger than a staging buffer", "[remap][cuda-sim]") {
  auto s = simulated({1 << 30});
  for (const std::string file : {"dtypes_be.t113.pt", "deflated.t113.pt", "deflated.t2x.pt"}) {
    INFO(file);
    const auto checkpoint = open_fixture(file);
    std::uint64_t largest = 0;
    for (const auto& st : checkpoint.storages()) largest = std::max(largest, st.nbytes);
    REQUIRE(largest > 64);  // the staging buffers below are smaller than a storage
    const auto manifest = read_json(fixture("checkpoints/" + file + ".manifest.json"));
    for (const bool arena : {false, true}) {
      check_manifest(remap::load(checkpoint, on(s, "cuda:0", geometry(arena, 64, 2, 3))), manifest, Device::cuda(0));
    }
  }
  check_nothing_left(*s.sim);
}

TEST_CASE("PyTorch's conformance files on a simulated device equal their CPU placement", "[remap][cuda-sim]") {
  const std::filesystem::path dir = MAPLOC_CONFORMANCE_DIR;
  REQUIRE(std::filesystem::exists(dir / "manifest.json"));  // committed: missing is a failure
  auto s = simulated({1 << 30});
  const remap::DeviceInventory cpu_only;
  int checked = 0;
  const auto corpus = read_json(dir / "manifest.json");
  for (const auto& f : corpus["files"]) {
    const std::string name = f["file"];
    INFO(name);
    std::optional<torch::Checkpoint> checkpoint;
    std::optional<remap::Loaded> cpu_load;
    LoadOptions host;
    host.map = MapLocation::parse("cpu");
    host.inventory = &cpu_only;
    try {  // files maploc refuses are tests/torch's business
      checkpoint.emplace(torch::Checkpoint::open((dir / name).string()));
      cpu_load.emplace(remap::load(*checkpoint, host));
    } catch (const Error& e) {
      UNSCOPED_INFO("not loaded on the CPU: " << e.what());
      continue;
    }
    const remap::Loaded& on_cpu = *cpu_load;
    const auto on_gpu = remap::load(*checkpoint, on(s, "cuda:0", geometry(true, 256, 2, 2)));
    for (std::size_t t = 0; t < on_cpu.tensors().size(); ++t) {
      if (!on_cpu.tensors()[t].storage) continue;
      CHECK(on_gpu.tensor_sha256(t) == on_cpu.tensor_sha256(t));
    }
    ++checked;
  }
  CHECK(checked >= 40);
}

TEST_CASE("two devices in one load, to() between them and back, cpu()", "[remap][cuda-sim]") {
  auto s = simulated({1 << 30, 1 << 30});
  const auto checkpoint = open_fixture("gpu_tagged.t113.pt");
  const auto manifest = read_json(fixture("checkpoints/gpu_tagged.t113.pt.manifest.json"));
  auto loaded = remap::load(checkpoint, on(s, "cuda:0->cuda:0,cuda:1->cuda:1"));
  std::set<int> used;
  for (std::size_t t = 0; t < loaded.tensors().size(); ++t) used.insert(loaded.device_of(t).index);
  CHECK(used == std::set<int>{0, 1});
  CHECK(s.sim->counts().device_allocations == 2);  // one arena per device
  check_manifest(loaded, manifest, std::nullopt);

  const auto before = s.sim->counts();
  loaded.to(Device::cuda(1));
  const auto after = s.sim->counts();
  CHECK(after.host_to_device == before.host_to_device);  // never through the host
  CHECK(after.device_to_host == before.device_to_host);
  CHECK(after.peer >= 1);
  check_manifest(loaded, manifest, Device::cuda(1));
  loaded.to(Device::cuda(0));
  check_manifest(loaded, manifest, Device::cuda(0));
  loaded.cpu();
  check_manifest(loaded, manifest, Device::cpu());
  loaded.to(Device::cuda(1), "0.*");
  CHECK(loaded.device_of(*loaded.find("0.weight")) == Device::cuda(1));
  check_manifest(loaded, manifest, std::nullopt);
  loaded = remap::Loaded{};
  check_nothing_left(*s.sim);
}

TEST_CASE("load_into checks that device destinations are device memory of that device", "[remap][cuda-sim]") {
  auto s = simulated({1 << 20, 1 << 20});
  const auto checkpoint = open_fixture("gpu_tagged.t113.pt");
  const auto manifest = read_json(fixture("checkpoints/gpu_tagged.t113.pt.manifest.json"));
  const auto loaded = remap::load(checkpoint, on(s, "cuda:*->cpu"));
  void* dev = nullptr;
  const auto owner = remap::detail::device_allocate(s.sim, 1, 16 * 8 * 4, &dev, "test");
  auto dest = [&](Device d, void* p) {
    return std::vector<remap::Destination>{{"0.weight", d, p, torch::DType::kFloat32, {16, 8}}};
  };
  loaded.load_into(dest(Device::cuda(1), dev), false);
  std::vector<std::uint8_t> host(16 * 8 * 4);
  remap::detail::device_download(*s.sim, 1, dev, host.data(), host.size(), "test", {});
  CHECK(Sha256::hex(host) == manifest["tensors"][0]["sha256"].get<std::string>());
  // The wrong device, host memory said to be a device's, device memory said to be the host's.
  for (const auto& [d, p] : {std::pair{Device::cuda(0), dev}, std::pair{Device::cuda(1), static_cast<void*>(host.data())},
                             std::pair{Device::cpu(), dev}}) {
    const Error e = error_of([&] { loaded.load_into(dest(d, p), false); });
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(e.what(), Catch::Contains("tensor '0.weight'"));
  }
}

TEST_CASE("the caller's current device comes back after load, plan, to and load_into", "[remap][cuda-sim]") {
  auto s = simulated({1 << 30, 1 << 30});
  const auto checkpoint = open_fixture("gpu_tagged.t113.pt");
  REQUIRE(s.sim->set_device(1) == 0);
  auto loaded = remap::load(checkpoint, on(s, "cuda:0"));
  CHECK(s.sim->current_device() == 1);
  REQUIRE(s.sim->set_device(0) == 0);
  loaded.to(Device::cuda(1));
  CHECK(s.sim->current_device() == 0);
  (void)remap::make_plan(checkpoint, MapLocation::parse("cuda:1"), s.inventory);
  CHECK(s.sim->current_device() == 0);
  s.sim->fail_copy(1);
  REQUIRE(s.sim->set_device(1) == 0);
  CHECK(code_of([&] { remap::load(checkpoint, on(s, "cuda:0")); }) == ErrorCode::kRemapDevice);
  CHECK(s.sim->current_device() == 1);
}

TEST_CASE("a failure at every allocation and every copy leaves nothing allocated", "[remap][cuda-sim]") {
  auto s = simulated({1 << 30, 1 << 30});
  const auto checkpoint = open_fixture("gpu_tagged.t113.pt");
  for (const bool arena : {false, true}) {
    const auto options = on(s, "cuda:0->cuda:0,cuda:1->cuda:1", geometry(arena, 256, 2, 2));
    s.sim->release_staging();  // the ring is made inside the load, so its allocations count too
    const auto before = s.sim->counts();
    { const auto ok = remap::load(checkpoint, options); }
    const auto made = s.sim->counts();
    const std::size_t allocations =
        made.device_allocations + made.pinned_allocations - before.device_allocations - before.pinned_allocations;
    const std::size_t copies = made.host_to_device - before.host_to_device;
    REQUIRE(allocations >= 2);
    REQUIRE(copies >= 2);
    for (std::size_t nth = 1; nth <= allocations + copies; ++nth) {
      INFO("arena=" << arena << " failure " << nth);
      s.sim->release_staging();
      if (nth <= allocations) s.sim->fail_allocation(nth);
      else s.sim->fail_copy(nth - allocations);
      const Error e = error_of([&] { remap::load(checkpoint, options); });
      CHECK((e.code() == ErrorCode::kRemapDevice || e.code() == ErrorCode::kRemapOutOfMemory));
      if (nth > allocations) CHECK_THAT(e.what(), Catch::Contains("storage '"));
      check_nothing_left(*s.sim);
    }
  }
}

TEST_CASE("1,000 failing loads leave the simulator's accounting at zero", "[remap][cuda-sim]") {
  auto s = simulated({1 << 30});
  const auto checkpoint = open_fixture("dtypes.t2x.pt");
  int failures = 0;
  for (int i = 0; i < 1000; ++i) {
    // The ring is kept between loads: an arena load makes one allocation, a per-storage one 25.
    const bool arena = i % 4 < 2;
    if (i % 2 == 0) s.sim->fail_copy(1 + static_cast<std::size_t>(i % 7));
    else s.sim->fail_allocation(arena ? 1 : 1 + static_cast<std::size_t>(i % 25));
    try {
      remap::load(checkpoint, on(s, "cpu->cuda:0", geometry(arena, 64, 2, 2)));
    } catch (const Error&) {
      ++failures;
    }
  }
  CHECK(failures == 1000);
  CHECK(s.sim->live().pinned_buffers <= 2);  // one ring at most, kept for reuse
  check_nothing_left(*s.sim);
}

TEST_CASE("map_location against simulated inventories", "[remap][cuda-sim]") {
  auto s = simulated({1 << 30, 1 << 30});
  const auto checkpoint = open_fixture("gpu_tagged.t113.pt");
  SECTION("cuda:7 with two devices fails before any allocation, naming storage, tensor, tag and devices") {
    const Error e = error_of([&] { remap::load(checkpoint, on(s, "cuda:1->cuda:7")); });
    CHECK(e.code() == ErrorCode::kRemapNoSuchDevice);
    CHECK_THAT(e.what(), Catch::Contains("storage '") && Catch::Contains("of tensor '") &&
                             Catch::Contains("tagged cuda:1") && Catch::Contains("cuda:7") &&
                             Catch::Contains("cuda:0, cuda:1"));
    CHECK(s.sim->counts().device_allocations == 0);
  }
  SECTION("cuda:*->cuda:0") {
    const auto loaded = remap::load(checkpoint, on(s, "cuda:*->cuda:0"));
    for (std::size_t t = 0; t < loaded.tensors().size(); ++t) CHECK(loaded.device_of(t) == Device::cuda(0));
  }
  SECTION("cuda:*->cuda:local sends every CUDA tag to this process's LOCAL_RANK device") {
    ::setenv("LOCAL_RANK", "1", 1);
    const auto loaded = remap::load(checkpoint, on(s, "cuda:*->cuda:local"));
    for (std::size_t t = 0; t < loaded.tensors().size(); ++t) CHECK(loaded.device_of(t) == Device::cuda(1));
    ::setenv("LOCAL_RANK", "3", 1);
    CHECK(code_of([&] { remap::load(checkpoint, on(s, "cuda:*->cuda:local")); }) == ErrorCode::kRemapNoSuchDevice);
    ::setenv("LOCAL_RANK", "one", 1);
    CHECK(code_of([] { (void)MapLocation::parse("cuda:*->cuda:local"); }) == ErrorCode::kRemapBadSpec);
    ::unsetenv("LOCAL_RANK");
    CHECK(code_of([] { (void)MapLocation::parse("cuda:*->cuda:local"); }) == ErrorCode::kRemapBadSpec);
  }
  SECTION("auto is cuda:0 where a device is present") {
    const auto loaded = remap::load(checkpoint, on(s, "auto"));
    for (std::size_t t = 0; t < loaded.tensors().size(); ++t) CHECK(loaded.device_of(t) == Device::cuda(0));
  }
  SECTION("a plan that does not fit is refused before any allocation") {
    auto small = simulated({1 << 30, 500});
    const auto plan = remap::make_plan(checkpoint, MapLocation::parse("cuda:*->cuda:1"), small.inventory);
    REQUIRE(plan.totals.back().free_bytes == 500u);
    const Error e = error_of([&] { remap::load(checkpoint, on(small, "cuda:*->cuda:1")); });
    CHECK(e.code() == ErrorCode::kRemapOutOfMemory);
    CHECK_THAT(e.what(), Catch::Contains("cuda:1"));
    CHECK(small.sim->counts().device_allocations == 0);
  }
}

}  // namespace maploc::test
