// crc32.cpp - the zip CRC-32 (zlib's crc32(), computed by ISA-L), and a record's bytes checked against its stored CRC.
#include "zip/crc32.h"

#include <isa-l/crc.h>

#include <cstdio>

#include "maploc/error.h"

namespace maploc::zip {

// ISA-L's crc32_gzip_refl is zlib's crc32() (reflected IEEE polynomial, inverted
// in and out) with carry-less multiplication: 5x zlib 1.2.13 here (bench/crc32_compare.cpp).
std::uint32_t crc32_update(std::uint32_t crc, std::span<const std::uint8_t> bytes) noexcept {
  if (bytes.empty()) return crc;
  return crc32_gzip_refl(crc, bytes.data(), bytes.size());
}

bool verify_crc32(const Archive& archive, const Record& record) {
  if (record.crc32 == 0 && record.size != 0) return false;
  const std::uint32_t crc = crc32_update(0, archive.read(record).span());
  if (crc != record.crc32) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "its bytes have CRC-32 %08x, the archive says %08x", crc, record.crc32);
    throw Error(ErrorCode::kZipCrcMismatch, Stage::kZip, std::string("record is corrupt: ") + buf,
                record.data_offset, record.name);
  }
  return true;
}

}  // namespace maploc::zip
