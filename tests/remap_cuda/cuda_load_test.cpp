// cuda_load_test.cpp - on a real CUDA device: every fixture to cuda:0 and back equals torch's
// manifest; sharing, arenas, no leaks (through the runtime maploc loads with dlopen).
#include <cstring>
#include <fstream>

#include "maploc/error.h"
#include "maploc/remap/loaded.h"
#include "support/sha256.h"
#include "maploc/zip/archive.h"
#include "remap/manifest.h"
#include "upload.h"

namespace maploc::test {
namespace {

using remap::Device;
using remap::LoadOptions;
using remap::MapLocation;

LoadOptions to_cuda0(bool arena, std::uint64_t staging) {
  LoadOptions o;
  o.map = MapLocation::parse("cuda:0");
  o.cuda.arena = arena;
  o.cuda.staging_bytes = staging;
  return o;
}

remap::DeviceBackend& runtime() { return *remap::DeviceInventory::probe().backend; }

std::uint64_t free_bytes() {
  std::uint64_t free = 0, total = 0;
  runtime().set_device(0);
  runtime().mem_info(&free, &total);
  return free;
}

}  // namespace

TEST_CASE("every fixture to cuda:0 and back equals the manifest", "[cuda]") {
  for (bool arena : {false, true}) {
    for (std::uint64_t staging : {std::uint64_t{4096}, std::uint64_t{16} << 20}) {
      for (const auto& [file, manifest] : all_fixtures()) {
        INFO(file << " arena=" << arena << " staging=" << staging);
        const auto checkpoint = torch::Checkpoint::open(fixture("checkpoints/" + file));
        const auto loaded = remap::load(checkpoint, to_cuda0(arena, staging));
        for (const auto& t : manifest["tensors"]) {
          INFO(t["name"].get<std::string>());
          const auto idx = loaded.find(t["name"].get<std::string>());
          REQUIRE(idx.has_value());
          CHECK(loaded.device_of(*idx) == Device::cuda(0));
          CHECK(loaded.tensor_sha256(*idx) == t["sha256"].get<std::string>());
        }
      }
    }
  }
}

TEST_CASE("shared storages share device memory, and survive to() round trips", "[cuda]") {
  const auto checkpoint = torch::Checkpoint::open(fixture("checkpoints/views_shared.t113.pt"));
  auto loaded = remap::load(checkpoint, to_cuda0(false, 16 << 20));
  const auto a = *loaded.find("tied_a"), b = *loaded.find("tied_b");
  REQUIRE(loaded.tensors()[a].storage == loaded.tensors()[b].storage);
  remap::DeviceBackend::PointerInfo info;
  REQUIRE(runtime().pointer_info(loaded.storages()[*loaded.tensors()[a].storage].data, &info) == 0);
  CHECK(info.kind == remap::DeviceBackend::PointerKind::kDevice);
  const auto before = loaded.tensor_sha256(a);
  loaded.cpu();
  CHECK(loaded.device_of(b) == Device::cpu());
  loaded.to(Device::cuda(0), "tied_*");
  CHECK(loaded.device_of(a) == Device::cuda(0));
  CHECK(loaded.tensors()[a].storage == loaded.tensors()[b].storage);
  CHECK(loaded.tensor_sha256(b) == before);
}

TEST_CASE("load_into fills caller-owned device buffers", "[cuda]") {
  const auto checkpoint = torch::Checkpoint::open(fixture("checkpoints/gpu_tagged.t113.pt"));
  const auto manifest = read_json(fixture("checkpoints/gpu_tagged.t113.pt.manifest.json"));
  LoadOptions o;
  o.map = MapLocation::parse("cuda:*->cpu");
  const auto loaded = remap::load(checkpoint, o);
  void* dev = nullptr;
  const auto owner = remap::detail::device_allocate(remap::DeviceInventory::probe().backend, 0, 16 * 8 * 4, &dev, "test");
  std::vector<remap::Destination> d = {{"0.weight", Device::cuda(0), dev, torch::DType::kFloat32, {16, 8}}};
  loaded.load_into(d, false);
  std::vector<std::uint8_t> host(16 * 8 * 4);
  remap::detail::device_download(runtime(), 0, dev, host.data(), host.size(), "test", {});
  CHECK(Sha256::hex(host) == manifest["tensors"][0]["sha256"].get<std::string>());
}

TEST_CASE("pinned host placement equals the manifest", "[cuda]") {
  const auto checkpoint = torch::Checkpoint::open(fixture("checkpoints/dtypes_be.t113.pt"));
  const auto manifest = read_json(fixture("checkpoints/dtypes_be.t113.pt.manifest.json"));
  LoadOptions o;
  o.map = MapLocation::parse("cpu");
  o.host = remap::HostMemory::kPinned;
  const auto loaded = remap::load(checkpoint, o);
  for (const auto& t : manifest["tensors"]) {
    CHECK(loaded.tensor_sha256(*loaded.find(t["name"].get<std::string>())) == t["sha256"].get<std::string>());
  }
}

TEST_CASE("1,000 failing loads leak no device memory", "[cuda]") {
  // deflated.t113.pt with its last data record broken: every earlier storage
  // is allocated on the device before the failure.
  std::ifstream in(fixture("checkpoints/deflated.t113.pt"), std::ios::binary);
  std::vector<std::uint8_t> bytes(std::istreambuf_iterator<char>(in), {});
  const auto archive = zip::Archive::from_file(MappedFile::from_bytes(Bytes::owned(bytes), "x"));
  const zip::Record* last = nullptr;
  for (const auto& r : archive.records()) {
    if (r.name.find("/data/") != std::string::npos && r.compressed_size > 0) last = &r;
  }
  REQUIRE(last != nullptr);
  bytes[last->data_offset] = 0xFF;
  const auto checkpoint = torch::Checkpoint::from_file(MappedFile::from_bytes(Bytes::owned(bytes), "broken.pt"));
  { auto warm = remap::load(checkpoint, [] { LoadOptions o; o.map = MapLocation::parse("meta"); return o; }()); }
  const auto before = free_bytes();
  int failures = 0;
  for (int i = 0; i < 1000; ++i) {
    try {
      remap::load(checkpoint, to_cuda0(i % 2 == 0, 1 << 20));
    } catch (const Error&) {
      ++failures;
    }
  }
  CHECK(failures == 1000);
  CHECK(free_bytes() == before);  // the whole device's free bytes: the test runs alone (RUN_SERIAL)
}

}  // namespace maploc::test
