// deferred.h - Archive::from_file in two steps (zip's internal interface, used by
// torch's reader): the central directory and a few records now, the local
// headers of the rest on another thread while the caller reads those few.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

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
  ~DeferredLocate();
  DeferredLocate(DeferredLocate&&) noexcept;
  DeferredLocate& operator=(DeferredLocate&&) noexcept;

  /// Locates the other records and checks overlaps: what from_file does on
  /// open, with the same errors. May run on another thread while the caller
  /// reads the early records and the names and sizes of any record (run()
  /// writes only the offsets of the records it locates).
  void run();

 private:
  Archive* archive_;
  std::unique_ptr<DirectoryEnd> end_;
  std::vector<std::uint32_t> early_;
};

}  // namespace maploc::zip
