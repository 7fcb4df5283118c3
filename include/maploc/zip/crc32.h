// crc32.h - zlib's CRC-32 (the zip checksum), exposed for writers and verifiers.
#pragma once

#include <cstdint>
#include <span>

namespace maploc::zip {

/// Continues a CRC-32 (start with 0) over `bytes`, as zlib's crc32() does.
std::uint32_t crc32_update(std::uint32_t crc, std::span<const std::uint8_t> bytes) noexcept;

}  // namespace maploc::zip
