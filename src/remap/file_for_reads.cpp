// file_for_reads.cpp - the checkpoint's file for the preads of one load, checked against its mapping.
#include "file_for_reads.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "maploc/error.h"

namespace maploc::remap::detail {

FileForReads::FileForReads(const torch::Checkpoint& checkpoint, const std::vector<HostFill>& fills) {
  const auto first = std::find_if(fills.begin(), fills.end(), [](const auto& f) { return f.file_offset >= 0; });
  if (first == fills.end()) return;
  open_checked(checkpoint, first->file_offset, first->src);
}

FileForReads::FileForReads(const torch::Checkpoint& checkpoint, const std::vector<UploadJob>& jobs) {
  const auto first = std::find_if(jobs.begin(), jobs.end(), [](const auto& j) { return j.file_offset >= 0; });
  if (first == jobs.end()) return;
  open_checked(checkpoint, first->file_offset, first->source);
}

void FileForReads::open_checked(const torch::Checkpoint& checkpoint, std::int64_t offset, const Bytes& src) {
  if (checkpoint.archive() == nullptr) return;
  fd_ = ::open(checkpoint.path().c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  const std::uint64_t mapped = checkpoint.archive()->file_bytes().size();
  if (fd_ >= 0 && ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) < mapped) {
    // Shorter than when it was mapped: copying from the mapping would raise SIGBUS.
    close();
    throw Error(ErrorCode::kIoRead, Stage::kRemap,
                "the checkpoint file is now " + std::to_string(st.st_size) + " bytes, " + std::to_string(mapped) +
                    " when it was opened: it was truncated or replaced after it was opened; open it again",
                std::nullopt, checkpoint.path());
  }
  if (fd_ < 0 || ::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<std::uint64_t>(st.st_size) != mapped || !same_bytes(offset, src)) {
    close();
  }
}

// The first bytes of one storage read through the descriptor equal the mapping's.
bool FileForReads::same_bytes(std::int64_t offset, const Bytes& src) const {
  std::uint8_t probe[4096];
  const std::size_t n = std::min<std::size_t>(sizeof probe, src.size());
  return ::pread(fd_, probe, n, static_cast<off_t>(offset)) == static_cast<ssize_t>(n) &&
         std::memcmp(probe, src.data(), n) == 0;
}

void FileForReads::close() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace maploc::remap::detail
