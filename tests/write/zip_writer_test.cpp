// zip_writer_test.cpp - zip::Writer layout: torch's alignment and FB padding, descriptors, ZIP64, read back.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "maploc/error.h"
#include "maploc/zip/archive.h"
#include "zip/crc32.h"
#include "zip/writer.h"
#include "torch/torch_test_util.h"
#include "write/write_test_util.h"

using namespace maploc;

namespace {

std::vector<std::uint8_t> bytes_of(std::string_view s) { return {s.begin(), s.end()}; }

zip::Archive reopen(const std::vector<std::uint8_t>& b) {
  return zip::Archive::from_file(MappedFile::from_bytes(Bytes::owned(b), "mem.zip"));
}

}  // namespace

TEST_CASE("zip writer aligns every record to 64 bytes and reads back with CRCs", "[zip]") {
  std::vector<std::uint8_t> out;
  zip::Writer w([&](std::span<const std::uint8_t> b) { out.insert(out.end(), b.begin(), b.end()); });
  const auto pkl = bytes_of("\x80\x02K\x01.");
  w.add("archive/data.pkl", pkl);
  w.add("archive/byteorder", bytes_of("little"));
  std::vector<std::uint8_t> big(1000);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::uint8_t>(i * 7);
  w.begin("archive/data/0", big.size());
  w.write(std::span(big).first(10));
  w.write(std::span(big).subspan(10));
  w.end();
  w.add("archive/data/1", {});
  w.add("archive/version", bytes_of("3\n"));
  w.finish();

  const zip::Archive ar = reopen(out);
  REQUIRE(ar.records().size() == 5);
  CHECK(ar.prefix() == "archive");
  for (const auto& r : ar.records()) {
    CHECK(r.data_offset % 64 == 0);
    CHECK(r.method == zip::kMethodStored);
    CHECK(r.crc32 == zip::crc32_update(0, ar.read(r).span()));
  }
  CHECK(ar.read(ar.at("data/0")).size() == 1000);
  CHECK(std::memcmp(ar.read(ar.at("data/0")).data(), big.data(), 1000) == 0);
  CHECK(ar.at("data/1").size == 0);
  // torch's own layout for the first record: header at 0, data at 64 (§1.5 worked example).
  CHECK(ar.at("data.pkl").data_offset == 64);
  // Always the ZIP64 end record and locator before the classic one (§1.7).
  REQUIRE(out.size() > 98);
  const std::uint8_t* tail = out.data() + out.size() - 22 - 20 - 56;
  CHECK(std::memcmp(tail, "PK\x06\x06", 4) == 0);
}

TEST_CASE("zip writer refuses misuse", "[zip][malformed]") {
  std::vector<std::uint8_t> out;
  zip::Writer w([&](std::span<const std::uint8_t> b) { out.insert(out.end(), b.begin(), b.end()); });
  CHECK(test::code_of([&] { w.write(bytes_of("x")); }) == ErrorCode::kZipWriterMisuse);
  w.begin("a/x", 2);
  CHECK(test::code_of([&] { w.write(bytes_of("xyz")); }) == ErrorCode::kZipWriterMisuse);
  w.write(bytes_of("x"));
  CHECK(test::code_of([&] { w.end(); }) == ErrorCode::kZipWriterMisuse);
  CHECK(test::code_of([] { zip::Writer bad([](std::span<const std::uint8_t>) {}, {.alignment = 48}); }) ==
        ErrorCode::kInvalidArgument);
  zip::Writer w2([](std::span<const std::uint8_t>) {});
  w2.add("a/x", {});
  CHECK(test::code_of([&] { w2.add("a/x", {}); }) == ErrorCode::kZipWriterMisuse);
}

TEST_CASE("zip writer switches to ZIP64 past 4 GiB (sparse file)", "[zip][limits]") {
  test::TempDir dir("zip64");
  const auto path = dir.path / "big.zip";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE(fd >= 0);
  // Zero chunks become holes, so the 5 GiB record costs no disk.
  auto sink = [fd](std::span<const std::uint8_t> b) {
    const bool zero = b.size() >= 4096 && std::all_of(b.begin(), b.end(), [](std::uint8_t c) { return c == 0; });
    if (zero) {
      REQUIRE(::lseek(fd, static_cast<off_t>(b.size()), SEEK_CUR) >= 0);
    } else {
      REQUIRE(::write(fd, b.data(), b.size()) == static_cast<ssize_t>(b.size()));
    }
  };
  const std::uint64_t size = (std::uint64_t{5} << 30) + 3;
  {
    zip::Writer w(sink, {.alignment = 64, .crc32 = false});
    w.add("archive/data.pkl", bytes_of("\x80\x02N."));
    w.begin("archive/data/0", size);
    std::vector<std::uint8_t> zeros(std::size_t{1} << 24);
    for (std::uint64_t left = size; left > 0;) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, zeros.size()));
      w.write(std::span(zeros).first(n));
      left -= n;
    }
    w.end();
    w.add("archive/version", bytes_of("3\n"));  // header offset above 4 GiB
    w.finish();
  }
  REQUIRE(::close(fd) == 0);
  const zip::Archive ar = zip::Archive::open(path);
  REQUIRE(ar.records().size() == 3);
  CHECK(ar.at("data/0").size == size);
  CHECK(ar.at("data/0").data_offset % 64 == 0);
  CHECK(ar.at("version").header_offset > 0xFFFFFFFFull);
  CHECK(ar.at("version").data_offset % 64 == 0);
  CHECK(ar.read(ar.at("version")).text() == "3\n");
}

TEST_CASE("verify_crc32 raises kZipCrcMismatch for a flipped byte, skips CRC 0", "[zip][malformed]") {
  std::vector<std::uint8_t> out;
  zip::Writer w([&](std::span<const std::uint8_t> b) { out.insert(out.end(), b.begin(), b.end()); });
  w.add("a/x", bytes_of("hello"));
  w.finish();
  CHECK(zip::verify_crc32(reopen(out), reopen(out).at("x")));
  out[64] ^= 1;  // the data of the first record starts at 64
  const zip::Archive bad = reopen(out);
  CHECK(test::code_of([&] { zip::verify_crc32(bad, bad.at("x")); }) == ErrorCode::kZipCrcMismatch);
  std::vector<std::uint8_t> nocrc;
  zip::Writer w2([&](std::span<const std::uint8_t> b) { nocrc.insert(nocrc.end(), b.begin(), b.end()); },
                 {.alignment = 64, .crc32 = false});
  w2.add("a/x", bytes_of("hello"));
  w2.finish();
  CHECK_FALSE(zip::verify_crc32(reopen(nocrc), reopen(nocrc).at("x")));
}
