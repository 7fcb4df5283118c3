// dlpack_test.cpp - every fixture tensor exported as DLPack: geometry, dtype codes and values against
// torch's manifests, the errors for what DLPack cannot describe, lifetime, sharing and devices.
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <set>

#include "error_of.h"
#include "manifest.h"
#include "maploc/remap/dlpack.h"
#include "support/sha256.h"
#include "simulated_backend.h"

namespace maploc::test {
namespace {

using remap::HostMemory;
using remap::LoadOptions;
using remap::MapLocation;

using Owned = std::unique_ptr<DLManagedTensor, void (*)(DLManagedTensor*)>;
Owned own(DLManagedTensor* t) {
  return Owned(t, [](DLManagedTensor* p) { p->deleter(p); });
}

// The DLPack codes a consumer must see, spelled here from DLPack's table (not from maploc's).
struct Code {
  int code, bits, lanes = 1;
};
std::map<std::string, Code> expected_codes() {
  std::map<std::string, Code> out = {
      {"float64", {kDLFloat, 64}}, {"float32", {kDLFloat, 32}},   {"float16", {kDLFloat, 16}},
      {"bfloat16", {kDLBfloat, 16}}, {"complex32", {kDLComplex, 32}}, {"complex64", {kDLComplex, 64}},
      {"complex128", {kDLComplex, 128}}, {"uint8", {kDLUInt, 8}}, {"uint16", {kDLUInt, 16}},
      {"uint32", {kDLUInt, 32}},   {"uint64", {kDLUInt, 64}},     {"int8", {kDLInt, 8}},
      {"int16", {kDLInt, 16}},     {"int32", {kDLInt, 32}},       {"int64", {kDLInt, 64}},
  };
#if defined(DLPACK_MAJOR_VERSION) || DLPACK_VERSION >= 80
  out["bool"] = {kDLBool, 8};
#else
  out["bool"] = {kDLUInt, 8};  // DLPack 0.6 has no bool code: torch's own export before kDLBool
#endif
#if defined(DLPACK_MAJOR_VERSION) && (DLPACK_MAJOR_VERSION > 1 || DLPACK_MINOR_VERSION >= 1)
  out["float8_e5m2"] = {kDLFloat8_e5m2, 8};
  out["float8_e4m3fn"] = {kDLFloat8_e4m3fn, 8};
  out["float8_e5m2fnuz"] = {kDLFloat8_e5m2fnuz, 8};
  out["float8_e4m3fnuz"] = {kDLFloat8_e4m3fnuz, 8};
  out["float8_e8m0fnu"] = {kDLFloat8_e8m0fnu, 8};
  out["float4_e2m1fn_x2"] = {kDLFloat4_e2m1fn, 4, 2};  // two values a byte, as torch exports it
#endif
  return out;
}

// SHA-256 of the values a DLPack host tensor describes, walked row-major through its strides.
std::string dlpack_sha256(const DLTensor& t) {
  const std::size_t size = (t.dtype.bits * t.dtype.lanes + 7) / 8;
  std::int64_t numel = 1;
  for (int d = 0; d < t.ndim; ++d) numel *= t.shape[d];
  std::vector<std::uint8_t> values;
  values.reserve(static_cast<std::size_t>(numel) * size);
  std::vector<std::int64_t> index(static_cast<std::size_t>(t.ndim), 0);
  const auto* base = static_cast<const std::uint8_t*>(t.data) + t.byte_offset;
  for (std::int64_t n = 0; n < numel; ++n) {
    std::int64_t at = 0;
    for (int d = 0; d < t.ndim; ++d) at += index[d] * t.strides[d];
    values.insert(values.end(), base + at * static_cast<std::int64_t>(size), base + (at + 1) * static_cast<std::int64_t>(size));
    for (int d = t.ndim - 1; d >= 0 && ++index[d] == t.shape[d]; --d) index[d] = 0;
  }
  return Sha256::hex(values);
}

remap::Loaded load_cpu(const torch::Checkpoint& checkpoint, HostMemory host = HostMemory::kMappedView) {
  LoadOptions o;
  o.map = MapLocation::parse("cpu");
  o.host = host;
  return remap::load(checkpoint, o);
}

struct Simulated {
  std::shared_ptr<remap::detail::SimulatedBackend> sim;
  remap::DeviceInventory inventory;
};

Simulated simulated(int devices) {
  remap::detail::SimulatedBackend::Options o;
  o.capacities.assign(static_cast<std::size_t>(devices), std::uint64_t{1} << 30);
  Simulated s{std::make_shared<remap::detail::SimulatedBackend>(o), {}};
  s.inventory.cuda_built = true;
  s.inventory.cuda_device_count = devices;
  s.inventory.backend = s.sim;
  return s;
}

}  // namespace

TEST_CASE("every fixture tensor is exported zero-copy with torch's geometry, dtype and values", "[remap][dlpack]") {
  const auto codes = expected_codes();
  std::size_t exported = 0, refused = 0;
  std::set<std::string> dtypes_seen;
  for (const auto& [file, manifest] : all_fixtures()) {
    const auto checkpoint = torch::Checkpoint::open(fixture("checkpoints/" + file));
    for (const auto host : {HostMemory::kMappedView, HostMemory::kOwnedCopy}) {
      const auto loaded = load_cpu(checkpoint, host);
      std::set<std::string> in_manifest;
      for (const auto& want : manifest["tensors"]) {
        const std::string name = want["name"], dtype = want["dtype"];
        INFO(file << " " << name << " " << dtype);
        in_manifest.insert(name);
        const auto index = loaded.find(name);
        REQUIRE(index);
        const auto code = codes.find(dtype);
        if (code == codes.end()) {  // quantized, bits, float8 under an older header: refused, named
          const auto e = error_of([&] { own(remap::to_dlpack(loaded, *index)); });
          CHECK(e.code() == ErrorCode::kTorchNotConvertible);
          CHECK(std::string(e.what()).find("'" + name + "'") != std::string::npos);
          ++refused;
          continue;
        }
        const auto t = own(remap::to_dlpack(loaded, *index));
        const DLTensor& dl = t->dl_tensor;
        CHECK(dl.device.device_type == kDLCPU);
        CHECK(dl.device.device_id == 0);
        CHECK(int(dl.dtype.code) == code->second.code);
        CHECK(int(dl.dtype.bits) == code->second.bits);
        CHECK(int(dl.dtype.lanes) == code->second.lanes);
        REQUIRE(dl.ndim == int(want["shape"].size()));
        for (int d = 0; d < dl.ndim; ++d) {
          CHECK(dl.shape[d] == want["shape"][std::size_t(d)].get<std::int64_t>());
          CHECK(dl.strides[d] == want["stride"][std::size_t(d)].get<std::int64_t>());
        }
        const auto& placed = loaded.storages()[*loaded.tensors()[*index].storage];
        const auto offset = want["storage_offset"].get<std::int64_t>() *
                            std::int64_t(torch::element_size(loaded.tensors()[*index].dtype));
        CHECK(static_cast<const char*>(dl.data) + dl.byte_offset == static_cast<const char*>(placed.data) + offset);
        CHECK(dlpack_sha256(dl) == want["sha256"].get<std::string>());
        dtypes_seen.insert(dtype);
        ++exported;
      }
      // Composites (sparse, nested, quantized per channel, ...) are listed by their components: refused, named.
      for (std::size_t i = 0; i < loaded.tensors().size(); ++i) {
        const auto& t = loaded.tensors()[i];
        const bool exportable = t.kind == torch::TensorKind::kDense || t.kind == torch::TensorKind::kStorage;
        if (in_manifest.count(t.name) != 0 || exportable) continue;
        INFO(file << " " << t.name);
        const auto e = error_of([&] { own(remap::to_dlpack(loaded, i)); });
        CHECK(e.code() == ErrorCode::kTorchNotConvertible);
        CHECK(std::string(e.what()).find("'" + t.name + "'") != std::string::npos);
        ++refused;
      }
    }
  }
  CHECK(exported > 1000);
  CHECK(refused > 10);
  for (const char* d : {"bool", "bfloat16", "complex32", "complex128", "uint64", "float16", "int8"}) {
    CHECK(dtypes_seen.count(d) == 1);
  }
}

TEST_CASE("lazy conj and neg bits, nested and meta tensors are refused, naming the tensor", "[remap][dlpack]") {
  const auto dir = fixture("rebuilds");
  const auto conj = torch::Checkpoint::open(dir / "conj_neg.t2x.pt");
  const auto loaded = load_cpu(conj);
  for (const std::string name : {"conj", "neg"}) {
    const auto e = error_of([&] { own(remap::to_dlpack(loaded, *loaded.find(name))); });
    CHECK(e.code() == ErrorCode::kTorchNotConvertible);
    CHECK(std::string(e.what()).find("'" + name + "'") != std::string::npos);
  }
  const auto want = read_json(dir / "conj_neg.t2x.pt.expected.json")["tensors"]["plain"];
  CHECK(dlpack_sha256(own(remap::to_dlpack(loaded, *loaded.find("plain")))->dl_tensor) == want["sha256"].get<std::string>());

  const auto rebuilds = torch::Checkpoint::open(dir / "rebuilds.t2x.pt");
  LoadOptions o;
  o.map = MapLocation::parse("cpu");
  const auto all = remap::load(rebuilds, o);
  for (const std::string name : {"nested", "meta"}) {
    INFO(name);
    CHECK(code_of([&] { own(remap::to_dlpack(all, *all.find(name))); }) == ErrorCode::kTorchNotConvertible);
  }
  CHECK(code_of([&] { own(remap::to_dlpack(all, all.tensors().size())); }) == ErrorCode::kInvalidArgument);
  o.map = MapLocation::parse("meta");
  const auto on_meta = remap::load(rebuilds, o);
  CHECK(code_of([&] { own(remap::to_dlpack(on_meta, *on_meta.find("plain"))); }) == ErrorCode::kTorchNotConvertible);
}

TEST_CASE("an exported tensor outlives its Loaded and Checkpoint, tensors of one storage share it", "[remap][dlpack]") {
  const auto manifest = read_json(fixture("checkpoints/views_shared.t113.pt.manifest.json"));
  std::map<std::string, std::string> sha;
  for (const auto& t : manifest["tensors"]) sha[t["name"]] = t["sha256"];
  for (const auto host : {HostMemory::kMappedView, HostMemory::kOwnedCopy}) {
    std::vector<Owned> kept;
    const void* storage_of_base = nullptr;
    {
      const auto checkpoint = torch::Checkpoint::open(fixture("checkpoints/views_shared.t113.pt"));
      auto loaded = load_cpu(checkpoint, host);
      for (const std::string name : {"base", "transpose", "tied_a", "tied_b"}) {
        kept.push_back(own(remap::to_dlpack(loaded, *loaded.find(name))));
      }
      const auto& placed = loaded.storages()[*loaded.tensors()[*loaded.find("base")].storage];
      storage_of_base = placed.data;
      const auto holders = placed.owner.use_count();
      // base and transpose view one storage: each export holds one more share of it.
      kept.push_back(own(remap::to_dlpack(loaded, *loaded.find("base"))));
      CHECK(placed.owner.use_count() == holders + 1);
      kept.pop_back();
      CHECK(placed.owner.use_count() == holders);
      loaded.to(remap::Device::meta());  // the Loaded lets go of its storages; the exports keep them
    }
    // Loaded and Checkpoint are gone: the storages live on in the exports (ASan checks the reads).
    CHECK(kept[0]->dl_tensor.data == storage_of_base);
    CHECK(dlpack_sha256(kept[0]->dl_tensor) == sha["base"]);
    kept[0].reset();  // dropping base leaves transpose, over the same storage, valid
    CHECK(dlpack_sha256(kept[1]->dl_tensor) == sha["transpose"]);
    CHECK(dlpack_sha256(kept[2]->dl_tensor) == sha["tied_a"]);
    kept[2].reset();
    CHECK(dlpack_sha256(kept[3]->dl_tensor) == sha["tied_b"]);
  }
}

TEST_CASE("CUDA placements export as kDLCUDA with the index, pinned host copies as kDLCUDAHost", "[remap][dlpack][cuda-sim]") {
  const auto s = simulated(2);
  const auto checkpoint = torch::Checkpoint::open(fixture("checkpoints/views_shared.t113.pt"));
  const auto manifest = read_json(fixture("checkpoints/views_shared.t113.pt.manifest.json"));
  LoadOptions o;
  o.inventory = &s.inventory;
  o.map = MapLocation::parse("cuda:1");
  const auto on_device = remap::load(checkpoint, o);
  for (const auto& want : manifest["tensors"]) {
    const auto index = *on_device.find(want["name"].get<std::string>());
    const auto t = own(remap::to_dlpack(on_device, index));
    CHECK(t->dl_tensor.device.device_type == kDLCUDA);
    CHECK(t->dl_tensor.device.device_id == 1);
    const auto& placed = on_device.storages()[*on_device.tensors()[index].storage];
    // A device pointer: compared, never read.
    CHECK(t->dl_tensor.data == static_cast<char*>(placed.data) + want["storage_offset"].get<std::int64_t>() * 4);
  }
  o.map = MapLocation::parse("cpu");
  o.host = HostMemory::kPinned;
  const auto pinned = remap::load(checkpoint, o);
  for (const auto& want : manifest["tensors"]) {
    const auto t = own(remap::to_dlpack(pinned, *pinned.find(want["name"].get<std::string>())));
    CHECK(t->dl_tensor.device.device_type == kDLCUDAHost);
    CHECK(dlpack_sha256(t->dl_tensor) == want["sha256"].get<std::string>());
  }
}

}  // namespace maploc::test
