// directory.h - parses the end records and central directory of a zip (internal).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "maploc/bytes.h"
#include "maploc/limits.h"
#include "maploc/zip/archive.h"

namespace maploc::zip {

/// Everything the end records say about where the central directory is.
struct DirectoryEnd {
  std::uint64_t eocd_offset = 0;      ///< file offset of the EOCD record
  std::uint64_t entries = 0;
  std::uint64_t cd_size = 0;
  std::uint64_t cd_offset = 0;        ///< as written (relative to the archive start)
  std::uint64_t cd_start = 0;         ///< file offset where the directory really starts
  std::uint64_t base = 0;             ///< bytes in front of the archive
  bool zip64 = false;
};

/// Finds and validates the end records. Raises kZipNotZip, kZipBadZip64,
/// kZipMultiDisk, kZipTooManyEntries, kZipOffsetOutOfRange.
DirectoryEnd find_directory_end(const Bytes& file, const std::string& path, const Limits& limits);

/// Parses every central-directory entry, locates each record's data through
/// its local header, and checks names, bounds and overlaps.
std::vector<Record> read_central_directory(const Bytes& file, const std::string& path,
                                           const DirectoryEnd& end);

}  // namespace maploc::zip
