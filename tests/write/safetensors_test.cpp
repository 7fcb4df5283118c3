// safetensors_test.cpp - safetensors files of the safetensors package read to their manifests; convert both ways; malformed headers.
#include <catch2/catch.hpp>

#include <cstring>

#include "maploc/torch/safetensors.h"
#include "maploc/torch/write.h"
#include "write/write_test_util.h"

using namespace maploc;
using nlohmann::json;

namespace {

std::filesystem::path st_dir() { return std::filesystem::path(MAPLOC_FIXTURES_DIR) / "safetensors"; }

std::vector<std::uint8_t> file_of(const std::string& header, std::size_t data_bytes) {
  std::vector<std::uint8_t> b(8);
  for (int i = 0; i < 8; ++i) b[i] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(header.size()) >> (8 * i));
  b.insert(b.end(), header.begin(), header.end());
  b.resize(b.size() + data_bytes, 0x11);
  return b;
}

}  // namespace

TEST_CASE("safetensors fixtures written by the safetensors package read to their manifests", "[torch]") {
  for (const auto& entry : test::read_json(st_dir() / "index.json")) {
    const std::string file = entry["file"];
    CAPTURE(file);
    const auto c = torch::Checkpoint::open(st_dir() / file);
    CHECK(c.format() == torch::Format::kSafetensors);
    const json m = test::read_json(st_dir() / entry["manifest"].get<std::string>());
    const auto view = test::manifest_view(c);
    CHECK(view.tensors == m["tensors"]);
    CHECK(view.storages == m["storages"]);
  }
}

TEST_CASE("convert to safetensors and back keeps every dense tensor", "[torch]") {
  test::TempDir dir("st");
  std::size_t converted = 0;
  for (const auto& entry : test::checkpoint_index()) {
    const std::string file = entry["file"];
    CAPTURE(file);
    const auto in = torch::Checkpoint::open(test::checkpoints_dir() / file);
    const auto st = dir.path / (file + ".safetensors");
    try {
      torch::save_safetensors(in, st);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::kTorchNotConvertible);
      CHECK_FALSE(std::filesystem::exists(st));  // a refusal leaves nothing behind
      continue;
    }
    const auto back = torch::Checkpoint::open(st);
    CHECK(back.format() == torch::Format::kSafetensors);
    for (const auto& s : back.storages()) CHECK(s.file_offset % torch::element_size(s.dtype) == 0);
    const auto want = test::hashes_of(in);
    const auto got = test::hashes_of(back);
    for (const auto& [name, sha] : want) {
      CAPTURE(name);
      REQUIRE(got.count(name) == 1);  // tied names come back through __metadata__
      CHECK(got.at(name) == sha);
    }
    // ... and on to a torch archive again.
    torch::save_archive(back, dir.path / (file + ".pt"));
    CHECK(test::hashes_of(torch::Checkpoint::open(dir.path / (file + ".pt"))) == got);
    ++converted;
  }
  CHECK(converted >= 30);
}

TEST_CASE("safetensors: tied weights are written once unless duplicated on request", "[torch]") {
  test::TempDir dir("tie");
  // A safetensors file whose metadata ties b to a, as maploc writes it.
  const std::string h = R"({"__metadata__":{"maploc.tied.b":"a"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const auto bytes = file_of(h, 8);
  const auto c = test::open_bytes(bytes);
  REQUIRE(c.tensors().size() == 2);
  CHECK(c.tensors()[1].name == "b");
  CHECK(c.tensors()[1].storage == c.tensors()[0].storage);
  const auto once = torch::save_safetensors(c, dir.path / "once.safetensors");
  CHECK(once.tensors == 1);
  REQUIRE(once.tied.size() == 1);
  CHECK(once.tied[0] == std::pair<std::string, std::string>{"b", "a"});
  torch::SafetensorsOptions dup;
  dup.duplicate_tied = true;
  const auto twice = torch::save_safetensors(c, dir.path / "twice.safetensors", dup);
  CHECK(twice.tensors == 2);
  CHECK(torch::Checkpoint::open(dir.path / "twice.safetensors").storages().size() == 2);
  // To a torch archive: one storage, two names.
  torch::save_archive(c, dir.path / "tied.pt");
  const auto pt = torch::Checkpoint::open(dir.path / "tied.pt");
  REQUIRE(pt.tensors().size() == 2);
  CHECK(pt.storages().size() == 1);
}

TEST_CASE("malformed safetensors headers are refused with kTorchBadSafetensors", "[torch][malformed]") {
  struct Case {
    const char* name;
    std::string header;
    std::size_t data;
  };
  const Case cases[] = {
      {"not json", "{\"a\":", 0},
      {"offsets past the data", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4},
      {"overlap", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8},
      {"gap", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8},
      {"trailing data", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8},
      {"size mismatch", R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8},
      {"begin after end", R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8},
      {"negative dim", R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", 0},
      {"metadata not strings", R"({"__metadata__":{"k":1}})", 0},
      {"duplicate name", R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})", 2},
      {"deep nesting", std::string(200, '[') + std::string(200, ']'), 0},
  };
  for (const auto& k : cases) {
    CAPTURE(k.name);
    auto bytes = file_of(k.header, k.data);
    bytes[8] = '{';  // keep the sniffer's "looks like safetensors"
    if (k.header[0] != '{') continue;
    CHECK(test::code_of([&] { test::open_bytes(bytes); }) == ErrorCode::kTorchBadSafetensors);
  }
  // Header size above the format's 100 MB cap, and past the end of the file.
  auto huge = file_of("{}", 0);
  const std::uint64_t n = torch::kSafetensorsMaxHeader + 1;
  for (int i = 0; i < 8; ++i) huge[i] = static_cast<std::uint8_t>(n >> (8 * i));
  CHECK(test::code_of([&] { test::open_bytes(huge); }) == ErrorCode::kTorchBadSafetensors);
  auto cut = file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8);
  cut.resize(20);
  CHECK(test::code_of([&] { test::open_bytes(cut); }) == ErrorCode::kTorchBadSafetensors);
  const auto unknown = file_of(R"({"a":{"dtype":"Q9","shape":[1],"data_offsets":[0,1]}})", 1);
  CHECK(test::code_of([&] { test::open_bytes(unknown); }) == ErrorCode::kTorchUnknownDType);
}

TEST_CASE("safetensors dtype names match the format's", "[torch]") {
  CHECK(torch::safetensors_dtype(torch::DType::kBFloat16) == "BF16");
  CHECK(torch::safetensors_dtype(torch::DType::kFloat8_e4m3fn) == "F8_E4M3");
  CHECK_FALSE(torch::safetensors_dtype(torch::DType::kComplex128));
  CHECK(torch::dtype_from_safetensors("BOOL") == torch::DType::kBool);
}

TEST_CASE("convert to safetensors: a jagged tensor's parts as tensors, the tensor in __metadata__, and a refusal "
          "names the tensor and the file",
          "[torch]") {
  test::TempDir dir("njt");
  const auto in = torch::Checkpoint::open(test::checkpoints_dir() / "nested_jagged.t2x.pt");
  const auto out = dir.path / "njt.safetensors";
  torch::save_safetensors(in, out);
  const auto back = torch::Checkpoint::open(out);
  const auto want = test::hashes_of(in);
  const auto got = test::hashes_of(back);
  for (const char* part : {"njt.values", "njt.offsets", "narrowed.values", "narrowed.offsets", "narrowed.lengths"}) {
    CAPTURE(part);
    REQUIRE(got.count(part) == 1);
    CHECK(got.at(part) == want.at(part));
  }
  std::string njt;
  for (const auto& [k, v] : back.metadata()) {
    if (k == std::string(torch::kNestedJaggedPrefix) + "narrowed") njt = v;
  }
  const json meta = json::parse(njt);
  CHECK(meta["components"]["lengths"] == json("narrowed.lengths"));
  CHECK(meta["attributes"]["ragged_idx"] == json(1));
  CHECK(meta["attributes"].contains("max_seqlen"));

  const auto sparse = test::checkpoints_dir() / "sparse.t2x.pt";
  try {
    torch::save_safetensors(torch::Checkpoint::open(sparse), dir.path / "sparse.safetensors");
    FAIL("a sparse tensor went into a safetensors file");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kTorchNotConvertible);
    CHECK_THAT(std::string(e.what()), Catch::Contains("tensor '") && Catch::Contains(sparse.string()));
  }
}
