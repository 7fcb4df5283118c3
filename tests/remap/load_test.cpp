// load_test.cpp - CPU placement of every fixture under every mapping kind, checked against torch's manifests.
#include "support/sha256.h"
#include <cstring>

#include "manifest.h"
#include "error_of.h"
#include "maploc/error.h"
#include "maploc/remap/loaded.h"
#include "maploc/remap/plan.h"
#include "maploc/zip/archive.h"

namespace maploc::test {
namespace {

using remap::Device;
using remap::HostMemory;
using remap::LoadOptions;
using remap::MapLocation;

const remap::DeviceInventory kCpuOnly{0, false, {}, {}};

LoadOptions options(MapLocation map, HostMemory host = HostMemory::kMappedView) {
  LoadOptions o;
  o.map = std::move(map);
  o.host = host;
  o.inventory = &kCpuOnly;
  return o;
}

// Every tensor the manifest lists has the manifest's hash in the loaded copy.
void check_hashes(const remap::Loaded& loaded, const nlohmann::json& manifest) {
  for (const auto& t : manifest["tensors"]) {
    const std::string name = t["name"];
    INFO(name);
    const auto idx = loaded.find(name);
    REQUIRE(idx.has_value());
    CHECK(loaded.device_of(*idx) == Device::cpu());
    CHECK(loaded.tensor_sha256(*idx) == t["sha256"].get<std::string>());
  }
}


remap::Loaded load_fixture(const std::string& file, const LoadOptions& o) {
  const auto checkpoint = torch::Checkpoint::open(fixture("checkpoints/" + file));
  return remap::load(checkpoint, o);
}

}  // namespace

TEST_CASE("every fixture loads on the CPU under every mapping kind and equals torch's manifest", "[remap]") {
  MapLocation callback;
  callback.callback = [](const remap::StorageRef&) -> std::optional<std::string> { return "cpu"; };
  const std::vector<std::pair<std::string, MapLocation>> maps = {
      {"cpu", MapLocation::parse("cpu")},
      {"wildcards", MapLocation::parse("cuda:*->cpu,mps->cpu,cpu->cpu")},
      {"auto", MapLocation::parse("auto")},
      {"name rules", MapLocation::parse("name:*weight*->cpu,*->cpu")},
      {"callback", callback},
  };
  int files = 0;
  for (const auto& [file, manifest] : all_fixtures()) {
    INFO(file);
    for (const auto& [label, map] : maps) {
      INFO(label);
      check_hashes(load_fixture(file, options(map)), manifest);
    }
    check_hashes(load_fixture(file, options(MapLocation::parse("cpu"), HostMemory::kOwnedCopy)), manifest);
    ++files;
  }
  CHECK(files >= 40);
}

TEST_CASE("without a mapping, CPU checkpoints load and device-tagged ones fail with torch's meaning", "[remap]") {
  for (const auto& [file, manifest] : all_fixtures()) {
    INFO(file);
    if (!has_non_cpu_tag(manifest)) {
      check_hashes(load_fixture(file, options(MapLocation::none())), manifest);
      continue;
    }
    const auto code = code_of([&] { load_fixture(file, options(MapLocation::none())); });
    CHECK((code == ErrorCode::kRemapCudaUnavailable || code == ErrorCode::kRemapUnknownTag));
  }
  auto e = code_of([] { load_fixture("gpu_tagged.t113.pt", options(MapLocation::none())); });
  CHECK(e == ErrorCode::kRemapCudaUnavailable);
  CHECK(code_of([] { load_fixture("device_tags.t113.pt", options(MapLocation::parse("cuda:*->cpu"))); }) ==
        ErrorCode::kRemapUnknownTag);
}

TEST_CASE("LoadOptions::strict refuses a checkpoint with a storage no named tensor reaches", "[remap][completeness]") {
  // od_build_only: an OrderedDict whose BUILD state holds a tensor maploc does not name (docs/torch.md).
  const auto checkpoint = torch::Checkpoint::open(fixture("pydicts/od_build_only.zip.pt"));
  REQUIRE(checkpoint.unreferenced_storages().size() == 1);
  LoadOptions o = options(MapLocation::parse("cpu"));
  CHECK(remap::load(checkpoint, o).storages().size() == checkpoint.storages().size());
  o.strict = true;
  const Error e = error_of([&] { (void)remap::load(checkpoint, o); });
  CHECK(e.code() == ErrorCode::kTorchIncomplete);
  CHECK(std::string(e.what()).find("od_build_only.zip.pt") != std::string::npos);
  // A complete checkpoint loads strictly.
  LoadOptions strict = options(MapLocation::parse("cuda:*->cpu"));
  strict.strict = true;
  CHECK_NOTHROW(remap::load(torch::Checkpoint::open(fixture("checkpoints/gpu_tagged.t113.pt")), strict));
}

TEST_CASE("the plan says where each storage goes before anything is read", "[remap]") {
  const auto checkpoint = torch::Checkpoint::open(fixture("checkpoints/gpu_tagged.t113.pt"));
  const auto plan = remap::make_plan(checkpoint, MapLocation::parse("cuda:1->meta,cuda:0->cpu"), kCpuOnly);
  REQUIRE(plan.totals.size() == 2);
  CHECK(plan.totals[0].device == Device::cpu());
  CHECK(plan.totals[0].storages == 2);
  CHECK(plan.totals[0].bytes == (16 * 8 + 16) * 4);
  CHECK(plan.totals[1].device == Device::meta());
  CHECK(plan.totals[1].bytes == (4 * 16 + 4) * 4);
}

TEST_CASE("shared storages stay shared after load and after to()", "[remap]") {
  auto loaded = load_fixture("views_shared.t113.pt", options(MapLocation::parse("cpu"), HostMemory::kOwnedCopy));
  const auto a = *loaded.find("tied_a"), b = *loaded.find("tied_b"), base = *loaded.find("base"),
             t = *loaded.find("transpose");
  CHECK(loaded.tensors()[a].storage == loaded.tensors()[b].storage);
  CHECK(loaded.tensors()[base].storage == loaded.tensors()[t].storage);
  const auto before = loaded.tensor_sha256(t);
  loaded.to(Device::meta(), "tied_a");  // moves storage 4, and tied_b with it
  CHECK(loaded.device_of(b) == Device::meta());
  CHECK(loaded.device_of(base) == Device::cpu());
  // A meta storage has no bytes to bring back, like torch's "Cannot copy out of meta tensor".
  CHECK(code_of([&] { loaded.to(Device::cpu()); }) == ErrorCode::kInvalidArgument);
  CHECK(loaded.device_of(base) == Device::cpu());
  CHECK(loaded.tensor_sha256(t) == before);
}

TEST_CASE("meta reads no byte: a checkpoint with unreadable data loads on meta", "[remap]") {
  // deflated.t113.pt with every data record's deflate stream broken.
  auto bytes = [] {
    std::ifstream in(fixture("checkpoints/deflated.t113.pt"), std::ios::binary);
    return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in), {});
  }();
  const auto archive = zip::Archive::from_file(MappedFile::from_bytes(Bytes::owned(bytes), "x"));
  int broken = 0;
  for (const auto& r : archive.records()) {
    if (r.name.find("/data/") == std::string::npos || r.compressed_size == 0) continue;
    bytes[r.data_offset] = 0xFF;  // a deflate block of the reserved type
    ++broken;
  }
  REQUIRE(broken > 3);
  const auto checkpoint = torch::Checkpoint::from_file(MappedFile::from_bytes(Bytes::owned(bytes), "broken.pt"));
  auto loaded = remap::load(checkpoint, options(MapLocation::parse("meta")));
  for (std::size_t i = 0; i < loaded.tensors().size(); ++i) {
    if (loaded.tensors()[i].storage) CHECK(loaded.device_of(i) == Device::meta());
  }
  CHECK(code_of([&] { remap::load(checkpoint, options(MapLocation::parse("cpu"))); }) == ErrorCode::kZipInflate);
}

TEST_CASE("views are zero-copy, copies are 64-byte aligned, writable views never touch the file", "[remap]") {
  const auto checkpoint = torch::Checkpoint::open(fixture("checkpoints/gpu_tagged.t113.pt"));
  const auto manifest = read_json(fixture("checkpoints/gpu_tagged.t113.pt.manifest.json"));
  auto view = remap::load(checkpoint, options(MapLocation::parse("cpu")));
  const Bytes raw = checkpoint.storage_bytes(0);
  CHECK(view.storages()[0].data == raw.data());
  CHECK_FALSE(view.storages()[0].writable);

  auto copy = remap::load(checkpoint, options(MapLocation::parse("cpu"), HostMemory::kOwnedCopy));
  for (const auto& s : copy.storages()) CHECK(reinterpret_cast<std::uintptr_t>(s.data) % 64 == 0);

  auto o = options(MapLocation::parse("cpu"));
  o.writable = true;
  auto cow = remap::load(checkpoint, o);
  REQUIRE(cow.storages()[0].writable);
  std::memset(cow.storages()[0].data, 0, cow.storages()[0].nbytes);
  CHECK(cow.tensor_sha256(*cow.find("0.weight")) != manifest["tensors"][0]["sha256"].get<std::string>());
  check_hashes(load_fixture("gpu_tagged.t113.pt", options(MapLocation::parse("cpu"))), manifest);
}

TEST_CASE("pinned host memory needs CUDA", "[remap]") {
  if (remap::DeviceInventory::probe().cuda_built) return;
  CHECK(code_of([] { load_fixture("gpu_tagged.t113.pt", options(MapLocation::parse("cpu"), HostMemory::kPinned)); }) ==
        ErrorCode::kRemapCudaNotBuilt);
}

TEST_CASE("moving to a CUDA device that is not there names the storage", "[remap]") {
  auto loaded = load_fixture("gpu_tagged.t113.pt", options(MapLocation::parse("cpu")));
  CHECK(code_of([&] { loaded.to(Device::cuda(0)); }) == ErrorCode::kRemapCudaUnavailable);
  CHECK(loaded.device_of(0) == Device::cpu());  // nothing moved
}

TEST_CASE("load_into follows load_state_dict: strict, missing, unexpected, mismatched", "[remap]") {
  const auto loaded = load_fixture("gpu_tagged.t113.pt", options(MapLocation::parse("cpu")));
  const auto manifest = read_json(fixture("checkpoints/gpu_tagged.t113.pt.manifest.json"));
  std::vector<float> w0(16 * 8), b0(16), w2(4 * 16), b2(4);
  std::vector<remap::Destination> all = {
      {"0.weight", Device::cpu(), w0.data(), torch::DType::kFloat32, {16, 8}},
      {"0.bias", Device::cpu(), b0.data(), torch::DType::kFloat32, {16}},
      {"2.weight", Device::cpu(), w2.data(), torch::DType::kFloat32, {4, 16}},
      {"2.bias", Device::cpu(), b2.data(), torch::DType::kFloat32, {4}},
  };
  const auto report = loaded.load_into(all);
  CHECK(report.loaded.size() == 4);
  CHECK(report.missing.empty());
  CHECK(report.unexpected.empty());
  CHECK(Sha256::hex({reinterpret_cast<const std::uint8_t*>(w2.data()), w2.size() * 4}) ==
        manifest["tensors"][2]["sha256"].get<std::string>());

  std::vector<remap::Destination> partial = {all[0], {"extra.weight", Device::cpu(), b0.data(), torch::DType::kFloat32, {16}}};
  CHECK(code_of([&] { loaded.load_into(partial); }) == ErrorCode::kRemapStateDictMismatch);
  const auto lax = loaded.load_into(partial, false);
  CHECK(lax.missing == std::vector<std::string>{"extra.weight"});
  CHECK(lax.unexpected == std::vector<std::string>{"0.bias", "2.weight", "2.bias"});

  std::vector<remap::Destination> wrong = {{"0.bias", Device::cpu(), b0.data(), torch::DType::kFloat16, {16}}};
  CHECK(code_of([&] { loaded.load_into(wrong, false); }) == ErrorCode::kRemapStateDictMismatch);
  wrong = {{"0.bias", Device::cpu(), b0.data(), torch::DType::kFloat32, {4, 4}}};
  CHECK(code_of([&] { loaded.load_into(wrong, false); }) == ErrorCode::kRemapStateDictMismatch);
}


TEST_CASE("copies report progress, serialized and ending at the total, views copy nothing", "[remap]") {
  const auto checkpoint = torch::Checkpoint::open(fixture("checkpoints/shufflenet_v2_x0_5.t113.pt"));
  std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
  auto o = options(MapLocation::parse("cpu"), HostMemory::kOwnedCopy);
  o.host_threads = 2;
  o.progress = [&](std::uint64_t done, std::uint64_t total) { calls.emplace_back(done, total); };
  remap::load(checkpoint, o);
  REQUIRE_FALSE(calls.empty());
  std::uint64_t total = 0;
  for (const auto& s : checkpoint.storages()) total += s.nbytes;
  for (std::size_t i = 1; i < calls.size(); ++i) CHECK(calls[i].first >= calls[i - 1].first);
  CHECK(calls.back() == std::make_pair(total, total));
  calls.clear();
  o.host = HostMemory::kMappedView;
  remap::load(checkpoint, o);
  CHECK(calls.empty());
}

}  // namespace maploc::test

namespace maploc::test {

TEST_CASE("a file truncated after it was opened fails with kIoRead when copied (not SIGBUS)", "[remap][malformed]") {
  // Another process shrinks the checkpoint between open and load: the copies
  // (owned host memory) would read pages the file no longer backs.
  const auto copy = std::filesystem::temp_directory_path() / "maploc-truncated-while-open.pt";
  std::filesystem::copy_file(fixture("checkpoints/dtypes.t2x.pt"), copy, std::filesystem::copy_options::overwrite_existing);
  {
    const auto checkpoint = torch::Checkpoint::open(copy);
    REQUIRE(!checkpoint.storages().empty());
    std::filesystem::resize_file(copy, 64);
    const Error e = error_of([&] { (void)remap::load(checkpoint, options(MapLocation::all_to("cpu"), HostMemory::kOwnedCopy)); });
    CHECK(e.code() == ErrorCode::kIoRead);
    CHECK(std::string(e.what()).find("truncated or replaced after it was opened") != std::string::npos);
  }
  std::filesystem::remove(copy);
}

TEST_CASE("an index past the load's tensors or storages is kInvalidArgument, not std::out_of_range", "[remap]") {
  const auto loaded = load_fixture("views_shared.t113.pt", options(MapLocation::parse("cpu")));
  const std::size_t tensors = loaded.tensors().size(), storages = loaded.storages().size();
  CHECK(code_of([&] { (void)loaded.device_of(tensors); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { (void)loaded.tensor_sha256(tensors); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { (void)loaded.host_bytes(storages); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { (void)loaded.host_bytes(SIZE_MAX); }) == ErrorCode::kInvalidArgument);
  CHECK_FALSE(loaded.host_bytes(storages - 1).empty());
}

}  // namespace maploc::test
