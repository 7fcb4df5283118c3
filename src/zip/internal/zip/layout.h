// layout.h - where a zip's structures lie, read from part of its bytes (zip's internal interface,
// used by torch's URL opener: docs/remote.md). Each step needs only the bytes the one before named.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "maploc/bytes.h"
#include "maploc/limits.h"
#include "maploc/zip/archive.h"

namespace maploc::zip {

/// Where the central directory lies: [start, end). Reads only the file's last 65,557 bytes and a
/// ZIP64 end record right before them. Raises what Archive::from_file raises for the end records.
struct DirectorySpan {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
};
DirectorySpan directory_span(const Bytes& file, const std::string& path, const Limits& limits);

/// The records the central directory lists, with absolute header offsets and data_offset 0. Reads
/// only the end records and the directory.
std::vector<Record> directory_records(const Bytes& file, const std::string& path, const Limits& limits);

/// Bytes of a local header before its data: 30 + name + extra, from the header's own fields
/// (which must be present: at least 30 bytes at header_offset).
std::uint64_t local_header_size(const Bytes& file, std::uint64_t header_offset);

}  // namespace maploc::zip
