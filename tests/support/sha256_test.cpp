// sha256_test.cpp - SHA-256 against the FIPS 180-4 example vectors.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "maploc/sha256.h"

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
