// crc32_test.cpp - the zip CRC-32 against the standard check values, fed whole and in pieces.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "zip/crc32.h"

namespace {
std::uint32_t crc(std::uint32_t start, const std::string& s) {
  return maploc::zip::crc32_update(start, {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()});
}
}  // namespace

TEST_CASE("CRC-32 of the standard check values", "[zip]") {
  CHECK(crc(0, "") == 0u);
  CHECK(crc(0, "123456789") == 0xCBF43926u);  // the CRC-32/ISO-HDLC check value
  CHECK(crc(0, "The quick brown fox jumps over the lazy dog") == 0x414FA339u);
  CHECK(crc(0, std::string(1 << 20, '\0')) == 0xA738EA1Cu);
}

TEST_CASE("CRC-32 continued over pieces equals the CRC of the whole", "[zip]") {
  std::string msg(100000, 'x');
  for (std::size_t i = 0; i < msg.size(); ++i) msg[i] = static_cast<char>(i * 131 + 7);
  const std::uint32_t whole = crc(0, msg);
  for (std::size_t piece : {1u, 3u, 15u, 16u, 17u, 63u, 64u, 255u, 4096u, 65537u}) {
    std::uint32_t c = 0;
    for (std::size_t off = 0; off < msg.size(); off += piece) c = crc(c, msg.substr(off, piece));
    CHECK(c == whole);
  }
}
