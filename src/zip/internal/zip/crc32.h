// crc32.h - the zip checksum (zlib's CRC-32, computed with ISA-L), exposed for writers and verifiers.
#pragma once

#include <cstdint>
#include <span>

#include "maploc/zip/archive.h"

namespace maploc::zip {

/// Continues a CRC-32 (start with 0) over `bytes`, as zlib's crc32() does.
std::uint32_t crc32_update(std::uint32_t crc, std::span<const std::uint8_t> bytes) noexcept;

/// Checks a record's bytes (inflated when deflated) against the CRC-32 its
/// writer stored. A stored CRC of 0 on a non-empty record means "not
/// computed" (torch.serialization.set_crc32_options(False)): returns false
/// without reading. Returns true when checked and equal. Raises
/// kZipCrcMismatch naming the record and both values, or what
/// Archive::read raises.
bool verify_crc32(const Archive& archive, const Record& record);

}  // namespace maploc::zip
