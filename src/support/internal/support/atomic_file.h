// atomic_file.h - a file written under a temporary name beside its target, renamed into place on commit.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

namespace maploc {

/// Output that appears complete or not at all: bytes go to a new temporary
/// file in the target's directory (`.NAME.maploc-XXXXXX`), and commit()
/// flushes it and renames it over the target. Destroying an AtomicFile that
/// was not committed removes the temporary file, so a failed write never
/// leaves a partial target nor touches an existing one.
///
/// The target may be the file being read (a mapping of the old file stays
/// valid after the rename). Not thread-safe. Move-only.
class AtomicFile {
 public:
  /// Creates the temporary file (mode 0666 minus the umask, like open(2)).
  /// Raises kIoOpen naming the directory when it does not exist or is not
  /// writable.
  static AtomicFile create(const std::filesystem::path& target);

  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&&) = delete;
  ~AtomicFile();

  /// Appends bytes. Raises kIoNoSpace when the disk or RLIMIT_FSIZE is full
  /// (SIGXFSZ must be ignored for the latter, or the process is killed),
  /// kIoWrite for other failures. After an error the file is unusable.
  void write(std::span<const std::uint8_t> bytes);
  /// Bytes written so far.
  std::uint64_t size() const noexcept { return size_; }
  /// fsync, close and rename onto the target. Raises kIoWrite/kIoNoSpace.
  void commit();

  /// The temporary file's path (for tests).
  const std::filesystem::path& temp_path() const noexcept { return temp_; }

 private:
  AtomicFile(std::filesystem::path target, std::filesystem::path temp, int fd)
      : target_(std::move(target)), temp_(std::move(temp)), fd_(fd) {}
  [[noreturn]] void fail(const std::string& what, int err);
  void discard() noexcept;

  std::filesystem::path target_;
  std::filesystem::path temp_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

}  // namespace maploc
