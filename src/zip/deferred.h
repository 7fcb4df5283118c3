// deferred.h - Archive::from_file in two steps (internal): a reader starts on
// a few records while another thread reads the local headers of the rest.
// Opening a 30,000-tensor checkpoint spent a fifth of its time in page faults
// on local headers; the torch reader overlaps them with running data.pkl.
#pragma once

#include <cstdint>
#include <span>
#include <optional>
#include <string_view>
#include <vector>

#include "directory.h"
#include "maploc/zip/archive.h"

namespace maploc::zip {

class DeferredLocate {
 public:
  /// Reads the end records and the central directory into `archive` (raises
  /// what Archive::from_file raises for them) and locates at once the records
  /// named in `early` (relative to the prefix) that exist. Every other record
  /// has data_offset 0 until run() has returned.
  DeferredLocate(MappedFile file, const Limits& limits, std::span<const std::string_view> early,
                 std::optional<Archive>& archive);

  /// Locates the other records and checks overlaps: what from_file does on
  /// open, with the same errors. May run on another thread while the caller
  /// reads the early records and the names and sizes of any record (run()
  /// writes only the offsets of the records it locates).
  void run();

 private:
  Archive* archive_;
  DirectoryEnd end_;
  std::vector<std::uint32_t> early_;
};

}  // namespace maploc::zip
