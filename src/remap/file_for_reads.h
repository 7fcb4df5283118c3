// file_for_reads.h - the checkpoint's file opened for the preads that fill copies and uploads, when it is
// still the file that was mapped (internal).
#pragma once

#include <cstdint>
#include <vector>

#include "maploc/bytes.h"
#include "maploc/torch/checkpoint.h"
#include "host_memory.h"
#include "upload.h"

namespace maploc::remap::detail {

/// A descriptor of the checkpoint's file for fill_host()'s and upload()'s preads, or -1 when the path
/// no longer names the file that was mapped (moved, replaced, resized), the checkpoint is not a zip
/// archive of one file, or nothing is to be read from it. The mapping stays the source of truth.
class FileForReads {
 public:
  /// Raises kIoRead when the file is now shorter than when it was mapped (copying from the mapping
  /// would raise SIGBUS).
  FileForReads(const torch::Checkpoint& checkpoint, const std::vector<HostFill>& fills);
  FileForReads(const torch::Checkpoint& checkpoint, const std::vector<UploadJob>& jobs);
  ~FileForReads() { close(); }
  FileForReads(const FileForReads&) = delete;
  FileForReads& operator=(const FileForReads&) = delete;
  int fd() const noexcept { return fd_; }

 private:
  void open_checked(const torch::Checkpoint& checkpoint, std::int64_t offset, const Bytes& src);
  bool same_bytes(std::int64_t offset, const Bytes& src) const;
  void close() noexcept;
  int fd_ = -1;
};

}  // namespace maploc::remap::detail
