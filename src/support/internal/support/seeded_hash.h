// seeded_hash.h - keyed hashing for every table built from file data (internal).
// SipHash-1-3 (Aumasson & Bernstein; the variant CPython and Rust use for
// their dicts) under a 128-bit key drawn once per process from the OS, so an
// input cannot be crafted to make keys collide: an unseeded hash let a 2 MB
// dict of `i << 32` int keys cost 48 s (issue 15).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace maploc::detail {

/// The process's 128-bit hash key (getrandom, drawn on first use).
struct HashKey {
  std::uint64_t k0, k1;
};
const HashKey& hash_key() noexcept;

/// SipHash-1-3 of bytes under key ^ domain (domain separates kinds of keys).
std::uint64_t siphash13(const void* data, std::size_t size, std::uint64_t domain) noexcept;

/// Keyed hash of text (zip names, storage keys, tensor names).
inline std::uint64_t hash_text(std::string_view text, std::uint64_t domain = 0) noexcept {
  return siphash13(text.data(), text.size(), domain);
}
inline std::uint64_t hash_bytes(std::span<const std::uint8_t> bytes, std::uint64_t domain) noexcept {
  return siphash13(bytes.data(), bytes.size(), domain);
}

/// Keyed hash of one 64-bit word (ints, float bits, identities).
std::uint64_t hash_word(std::uint64_t word, std::uint64_t domain) noexcept;

/// Combines an accumulated hash with the keyed hash of an element (tuples):
/// SipHash of both words, so equal-hash sequences cannot be built by algebra.
inline std::uint64_t hash_combine(std::uint64_t h, std::uint64_t element) noexcept {
  const std::uint64_t words[2] = {h, element};
  return siphash13(words, sizeof words, 0x636f6d62696e65ull);
}

}  // namespace maploc::detail

namespace maploc::detail {

/// Hashers for std::unordered_* containers keyed by file data.
struct SeededWordHash {
  std::size_t operator()(std::uint64_t v) const noexcept { return static_cast<std::size_t>(hash_word(v, 0x776f7264)); }
  std::size_t operator()(std::int64_t v) const noexcept { return (*this)(static_cast<std::uint64_t>(v)); }
};
struct SeededTextHash {
  std::size_t operator()(std::string_view s) const noexcept { return static_cast<std::size_t>(hash_text(s, 0x74657874)); }
};

}  // namespace maploc::detail
