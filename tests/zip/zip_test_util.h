// zip_test_util.h - helpers shared by the zip tests: fixture paths, byte patching, error checks.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "maploc/error.h"
#include "maploc/zip/archive.h"
#include "error_of.h"

namespace maploc::test {

using Buffer = std::vector<std::uint8_t>;

inline std::filesystem::path fixture(const std::string& rel) {
  return std::filesystem::path(MAPLOC_FIXTURES_DIR) / rel;
}

inline Buffer read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE(in.good());
  return Buffer(std::istreambuf_iterator<char>(in), {});
}

inline zip::Archive open_bytes(const Buffer& bytes, const Limits& limits = {}) {
  return zip::Archive::from_file(MappedFile::from_bytes(Bytes::owned(bytes), "test.pt"), limits);
}

inline void put_u16(Buffer& b, std::uint64_t off, std::uint16_t v) {
  REQUIRE(off + 2 <= b.size());
  b[off] = static_cast<std::uint8_t>(v);
  b[off + 1] = static_cast<std::uint8_t>(v >> 8);
}
inline void put_u32(Buffer& b, std::uint64_t off, std::uint32_t v) {
  put_u16(b, off, static_cast<std::uint16_t>(v));
  put_u16(b, off + 2, static_cast<std::uint16_t>(v >> 16));
}
inline void put_u64(Buffer& b, std::uint64_t off, std::uint64_t v) {
  put_u32(b, off, static_cast<std::uint32_t>(v));
  put_u32(b, off + 4, static_cast<std::uint32_t>(v >> 32));
}
inline std::uint32_t get_u32(const Buffer& b, std::uint64_t off) {
  return std::uint32_t{b[off]} | (std::uint32_t{b[off + 1]} << 8) | (std::uint32_t{b[off + 2]} << 16) |
         (std::uint32_t{b[off + 3]} << 24);
}

/// Offset of the last occurrence of a 4-byte little-endian signature.
inline std::uint64_t find_last(const Buffer& b, std::uint32_t sig) {
  for (std::uint64_t pos = b.size() - 4; pos > 0; --pos) {
    if (get_u32(b, pos) == sig) return pos;
  }
  FAIL("signature not found");
  return 0;
}

/// Offsets of every central-directory header, in directory order, walked
/// from the end record (small archive at offset 0: its 32-bit fields are exact).
inline std::vector<std::uint64_t> central_headers(const Buffer& b) {
  const std::uint64_t eocd = find_last(b, 0x06054b50);
  std::uint64_t pos = get_u32(b, eocd + 16), entries = b[eocd + 10] | (b[eocd + 11] << 8);
  std::vector<std::uint64_t> out;
  for (std::uint64_t i = 0; i < entries; ++i) {
    REQUIRE(get_u32(b, pos) == 0x02014b50);
    out.push_back(pos);
    pos += 46 + (b[pos + 28] | (b[pos + 29] << 8)) + (b[pos + 30] | (b[pos + 31] << 8)) +
           (b[pos + 32] | (b[pos + 33] << 8));
  }
  return out;
}


}  // namespace maploc::test
