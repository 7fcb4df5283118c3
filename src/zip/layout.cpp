// layout.cpp - the end records, the central directory and local header sizes, read step by step.
#include "zip/layout.h"

#include "directory.h"
#include "support/little_endian.h"

namespace maploc::zip {

DirectorySpan directory_span(const Bytes& file, const std::string& path, const Limits& limits) {
  const DirectoryEnd end = find_directory_end(file, path, limits);
  return {end.cd_start, end.cd_start + end.cd_size};
}

std::vector<Record> directory_records(const Bytes& file, const std::string& path, const Limits& limits) {
  const DirectoryEnd end = find_directory_end(file, path, limits);
  std::vector<Record> records = read_central_directory(file, path, end, /*locate=*/false);
  for (Record& r : records) r.header_offset += end.base;
  return records;
}

std::uint64_t local_header_size(const Bytes& file, std::uint64_t header_offset) {
  const std::uint8_t* h = file.data() + header_offset;
  return 30 + static_cast<std::uint64_t>(detail::load_u16(h + 26)) + detail::load_u16(h + 28);
}

}  // namespace maploc::zip
