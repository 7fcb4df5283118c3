// mapped_file.h - a whole file as read-only bytes: mmap, or a read fallback.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "maploc/bytes.h"

namespace maploc {

/// How the bytes of a MappedFile are held.
enum class Residency : std::uint8_t { kMapped, kRead, kBuffer, kCopyOnWrite };

/// A file opened read-only. The bytes are a private read-only mapping where
/// mmap works and an owned copy otherwise (pipes, some FUSE filesystems).
struct MappedFile {
  std::string path;          ///< as given; used in error messages
  Bytes bytes;               ///< the whole file
  Residency residency = Residency::kBuffer;

  /// Opens and maps path. Raises kIoOpen (missing, a folder, no permission)
  /// or kIoRead. Views taken from `bytes` outlive the MappedFile.
  static MappedFile open(const std::filesystem::path& path);
  /// Maps path privately with write access: pages are the file's until
  /// written, then private copies (copy-on-write); the file never changes.
  /// Bytes::data() may be written through a const_cast by the owner of the
  /// only reference. Raises kIoOpen when the file cannot be mapped.
  static MappedFile open_copy_on_write(const std::filesystem::path& path);
  /// Wraps bytes already in memory; `name` is used in messages.
  static MappedFile from_bytes(Bytes bytes, std::string name);
};

}  // namespace maploc
