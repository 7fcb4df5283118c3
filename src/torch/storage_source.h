// storage_source.h - where a checkpoint's storage bytes lie and how they are read: one class per layout (internal).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "maploc/bytes.h"
#include "maploc/mapped_file.h"
#include "maploc/torch/checkpoint.h"
#include "maploc/zip/archive.h"

namespace maploc::torch {

struct DcpLayout;  // torch/dcp.h

/// The storage half of an opened checkpoint, chosen once by the format reader (LLVM's
/// ObjectFile::createObjectFile is the model): the reader knows the layout, so no accessor asks
/// again. The Checkpoint keeps the format-independent model (storages, tensors, origins) and
/// hands each storage question to its source after checking the index. A new layout is one
/// new class here.
///
/// Every method takes an index into the checkpoint's storages(), already checked. A source
/// over a URL-backed file (MappedFile::source) fetches what it returns before returning it:
/// no method hands out bytes that were never fetched (docs/remote.md).
class StorageSource {
 public:
  virtual ~StorageSource() = default;
  /// The raw bytes of storage i, exactly as stored (Checkpoint::storage_bytes).
  virtual Bytes bytes(std::size_t i) const = 0;
  /// Where storage i lies unchanged in a file on disk (Checkpoint::storage_file_range).
  virtual std::optional<FileRange> file_range(std::size_t i) const = 0;
  /// file_range(i)'s offset when that file is the checkpoint's own (Checkpoint::storage_file_offset):
  /// the same answer without making a path, for loaders that ask it of every storage. Sources over
  /// one file answer file_range from it; the others (set members, DCP chunks) have none.
  virtual std::optional<std::uint64_t> own_file_offset(std::size_t) const { return std::nullopt; }
  /// Where storage i lies unchanged in an object read by URL (Checkpoint::remote_range).
  virtual std::optional<RemoteRange> remote_range(std::size_t i) const = 0;
  /// Fetches the bytes of the storages named now, several requests in flight; a no-op for
  /// sources whose bytes are all present (Checkpoint::prefetch). Ignores indexes out of range.
  virtual void prefetch(std::span<const std::size_t> indexes) const = 0;
};

/// Zip records (kZip, kTorchScript): stored records as views of the file (located on open:
/// Storage::file_offset and `present` bytes), deflated ones inflated by the archive, views as
/// slices of their root. The references outlive the source (they are the State's).
std::unique_ptr<StorageSource> zip_source(const zip::Archive& archive, const MappedFile& file,
                                          const std::vector<Storage>& storages,
                                          const std::vector<std::uint64_t>& present);

/// Pickle streams with the storages' bytes between pickles (kLegacy, kTar): `spans[i]` is
/// storage i's bytes, a view of `file` (empty where a view's root is short).
std::unique_ptr<StorageSource> stream_source(std::vector<Bytes> spans, const MappedFile& file,
                                             const std::vector<Storage>& storages,
                                             const std::vector<std::uint64_t>& present);

/// A safetensors file: storage i is [file_offset, + nbytes) of the file, checked on open.
std::unique_ptr<StorageSource> safetensors_source(const MappedFile& file, const std::vector<Storage>& storages);

/// DCP chunks: each storage assembled anew from its chunks on every bytes() call; no plain range.
std::unique_ptr<StorageSource> dcp_source(std::shared_ptr<const DcpLayout> layout,
                                          const std::vector<Storage>& storages);

/// The member checkpoints of a kSet: storage i is storage local(i) of member(i), which its
/// own source answers for. Filled by the set reader as it appends members.
class SetSource final : public StorageSource {
 public:
  /// `member_of` is the State's per-storage member index (Checkpoint::member_of_storage reports it).
  explicit SetSource(const std::vector<std::uint32_t>& member_of) : member_of_(member_of) {}
  /// Takes member `c`; returns its index.
  std::size_t add_member(Checkpoint c);
  /// Records that the set's next storage is storage `local` of the member last added.
  void add_storage(std::size_t local) { local_.push_back(local); }
  std::size_t member_count() const noexcept { return members_.size(); }

  Bytes bytes(std::size_t i) const override;
  std::optional<FileRange> file_range(std::size_t i) const override;
  std::optional<RemoteRange> remote_range(std::size_t i) const override;
  void prefetch(std::span<const std::size_t> indexes) const override;

 private:
  const std::vector<std::uint32_t>& member_of_;
  std::vector<Checkpoint> members_;   ///< they own their mappings, trees and sources
  std::vector<std::size_t> local_;    ///< per storage of the set: its index in its member
};

/// For sources over one file: where `raw`, a view of `file` (not inflated, not assembled),
/// starts in it, when `file` is a mapping or a read of a file on disk; nullopt otherwise.
std::optional<std::uint64_t> plain_offset_in(const MappedFile& file, const Bytes& raw);
/// `offset` (from plain_offset_in) as a FileRange of `file`.
std::optional<FileRange> range_at(const MappedFile& file, std::optional<std::uint64_t> offset);
/// For sources over one file: [offset, + length) of `file` as a RemoteRange, when `file` is
/// read by URL and the range lies inside it; nullopt otherwise.
std::optional<RemoteRange> remote_range_of(const MappedFile& file, std::uint64_t offset, std::uint64_t length);

}  // namespace maploc::torch
