// simulator_test.cpp - the upload pipeline against the simulated device: it catches a broken
// ordering, names the storage of a failed background copy, frees everything on every failure.
#include <catch2/catch.hpp>

#include <cstring>
#include <numeric>

#include "error_of.h"
#include "maploc/remap/loaded.h"
#include "simulated_backend.h"
#include "upload.h"

namespace maploc::test {
namespace {

using remap::detail::SimulatedBackend;
using remap::detail::UploadJob;

// Bytes that differ from buffer to buffer and from job to job.
std::vector<std::uint8_t> pattern(std::size_t n, std::uint8_t seed) {
  std::vector<std::uint8_t> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::uint8_t>(seed * 31 + i * 7 + i / 4096);
  return out;
}

struct Uploads {
  std::vector<std::vector<std::uint8_t>> sources;
  std::vector<std::shared_ptr<void>> owners;
  std::vector<UploadJob> jobs;
};

// One job per size, each in its own device allocation on `device`.
Uploads make_jobs(const std::shared_ptr<SimulatedBackend>& sim, const std::vector<std::size_t>& sizes, int device = 0) {
  Uploads u;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    u.sources.push_back(pattern(sizes[i], static_cast<std::uint8_t>(i + 1)));
    void* dst = nullptr;
    u.owners.push_back(remap::detail::device_allocate(sim, device, sizes[i], &dst, "test"));
    u.jobs.push_back({Bytes(nullptr, u.sources.back().data(), u.sources.back().size()), -1, 1, dst, device,
                      "storage '" + std::to_string(i) + "'"});
  }
  return u;
}

bool all_equal(SimulatedBackend& sim, const Uploads& u) {
  for (const auto& j : u.jobs) {
    std::vector<std::uint8_t> back(j.source.size());
    remap::detail::device_download(sim, j.device, j.dst, back.data(), back.size(), "test", {});
    if (std::memcmp(back.data(), j.source.data(), back.size()) != 0) return false;
  }
  return true;
}

remap::CudaOptions ring(std::uint64_t bytes, unsigned buffers, unsigned readers, bool arena = false) {
  remap::CudaOptions o;
  o.staging_bytes = bytes;
  o.staging_buffers = buffers;
  o.reader_threads = readers;
  o.arena = arena;
  return o;
}

std::shared_ptr<SimulatedBackend> simulator(std::size_t max_queued = 64, std::size_t devices = 1) {
  SimulatedBackend::Options o;
  o.capacities.assign(devices, std::uint64_t{1} << 30);
  o.piece_bytes = 4096;
  o.max_queued = max_queued;
  return std::make_shared<SimulatedBackend>(o);
}

}  // namespace

TEST_CASE("the simulator catches a staging buffer refilled before its copy finished", "[remap][simulator]") {
  // Copies start only when waited for: the broken pipeline's stale copies read refilled buffers.
  for (const bool broken : {false, true}) {
    INFO("broken=" << broken);
    auto sim = simulator(0);
    {
      Uploads u = make_jobs(sim, {40000, 9000, 70000, 300});
      remap::detail::UploadHooks hooks;
      hooks.refill_before_copy_done = broken;
      remap::detail::upload(*sim, u.jobs, -1, ring(8192, 2, 2), remap::detail::Destinations::kSeparate, nullptr, hooks);
      CHECK(all_equal(*sim, u) == !broken);
    }
    sim->release_staging();
    CHECK(sim->live().device_allocations == 0);
  }
}

TEST_CASE("uploads equal their sources for every ring geometry and reader count", "[remap][simulator]") {
  auto sim = simulator();
  const std::vector<std::size_t> sizes = {1, 4096, 4097, 100000, 3 << 20, 17, 65536, 12345};
  for (const std::uint64_t staging : {std::uint64_t{4096}, std::uint64_t{65536}, std::uint64_t{1} << 20,
                                      std::uint64_t{64} << 20}) {
    for (const unsigned buffers : {1u, 2u, 8u}) {
      for (const unsigned readers : {1u, 3u, 8u}) {
        INFO("staging=" << staging << " buffers=" << buffers << " readers=" << readers);
        Uploads u = make_jobs(sim, sizes);
        remap::detail::upload(*sim, u.jobs, -1, ring(staging, buffers, readers), remap::detail::Destinations::kSeparate);
        CHECK(all_equal(*sim, u));
      }
    }
  }
  const auto live = sim->live();
  CHECK(live.device_allocations == 0);
  CHECK(live.streams == 0);
  CHECK(live.events == 0);
  // The last ring (the check's downloads, default geometry), kept.
  CHECK(live.pinned_buffers == remap::CudaOptions{}.staging_buffers);
  sim->release_staging();
  CHECK(sim->live().pinned_buffers == 0);
}

TEST_CASE("small storages share a staging buffer and, in an arena, one transfer", "[remap][simulator]") {
  auto sim = simulator();
  std::vector<std::uint8_t> src = pattern(100 * 256, 9);
  void* base = nullptr;
  const auto owner = remap::detail::device_allocate(sim, 0, src.size(), &base, "arena");
  std::vector<UploadJob> jobs;
  for (std::size_t i = 0; i < 100; ++i) {  // 100 neighbours of 200 bytes at 256-byte offsets
    jobs.push_back({Bytes(nullptr, src.data() + i * 256, 200), -1, 1, static_cast<std::uint8_t*>(base) + i * 256, 0, "s"});
  }
  auto before = sim->counts().host_to_device;
  remap::detail::upload(*sim, jobs, -1, ring(1 << 20, 2, 2, true), remap::detail::Destinations::kOwnArena);
  CHECK(sim->counts().host_to_device - before == 1);
  // Outside maploc's own arena a gap may be someone else's memory: one transfer per storage.
  before = sim->counts().host_to_device;
  remap::detail::upload(*sim, jobs, -1, ring(1 << 20, 2, 2, true), remap::detail::Destinations::kSeparate);
  CHECK(sim->counts().host_to_device - before == 100);
  std::vector<std::uint8_t> back(src.size());
  remap::detail::device_download(*sim, 0, base, back.data(), back.size(), "arena", {});
  for (std::size_t i = 0; i < 100; ++i) CHECK(std::memcmp(back.data() + i * 256, src.data() + i * 256, 200) == 0);
}

TEST_CASE("a failed background copy is reported against the storage it carried", "[remap][simulator]") {
  // Each job fills whole staging buffers: transfers A A A B B C.
  const std::uint64_t cap = 4096;
  const std::vector<std::pair<std::size_t, std::string>> cases = {
      {1, "storage '0'"}, {3, "storage '0'"}, {4, "storage '1'"}, {5, "storage '1'"}, {6, "storage '2'"}};
  for (const auto& [nth, who] : cases) {
    for (const unsigned buffers : {1u, 2u, 4u}) {
      INFO("copy " << nth << " fails, buffers=" << buffers);
      auto sim = simulator();
      {
        Uploads u = make_jobs(sim, {3 * cap, 2 * cap, cap});
        sim->fail_copy(nth);
        const Error e = error_of([&] { remap::detail::upload(*sim, u.jobs, -1, ring(cap, buffers, 2), remap::detail::Destinations::kSeparate); });
        CHECK(e.code() == ErrorCode::kRemapDevice);
        CHECK_THAT(e.what(), Catch::Contains("copying " + who + " to cuda:0 failed"));
        CHECK_THAT(e.what(), Catch::Contains("injected copy failure"));
      }
      sim->release_staging();
      const auto live = sim->live();
      CHECK(live.device_allocations + live.pinned_buffers + live.streams + live.events == 0);
    }
  }
}

TEST_CASE("a staging ring that cannot be made whole is freed", "[remap][simulator]") {
  auto sim = simulator();
  Uploads u = make_jobs(sim, {100000});
  for (std::size_t nth = 1; nth <= 4; ++nth) {
    sim->fail_allocation(nth);
    CHECK(code_of([&] { remap::detail::upload(*sim, u.jobs, -1, ring(4096, 4, 2), remap::detail::Destinations::kSeparate); }) == ErrorCode::kRemapDevice);
    CHECK(sim->live().pinned_buffers == 0);
    CHECK(sim->live().streams == 0);
  }
}

TEST_CASE("the simulator refuses copies outside an allocation and out-of-capacity allocations", "[remap][simulator]") {
  SimulatedBackend::Options o;
  o.capacities = {1 << 20};
  auto sim = std::make_shared<SimulatedBackend>(o);
  void* p = nullptr;
  CHECK(sim->device_alloc(&p, 2 << 20) == SimulatedBackend::kOutOfMemory);
  REQUIRE(sim->device_alloc(&p, 1000) == 0);
  remap::DeviceBackend::Stream s = nullptr;
  REQUIRE(sim->stream_create(&s) == 0);
  std::vector<std::uint8_t> host(2000);
  CHECK(sim->copy_async(p, host.data(), 1001, remap::DeviceBackend::CopyKind::kHostToDevice, s) ==
        SimulatedBackend::kInvalidValue);
  CHECK(sim->copy_async(static_cast<std::uint8_t*>(p) + 1, host.data(), 1000,
                        remap::DeviceBackend::CopyKind::kHostToDevice, s) == SimulatedBackend::kInvalidValue);
  CHECK(sim->copy_async(p, host.data(), 1000, remap::DeviceBackend::CopyKind::kHostToDevice, s) == 0);
  CHECK(sim->stream_sync(s) == 0);
  CHECK(sim->stream_destroy(s) == 0);
  CHECK(sim->device_free(p) == 0);
  CHECK(sim->set_device(1) == SimulatedBackend::kInvalidDevice);
  remap::DeviceBackend::PointerInfo info;
  REQUIRE(sim->pointer_info(host.data(), &info) == 0);
  CHECK(info.kind == remap::DeviceBackend::PointerKind::kHost);
}

TEST_CASE("a missing or foreign CUDA runtime library is a clear refusal, and no device is no crash", "[remap]") {
  std::string why;
  CHECK(remap::detail::load_cuda_runtime("libmaploc-no-such-cudart.so.13", &why) == nullptr);
  if (remap::DeviceInventory::probe().cuda_built) {
    CHECK_THAT(why, Catch::Contains("libmaploc-no-such-cudart.so.13") && Catch::Contains("MAPLOC_CUDART"));
    // A library that is not a CUDA runtime: named, with the symbol it lacks.
    CHECK(remap::detail::load_cuda_runtime("libz.so.1", &why) == nullptr);
    CHECK_THAT(why, Catch::Contains("libz.so.1") && Catch::Contains("cudaRuntimeGetVersion"));
  } else {
    CHECK_THAT(why, Catch::Contains("built without CUDA"));
  }
  const auto& inventory = remap::DeviceInventory::probe();
  if (inventory.cuda_device_count == 0) CHECK_FALSE(inventory.cuda_note.empty());
}

}  // namespace maploc::test
