// directory.h - parses the end records and central directory of a zip (internal).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "maploc/bytes.h"
#include "maploc/limits.h"
#include "maploc/mapped_file.h"
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

/// Parses every central-directory entry and checks names and bounds; with
/// `locate`, also locates each record's data through its local header and
/// checks overlaps (locate_records). Without, header offsets stay relative
/// to the archive start and data offsets are 0.
std::vector<Record> read_central_directory(const Bytes& file, const std::string& path, const DirectoryEnd& end,
                                           bool locate = true);

/// Locates every record not listed in `already` (indices located one by one
/// with locate_record) and checks that no two records overlap.
void locate_records(const Bytes& file, const std::string& path, const DirectoryEnd& end, std::vector<Record>& records,
                    std::span<const std::uint32_t> already);

/// Reads one record's local header: absolute header offset and data offset.
/// Call it once per record.
void locate_record(const Bytes& file, const std::string& path, const DirectoryEnd& end, Record& record);

}  // namespace maploc::zip
