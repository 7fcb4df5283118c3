// malformed_test.cpp - corrupted real torch archives, each rejected with its ErrorCode.
#include <functional>
#include <string>

#include "zip_test_util.h"

namespace maploc::test {
namespace {

// CD header field offsets (APPNOTE 4.3.12) and local header (4.3.7).
constexpr std::uint64_t kCdFlags = 8, kCdMethod = 10, kCdComp = 20, kCdSize = 24, kCdNameLen = 28,
                        kCdExtraLen = 30, kCdDisk = 34, kCdLho = 42, kCdName = 46;
constexpr std::uint64_t kLhFlags = 6, kLhNameLen = 26, kLhExtraLen = 28, kLhName = 30;

struct Case {
  const char* name;
  const char* base;                           // fixture to corrupt
  std::function<void(Buffer&)> corrupt;       // applied to the file's bytes
  ErrorCode expected;
  std::function<void(const zip::Archive&)> then = {};  // optional step after a successful open
  Limits limits = {};
};

// Central-directory header i, local header i and the end records of b.
std::uint64_t cd(const Buffer& b, std::size_t i) { return central_headers(b).at(i); }
std::uint64_t lh(const Buffer& b, std::size_t i) { return get_u32(b, cd(b, i) + kCdLho); }
std::uint64_t eocd(const Buffer& b) { return find_last(b, 0x06054b50); }
std::uint64_t z64(const Buffer& b) { return find_last(b, 0x06064b50); }
std::uint64_t locator(const Buffer& b) { return find_last(b, 0x07064b50); }

void read_all(const zip::Archive& a) {
  for (const auto& r : a.records()) a.read(r);
}

Limits small_limits(std::uint64_t entries, std::uint64_t inflated) {
  Limits l;
  l.zip_max_entries = entries;
  l.zip_max_inflated_bytes = inflated;
  return l;
}

const char* const kTorch = "checkpoints/nested_training.t113.pt";
const char* const kDeflated = "checkpoints/deflated.t113.pt";

std::vector<Case> cases() {
  std::vector<Case> c = {
      {"empty file", kTorch, [](Buffer& b) { b.clear(); }, ErrorCode::kZipNotZip},
      {"first 10 bytes only", kTorch, [](Buffer& b) { b.resize(10); }, ErrorCode::kZipNotZip},
      {"last byte cut", kTorch, [](Buffer& b) { b.pop_back(); }, ErrorCode::kZipNotZip},
      {"cut inside the end record", kTorch, [](Buffer& b) { b.resize(eocd(b) + 10); }, ErrorCode::kZipNotZip},
      {"cut after the central directory start", kTorch,
       [](Buffer& b) { b.resize(cd(b, 0) + 30); }, ErrorCode::kZipNotZip},
      {"an HTML page", kTorch,
       [](Buffer& b) { std::string s = "<!DOCTYPE html><html><body>Not found</body></html>"; b.assign(s.begin(), s.end()); },
       ErrorCode::kZipNotZip},
      {"a git-lfs pointer", kTorch,
       [](Buffer& b) {
         std::string s = "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\nsize 1024\n";
         b.assign(s.begin(), s.end());
       },
       ErrorCode::kZipNotZip},
      {"ZIP64 directory offset past the end", kTorch, [](Buffer& b) { put_u64(b, z64(b) + 48, 1ull << 40); },
       ErrorCode::kZipOffsetOutOfRange},
      {"ZIP64 directory size larger than the file", kTorch, [](Buffer& b) { put_u64(b, z64(b) + 40, 1ull << 40); },
       ErrorCode::kZipOffsetOutOfRange},
      {"ZIP64 entry count of 2^62", kTorch,
       [](Buffer& b) { put_u64(b, z64(b) + 24, 1ull << 62); put_u64(b, z64(b) + 32, 1ull << 62); },
       ErrorCode::kZipTooManyEntries},
      {"entry count larger than the directory can hold", kTorch,
       [](Buffer& b) { put_u64(b, z64(b) + 24, 100000); put_u64(b, z64(b) + 32, 100000); },
       ErrorCode::kZipTooManyEntries},
      {"entry count above Limits::zip_max_entries", kTorch, [](Buffer&) {}, ErrorCode::kZipTooManyEntries, {},
       small_limits(3, 1u << 20)},
      {"zero entries", kTorch, [](Buffer& b) { put_u64(b, z64(b) + 24, 0); put_u64(b, z64(b) + 32, 0); },
       ErrorCode::kZipEmpty},
      {"ZIP64 record missing where the locator points", kTorch,
       [](Buffer& b) { put_u32(b, z64(b), 0x12345678); }, ErrorCode::kZipBadZip64},
      {"saturated end record without a ZIP64 locator", kTorch,
       [](Buffer& b) { put_u32(b, locator(b), 0); put_u32(b, eocd(b) + 16, 0xFFFFFFFF); },
       ErrorCode::kZipBadZip64},
      {"ZIP64 record on disk 1", kTorch, [](Buffer& b) { put_u32(b, z64(b) + 16, 1); }, ErrorCode::kZipMultiDisk},
      {"locator declares 3 disks", kTorch, [](Buffer& b) { put_u32(b, locator(b) + 16, 3); },
       ErrorCode::kZipMultiDisk},
      {"record starts on disk 2", kTorch, [](Buffer& b) { put_u16(b, cd(b, 1) + kCdDisk, 2); },
       ErrorCode::kZipMultiDisk},
      {"central header signature flipped", kTorch, [](Buffer& b) { b[cd(b, 2)] ^= 0xFF; },
       ErrorCode::kZipBadSignature},
      {"local header signature flipped", kTorch, [](Buffer& b) { b[lh(b, 1)] ^= 0xFF; },
       ErrorCode::kZipBadSignature},
      {"local header offset past the end", kTorch, [](Buffer& b) { put_u32(b, cd(b, 1) + kCdLho, 0x7FFFFFF0); },
       ErrorCode::kZipOffsetOutOfRange},
      {"local header offset inside the central directory", kTorch,
       [](Buffer& b) { put_u32(b, cd(b, 1) + kCdLho, static_cast<std::uint32_t>(cd(b, 0))); },
       ErrorCode::kZipOffsetOutOfRange},
      {"record size past the end of the file", kTorch,
       [](Buffer& b) { put_u32(b, cd(b, 1) + kCdComp, 0x7FFFFFFF); put_u32(b, cd(b, 1) + kCdSize, 0x7FFFFFFF); },
       ErrorCode::kZipOffsetOutOfRange},
      {"stored record with two different sizes", kTorch, [](Buffer& b) { put_u32(b, cd(b, 1) + kCdSize, 7); },
       ErrorCode::kZipSizeMismatch},
      {"central name length past the directory", kTorch,
       [](Buffer& b) { put_u16(b, cd(b, 2) + kCdNameLen, 0xFFFF); }, ErrorCode::kZipBadCentralDirectory},
      {"local name and extra past the directory start", kTorch,
       [](Buffer& b) { put_u16(b, lh(b, 1) + kLhExtraLen, 0xFFFF); put_u16(b, lh(b, 1) + kLhNameLen, 0xFFFF); },
       ErrorCode::kZipTruncated},
      {"local and central names disagree", kTorch, [](Buffer& b) { b[lh(b, 1) + kLhName + 3] ^= 0x20; },
       ErrorCode::kZipNameMismatch},
      {"two records with the same name", kTorch,
       [](Buffer& b) {
         // data/0 and data/1 have names of one length: rename the second in both headers.
         const auto first = cd(b, 1), second = cd(b, 2);
         const auto n = b[first + kCdNameLen];
         REQUIRE(n == b[second + kCdNameLen]);
         const auto local = lh(b, 2);
         std::memcpy(&b[second + kCdName], &b[first + kCdName], n);
         std::memcpy(&b[local + kLhName], &b[first + kCdName], n);
       },
       ErrorCode::kZipDuplicateName},
      {"a record that runs into the next one", kTorch,
       [](Buffer& b) {
         const auto gap = lh(b, 2) - lh(b, 1);
         put_u32(b, cd(b, 1) + kCdComp, static_cast<std::uint32_t>(gap));
         put_u32(b, cd(b, 1) + kCdSize, static_cast<std::uint32_t>(gap));
       },
       ErrorCode::kZipOverlappingRecords},
      {"a second entry pointing at another record's local header", kTorch,
       [](Buffer& b) { put_u32(b, cd(b, 2) + kCdLho, static_cast<std::uint32_t>(lh(b, 1))); },
       ErrorCode::kZipNameMismatch},
      {"compression method 12 (bzip2)", kTorch, [](Buffer& b) { put_u16(b, cd(b, 1) + kCdMethod, 12); },
       ErrorCode::kZipUnsupportedCompression},
      {"encrypted flag in the central header", kTorch, [](Buffer& b) { b[cd(b, 1) + kCdFlags] |= 1; },
       ErrorCode::kZipEncrypted},
      {"encrypted flag in the local header only", kTorch, [](Buffer& b) { b[lh(b, 1) + kLhFlags] |= 1; },
       ErrorCode::kZipEncrypted},
      {"strong-encryption flag", kTorch, [](Buffer& b) { b[cd(b, 1) + kCdFlags] |= 0x40; },
       ErrorCode::kZipEncrypted},
      {"saturated size without a ZIP64 extra field", kTorch,
       [](Buffer& b) { put_u32(b, cd(b, 1) + kCdSize, 0xFFFFFFFF); put_u32(b, cd(b, 1) + kCdComp, 0xFFFFFFFF); },
       ErrorCode::kZipBadZip64},
      {"saturated offset with a short extra field", kTorch,
       [](Buffer& b) { put_u32(b, cd(b, 0) + kCdLho, 0xFFFFFFFF); put_u16(b, cd(b, 0) + kCdExtraLen, 0); },
       ErrorCode::kZipBadZip64},
      {"a record name that is not there", kTorch, [](Buffer&) {}, ErrorCode::kZipRecordNotFound,
       [](const zip::Archive& a) { a.at("data/999999"); }},
      {"an entry outside the archive folder", kTorch,
       [](Buffer& b) {
         // Replace the '/' after the prefix of entry 1 in both headers.
         const auto n = b[cd(b, 0) + kCdNameLen];
         std::uint64_t slash = 0;
         while (b[cd(b, 1) + kCdName + slash] != '/') ++slash;
         REQUIRE(slash < n);
         b[lh(b, 1) + kLhName + slash] = '_';
         b[cd(b, 1) + kCdName + slash] = '_';
       },
       ErrorCode::kZipNoPrefix, [](const zip::Archive& a) { a.require_prefix(); }},
      {"deflated record above Limits::zip_max_inflated_bytes", kDeflated, [](Buffer&) {},
       ErrorCode::kZipRecordTooLarge, read_all, small_limits(1000, 100)},
      {"deflate ratio bomb", kDeflated, [](Buffer& b) { put_u32(b, cd(b, 0) + kCdSize, 0x7FFFFFFF); },
       ErrorCode::kZipRecordTooLarge, read_all},
      {"deflate stream shorter than declared", kDeflated,
       [](Buffer& b) { put_u32(b, cd(b, 0) + kCdSize, get_u32(b, cd(b, 0) + kCdSize) + 1); },
       ErrorCode::kZipSizeMismatch, read_all},
      {"deflate stream longer than declared", kDeflated,
       [](Buffer& b) { put_u32(b, cd(b, 0) + kCdSize, get_u32(b, cd(b, 0) + kCdSize) - 1); },
       ErrorCode::kZipSizeMismatch, read_all},
      {"deflate block of reserved type", kDeflated,
       [](Buffer& b) { b[lh(b, 0) + kLhName + b[lh(b, 0) + kLhNameLen] + b[lh(b, 0) + kLhExtraLen]] = 0xFF; },
       ErrorCode::kZipInflate, read_all},
  };
  return c;
}

}  // namespace

TEST_CASE("malformed archives are rejected with their ErrorCode", "[zip][malformed]") {
  const auto all = cases();
  REQUIRE(all.size() >= 30);
  for (const auto& tc : all) {
    SECTION(tc.name) {
      Buffer bytes = read_file(fixture(tc.base));
      tc.corrupt(bytes);
      CHECK(code_of([&] {
              auto archive = open_bytes(bytes, tc.limits);
              if (tc.then) tc.then(archive);
            }) == tc.expected);
    }
  }
}

TEST_CASE("the uncorrupted bases open and read", "[zip]") {
  for (const char* base : {kTorch, kDeflated}) {
    auto archive = open_bytes(read_file(fixture(base)));
    read_all(archive);
    CHECK(archive.records().size() > 3);
  }
}

TEST_CASE("every truncation of a torch archive is rejected, never crashes", "[zip][malformed]") {
  const Buffer whole = read_file(fixture("checkpoints/protocol2.t113.pt"));
  for (std::size_t n = 0; n < whole.size(); n += (n < 64 || n + 200 > whole.size()) ? 1 : 7) {
    Buffer cut(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(n));
    CHECK(code_of([&] { open_bytes(cut); }) == ErrorCode::kZipNotZip);
  }
}

TEST_CASE("the not-a-zip message says what the file looks like", "[zip][malformed]") {
  std::string html = "<!DOCTYPE html><html>404</html>";
  try {
    open_bytes(Buffer(html.begin(), html.end()));
    FAIL("no error");
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK(what.find("no end-of-central-directory record in the last 31 bytes of a file of 31 bytes") !=
          std::string::npos);
    CHECK(what.find("HTML page") != std::string::npos);
  }
}

}  // namespace maploc::test
