// error_codes_test.cpp - every ErrorCode in error.h is produced by some test input.
// The malicious corpus covers the file-borne codes; the table below covers the API- and
// mapping-borne ones; the rest are listed with the reason they are covered elsewhere.
#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <set>
#include <string>

#include <cstdio>
#include <filesystem>

#include "support/atomic_file.h"
#include "maploc/error.h"
#include "maploc/mapped_file.h"
#include "maploc/pickle/machine.h"
#include "maploc/remap/loaded.h"
#include "maploc/remap/plan.h"
#include "maploc/torch/checkpoint.h"
#include "maploc/zip/archive.h"
#include "zip/crc32.h"
#include "security/security_util.h"

using namespace maploc;

namespace {

std::string fixture(const std::string& name) { return std::string(MAPLOC_FIXTURES_DIR) + "/checkpoints/" + name; }

std::string code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return std::string(error_code_name(e.code()));
  }
  return "no error";
}

remap::Loaded load_with(const torch::Checkpoint& ckpt, remap::MapLocation map, remap::DeviceInventory inv,
                        remap::HostMemory host = remap::HostMemory::kMappedView) {
  remap::LoadOptions o;
  o.map = std::move(map);
  o.inventory = &inv;
  o.host = host;
  return remap::load(ckpt, o);
}

// Producers of the codes that come from API use or placement, not from file bytes.
std::map<std::string, std::function<void()>> api_producers() {
  std::map<std::string, std::function<void()>> p;
  p["kIoOpen"] = [] { (void)MappedFile::open("/nonexistent/maploc/file.pt"); };
  p["kIoRead"] = [] { (void)MappedFile::open("/proc/self/mem"); };
  p["kInvalidArgument"] = [] {
    const std::uint8_t b[] = {'N', '.'};
    pickle::Options o;
    o.start_offset = 10;
    (void)pickle::run(std::span<const std::uint8_t>(b, 2), o);
  };
  p["kZipRecordNotFound"] = [] { (void)zip::Archive::open(fixture("dtypes.t2x.pt")).at("no/such/record"); };
  p["kIoWrite"] = [] {
    const auto path = std::filesystem::temp_directory_path() / "maploc-security-iowrite.bin";
    auto out = AtomicFile::create(path);
    out.commit();
    std::filesystem::remove(path);
    const std::uint8_t b = 0;
    out.write(std::span<const std::uint8_t>(&b, 1));  // after commit
  };
  p["kZipCrcMismatch"] = [] {
    auto ar = zip::Archive::open(security::malicious_dir() + "/codes/crc_mismatch.zip");
    (void)zip::verify_crc32(ar, ar.records().at(0));
  };
  p["kRemapBadRewriteTarget"] = [] {
    // Raised by the CLI's remap command only: run it and read the code from its message.
    const auto out = std::filesystem::temp_directory_path() / "maploc-security-remap.pt";
    const std::string cmd = std::string("'") + MAPLOC_CLI + "' remap '" + fixture("dtypes.t2x.pt") + "' '" +
                            out.string() + "' --map-location meta 2>&1";
    std::string text;
    if (FILE* pipe = popen(cmd.c_str(), "r")) {
      char buf[512];
      while (std::fgets(buf, sizeof buf, pipe)) text += buf;
      pclose(pipe);
    }
    std::filesystem::remove(out);
    if (text.find("[kRemapBadRewriteTarget]") != std::string::npos) {
      throw Error(ErrorCode::kRemapBadRewriteTarget, Stage::kCli, text);
    }
  };
  p["kPicklePersistentId"] = [] {
    const std::uint8_t b[] = {0x80, 2, 'K', 1, 'Q', '.'};
    pickle::Options o;
    o.persistent_load = [](const pickle::Value&, std::uint64_t) -> std::optional<pickle::Value> { return std::nullopt; };
    (void)pickle::run(std::span<const std::uint8_t>(b, sizeof b), o);
  };
  p["kRemapCudaUnavailable"] = [] {
    load_with(torch::Checkpoint::open(fixture("gpu_tagged.t2x.pt")), remap::MapLocation::none(), {0, true, {}, {}});
  };
  p["kRemapNoSuchDevice"] = [] {
    load_with(torch::Checkpoint::open(fixture("gpu_tagged.t2x.pt")), remap::MapLocation::none(), {1, true, {}, {}});
  };
  p["kRemapUnknownTag"] = [] {
    load_with(torch::Checkpoint::open(fixture("device_tags.t2x.pt")), remap::MapLocation::parse("cuda*->cpu"), {0, false, {}, {}});
  };
  p["kRemapBadSpec"] = [] { (void)remap::MapLocation::parse("cpu->->gpu"); };
  p["kRemapConflictingRules"] = [] {
    load_with(torch::Checkpoint::open(fixture("views_shared.t2x.pt")),
              remap::MapLocation::parse("name:base->cpu,name:row_slice->meta"), {0, false, {}, {}});
  };
  p["kRemapOutOfMemory"] = [] {
    remap::Plan plan;
    plan.totals.push_back({remap::Device::cuda(0), 1000, 1, 10});
    remap::check_fits(plan);
  };
  p["kRemapCudaNotBuilt"] = [] {
    load_with(torch::Checkpoint::open(fixture("dtypes.t2x.pt")), remap::MapLocation::all_to("cuda"), {1, false, {}, {}});
  };
  p["kRemapStateDictMismatch"] = [] {
    auto loaded = load_with(torch::Checkpoint::open(fixture("dtypes.t2x.pt")), remap::MapLocation::all_to("cpu"), {0, false, {}, {}});
    remap::Destination d;
    d.name = "no.such.tensor";
    (void)loaded.load_into(std::span<const remap::Destination>(&d, 1), true);
  };
  return p;
}

// Codes no input of this suite can produce, with where they are covered.
const std::map<std::string, std::string> kElsewhere = {
    {"kRemapDevice", "device-only: needs a CUDA runtime failure (tests/remap_cuda on a GPU machine)"},
    {"kIoNoSpace", "writer API: tests/write/failure_test.cpp (RLIMIT_FSIZE)"},
    {"kZipWriterMisuse", "writer API: tests/write/zip_writer_test.cpp"},
    {"kPickleUnwritable", "writer API: tests/write/remap_test.cpp"},
    {"kTorchNotConvertible", "convert API: tests/write/safetensors_test.cpp"},
    {"kTorchBadSet", "sharded sets: tests/sharded/set_test.cpp (fixtures/sharded/bad_*)"},
    {"kTorchBadDcp", "torch.distributed.checkpoint: tests/sharded/dcp_test.cpp"},
    {"kTorchLimitTensors", "complexity corpus at the default limits: tensor_bomb.pt (tests/security/complexity_test.cpp)"},
    {"kTorchLimitNameBytes", "complexity corpus at the default limits: long_names.pt (tests/security/complexity_test.cpp)"},
    {"kTorchLimitWalkBytes", "complexity corpus at the default limits: walk_bytes_bomb.pt (tests/security/complexity_test.cpp)"},
    {"kLimitMemory", "allocation failure under RLIMIT_AS: tests/security/complexity_test.cpp"},
    {"kRemoteBadUrl", "URL sources: tests/remote/url_test.cpp, remote_test.cpp (docs/remote.md)"},
    {"kRemoteRequest", "URL sources against a loopback server: tests/remote/remote_test.cpp (404, 403, short bodies)"},
    {"kRemoteBadResponse", "URL sources against a loopback server: tests/remote/remote_test.cpp (wrong Content-Range, Range ignored)"},
    {"kRemoteChanged", "URL sources against a loopback server: tests/remote/remote_test.cpp (object replaced mid-load)"},
    {"kRemoteRedirects", "URL sources against a loopback server: tests/remote/remote_test.cpp (redirect loop)"},
    {"kTorchIncomplete", "strict opening: tests/torch/completeness_test.cpp (a storage held by an unknown call, an "
                         "unknown rebuild function), tests/remap/load_test.cpp (LoadOptions::strict)"},
};

}  // namespace

TEST_CASE("API-borne error codes are produced by their inputs", "[security][malformed]") {
  for (const auto& [name, produce] : api_producers()) {
    INFO(name);
    CHECK(code_of(produce) == name);
  }
}

TEST_CASE("every ErrorCode in error.h is produced by a test input", "[security][malformed]") {
  std::set<std::string> covered;
  for (const auto& e : security::manifest()) covered.insert(e.expect);
  for (const auto& [name, produce] : api_producers()) covered.insert(name);
  std::size_t codes = 0;
  for (int n = 1; n < 1000; ++n) {
    const std::string name(error_code_name(static_cast<ErrorCode>(n)));
    if (name == "unknown") continue;
    ++codes;
    INFO("ErrorCode " << n << " " << name << " has no producing input in tests/security "
                      "(add a file to fixtures/malicious/generate.py or a producer to error_codes_test.cpp)");
    CHECK((covered.count(name) == 1 || kElsewhere.count(name) == 1));
  }
  CHECK(codes >= 60);
}
