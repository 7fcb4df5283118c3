// atomic_file.cpp - write to a temporary file beside the target, fsync, rename (POSIX).
#include "support/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "maploc/error.h"

namespace maploc {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

bool is_space_error(int err) { return err == ENOSPC || err == EFBIG || err == EDQUOT; }

}  // namespace

AtomicFile AtomicFile::create(const std::filesystem::path& target) {
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  const std::string base = target.filename().string();
  if (base.empty() || base == "." || base == "..") {
    throw Error(ErrorCode::kIoOpen, Stage::kIo, "the output path names no file", std::nullopt, target.string());
  }
  std::random_device rd;
  std::mt19937_64 gen(rd());
  static constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  int last_err = 0;
  // O_EXCL with a random name (mkstemp would create 0600 and ignore the umask).
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string suffix(6, 'x');
    for (char& c : suffix) c = kAlnum[gen() % (sizeof kAlnum - 1)];
    std::filesystem::path temp = dir / ("." + base + ".maploc-" + suffix);
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) return AtomicFile(target, std::move(temp), fd);
    last_err = errno;
    if (last_err != EEXIST) break;
  }
  std::string why = errno_text(last_err);
  if (last_err == ENOENT) why = "the directory does not exist";
  throw Error(ErrorCode::kIoOpen, Stage::kIo, "cannot create the output in '" + dir.string() + "': " + why,
              std::nullopt, target.string());
}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : target_(std::move(other.target_)), temp_(std::move(other.temp_)), fd_(other.fd_), size_(other.size_) {
  other.fd_ = -1;
  other.temp_.clear();
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_.empty()) ::unlink(temp_.c_str());
  temp_.clear();
}

void AtomicFile::fail(const std::string& what, int err) {
  discard();
  if (is_space_error(err)) {
    throw Error(ErrorCode::kIoNoSpace, Stage::kIo,
                what + " after " + std::to_string(size_) + " bytes: " + errno_text(err) +
                    " (the disk or the file-size limit is full); nothing was written",
                std::nullopt, target_.string());
  }
  throw Error(ErrorCode::kIoWrite, Stage::kIo, what + ": " + errno_text(err) + "; nothing was written", std::nullopt,
              target_.string());
}

void AtomicFile::write(std::span<const std::uint8_t> bytes) {
  if (fd_ < 0) {
    throw Error(ErrorCode::kIoWrite, Stage::kIo, "write to an output that failed or was committed", std::nullopt,
                target_.string());
  }
  const std::uint8_t* p = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("writing failed", errno);
    }
    if (n == 0) fail("writing failed", ENOSPC);
    p += n;
    left -= static_cast<std::size_t>(n);
    size_ += static_cast<std::uint64_t>(n);
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) {
    throw Error(ErrorCode::kIoWrite, Stage::kIo, "commit of an output that failed or was committed", std::nullopt,
                target_.string());
  }
  if (::fsync(fd_) != 0) fail("flushing failed", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("closing failed", errno);
  if (::rename(temp_.c_str(), target_.c_str()) != 0) fail("renaming into place failed", errno);
  temp_.clear();
}

}  // namespace maploc
