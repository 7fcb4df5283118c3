// byteswap.h - copying big-endian element arrays into native little-endian order (internal).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace maploc::detail {

/// Copies n bytes from src to dst, reversing the bytes of each `unit`-byte
/// element (unit 1 is a plain copy). Precondition: n % unit == 0; dst and
/// src do not overlap, or are equal (in-place swap).
inline void copy_swapped(std::uint8_t* dst, const std::uint8_t* src, std::size_t n, std::size_t unit) {
  if (unit <= 1) {
    if (dst != src) std::memcpy(dst, src, n);
    return;
  }
  for (std::size_t off = 0; off + unit <= n; off += unit) {
    for (std::size_t i = 0, j = unit - 1; i < j; ++i, --j) {
      const std::uint8_t a = src[off + i], b = src[off + j];
      dst[off + i] = b;
      dst[off + j] = a;
    }
    if (unit % 2 == 1) dst[off + unit / 2] = src[off + unit / 2];
  }
}

}  // namespace maploc::detail
