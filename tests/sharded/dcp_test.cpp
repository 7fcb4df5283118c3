// dcp_test.cpp - torch.distributed.checkpoint directories written by real dcp.save (one and two processes).
#include <catch2/catch.hpp>

#include <fstream>

#include "error_of.h"
#include "maploc/remap/loaded.h"
#include "maploc/torch/verify.h"
#include "sharded/sharded_test_util.h"

using namespace maploc;
using maploc::test::sharded_dir;

namespace {

// A copy of a fixture directory to break.
std::filesystem::path scratch_copy(const std::string& set, const std::string& tag) {
  const auto dir = std::filesystem::temp_directory_path() / ("maploc_dcp_test_" + tag);
  std::filesystem::remove_all(dir);
  std::filesystem::copy(sharded_dir() / set, dir);
  return dir;
}

void write_bytes(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

}  // namespace

TEST_CASE("DCP directories assemble equal to torch's consolidated view", "[torch][sharded][dcp]") {
  for (const std::string set : {"dcp_single", "dcp_two", "dcp_safetensors", "dcp_zstd", "dcp_ranks"}) {
    INFO(set);
    const auto manifest = test::set_manifest(set);
    const auto c = torch::Checkpoint::open(sharded_dir() / set);
    CHECK(c.format() == torch::Format::kDcp);
    test::check_against_manifest(c, manifest);
    std::vector<std::string> items;
    for (const auto& b : c.byte_items()) items.push_back(b.name);
    std::vector<std::string> expected;
    for (const auto& b : manifest["bytes_items"]) expected.push_back(b["name"]);
    CHECK(items == expected);
    remap::LoadOptions o;
    o.map = remap::MapLocation::all_to("cpu");
    const remap::Loaded loaded = remap::load(c, o);
    for (const auto& e : manifest["tensors"]) {
      const auto i = loaded.find(e["name"].get<std::string>());
      REQUIRE(i);
      CHECK(loaded.tensor_sha256(*i) == e["sha256"].get<std::string>());
    }
    CHECK(torch::verify(sharded_dir() / set).ok());
  }
}

TEST_CASE("DCP .metadata is read inertly: a global torch would import is only listed", "[torch][sharded][dcp]") {
  // torch 2.15 pickles storage_meta.checkpoint_id as a pathlib.PosixPath, which pickle.load imports and calls.
  const auto c = torch::Checkpoint::open(sharded_dir() / "dcp_two");
  CHECK(c.unknown_globals() == std::vector<std::string>{"pathlib.PosixPath"});
  // A .metadata that would run os.system under pickle.load: refused, nothing run.
  const auto dir = scratch_copy("dcp_single", "evil");
  const auto canary = std::filesystem::temp_directory_path() / "maploc_dcp_canary";
  std::filesystem::remove(canary);
  write_bytes(dir / ".metadata", "cos\nsystem\n(S'touch " + canary.string() + "'\ntR.");
  const Error e = test::error_of([&] { (void)torch::Checkpoint::open(dir); });
  CHECK(e.code() == ErrorCode::kTorchBadDcp);
  CHECK_FALSE(std::filesystem::exists(canary));
  std::filesystem::remove_all(dir);
}

TEST_CASE("DCP stream.zstd/1 items are inflated by libzstd, other transforms are refused by name",
          "[torch][sharded][dcp]") {
  const auto c = torch::Checkpoint::open(sharded_dir() / "dcp_zstd");
  for (const auto& b : c.byte_items()) CHECK(b.transform == "stream.zstd/1");
  {  // a transform maploc does not know: the listing works, reading names it
    const auto dir = scratch_copy("dcp_zstd", "xform");
    auto meta = test::read_all(dir / ".metadata");
    const std::string from = "stream.zstd/1", to = "stream.lz4x/1";
    auto at = meta.find(from);
    REQUIRE(at != std::string::npos);
    for (; at != std::string::npos; at = meta.find(from, at)) meta.replace(at, from.size(), to);
    write_bytes(dir / ".metadata", meta);
    const auto x = torch::Checkpoint::open(dir);
    const Error e = test::error_of([&] { (void)x.storage_bytes(std::size_t{0}); });
    CHECK(e.code() == ErrorCode::kTorchUnsupportedFormat);
    CHECK(std::string(e.what()).find("stream.lz4x/1") != std::string::npos);
    CHECK_FALSE(torch::verify(dir).ok());
    std::filesystem::remove_all(dir);
  }
  {  // damaged zstd data: an error naming the tensor, nothing crashes
    const auto dir = scratch_copy("dcp_zstd", "damaged");
    auto data = test::read_all(dir / "__0_0.distcp");
    for (std::size_t i = 20; i < data.size(); i += 7) data[i] = static_cast<char>(data[i] ^ 0x5a);
    write_bytes(dir / "__0_0.distcp", data);
    const auto x = torch::Checkpoint::open(dir);
    bool failed = false;
    for (std::size_t i = 0; i < x.storages().size(); ++i) {
      try {
        (void)x.storage_bytes(i);
      } catch (const Error&) {
        failed = true;
      }
    }
    CHECK(failed);
    std::filesystem::remove_all(dir);
  }
}

TEST_CASE("DCP saved with use_collectives=False: every rank's __R.metadata merged", "[torch][sharded][dcp]") {
  // dcp_ranks: rows, cols and half split between two ranks, rep and plain written by both.
  const auto c = torch::Checkpoint::open(sharded_dir() / "dcp_ranks");
  CHECK(c.format() == torch::Format::kDcp);
  CHECK(c.byte_items().size() == 1);  // "step", written by both ranks, listed once
  {  // one rank's metadata alone: its half of each split tensor has no chunk, named on assembly
    const auto dir = scratch_copy("dcp_ranks", "rank0");
    std::filesystem::remove(dir / "__1.metadata");
    const auto one = torch::Checkpoint::open(dir);
    REQUIRE(one.storages().size() == 5);
    const Error e = test::error_of([&] { (void)one.storage_bytes(std::size_t{0}); });
    CHECK(e.code() == ErrorCode::kTorchBadDcp);
    CHECK(std::string(e.what()).find("rows") != std::string::npos);
    CHECK(one.storage_bytes(std::size_t{2}).size() == 12);  // rep: whole in rank 0's own files
    std::filesystem::remove_all(dir);
  }
  {  // no metadata at all: not a DCP directory (nor a set)
    const auto dir = scratch_copy("dcp_ranks", "nometa");
    std::filesystem::remove(dir / "__0.metadata");
    std::filesystem::remove(dir / "__1.metadata");
    CHECK_THROWS_AS(torch::Checkpoint::open(dir), Error);
    std::filesystem::remove_all(dir);
  }
  {  // two ranks that disagree on a tensor's size: rows is torch.Size((5, 4)) in rank 0, (6, 4) in rank 1
    const auto dir = scratch_copy("dcp_ranks", "disagree");
    auto meta = test::read_all(dir / "__1.metadata");
    const std::string from("K\x05K\x04", 4);
    const auto at = meta.find(from);
    REQUIRE(at != std::string::npos);
    meta[at + 1] = '\x06';
    write_bytes(dir / "__1.metadata", meta);
    const Error e = test::error_of([&] { (void)torch::Checkpoint::open(dir); });
    CHECK(e.code() == ErrorCode::kTorchBadDcp);
    CHECK(std::string(e.what()).find("rows") != std::string::npos);
    std::filesystem::remove_all(dir);
  }
}

TEST_CASE("broken DCP directories: clear errors", "[torch][sharded][dcp][malformed]") {
  {  // a rank's file missing
    const auto dir = scratch_copy("dcp_two", "missing");
    std::filesystem::remove(dir / "__1_0.distcp");
    CHECK(test::code_of([&] { (void)torch::Checkpoint::open(dir); }) == ErrorCode::kTorchBadDcp);
    std::filesystem::remove_all(dir);
  }
  {  // a rank's file cut short: opens (metadata is whole), assembling fails naming the tensor
    const auto dir = scratch_copy("dcp_two", "cut");
    std::filesystem::resize_file(dir / "__1_0.distcp", 100);
    const auto c = torch::Checkpoint::open(dir);
    bool failed = false;
    for (std::size_t i = 0; i < c.storages().size(); ++i) {
      try {
        (void)c.storage_bytes(i);
      } catch (const Error&) {
        failed = true;
      }
    }
    CHECK(failed);
    CHECK_FALSE(torch::verify(dir).ok());
    std::filesystem::remove_all(dir);
  }
  {  // a .metadata that is a pickle of something else
    const auto dir = scratch_copy("dcp_single", "notmeta");
    write_bytes(dir / ".metadata", std::string("\x80\x04}\x94.", 5));
    CHECK(test::code_of([&] { (void)torch::Checkpoint::open(dir); }) == ErrorCode::kTorchBadDcp);
    std::filesystem::remove_all(dir);
  }
}
