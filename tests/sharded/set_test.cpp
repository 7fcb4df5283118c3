// set_test.cpp - sharded sets written by torch and safetensors (fixtures/sharded/generate.py) read as one checkpoint.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <set>

#include "error_of.h"
#include "maploc/remap/loaded.h"
#include "maploc/torch/verify.h"
#include "sharded/sharded_test_util.h"

using namespace maploc;
using maploc::test::sharded_dir;

namespace {

std::string index_of(const nlohmann::json& manifest) { return manifest["index"].get<std::string>(); }

std::size_t distinct_files(const nlohmann::json& manifest) {
  std::set<std::string> files;
  for (const auto& e : manifest["tensors"]) files.insert(e["file"].get<std::string>());
  return files.size();
}

// A scratch directory with an index of our own text beside copies of st_set's shards.
std::filesystem::path scratch_set(const std::string& name, const std::string& index_text) {
  const auto dir = std::filesystem::temp_directory_path() / ("maploc_set_test_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const auto& e : std::filesystem::directory_iterator(sharded_dir() / "st_set")) {
    if (e.path().extension() == ".safetensors") std::filesystem::copy_file(e.path(), dir / e.path().filename());
  }
  std::ofstream(dir / "model.safetensors.index.json") << index_text;
  return dir;
}

}  // namespace

TEST_CASE("sets open from their index or directory and equal torch's consolidated view", "[torch][sharded]") {
  for (const std::string set : {"st_set", "bin_set", "legacy_set", "mixed_set"}) {
    INFO(set);
    const auto manifest = test::set_manifest(set);
    for (const auto& path : {sharded_dir() / set, sharded_dir() / set / index_of(manifest)}) {
      const auto c = torch::Checkpoint::open(path);
      CHECK(c.format() == torch::Format::kSet);
      test::check_against_manifest(c, manifest);
      // Each file opened once, storages grouped by file in set order.
      REQUIRE(c.members().size() == distinct_files(manifest));
      for (std::size_t s = 1; s < c.storages().size(); ++s) CHECK(c.member_of_storage(s - 1) <= c.member_of_storage(s));
      // total_size is reported as the index says it (never checked against anything).
      REQUIRE(c.metadata().size() == 1);
      CHECK(c.metadata()[0].first == "total_size");
      CHECK(c.metadata()[0].second == std::to_string(manifest["total_size"].get<std::uint64_t>()));
    }
  }
}

TEST_CASE("set members keep their own formats", "[torch][sharded]") {
  const auto c = torch::Checkpoint::open(sharded_dir() / "mixed_set");
  REQUIRE(c.members().size() == 3);
  CHECK(c.members()[0].format == torch::Format::kSafetensors);
  CHECK(c.members()[1].format == torch::Format::kZip);
  CHECK(c.members()[2].format == torch::Format::kLegacy);
  const auto l = torch::Checkpoint::open(sharded_dir() / "legacy_set");
  for (const auto& m : l.members()) CHECK(m.format == torch::Format::kLegacy);
}

TEST_CASE("tied tensors of a .bin set share one storage in one shard", "[torch][sharded]") {
  const auto c = torch::Checkpoint::open(sharded_dir() / "bin_set");
  const torch::Tensor* embed = nullptr;
  const torch::Tensor* head = nullptr;
  for (const auto& t : c.tensors()) {
    if (t.name == "embed.weight") embed = &t;
    if (t.name == "lm_head.weight") head = &t;
  }
  REQUIRE(embed != nullptr);
  REQUIRE(head != nullptr);
  CHECK(embed->storage == head->storage);
  CHECK(c.storages().size() + 1 == c.tensors().size());
}

TEST_CASE("a set loads through remap::load with the values torch saved", "[torch][sharded][remap]") {
  for (const std::string set : {"st_set", "bin_set", "legacy_set", "mixed_set"}) {
    INFO(set);
    const auto manifest = test::set_manifest(set);
    const auto c = torch::Checkpoint::open(sharded_dir() / set);
    for (const auto host : {remap::HostMemory::kMappedView, remap::HostMemory::kOwnedCopy}) {
      remap::LoadOptions o;
      o.map = remap::MapLocation::all_to("cpu");
      o.host = host;
      o.writable = true;  // a set has no single file to map copy-on-write: copies
      const remap::Loaded loaded = remap::load(c, o);
      for (const auto& e : manifest["tensors"]) {
        const auto i = loaded.find(e["name"].get<std::string>());
        REQUIRE(i);
        CHECK(loaded.tensor_sha256(*i) == e["sha256"].get<std::string>());
      }
    }
  }
}

TEST_CASE("a list of files opens as a set, a name in two files is refused", "[torch][sharded]") {
  const auto manifest = test::set_manifest("st_set");
  std::vector<std::filesystem::path> files;
  for (const auto& name : {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                           "model-00003-of-00003.safetensors"}) {
    files.push_back(sharded_dir() / "st_set" / name);
  }
  const auto c = torch::Checkpoint::open_set(files);
  test::check_against_manifest(c, manifest);
  CHECK(c.metadata().empty());
  files.push_back(files.front());
  const Error e = test::error_of([&] { (void)torch::Checkpoint::open_set(files); });
  CHECK(e.code() == ErrorCode::kTorchBadSet);
  CHECK(std::string(e.what()).find("embed.weight") != std::string::npos);
}

TEST_CASE("broken sets: clear errors naming the tensor or file", "[torch][sharded][malformed]") {
  struct Case {
    const char* set;
    ErrorCode code;
    const char* names;
  };
  for (const Case k : {Case{"bad_missing_tensor", ErrorCode::kTorchBadSet, "ghost.weight"},
                       Case{"bad_missing_file", ErrorCode::kTorchBadSet, "model-00099-of-00099.safetensors"},
                       Case{"bad_listed_twice", ErrorCode::kTorchBadSet, "norm.weight"}}) {
    INFO(k.set);
    const Error e = test::error_of([&] { (void)torch::Checkpoint::open(sharded_dir() / k.set); });
    CHECK(e.code() == k.code);
    CHECK(std::string(e.what()).find(k.names) != std::string::npos);
    const auto r = torch::verify(sharded_dir() / k.set);
    CHECK_FALSE(r.ok());
  }
}

TEST_CASE("a tensor in a shard but not in the map is left out with a warning", "[torch][sharded]") {
  std::vector<std::string> warnings;
  torch::Options o;
  o.diagnostics = [&](std::string_view m) { warnings.emplace_back(m); };
  const auto c = torch::Checkpoint::open(sharded_dir() / "bad_unmapped_tensor", o);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("'norm.weight'") != std::string::npos);
  for (const auto& t : c.tensors()) CHECK(t.name != "norm.weight");
  auto manifest = test::set_manifest("bad_unmapped_tensor");
  auto& ts = manifest["tensors"];
  ts.erase(std::remove_if(ts.begin(), ts.end(), [](const auto& e) { return e["name"] == "norm.weight"; }), ts.end());
  test::check_against_manifest(c, manifest);
  std::uint64_t bytes = 0;
  for (const auto& s : c.storages()) bytes += s.nbytes;
  CHECK(bytes == manifest["total_size"].get<std::uint64_t>() - 8 * 4);  // norm.weight's storage is not read
  CHECK(torch::verify(sharded_dir() / "bad_unmapped_tensor").warnings.size() == 1);
}

TEST_CASE("index and directory errors", "[torch][sharded][malformed]") {
  // JSON that is not an index (the manifest itself), a directory with no index.
  CHECK(test::code_of([] { (void)torch::Checkpoint::open(sharded_dir() / "st_set" / "manifest.json"); }) ==
        ErrorCode::kTorchNotCheckpoint);
  CHECK(test::code_of([] { (void)torch::Checkpoint::open(std::filesystem::path(MAPLOC_FIXTURES_DIR) / "zip"); }) ==
        ErrorCode::kTorchNotCheckpoint);
  const std::string shard = "model-00001-of-00003.safetensors";
  const std::string escapes[] = {"/etc/passwd", "../st_set/" + shard, "sub/../../x.safetensors"};
  for (const std::string& bad : escapes) {
    INFO(bad);
    const auto dir = scratch_set("escape", R"({"weight_map": {"embed.weight": ")" + bad + R"("}})");
    CHECK(test::code_of([&] { (void)torch::Checkpoint::open(dir); }) == ErrorCode::kTorchBadSet);
    std::filesystem::remove_all(dir);
  }
  const auto bad_json = scratch_set("json", R"({"weight_map": {"embed.weight": )");
  CHECK(test::code_of([&] { (void)torch::Checkpoint::open(bad_json); }) == ErrorCode::kTorchBadSet);
  std::filesystem::remove_all(bad_json);
  const auto two = scratch_set("two", R"({"weight_map": {"embed.weight": ")" + shard + R"("}})");
  std::filesystem::copy_file(two / "model.safetensors.index.json", two / "other.index.json");
  CHECK(test::code_of([&] { (void)torch::Checkpoint::open(two); }) == ErrorCode::kTorchBadSet);
  // Naming one of the two works, and leaves the shard's other tensors out.
  const auto c = torch::Checkpoint::open(two / "other.index.json");
  CHECK(c.tensors().size() == 1);
  std::filesystem::remove_all(two);
}
