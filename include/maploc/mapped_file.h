// mapped_file.h - a whole file as read-only bytes: mmap, or a read fallback.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

#include "maploc/bytes.h"

namespace maploc {

/// How the bytes of a MappedFile are held.
enum class Residency : std::uint8_t { kMapped, kRead, kBuffer, kCopyOnWrite };

/// A byte range of a file: [offset, offset + length).
struct ByteRange {
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

/// What reading a file from a URL cost so far (docs/remote.md).
struct RemoteTransfer {
  std::string url;                  ///< without credentials or query string
  std::uint64_t object_bytes = 0;   ///< the object's size as the server gave it
  std::uint64_t bytes_read = 0;     ///< body bytes received, retries included
  std::uint64_t requests = 0;       ///< HTTP requests sent, retries included
  std::uint64_t retries = 0;        ///< requests sent again after a fault
  bool read_in_full = false;        ///< the format has no index at its tail: the whole object was read
};

/// Brings a file's bytes in before they are read, for files whose bytes are not all present when
/// they are opened (a checkpoint read from a URL by ranged requests, docs/remote.md).
///
/// No silent zeros: every accessor that hands out bytes of such a file fetches them first or
/// raises a kRemote* code, never returns bytes that were not fetched: MappedFile::view,
/// torch::Checkpoint::storage_bytes (each layout's storage source), storage_file_range (nullopt:
/// a URL is no file on disk), remote_range with read() below, the torch hash functions
/// (tensor_sha256, contiguous_bytes), Checkpoint::object_pickle and zip::Archive::read
/// (tests/remote/unfetched_test.cpp reads unfetched ranges through each). Only the raw buffer,
/// MappedFile::bytes (and zip::Archive::file_bytes, remote::Object::bytes, the same buffer),
/// holds pages never fetched, which read as zeros: a reader of that buffer itself calls ensure()
/// on the range first, or reads it through view().
class RangeSource {
 public:
  virtual ~RangeSource() = default;
  /// Makes every range present, fetching what is missing (several requests in flight). Raises
  /// the kRemote* codes on failure. Thread-safe.
  virtual void ensure(std::span<const ByteRange> ranges) const = 0;
  /// Reads [offset, offset + length) straight into `out`, never into the file's own bytes: one
  /// ranged request (or a copy when every byte is present already). For loaders that stream a
  /// storage to its destination with their own threads; read_parallel() of them at once fill the
  /// link. Raises the kRemote* codes. Thread-safe.
  virtual void read(std::uint64_t offset, std::uint64_t length, std::uint8_t* out) const = 0;
  /// How many read() calls a loader should keep in flight.
  virtual unsigned read_parallel() const = 0;
  virtual RemoteTransfer transfer() const = 0;
};

/// A file opened read-only. The bytes are a private read-only mapping where
/// mmap works and an owned copy otherwise (pipes, some FUSE filesystems).
struct MappedFile {
  std::string path;          ///< as given; used in error messages
  /// The whole file. Where `source` is set, the raw buffer: bytes never ensure()d read as zeros
  /// (RangeSource); view() is the accessor that fetches first.
  Bytes bytes;
  Residency residency = Residency::kBuffer;
  /// Set when the bytes arrive on demand (a URL source): ensure() ranges before reading them.
  std::shared_ptr<const RangeSource> source;

  /// Makes [offset, offset + length) present when the file has a source; a no-op otherwise.
  void ensure(std::uint64_t offset, std::uint64_t length) const {
    if (source && length != 0) {
      const ByteRange range{offset, length};
      source->ensure(std::span<const ByteRange>(&range, 1));
    }
  }

  /// [offset, offset + length) of the file, made present first (ensure()): for a file read by
  /// URL, fetched if it never was; for any other file, a view of `bytes`. The view keeps the
  /// bytes alive. Raises kInvalidArgument when the range runs past the file, the kRemote* codes
  /// when a fetch fails.
  Bytes view(std::uint64_t offset, std::uint64_t length) const;

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
