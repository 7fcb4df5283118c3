// host_memory.cpp - host placements and reading placed storages back.
#include "remap/host_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <system_error>
#include <thread>
#include <vector>

#include "maploc/error.h"
#include "remap/cuda_backend.h"
#include "support/byteswap.h"

namespace maploc::remap::detail {

namespace {

// Buffers from 2 MiB up are their own anonymous mappings, asked to use
// transparent huge pages: 512 times fewer first-touch faults while filling.
constexpr std::uint64_t kMappedAllocation = std::uint64_t{2} << 20;
// Ranges at least this long are read with pread; shorter ones are copied
// from the mapping (one syscall each would cost more than the copy).
constexpr std::uint64_t kPreadMin = std::uint64_t{256} << 10;
// One piece of work: one pread or one copy.
constexpr std::uint64_t kPiece = std::uint64_t{8} << 20;
// Below this much in all, filling stays on the calling thread.
constexpr std::uint64_t kParallelMin = std::uint64_t{16} << 20;

[[noreturn]] void out_of_memory(std::uint64_t nbytes, const std::string& who) {
  throw Error(ErrorCode::kRemapOutOfMemory, Stage::kRemap,
              "cannot allocate " + std::to_string(nbytes) + " host bytes for " + who);
}

struct Piece {
  std::size_t fill;
  std::uint64_t off, n;
};

void fill_piece(const HostFill& f, const Piece& p, int fd) {
  std::uint8_t* dst = f.dst + p.off;
  std::uint64_t done = 0;
  if (fd >= 0 && f.file_offset >= 0 && f.swap_unit <= 1 && f.src.size() >= kPreadMin) {
    while (done < p.n) {
      const ssize_t got = ::pread(fd, dst + done, static_cast<std::size_t>(p.n - done),
                                  static_cast<off_t>(static_cast<std::uint64_t>(f.file_offset) + p.off + done));
      if (got <= 0) {
        if (got < 0 && errno == EINTR) continue;
        break;  // the rest comes from the mapping
      }
      done += static_cast<std::uint64_t>(got);
    }
  }
  if (done < p.n) {
    maploc::detail::copy_swapped(dst + done, f.src.data() + p.off + done, static_cast<std::size_t>(p.n - done),
                                 f.swap_unit);
  }
}

}  // namespace

PlacedStorage host_allocate(std::uint64_t nbytes, bool pinned, const std::string& who) {
  PlacedStorage out;
  out.device = Device::cpu();
  out.nbytes = nbytes;
  out.writable = true;
  if (nbytes == 0) return out;
  if (nbytes > std::numeric_limits<std::size_t>::max() - 64) out_of_memory(nbytes, who);
  const auto n = static_cast<std::size_t>(nbytes);
  void* p = nullptr;
  if (pinned) {
    out.owner = cuda_allocate_pinned(n, &p, who);
  } else if (nbytes >= kMappedAllocation) {
    p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) out_of_memory(nbytes, who);
    ::madvise(p, n, MADV_HUGEPAGE);  // advice only: ignored where THP is off
    out.owner = std::shared_ptr<void>(p, [n](void* q) { ::munmap(q, n); });
  } else {
    p = std::aligned_alloc(64, (n + 63) / 64 * 64);
    if (p == nullptr) out_of_memory(nbytes, who);
    out.owner = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  }
  out.data = p;
  return out;
}

PlacedStorage host_copy(const Bytes& raw, std::size_t swap_unit, bool pinned, const std::string& who) {
  PlacedStorage out = host_allocate(raw.size(), pinned, who);
  if (!raw.empty()) {
    maploc::detail::copy_swapped(static_cast<std::uint8_t*>(out.data), raw.data(), raw.size(), swap_unit);
  }
  return out;
}

void fill_host(std::span<const HostFill> fills, int fd, unsigned threads, maploc::detail::ProgressMeter* meter) {
  std::vector<Piece> pieces;
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < fills.size(); ++i) {
    const std::uint64_t n = fills[i].src.size();
    const std::uint64_t unit = std::max<std::uint64_t>(1, fills[i].swap_unit);
    const std::uint64_t piece = kPiece / unit * unit;  // never split an element
    for (std::uint64_t off = 0; off < n; off += piece) pieces.push_back({i, off, std::min(piece, n - off)});
    total += n;
  }
  // Largest pieces first, so that no thread is left with a big one at the end.
  std::stable_sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.n > b.n; });
  if (threads <= 1 || total < kParallelMin || pieces.size() < 2) {
    for (const Piece& p : pieces) {
      fill_piece(fills[p.fill], p, fd);
      if (meter != nullptr) meter->add(p.n);
    }
    return;
  }
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t k; (k = next.fetch_add(1, std::memory_order_relaxed)) < pieces.size();) {
      fill_piece(fills[pieces[k].fill], pieces[k], fd);
      if (meter != nullptr) meter->add(pieces[k].n);
    }
  };
  std::vector<std::jthread> pool;
  const auto extra = std::min<std::size_t>(threads, pieces.size()) - 1;
  for (std::size_t t = 0; t < extra; ++t) {
    try {
      pool.emplace_back(worker);
    } catch (const std::system_error&) {
      break;  // fewer threads than asked: the ones running finish the work
    }
  }
  worker();
}

PlacedStorage host_view(const Bytes& raw) {
  PlacedStorage out;
  out.device = Device::cpu();
  out.nbytes = raw.size();
  out.data = const_cast<std::uint8_t*>(raw.data());
  out.writable = false;
  out.owner = std::make_shared<Bytes>(raw);
  return out;
}

PlacedStorage host_cow_view(const Bytes& cow, std::uint64_t file_offset, std::uint64_t nbytes) {
  PlacedStorage out = host_view(cow.slice(static_cast<std::size_t>(file_offset), static_cast<std::size_t>(nbytes)));
  out.writable = true;  // private pages: writes never reach the file
  return out;
}

Bytes host_bytes_of(const PlacedStorage& placed, const std::string& who) {
  switch (placed.device.kind) {
    case Device::Kind::kCpu:
      return Bytes(placed.owner, static_cast<const std::uint8_t*>(placed.data), placed.nbytes);
    case Device::Kind::kCuda: {
      std::vector<std::uint8_t> host(placed.nbytes);
      cuda_download(placed.device.index, placed.data, host.data(), placed.nbytes, who);
      return Bytes::owned(std::move(host));
    }
    case Device::Kind::kMeta: break;
  }
  throw Error(ErrorCode::kInvalidArgument, Stage::kRemap,
              who + " was loaded on meta: it has a shape but no bytes (load it with another --map-location)");
}

}  // namespace maploc::remap::detail
