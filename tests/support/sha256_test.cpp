// sha256_test.cpp - SHA-256 against the FIPS 180-4 example vectors.
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "support/sha256.h"

namespace {
std::string sha(const std::string& s) {
  return maploc::Sha256::hex({reinterpret_cast<const std::uint8_t*>(s.data()), s.size()});
}
}  // namespace

TEST_CASE("SHA-256 of the FIPS 180-4 examples", "[support]") {
  CHECK(sha("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(sha(std::string(1000000, 'a')) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("SHA-256 is the same fed in pieces of every size", "[support]") {
  std::string msg(1000, 'x');
  for (std::size_t i = 0; i < msg.size(); ++i) msg[i] = static_cast<char>(i * 7 + 3);
  const std::string whole = sha(msg);
  for (std::size_t piece : {1u, 3u, 55u, 56u, 63u, 64u, 65u, 127u}) {
    maploc::Sha256 s;
    for (std::size_t off = 0; off < msg.size(); off += piece) {
      std::size_t n = std::min(piece, msg.size() - off);
      s.update({reinterpret_cast<const std::uint8_t*>(msg.data()) + off, n});
    }
    CHECK(s.finish_hex() == whole);
  }
}

TEST_CASE("SHA-256 of more known vectors, and a moved hasher", "[support]") {
  // FIPS 180-4's 896-bit example and the common pangram.
  CHECK(sha("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu") ==
        "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  CHECK(sha("The quick brown fox jumps over the lazy dog") ==
        "d7a8fbb307d7809469ca9abcb0082e4f8d5651e46d3cdb762d02d0bf37c9e592");
  maploc::Sha256 a;
  a.update({reinterpret_cast<const std::uint8_t*>("ab"), 2});
  maploc::Sha256 b = std::move(a);
  b.update({reinterpret_cast<const std::uint8_t*>("c"), 1});
  CHECK(b.finish_hex() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}
