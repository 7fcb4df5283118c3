// archive_test.cpp - opening torch-written archives: prefix, lookup, alignment, views, offsets.
#include <nlohmann/json.hpp>

#include "zip_test_util.h"

namespace maploc::test {
namespace {

nlohmann::json fixture_index() {
  auto bytes = read_file(fixture("checkpoints/index.json"));
  return nlohmann::json::parse(bytes.begin(), bytes.end());
}

}  // namespace

TEST_CASE("every zip fixture opens and every record reads", "[zip]") {
  int opened = 0;
  for (const auto& entry : fixture_index()) {
    if (entry["format"] != "zip" && entry["format"] != "torchscript") continue;
    const std::string file = entry["file"];
    INFO(file);
    auto archive = zip::Archive::open(fixture("checkpoints/" + file));
    archive.require_prefix();
    REQUIRE(archive.find_in_prefix("data.pkl") != nullptr);
    for (const auto& r : archive.records()) CHECK(archive.read(r).size() == r.size);
    ++opened;
  }
  CHECK(opened >= 10);
}

TEST_CASE("torch.save writes every record 64-byte aligned and stored", "[zip]") {
  auto archive = zip::Archive::open(fixture("checkpoints/nested_training.t113.pt"));
  CHECK(archive.residency() == Residency::kMapped);
  CHECK(archive.base_offset() == 0);
  for (const auto& r : archive.records()) {
    INFO(r.name);
    CHECK(r.method == zip::kMethodStored);
    CHECK(r.data_offset % 64 == 0);
    CHECK(r.alignment() >= 64);
  }
}

TEST_CASE("the prefix is discovered, not assumed", "[zip]") {
  auto archive = zip::Archive::open(fixture("checkpoints/nested_training.t113.pt"));
  CHECK(archive.prefix() == "nested_training.t113");
  const zip::Record* pkl = archive.find("nested_training.t113/data.pkl");
  REQUIRE(pkl != nullptr);
  CHECK(archive.find_in_prefix("data.pkl") == pkl);
  CHECK(&archive.at("data.pkl") == pkl);
  CHECK(archive.find("archive/data.pkl") == nullptr);
  CHECK(archive.find_in_prefix("data/does-not-exist") == nullptr);
}

TEST_CASE("stored records are zero-copy views that outlive the archive", "[zip]") {
  Bytes pkl;
  {
    auto archive = zip::Archive::open(fixture("checkpoints/nested_training.t113.pt"));
    const auto& r = archive.at("data.pkl");
    pkl = archive.read(r);
    CHECK(pkl.data() == archive.file_bytes().data() + r.data_offset);
  }
  REQUIRE(pkl.size() > 2);
  CHECK(pkl.data()[0] == 0x80);  // PROTO
  CHECK(pkl.data()[pkl.size() - 1] == '.');  // STOP
}

TEST_CASE("a record the caller built outside the file is an error, not a read past the mapping", "[zip]") {
  auto archive = zip::Archive::open(fixture("checkpoints/nested_training.t113.pt"));
  zip::Record r = archive.at("data.pkl");
  const std::uint64_t size = archive.file_bytes().size();
  for (const auto& [offset, length] : {std::pair<std::uint64_t, std::uint64_t>{size + 1, 0}, {size - 4, 5},
                                       {8, UINT64_MAX - 4}}) {
    r.data_offset = offset;
    r.compressed_size = length;
    bool threw = false;
    try {
      (void)archive.read(r);
    } catch (const Error& e) {
      threw = true;
      CHECK(e.code() == ErrorCode::kZipOffsetOutOfRange);
      CHECK(std::string(e.what()).find("data.pkl") != std::string::npos);
    }
    CHECK(threw);
  }
  r.data_offset = size - 4;  // the last four bytes: inside, read as a view
  r.compressed_size = 4;
  r.method = zip::kMethodStored;
  CHECK(archive.read(r).size() == 4);
}

TEST_CASE("an archive behind prepended bytes is found with its base offset", "[zip]") {
  auto archive = zip::Archive::open(fixture("checkpoints/junk_prefix.t113.pt"));
  CHECK(archive.base_offset() == 6);
  const auto& r = archive.at("data.pkl");
  CHECK(r.header_offset >= 6);
  CHECK(archive.read(r).data()[0] == 0x80);
}

TEST_CASE("deflated records inflate to their declared size", "[zip]") {
  auto stored = zip::Archive::open(fixture("checkpoints/nested_training.t113.pt"));
  auto deflated = zip::Archive::open(fixture("checkpoints/deflated.t113.pt"));
  REQUIRE(stored.records().size() == deflated.records().size());
  for (const auto& r : deflated.records()) {
    INFO(r.name);
    CHECK(r.method == zip::kMethodDeflated);
    const zip::Record* twin = stored.find(r.name);
    REQUIRE(twin != nullptr);
    CHECK(deflated.read(r).text() == stored.read(*twin).text());
  }
}

TEST_CASE("PyTorch's conformance archives open", "[zip][conformance]") {
  const std::filesystem::path dir(MAPLOC_CONFORMANCE_DIR);
  REQUIRE(std::filesystem::exists(dir / "manifest.json"));  // committed: missing is a failure
  int zips = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".pt") continue;
    const auto head = read_file(e.path());
    if (head.size() < 4 || head[0] != 'P' || head[1] != 'K') continue;
    INFO(e.path());
    auto archive = zip::Archive::open(e.path());
    archive.require_prefix();
    CHECK(archive.find_in_prefix("data.pkl") != nullptr);
    ++zips;
  }
  CHECK(zips >= 50);
}

}  // namespace maploc::test
