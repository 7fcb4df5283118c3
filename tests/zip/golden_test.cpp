// golden_test.cpp - every record equals what Python's zipfile reads (goldens by fixtures/zip_golden.py).
#include <nlohmann/json.hpp>

#include "support/sha256.h"
#include "zip_test_util.h"

namespace maploc::test {
namespace {

namespace fs = std::filesystem;

void check_record(const zip::Archive& archive, const zip::Record& r, const nlohmann::json& g) {
  INFO(r.name);
  CHECK(r.name == g["name"].get<std::string>());
  CHECK(r.header_offset == g["header_offset"].get<std::uint64_t>());
  CHECK(r.data_offset == g["data_offset"].get<std::uint64_t>());
  CHECK(r.method == g["compress_type"].get<std::uint16_t>());
  CHECK(r.size == g["file_size"].get<std::uint64_t>());
  CHECK(r.compressed_size == g["compress_size"].get<std::uint64_t>());
  CHECK(r.crc32 == g["crc"].get<std::uint32_t>());
  CHECK(Sha256::hex(archive.read(r).span()) == g["sha256"].get<std::string>());
}

// Compares one archive with its golden: every record listed, or for very
// large archives the first and last records in full plus a digest of all.
void check_against_golden(const fs::path& archive_path, const nlohmann::json& golden) {
  INFO(archive_path.string());
  auto archive = zip::Archive::open(archive_path);
  const auto& records = archive.records();
  CHECK(archive.base_offset() == golden.value("base_offset", 0u));
  if (golden.contains("records")) {
    const auto& want = golden["records"];
    REQUIRE(records.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) check_record(archive, records[i], want[i]);
    return;
  }
  REQUIRE(records.size() == golden["count"].get<std::size_t>());
  const auto& first = golden["first_records"];
  const auto& last = golden["last_records"];
  REQUIRE(first.size() + last.size() <= records.size());
  for (std::size_t i = 0; i < first.size(); ++i) check_record(archive, records[i], first[i]);
  for (std::size_t i = 0; i < last.size(); ++i) {
    check_record(archive, records[records.size() - last.size() + i], last[i]);
  }
  Sha256 all;
  for (const auto& r : records) {
    const std::string hex = Sha256::hex(archive.read(r).span());
    all.update({reinterpret_cast<const std::uint8_t*>(hex.data()), hex.size()});
  }
  CHECK(all.finish_hex() == golden["records_sha256"].get<std::string>());
}

nlohmann::json load_json(const fs::path& p) {
  auto bytes = read_file(p);
  return nlohmann::json::parse(bytes.begin(), bytes.end());
}

std::size_t check_folder(const fs::path& goldens, const fs::path& archives) {
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(goldens)) {
    if (!e.is_regular_file() || e.path().string().ends_with(".records.json") == false) continue;
    const auto golden = load_json(e.path());
    check_against_golden(archives / golden["file"].get<std::string>(), golden);
    ++files;
  }
  return files;
}

}  // namespace

TEST_CASE("fixture records equal Python zipfile's reading", "[zip]") {
  CHECK(check_folder(fixture("zip"), fixture("checkpoints")) >= 10);
}

TEST_CASE("conformance records equal Python zipfile's reading", "[zip][conformance]") {
  const fs::path dir(MAPLOC_CONFORMANCE_DIR);
  REQUIRE(fs::exists(dir / "manifest.json"));  // committed: missing is a failure
  CHECK(check_folder(fixture("zip/conformance"), dir) >= 50);
}

}  // namespace maploc::test
