// archive.h - a bounds-checked, read-only zip reader for torch archives (APPNOTE 6.3, ZIP64).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "maploc/bytes.h"
#include "maploc/limits.h"
#include "maploc/mapped_file.h"

namespace maploc::detail {
class FlatIndex;
}  // namespace maploc::detail

namespace maploc::zip {

struct DirectoryEnd;   // internal: what the end records say
class DeferredLocate;  // internal: Archive::from_file in two steps (torch's reader)

/// APPNOTE compression methods the reader accepts.
inline constexpr std::uint16_t kMethodStored = 0;
inline constexpr std::uint16_t kMethodDeflated = 8;

/// One entry of the central directory, with its data located through the
/// local header. All offsets are from the start of the file.
struct Record {
  std::string name;              ///< full name, e.g. "archive/data/0"
  std::uint64_t header_offset;   ///< local file header
  std::uint64_t data_offset;     ///< first byte of the (possibly compressed) data
  std::uint64_t compressed_size;
  std::uint64_t size;            ///< uncompressed size
  std::uint32_t crc32;           ///< as the central directory says (torch may write 0)
  std::uint16_t method;          ///< kMethodStored or kMethodDeflated
  std::uint16_t flags;           ///< general purpose bit flags

  /// Largest power of two (capped at 4096) that divides data_offset; torch
  /// writes 64 by default.
  std::uint64_t alignment() const;
};

/// An opened zip archive. Validates the whole directory on open, so that
/// every Record it hands out lies inside the file and no two overlap.
class Archive {
 public:
  /// Opens and maps path. Raises kIoOpen/kIoRead or any kZip* code.
  static Archive open(const std::filesystem::path& path, const Limits& limits = {});
  /// Reads an archive held in memory (file.path is used in messages).
  static Archive from_file(MappedFile file, const Limits& limits = {});

  /// Name of the file, for messages.
  const std::string& path() const { return file_.path; }
  /// The whole file. For an archive read by URL, the raw buffer (MappedFile::bytes): bytes that
  /// read() or MappedFile::ensure never fetched read as zeros; read records with read().
  const Bytes& file_bytes() const { return file_.bytes; }
  Residency residency() const { return file_.residency; }
  /// Offset of the archive inside the file: non-zero when bytes were
  /// prepended to a zip (torch's test_serialization_with_header).
  std::uint64_t base_offset() const { return base_; }

  /// Records in central-directory order.
  const std::vector<Record>& records() const { return records_; }
  /// The top-level folder of the first entry ("archive" for buffer-saved
  /// checkpoints), or empty when that entry is not inside a folder.
  const std::string& prefix() const { return prefix_; }
  /// Raises kZipNoPrefix unless every record lies under prefix()/ (what
  /// PyTorchStreamReader requires of a torch archive).
  void require_prefix() const;

  /// Record by full name, or nullptr. O(1).
  const Record* find(std::string_view full_name) const;
  /// Record by name relative to the prefix ("data.pkl" -> "archive/data.pkl").
  const Record* find_in_prefix(std::string_view name) const;
  /// Like find_in_prefix but raises kZipRecordNotFound naming the archive.
  const Record& at(std::string_view name) const;

  /// The uncompressed bytes of a record: a zero-copy view of the file for
  /// stored records, an owned inflated buffer for deflated ones (checked
  /// against the declared size and Limits). The view keeps the file alive.
  Bytes read(const Record& record) const;

 private:
  Archive() = default;
  /// from_file's work; without `locate`, records keep data_offset 0 until
  /// DeferredLocate::run(). `end` (may be null) receives the end records.
  static Archive parse(MappedFile file, const Limits& limits, bool locate, DirectoryEnd* end);

  MappedFile file_;
  Limits limits_;
  std::uint64_t base_ = 0;
  std::string prefix_;
  std::vector<Record> records_;
  std::shared_ptr<const maploc::detail::FlatIndex> index_;  ///< record names, hashed; built once
  friend class DeferredLocate;  ///< writes the data offsets of records it locates late
};

}  // namespace maploc::zip
