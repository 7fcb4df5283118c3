// little_endian.h - unaligned little-endian loads and overflow-checked offset arithmetic (internal).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>

namespace maploc::detail {

inline std::uint16_t load_u16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}
inline std::uint32_t load_u32(const std::uint8_t* p) {
  return std::uint32_t{p[0]} | (std::uint32_t{p[1]} << 8) | (std::uint32_t{p[2]} << 16) |
         (std::uint32_t{p[3]} << 24);
}
inline std::uint64_t load_u64(const std::uint8_t* p) {
  return std::uint64_t{load_u32(p)} | (std::uint64_t{load_u32(p + 4)} << 32);
}

/// True when [off, off+len) lies inside a buffer of `size` bytes; never overflows.
inline bool in_bounds(std::uint64_t off, std::uint64_t len, std::uint64_t size) {
  return off <= size && len <= size - off;
}

/// a + b, or nullopt on overflow.
inline std::optional<std::uint64_t> checked_add(std::uint64_t a, std::uint64_t b) {
  if (b > UINT64_MAX - a) return std::nullopt;
  return a + b;
}

/// a * b, or nullopt on overflow.
inline std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b) {
  if (a != 0 && b > UINT64_MAX / a) return std::nullopt;
  return a * b;
}

}  // namespace maploc::detail
