// part_reads.cpp - readers of the parts one load copies: URL streams, preads of file ranges, storage bytes in memory.
#include "part_reads.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "maploc/error.h"

namespace maploc::remap::detail {
namespace {

void pread_all(int fd, std::uint8_t* dst, std::uint64_t len, std::uint64_t off, const std::string& path) {
  while (len > 0) {
    const ssize_t n = ::pread(fd, dst, static_cast<std::size_t>(std::min<std::uint64_t>(len, 1u << 30)),
                              static_cast<off_t>(off));
    if (n <= 0) throw Error(ErrorCode::kIoRead, Stage::kIo, "short read of a storage's bytes", off, path);
    dst += n;
    off += static_cast<std::uint64_t>(n);
    len -= static_cast<std::uint64_t>(n);
  }
}

}  // namespace

PartReads::PartReads(const torch::Checkpoint& checkpoint, const RemoteReads& streams)
    : checkpoint_(checkpoint), streams_(streams) {}

PartReads::~PartReads() {
  for (const auto& [path, fd] : fds_) ::close(fd);
}

PartReads::Origin PartReads::origin(std::size_t i) {
  if (origins_.empty()) {  // made on first use: a whole load of views asks nothing here
    const std::size_t count = checkpoint_.storages().size();
    origins_.assign(count, Origin::kUnknown);
    ranges_.resize(count);
    held_.resize(count);
  }
  Origin& o = origins_[i];
  if (o != Origin::kUnknown) return o;
  if (i < streams_.readers.size() && streams_.readers[i]) return o = Origin::kStream;
  ranges_[i] = checkpoint_.storage_file_range(i);
  return o = ranges_[i] ? Origin::kFile : Origin::kMemory;
}

// Asked of every storage a load copies: the streams alone answer it (no file range is made).
bool PartReads::streamed(std::size_t storage) {
  return storage < streams_.readers.size() && static_cast<bool>(streams_.readers[storage]);
}

bool PartReads::from_memory(std::size_t storage) { return origin(storage) == Origin::kMemory; }

int PartReads::fd(const std::string& path) {
  for (const auto& [p, fd] : fds_) {
    if (p == path) return fd;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(ErrorCode::kIoOpen, Stage::kIo, "cannot open to read storages from", std::nullopt, path);
  fds_.emplace_back(path, fd);
  return fd;
}

StorageReader PartReads::reader(const Part& part) {
  const std::size_t i = part.parent;
  StorageReader parent;
  switch (origin(i)) {
    case Origin::kStream:
      parent = streams_.readers[i];
      break;
    case Origin::kFile:
      parent = [fd = fd(ranges_[i]->path), at = ranges_[i]->offset, path = ranges_[i]->path](
                   std::uint64_t off, std::uint64_t n, std::uint8_t* out) { pread_all(fd, out, n, at + off, path); };
      break;
    default:
      if (held_[i].empty()) held_[i] = checkpoint_.storage_bytes(i);
      parent = [raw = held_[i]](std::uint64_t off, std::uint64_t n, std::uint8_t* out) {
        std::memcpy(out, raw.data() + off, static_cast<std::size_t>(n));
      };
      break;
  }
  if (part.whole) return parent;
  return [&part, parent = std::move(parent)](std::uint64_t off, std::uint64_t n, std::uint8_t* out) {
    gather(part, off, n, out, parent);
  };
}

}  // namespace maploc::remap::detail
