// mapped_file.cpp - read-only mmap of a whole file, with a read() fallback.
#include "maploc/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "maploc/error.h"

namespace maploc {
namespace {

// Closes the descriptor on every path out of open().
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Owns a mapping; shared by every Bytes view taken from it.
struct Mapping {
  void* addr = nullptr;
  std::size_t size = 0;
  ~Mapping() {
    if (addr != nullptr) ::munmap(addr, size);
  }
};

[[noreturn]] void fail_open(const std::string& path, const char* what, int err) {
  throw Error(ErrorCode::kIoOpen, Stage::kIo,
              std::string(what) + ": " + std::strerror(err) + " (check the path and permissions)",
              std::nullopt, path);
}

// Reads the whole descriptor when it cannot be mapped (pipes, special files).
std::vector<std::uint8_t> read_all(int fd, const std::string& path) {
  std::vector<std::uint8_t> out;
  std::uint8_t chunk[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n == 0) return out;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(ErrorCode::kIoRead, Stage::kIo, std::string("read failed: ") + std::strerror(errno),
                  out.size(), path);
    }
    out.insert(out.end(), chunk, chunk + n);
  }
}

// Maps a whole regular file MAP_PRIVATE with `prot`; false when it cannot be mapped.
bool try_map(int fd, const struct stat& st, int prot, MappedFile& out) {
  if (!S_ISREG(st.st_mode) || st.st_size <= 0) return false;
  auto size = static_cast<std::size_t>(st.st_size);
  void* addr = ::mmap(nullptr, size, prot, MAP_PRIVATE, fd, 0);
  if (addr == MAP_FAILED) return false;
  auto mapping = std::make_shared<Mapping>();
  mapping->addr = addr;
  mapping->size = size;
  out.bytes = Bytes(std::move(mapping), static_cast<const std::uint8_t*>(addr), size);
  return true;
}

// Opens path read-only and stats it; the caller maps or reads it.
Fd open_checked(const std::string& path, struct stat& st) {
  Fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) fail_open(path, "cannot open file", errno);
  if (::fstat(fd.fd, &st) != 0) fail_open(path, "cannot stat file", errno);
  if (S_ISDIR(st.st_mode)) fail_open(path, "is a directory", EISDIR);
  return fd;
}

}  // namespace

MappedFile MappedFile::open(const std::filesystem::path& path) {
  MappedFile out;
  out.path = path.string();
  struct stat st {};
  Fd fd = open_checked(out.path, st);
  if (try_map(fd.fd, st, PROT_READ, out)) {
    out.residency = Residency::kMapped;
    return out;
  }
  out.bytes = Bytes::owned(read_all(fd.fd, out.path));
  out.residency = Residency::kRead;
  return out;
}

MappedFile MappedFile::open_copy_on_write(const std::filesystem::path& path) {
  MappedFile out;
  out.path = path.string();
  struct stat st {};
  Fd fd = open_checked(out.path, st);
  if (!try_map(fd.fd, st, PROT_READ | PROT_WRITE, out)) {
    fail_open(out.path, "cannot map the file copy-on-write", errno == 0 ? EINVAL : errno);
  }
  out.residency = Residency::kCopyOnWrite;
  return out;
}

Bytes MappedFile::view(std::uint64_t offset, std::uint64_t length) const {
  if (offset > bytes.size() || length > bytes.size() - offset) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kIo,
                "bytes [" + std::to_string(offset) + ", +" + std::to_string(length) + ") lie outside the file (" +
                    std::to_string(bytes.size()) + " bytes)",
                offset, path);
  }
  ensure(offset, length);  // a URL source fetches what it never did (RangeSource: no silent zeros)
  return bytes.slice(static_cast<std::size_t>(offset), static_cast<std::size_t>(length));
}

MappedFile MappedFile::from_bytes(Bytes bytes, std::string name) {
  MappedFile out;
  out.path = std::move(name);
  out.bytes = std::move(bytes);
  out.residency = Residency::kBuffer;
  return out;
}

}  // namespace maploc
