// seeded_hash.cpp - SipHash-1-3 and the per-process key.
#include "support/seeded_hash.h"

#include <sys/random.h>

#include <chrono>
#include <cstring>

namespace maploc::detail {
namespace {

inline std::uint64_t rotl(std::uint64_t x, int b) noexcept { return (x << b) | (x >> (64 - b)); }

struct State {
  std::uint64_t v0, v1, v2, v3;
  void round() noexcept {
    v0 += v1; v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32);
    v2 += v3; v3 = rotl(v3, 16); v3 ^= v2;
    v0 += v3; v3 = rotl(v3, 21); v3 ^= v0;
    v2 += v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32);
  }
  void absorb(std::uint64_t m) noexcept {
    v3 ^= m;
    round();  // c = 1
    v0 ^= m;
  }
  std::uint64_t finish() noexcept {
    v2 ^= 0xff;
    round(); round(); round();  // d = 3
    return v0 ^ v1 ^ v2 ^ v3;
  }
};

State start(std::uint64_t domain) noexcept {
  const HashKey& k = hash_key();
  const std::uint64_t k0 = k.k0 ^ domain, k1 = k.k1;
  return {k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull, k0 ^ 0x6c7967656e657261ull,
          k1 ^ 0x7465646279746573ull};
}

HashKey draw() noexcept {
  HashKey k{0, 0};
  std::uint8_t buf[16];
  std::size_t got = 0;
  while (got < sizeof buf) {
    const ssize_t n = getrandom(buf + got, sizeof buf - got, 0);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got == sizeof buf) {
    std::memcpy(&k.k0, buf, 8);
    std::memcpy(&k.k1, buf + 8, 8);
  } else {
    // No entropy source (a seccomp sandbox): the clock and an address still
    // differ between runs, which is what defeats a precomputed input.
    const auto t = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    k.k0 = t ^ reinterpret_cast<std::uintptr_t>(&k);
    k.k1 = rotl(t, 29) ^ 0x9e3779b97f4a7c15ull;
  }
  return k;
}

}  // namespace

const HashKey& hash_key() noexcept {
  static const HashKey key = draw();
  return key;
}

std::uint64_t siphash13(const void* data, std::size_t size, std::uint64_t domain) noexcept {
  State s = start(domain);
  const auto* p = static_cast<const std::uint8_t*>(data);
  const std::size_t whole = size & ~std::size_t{7};
  for (std::size_t i = 0; i < whole; i += 8) {
    std::uint64_t m;
    std::memcpy(&m, p + i, 8);  // native order: a keyed hash either way
    s.absorb(m);
  }
  std::uint64_t last = static_cast<std::uint64_t>(size) << 56;
  for (std::size_t i = whole; i < size; ++i) last |= static_cast<std::uint64_t>(p[i]) << (8 * (i - whole));
  s.absorb(last);
  return s.finish();
}

std::uint64_t hash_word(std::uint64_t word, std::uint64_t domain) noexcept {
  State s = start(domain);
  s.absorb(word);
  s.absorb(std::uint64_t{8} << 56);
  return s.finish();
}

}  // namespace maploc::detail
