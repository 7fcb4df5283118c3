// part_reads.h - where one load reads the bytes of the storages it copies: the storage's URL stream, a
// pread of its file range, or its bytes in memory; asked of the checkpoint once per storage (internal).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "maploc/bytes.h"
#include "maploc/torch/checkpoint.h"
#include "parts.h"
#include "remote_reads.h"

namespace maploc::remap::detail {

/// The sources of one load's storages. Outlives the fills and uploads that use its readers.
class PartReads {
 public:
  /// `streams`: remote_reads() of the checkpoint, alive as long as this.
  PartReads(const torch::Checkpoint& checkpoint, const RemoteReads& streams);
  ~PartReads();
  PartReads(const PartReads&) = delete;
  PartReads& operator=(const PartReads&) = delete;

  /// A reader of `part`'s bytes, as on disk (not byte-swapped), gathered from its segments: from the
  /// parent's URL stream when it has one, else by pread of its plain file range (each file opened
  /// once: only the part's bytes are read), else copied out of storage_bytes() (deflated records,
  /// DCP tensors; made once per storage and held here). Made on one thread, called on any;
  /// `part` outlives it. Raises kIoOpen for a file that cannot be opened; the reader raises kIoRead
  /// for a short read.
  StorageReader reader(const Part& part);
  /// Whether storage i is streamed from a URL (RemoteReads::readers).
  bool streamed(std::size_t storage);
  /// Whether storage i's bytes are taken from storage_bytes() whole (no stream, no file range).
  bool from_memory(std::size_t storage);

 private:
  enum class Origin : std::uint8_t { kUnknown, kStream, kFile, kMemory };
  Origin origin(std::size_t storage);
  int fd(const std::string& path);

  const torch::Checkpoint& checkpoint_;
  const RemoteReads& streams_;
  std::vector<Origin> origins_;
  std::vector<std::optional<torch::FileRange>> ranges_;
  std::vector<Bytes> held_;  // storage_bytes() of kMemory storages, once each
  std::vector<std::pair<std::string, int>> fds_;
};

}  // namespace maploc::remap::detail
