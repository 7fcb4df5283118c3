// crc32.cpp - zlib's CRC-32 over large spans, and a record's bytes checked against its stored CRC.
#include "maploc/zip/crc32.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>

#include "maploc/error.h"

namespace maploc::zip {

std::uint32_t crc32_update(std::uint32_t crc, std::span<const std::uint8_t> bytes) noexcept {
  uLong c = crc;
  for (std::size_t off = 0; off < bytes.size();) {
    // zlib takes uInt lengths: feed at most 1 GiB at a time.
    const std::size_t n = std::min<std::size_t>(bytes.size() - off, std::size_t{1} << 30);
    c = ::crc32(c, bytes.data() + off, static_cast<uInt>(n));
    off += n;
  }
  return static_cast<std::uint32_t>(c);
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
