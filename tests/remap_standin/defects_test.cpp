// defects_test.cpp - maploc's real CUDA adapter against the CUDA runtime stand-in: each defect of
// issue 26 reproduced through the public API (every test failed on the code before the fix).
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "error_of.h"
#include "maploc/remap/loaded.h"
#include "maploc/remap/slice.h"
#include "remap/manifest.h"
#include "standin_fixture.h"
#include "support/sha256.h"
#include "upload.h"

namespace maploc::test {
namespace {

using remap::Device;
using remap::LoadOptions;
using remap::MapLocation;

const char kTagged[] = "checkpoints/gpu_tagged.t113.pt";

LoadOptions options_for(OnStandin& s, const char* map) {
  LoadOptions o;
  o.map = MapLocation::parse(map);
  o.inventory = &s.inventory;
  return o;
}

std::string sha256_of_device(OnStandin& s, const void* p, std::size_t n) {
  std::vector<std::uint8_t> host(n);
  REQUIRE(s.sc.device_bytes(p, host.data(), n) == 0);
  Sha256 sha;
  sha.update(host);
  return sha.finish_hex();
}

nlohmann::json manifest() { return read_json(fixture(std::string(kTagged) + ".manifest.json")); }

std::string manifest_sha(const std::string& tensor) {
  const auto m = manifest();
  for (const auto& t : m["tensors"]) {
    if (t["name"] == tensor) return t["sha256"];
  }
  FAIL("no tensor " << tensor << " in the manifest");
  return {};
}

void check_all_equal_manifest(const remap::Loaded& loaded) {
  const auto m = manifest();
  for (const auto& t : m["tensors"]) {
    const std::string name = t["name"];
    INFO(name);
    const auto i = loaded.find(name);
    REQUIRE(i.has_value());
    CHECK(loaded.tensor_sha256(*i) == t["sha256"].get<std::string>());
  }
}

}  // namespace

TEST_CASE("to(): a host upload never writes over storages peer-copied between its destinations (issue 26, 1a)",
          "[standin][defect]") {
  OnStandin s("devices=2,memory=64M");
  {
    const auto checkpoint = torch::Checkpoint::open(fixture(kTagged));
    auto loaded = remap::load(checkpoint, options_for(s, "cuda:*->cpu"));
    loaded.to(Device::cuda(0), "0.bias");
    loaded.to(Device::cuda(1));  // 0.bias from cuda:0 (peer), the others from the host, one block
    for (std::size_t i = 0; i < loaded.tensors().size(); ++i) CHECK(loaded.device_of(i) == Device::cuda(1));
    check_all_equal_manifest(loaded);
  }
  CHECK(s.violations().empty());
}

TEST_CASE("load_into never writes the caller's memory between two destinations (issue 26, 1b)", "[standin][defect]") {
  OnStandin s("devices=1,memory=64M");
  const auto checkpoint = torch::Checkpoint::open(fixture(kTagged));
  const auto loaded = remap::load(checkpoint, options_for(s, "cuda:*->cpu"));
  REQUIRE(s.sc.cudaSetDevice(0) == 0);
  void* block = nullptr;
  REQUIRE(s.sc.cudaMalloc(&block, 2048) == 0);
  auto* base = static_cast<std::uint8_t*>(block);
  // 0.weight at 0 (512 bytes), a tensor of the caller's at 512 (256 bytes), 0.bias at 768.
  const std::vector<std::uint8_t> neighbour(256, 0xAB);
  REQUIRE(s.sc.write_device(base + 512, neighbour.data(), neighbour.size()) == 0);
  REQUIRE(s.sc.protect(base + 512, neighbour.size()) == 0);
  const std::vector<remap::Destination> destinations = {
      {"0.weight", Device::cuda(0), base, torch::DType::kFloat32, {16, 8}},
      {"0.bias", Device::cuda(0), base + 768, torch::DType::kFloat32, {16}},
  };
  const auto report = loaded.load_into(destinations, false);
  CHECK(report.loaded.size() == 2);
  std::vector<std::uint8_t> after(256);
  REQUIRE(s.sc.device_bytes(base + 512, after.data(), after.size()) == 0);
  CHECK(after == neighbour);
  CHECK(sha256_of_device(s, base, 512) == manifest_sha("0.weight"));
  CHECK(sha256_of_device(s, base + 768, 64) == manifest_sha("0.bias"));
  CHECK(s.violations().empty());
  REQUIRE(s.sc.cudaFree(block) == 0);
}

TEST_CASE("a sliced CUDA load sends no transfer across two allocations (issue 26, 1c)", "[standin][defect]") {
  OnStandin s("devices=1,memory=64M");
  {
    const auto checkpoint = torch::Checkpoint::open(fixture(kTagged));
    LoadOptions o = options_for(s, "cuda:*->cuda:0");
    o.slice = remap::RankSlice{0, 1, remap::SliceSpec::parse("all:*")};  // every storage its own allocation
    const auto loaded = remap::load(checkpoint, o);
    check_all_equal_manifest(loaded);
  }
  CHECK(s.violations().empty());
}

TEST_CASE("copies into the caller's memory wait for the caller's earlier work (issue 26, 2)", "[standin][defect]") {
  OnStandin s("devices=1,memory=64M");
  const auto checkpoint = torch::Checkpoint::open(fixture(kTagged));
  auto loaded = remap::load(checkpoint, options_for(s, "cuda:*->cpu"));
  REQUIRE(s.sc.cudaSetDevice(0) == 0);
  void* dst = nullptr;
  REQUIRE(s.sc.cudaMalloc(&dst, 512) == 0);
  const std::vector<remap::Destination> weight = {{"0.weight", Device::cuda(0), dst, torch::DType::kFloat32, {16, 8}}};

  SECTION("a fill queued on the legacy default stream just before load_into lands before maploc's copy") {
    REQUIRE(s.sc.enqueue_fill(dst, 0x55, 512, nullptr, 1'000'000'000ULL) == 0);
    loaded.load_into(weight, false);
  }
  SECTION("the same on a caller stream named in CudaOptions::streams") {
    remap::cuda::Stream stream = nullptr;
    REQUIRE(s.sc.cudaStreamCreateWithFlags(&stream, remap::cuda::kStreamNonBlocking) == 0);
    REQUIRE(s.sc.enqueue_fill(dst, 0x55, 512, stream, 1'000'000'000ULL) == 0);
    remap::CudaOptions cuda;
    cuda.streams.push_back({0, stream});
    loaded.set_cuda_options(cuda);
    loaded.load_into(weight, false);
    REQUIRE(s.sc.cudaStreamDestroy(stream) == 0);
  }
  REQUIRE(s.sc.synchronize_all() == 0);
  CHECK(sha256_of_device(s, dst, 512) == manifest_sha("0.weight"));
  REQUIRE(s.sc.cudaFree(dst) == 0);
  CHECK(s.violations().empty());
}

TEST_CASE("copies out of device memory wait for the caller's earlier work (issue 26, 2)", "[standin][defect]") {
  OnStandin s("devices=1,memory=64M");
  const auto checkpoint = torch::Checkpoint::open(fixture(kTagged));
  const auto loaded = remap::load(checkpoint, options_for(s, "cuda:*->cuda:0"));
  const auto& storage = loaded.storages()[0];
  REQUIRE(s.sc.cudaSetDevice(0) == 0);
  // The caller's kernel rewrites the storage; a download right after must see what it wrote.
  REQUIRE(s.sc.enqueue_fill(storage.data, 0x11, storage.nbytes, nullptr, 1'000'000'000ULL) == 0);
  const auto bytes = loaded.host_bytes(0);
  CHECK(std::all_of(bytes.begin(), bytes.end(), [](std::uint8_t b) { return b == 0x11; }));
  REQUIRE(s.sc.synchronize_all() == 0);
}

TEST_CASE("uploads keep every link busy, on one device and on two at once (issue 26, 3)", "[standin][defect]") {
  for (int devices : {1, 2}) {
    INFO(devices << " device(s)");
    OnStandin s("devices=2,memory=256M,h2d=1e9");
    constexpr std::size_t kJob = std::size_t{1} << 20;
    const std::vector<std::uint8_t> source(kJob, 7);
    std::vector<std::shared_ptr<void>> owners;
    std::vector<remap::detail::UploadJob> jobs;
    for (int j = 0; j < 16; ++j) {
      const int device = j % devices;
      void* p = nullptr;
      owners.push_back(remap::detail::device_allocate(s.inventory.backend, device, kJob, &p, "job"));
      jobs.push_back({Bytes(nullptr, source.data(), source.size()), -1, 1, p, device, "job " + std::to_string(j)});
    }
    remap::CudaOptions o;
    o.staging_bytes = kJob;
    o.staging_buffers = 4;
    o.reader_threads = 4;
    s.sc.reset_clock_stats();
    remap::detail::upload(s.backend(), jobs, -1, o, remap::detail::Destinations::kSeparate);
    for (int d = 0; d < devices; ++d) {
      const double busy = static_cast<double>(s.sc.engine_busy_ns(d, 0));
      const double span = static_cast<double>(s.sc.engine_last_end_ns(d, 0) - s.sc.engine_first_start_ns(d, 0));
      INFO("cuda:" << d << " busy " << busy << " ns of " << span << " ns");
      REQUIRE(span > 0);
      CHECK(busy >= 0.9 * span);
    }
    owners.clear();
    CHECK(s.violations().empty());
  }
}

TEST_CASE("a load never creates a context on a device it does not use (issue 26, 4)", "[standin][defect]") {
  OnStandin s("devices=2,memory=64M");
  const auto checkpoint = torch::Checkpoint::open(fixture(kTagged));
  SECTION("a thread that never chose a device") {
    {
      const auto loaded = remap::load(checkpoint, options_for(s, "cuda:*->cuda:1"));
      check_all_equal_manifest(loaded);  // downloads too
    }
    CHECK(s.sc.contexts_created(0) == 0);
    CHECK(s.sc.context_active(0) == 0);
  }
  SECTION("a thread working on cuda:0 gets cuda:0 back") {
    REQUIRE(s.sc.cudaSetDevice(0) == 0);
    {
      const auto loaded = remap::load(checkpoint, options_for(s, "cuda:*->cuda:1"));
      check_all_equal_manifest(loaded);
    }
    int current = -1;
    REQUIRE(s.sc.cudaGetDevice(&current) == 0);
    CHECK(current == 0);
    CHECK(s.sc.contexts_created(0) == 1);
  }
}

TEST_CASE("events block rather than spin (issue 26, 9)", "[standin][defect]") {
  OnStandin s("devices=1,memory=64M");
  const auto checkpoint = torch::Checkpoint::open(fixture(kTagged));
  {
    const auto loaded = remap::load(checkpoint, options_for(s, "cuda:*->cuda:0"));
    check_all_equal_manifest(loaded);
  }
  CHECK(s.sc.spinning_waits() == 0);
}

TEST_CASE("a runtime newer than the driver gives way to the next library, and each library's error is kept (issue 26, 5)",
          "[standin][defect]") {
  auto& sc = standin::Control::get();
  const std::string first = standin::Control::path();
  std::string why;
  SECTION("runtime 13.0 over driver 12.4, then a runtime 12.4") {
    REQUIRE(sc.configure("devices=1,runtime=13000,driver=12040") == 0);
    CHECK(remap::detail::load_cuda_runtime(first, &why) == nullptr);
    CHECK_THAT(why, Catch::Contains(first) && Catch::Contains("cudaErrorInsufficientDriver") &&
                        Catch::Contains("MAPLOC_CUDART"));
    // The note sits in "(...); map it" messages that scanners parse (fixtures/real/check.py).
    CHECK(why.find(';') == std::string::npos);
    // A second runtime library (a copy: its own instance), configured as a CUDA 12.4 runtime.
    const auto second = std::filesystem::temp_directory_path() /
                        ("maploc-standin-12-" + std::to_string(::getpid()) + ".so");
    std::filesystem::copy_file(first, second, std::filesystem::copy_options::overwrite_existing);
    REQUIRE(::setenv("MAPLOC_STANDIN", "devices=1,runtime=12040,driver=12040", 1) == 0);
    auto backend = remap::detail::load_cuda_runtime(first + ":" + second.string(), &why);
    ::unsetenv("MAPLOC_STANDIN");
    std::filesystem::remove(second);
    REQUIRE(backend);
    CHECK(backend->device_count() == 1);
    CHECK_THAT(backend->name(), Catch::Contains(second.string()) && Catch::Contains("runtime 12.4"));
    CHECK_THAT(why, Catch::Contains(first) && Catch::Contains("cudaErrorInsufficientDriver"));
    backend->release_staging();
  }
  SECTION("no device: the runtime is kept, with the reason") {
    REQUIRE(sc.configure("mode=nodevice") == 0);
    const auto backend = remap::detail::load_cuda_runtime(first, &why);
    REQUIRE(backend);
    CHECK(backend->device_count() == 0);
    CHECK_THAT(why, Catch::Contains("cudaErrorNoDevice"));
  }
  REQUIRE(sc.configure("") == 0);
}

TEST_CASE("pinned host copies share one page-locked allocation (issue 26, 9)", "[standin][defect]") {
  OnStandin s("devices=1,memory=64M");
  const auto before = s.sc.calls("cudaHostAlloc");
  {
    const auto checkpoint = torch::Checkpoint::open(fixture(kTagged));
    LoadOptions o = options_for(s, "cuda:*->cpu");
    o.host = remap::HostMemory::kPinned;
    const auto loaded = remap::load(checkpoint, o);
    for (const auto& placed : loaded.storages()) CHECK(placed.pinned);
    check_all_equal_manifest(loaded);
    CHECK(s.sc.calls("cudaHostAlloc") - before == 1);  // was one per storage
  }
  CHECK(s.sc.live("pinned_buffers") == 0);
}

TEST_CASE("downloads go through the pinned ring, every storage of a to(cpu) in one pass (issue 26, 9)",
          "[standin][defect]") {
  OnStandin s("devices=2,memory=64M");
  const auto checkpoint = torch::Checkpoint::open(fixture(kTagged));
  auto loaded = remap::load(checkpoint, options_for(s, "cuda:0->cuda:0,cuda:1->cuda:1"));
  const auto streams = s.sc.calls("cudaStreamCreateWithFlags");
  const auto pinned = s.sc.calls("cudaHostAlloc");
  loaded.cpu();
  CHECK(s.sc.calls("cudaStreamCreateWithFlags") - streams == 2);  // one per device, not one per storage
  CHECK(s.sc.calls("cudaHostAlloc") == pinned);                   // the load's ring, reused
  for (std::size_t i = 0; i < loaded.tensors().size(); ++i) CHECK(loaded.device_of(i) == Device::cpu());
  check_all_equal_manifest(loaded);
}

TEST_CASE("load_into takes an empty CUDA destination with a null data pointer (issue 26, 9)", "[standin][defect]") {
  OnStandin s("devices=1,memory=64M");
  const auto checkpoint = torch::Checkpoint::open(fixture("checkpoints/scalars_empty.t113.pt"));
  const auto loaded = remap::load(checkpoint, options_for(s, "cpu"));
  const std::vector<remap::Destination> empty = {
      {"empty_0", Device::cuda(0), nullptr, torch::DType::kFloat32, {0}},
      {"empty_3x0", Device::cuda(0), nullptr, torch::DType::kFloat32, {3, 0}},
  };
  CHECK(loaded.load_into(empty, false).loaded.size() == 2);
  CHECK(s.violations().empty());
}

TEST_CASE("sliced loads to CUDA stream their rows and columns through the ring (issue 26, 9)", "[standin][defect]") {
  OnStandin s("devices=1,memory=64M");
  struct Case {
    const char* file;
    const char* rules;
  };
  for (const Case c : {Case{kTagged, "rows:0.weight,cols:2.weight"}, Case{"checkpoints/dtypes_be.t113.pt", "all:*"}}) {
    for (int rank : {0, 1}) {
      INFO(c.file << " rank " << rank);
      const auto checkpoint = torch::Checkpoint::open(fixture(c.file));
      LoadOptions on_host = options_for(s, "cpu");
      on_host.slice = remap::RankSlice{rank, 2, remap::SliceSpec::parse(c.rules)};
      LoadOptions on_cuda = options_for(s, "cuda:0");
      on_cuda.slice = on_host.slice;
      on_cuda.cuda.staging_bytes = 64;  // slices cross many staging buffers
      on_cuda.cuda.staging_buffers = 2;
      const auto host = remap::load(checkpoint, on_host);
      const auto cuda = remap::load(checkpoint, on_cuda);
      REQUIRE(host.tensors().size() == cuda.tensors().size());
      for (std::size_t i = 0; i < host.tensors().size(); ++i) {
        INFO(host.tensors()[i].name);
        if (!host.tensors()[i].storage) continue;
        CHECK(cuda.device_of(i) == Device::cuda(0));
        CHECK(cuda.tensor_sha256(i) == host.tensor_sha256(i));
      }
    }
  }
  CHECK(s.violations().empty());
}

TEST_CASE("a runtime whose cudaPointerAttributes grew writes into room left for it (issue 26, 8)", "[standin][defect]") {
  // The runtime writes 512 bytes, as a future runtime with a larger structure would: the adapter
  // must hand it room, not a structure of the headers it was built with (ASan checks the bounds).
  OnStandin s("devices=1,memory=64M,attributes_bytes=512");
  const auto checkpoint = torch::Checkpoint::open(fixture(kTagged));
  const auto loaded = remap::load(checkpoint, options_for(s, "cuda:*->cpu"));
  REQUIRE(s.sc.cudaSetDevice(0) == 0);
  void* dst = nullptr;
  REQUIRE(s.sc.cudaMalloc(&dst, 512) == 0);
  const std::vector<remap::Destination> weight = {{"0.weight", Device::cuda(0), dst, torch::DType::kFloat32, {16, 8}}};
  CHECK(loaded.load_into(weight, false).loaded.size() == 1);  // asks cudaPointerGetAttributes what dst is
  CHECK(sha256_of_device(s, dst, 512) == manifest_sha("0.weight"));
  remap::DeviceBackend::PointerInfo info;
  REQUIRE(s.backend().pointer_info(dst, &info) == 0);
  CHECK(info.kind == remap::DeviceBackend::PointerKind::kDevice);
  CHECK(info.device == 0);
  REQUIRE(s.sc.cudaFree(dst) == 0);
}

TEST_CASE("runtime failures through the real adapter: named, nothing left behind", "[standin]") {
  const auto checkpoint = torch::Checkpoint::open(fixture(kTagged));
  SECTION("out of device memory") {
    OnStandin s("devices=1,memory=64M");
    REQUIRE(s.sc.fail("cudaMalloc", 1, remap::cuda::kErrorMemoryAllocation) == 0);
    const Error e = error_of([&] { remap::load(checkpoint, options_for(s, "cuda:*->cuda:0")); });
    CHECK(e.code() == ErrorCode::kRemapOutOfMemory);
    CHECK_THAT(e.what(), Catch::Contains("cudaErrorMemoryAllocation") && Catch::Contains("cuda:0"));
    CHECK(s.sc.live("device_allocations") == 0);
    CHECK(s.sc.live("streams") == 0);
  }
  SECTION("a copy that fails when it runs: a sticky error, reported against its storage") {
    OnStandin s("devices=2,memory=64M");
    REQUIRE(s.sc.fail("cudaMemcpyAsync", 1, remap::cuda::kErrorIllegalAddress) == 0);
    remap::LoadOptions o = options_for(s, "cuda:*->cuda:1");
    o.cuda.arena = false;
    const Error e = error_of([&] { remap::load(checkpoint, o); });
    CHECK(e.code() == ErrorCode::kRemapDevice);
    CHECK_THAT(e.what(), Catch::Contains("cudaErrorIllegalAddress") && Catch::Contains("to cuda:1") &&
                             Catch::Contains("storage"));
    s.violations();  // the injected failure is not a defect of maploc's
  }
}

}  // namespace maploc::test
