// host_memory.cpp - host placements, populating views, and reading placed storages back.
#include "host_memory.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <exception>
#include <limits>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include "maploc/error.h"
#include "upload.h"
#include "support/byteswap.h"
#include "support/huge_chunks.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14; older headers lack it
#endif

namespace maploc::remap::detail {

namespace {

// Ranges at least this long are read with pread; shorter ones are copied
// from the mapping (one syscall each would cost more than the copy).
constexpr std::uint64_t kPreadMin = std::uint64_t{256} << 10;
// One piece of work: one pread or one copy.
constexpr std::uint64_t kPiece = std::uint64_t{8} << 20;
// Below this much in all, filling (or populating) stays on the calling thread.
constexpr std::uint64_t kParallelMin = std::uint64_t{16} << 20;
// One piece of populating work: one madvise call.
constexpr std::uint64_t kPopulatePiece = std::uint64_t{64} << 20;
// Where MADV_POPULATE_READ is refused: one byte read per this many bytes.
constexpr std::uintptr_t kTouchStride = 4096;

[[noreturn]] void out_of_memory(std::uint64_t nbytes, const std::string& who) {
  throw Error(ErrorCode::kRemapOutOfMemory, Stage::kRemap,
              "cannot allocate " + std::to_string(nbytes) + " host bytes for " + who);
}

struct Piece {
  std::size_t fill;
  std::uint64_t off, n;
};

// Returns false when pread met the end of the file before the range's end:
// the file shrank after it was mapped, and the mapping's missing pages would
// raise SIGBUS, so the caller raises an error instead of copying from them.
bool fill_piece(const HostFill& f, const Piece& p, int fd) {
  std::uint8_t* dst = f.dst + p.off;
  if (f.read) {
    f.read(p.off, p.n, dst);
    if (f.swap_unit > 1) maploc::detail::copy_swapped(dst, dst, static_cast<std::size_t>(p.n), f.swap_unit);
    return true;
  }
  std::uint64_t done = 0;
  if (fd >= 0 && f.file_offset >= 0 && f.swap_unit <= 1 && f.src.size() >= kPreadMin) {
    while (done < p.n) {
      const ssize_t got = ::pread(fd, dst + done, static_cast<std::size_t>(p.n - done),
                                  static_cast<off_t>(static_cast<std::uint64_t>(f.file_offset) + p.off + done));
      if (got == 0) return false;  // end of file inside the range: truncated while loading
      if (got < 0) {
        if (errno == EINTR) continue;
        break;  // the rest comes from the mapping
      }
      done += static_cast<std::uint64_t>(got);
    }
  }
  if (done < p.n) {
    maploc::detail::copy_swapped(dst + done, f.src.data() + p.off + done, static_cast<std::size_t>(p.n - done),
                                 f.swap_unit);
  }
  return true;
}

[[noreturn]] void file_shrank(std::uint64_t size, std::uint64_t needed) {
  throw Error(ErrorCode::kIoRead, Stage::kRemap,
              "the checkpoint file is now " + std::to_string(size) + " bytes but its storages reach byte " +
                  std::to_string(needed) + ": it was truncated or replaced after it was opened; open it again");
}

// Runs piece(k) for every k < count, in order on the calling thread when the
// work is small (under kParallelMin bytes in all, one piece or one thread),
// else taken in order by the calling thread and up to threads - 1 more. A
// thread that cannot be created is no error: the ones running share its work.
template <class Work>
void for_each_piece(std::size_t count, std::uint64_t total_bytes, unsigned threads, Work piece) {
  if (threads <= 1 || total_bytes < kParallelMin || count < 2) {
    for (std::size_t k = 0; k < count; ++k) piece(k);
    return;
  }
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t k; (k = next.fetch_add(1, std::memory_order_relaxed)) < count;) piece(k);
  };
  std::vector<std::jthread> pool;
  for (std::size_t t = 0; t + 1 < std::min<std::size_t>(threads, count); ++t) {
    try {
      pool.emplace_back(worker);
    } catch (const std::system_error&) {
      break;
    }
  }
  worker();
}

std::uintptr_t page_size() {
  static const auto size = static_cast<std::uintptr_t>(std::max(4096L, ::sysconf(_SC_PAGESIZE)));
  return size;
}

// A CPU storage's bytes rounded out to whole pages; empty for other devices and no bytes.
PageRange pages_of(const PlacedStorage& s) {
  if (s.device.kind != Device::Kind::kCpu || s.data == nullptr || s.nbytes == 0) return {};
  const std::uintptr_t page = page_size();
  const auto begin = reinterpret_cast<std::uintptr_t>(s.data);
  return {begin / page * page, (begin + s.nbytes + page - 1) / page * page};
}

// Every CPU storage's pages, sorted by address, spans that touch or overlap
// made one. Ranges less than a page apart touch once rounded out, and a
// rounded span never leaves its storage's mapping (mappings are whole pages).
std::vector<PageRange> merged_pages(std::span<const PlacedStorage> storages) {
  std::vector<PageRange> spans;
  spans.reserve(storages.size());
  for (const auto& s : storages) {
    if (const PageRange p = pages_of(s); p.end > p.begin) spans.push_back(p);
  }
  std::sort(spans.begin(), spans.end(), [](const PageRange& a, const PageRange& b) { return a.begin < b.begin; });
  std::vector<PageRange> merged;
  for (const PageRange& p : spans) {
    if (!merged.empty() && p.begin <= merged.back().end) {
      merged.back().end = std::max(merged.back().end, p.end);
    } else {
      merged.push_back(p);
    }
  }
  return merged;
}

// Reads one byte per 4 KiB page, which faults each page in as MADV_POPULATE_READ
// would; but a page the file no longer backs raises SIGBUS here, not an error.
void touch_pages(PageRange s) {
  const auto* p = reinterpret_cast<const volatile std::uint8_t*>(s.begin);
  for (std::uintptr_t off = 0; off < s.end - s.begin; off += kTouchStride) (void)p[off];
}

// Makes one span resident and mapped: 0, or the errno of the failure.
// EINVAL is a kernel before 5.14 (or a mapping the advice does not apply to): touch instead.
int populate_pages(PageRange s) {
  for (;;) {
    if (::madvise(reinterpret_cast<void*>(s.begin), s.end - s.begin, MADV_POPULATE_READ) == 0) return 0;
    if (errno == EINTR) continue;
    if (errno != EINVAL) return errno;
    touch_pages(s);
    return 0;
  }
}

std::string why_unreadable(int err) {
  const std::string what = std::system_category().message(err);
  switch (err) {
    case EFAULT: return what + ": the file is shorter than when it was opened (truncated while loading?)";
    case EIO: return what + ": the file's storage failed to read it";
    default: return what;
  }
}

// Names the storage whose pages failed: the first one of the failed span that
// fails again alone (the others may share the span's pages), else the first in it.
[[noreturn]] void unreadable_pages(std::span<const PlacedStorage> storages, PageRange failed, int err,
                                   const std::function<std::string(std::size_t)>& describe) {
  std::optional<std::size_t> first;
  for (std::size_t i = 0; i < storages.size(); ++i) {
    const PageRange p = pages_of(storages[i]);
    if (p.end <= failed.begin || p.begin >= failed.end) continue;
    if (!first) first = i;
    if (const int again = populate_pages(p); again != 0) {
      first = i;
      err = again;
      break;
    }
  }
  const std::string who = first ? describe(*first) : "a storage";
  throw Error(err == ENOMEM ? ErrorCode::kRemapOutOfMemory : ErrorCode::kRemapDevice, Stage::kRemap,
              "cannot make the pages of " + who + " resident: " + why_unreadable(err));
}

}  // namespace

PlacedStorage host_allocate(std::uint64_t nbytes, const std::shared_ptr<DeviceBackend>& pinned,
                            const std::string& who) {
  PlacedStorage out;
  out.device = Device::cpu();
  out.nbytes = nbytes;
  out.writable = true;
  if (nbytes == 0) return out;
  if (nbytes > std::numeric_limits<std::size_t>::max() - 64) out_of_memory(nbytes, who);
  const auto n = static_cast<std::size_t>(nbytes);
  void* p = nullptr;
  if (pinned) {
    out.owner = pinned_allocate(pinned, n, &p, who);
    out.pinned = true;
  } else if (n >= maploc::detail::kHugePage) {
    // Its own mapping in huge pages: 512 times fewer first-touch faults while filling.
    p = maploc::detail::map_huge(n);
    if (p == nullptr) out_of_memory(nbytes, who);
    out.owner = std::shared_ptr<void>(p, [n](void* q) { ::munmap(q, n); });
  } else {
    p = std::aligned_alloc(64, (n + 63) / 64 * 64);
    if (p == nullptr) out_of_memory(nbytes, who);
    out.owner = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  }
  out.data = p;
  return out;
}

HostArena host_arena(std::uint64_t bytes, const std::string& who) {
  HostArena arena;
  if (bytes == 0) return arena;
  constexpr std::uint64_t kAlign = maploc::detail::kHugePage;
  if (bytes > std::numeric_limits<std::size_t>::max() - 2 * kAlign) out_of_memory(bytes, who);
  const auto len = static_cast<std::size_t>(bytes + kAlign);  // room to start on a huge-page boundary
  void* p = maploc::detail::map_huge(len);
  if (p == nullptr) out_of_memory(bytes, who);
  arena.owner = std::shared_ptr<void>(p, [len](void* q) { ::munmap(q, len); });
  const auto at = (reinterpret_cast<std::uintptr_t>(p) + kAlign - 1) / kAlign * kAlign;
  arena.next = reinterpret_cast<std::uint8_t*>(at);
  arena.end = arena.next + bytes;
  return arena;
}

HostArena pinned_arena(const std::shared_ptr<DeviceBackend>& backend, std::uint64_t bytes, const std::string& who) {
  HostArena arena;
  if (bytes == 0) return arena;
  void* p = nullptr;
  arena.owner = pinned_allocate(backend, bytes, &p, who);
  arena.next = static_cast<std::uint8_t*>(p);
  arena.end = arena.next + bytes;
  arena.pinned = true;
  return arena;
}

PlacedStorage host_allocate(HostArena& arena, std::uint64_t nbytes, const std::string& who) {
  if (nbytes == 0 || host_arena_slice(nbytes) > static_cast<std::uint64_t>(arena.end - arena.next)) {
    PlacedStorage out = host_allocate(nbytes, nullptr, who);
    if (nbytes == 0) out.pinned = arena.pinned;
    return out;
  }
  PlacedStorage out;
  out.device = Device::cpu();
  out.nbytes = nbytes;
  out.writable = true;
  out.data = arena.next;
  out.pinned = arena.pinned;
  out.owner = std::shared_ptr<void>(arena.owner, arena.next);
  arena.next += host_arena_slice(nbytes);
  return out;
}

PlacedStorage host_copy(const Bytes& raw, std::size_t swap_unit, const std::shared_ptr<DeviceBackend>& pinned,
                        const std::string& who) {
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
    const std::uint64_t n = fills[i].size();
    const std::uint64_t unit = std::max<std::uint64_t>(1, fills[i].swap_unit);
    const std::uint64_t piece = kPiece / unit * unit;  // never split an element
    for (std::uint64_t off = 0; off < n; off += piece) pieces.push_back({i, off, std::min(piece, n - off)});
    total += n;
  }
  // A file truncated after it was mapped: the copies from the mapping would
  // fault with SIGBUS past its new end. Checked once here; a truncation during
  // the copies is caught by pread's end of file (ranges of 256 KiB and up) and
  // stays a SIGBUS for smaller ones (docs/security.md).
  std::uint64_t needed = 0;
  for (const HostFill& f : fills) {
    if (f.file_offset >= 0 && !f.read) {
      needed = std::max(needed, static_cast<std::uint64_t>(f.file_offset) + f.src.size());
    }
  }
  if (fd >= 0) {
    struct stat st {};
    if (needed > 0 && ::fstat(fd, &st) == 0 && static_cast<std::uint64_t>(st.st_size) < needed) {
      file_shrank(static_cast<std::uint64_t>(st.st_size), needed);
    }
  }
  // Largest pieces first, so that no thread is left with a big one at the end.
  std::stable_sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.n > b.n; });
  std::atomic<bool> shrank{false}, failed{false};
  std::exception_ptr error;  // the first read() that failed (a URL source)
  std::mutex error_mutex;
  for_each_piece(pieces.size(), total, threads, [&](std::size_t k) {
    if (shrank.load(std::memory_order_relaxed) || failed.load(std::memory_order_relaxed)) return;
    try {
      if (!fill_piece(fills[pieces[k].fill], pieces[k], fd)) shrank.store(true);
    } catch (...) {  // never out of a worker thread: raised below
      const std::lock_guard lock(error_mutex);
      if (!error) error = std::current_exception();
      failed.store(true);
      return;
    }
    if (meter != nullptr) meter->add(pieces[k].n);
  });
  if (error) std::rethrow_exception(error);
  if (shrank.load()) {
    struct stat st {};
    file_shrank(::fstat(fd, &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0, needed);
  }
}

std::vector<PageRange> populate_pieces(std::span<const PlacedStorage> storages) {
  std::vector<PageRange> pieces;
  for (const PageRange& m : merged_pages(storages)) {
    for (std::uintptr_t b = m.begin; b < m.end; b += kPopulatePiece) {
      pieces.push_back({b, std::min<std::uintptr_t>(b + kPopulatePiece, m.end)});
    }
  }
  return pieces;
}

void populate_host(std::span<const PlacedStorage> storages, unsigned threads,
                   const std::function<std::string(std::size_t)>& describe) {
  const std::vector<PageRange> pieces = populate_pieces(storages);
  std::uint64_t total = 0;
  for (const PageRange& p : pieces) total += p.end - p.begin;
  // Every piece runs even after a failure (a piece past the end of the file
  // fails at its first page), so that the lowest failing address, and so the
  // storage named, does not depend on the threads' timing.
  std::mutex mutex;
  PageRange failed;
  int failed_errno = 0;
  for_each_piece(pieces.size(), total, threads, [&](std::size_t k) {
    if (const int err = populate_pages(pieces[k]); err != 0) {
      const std::lock_guard lock(mutex);
      if (failed_errno == 0 || pieces[k].begin < failed.begin) {
        failed = pieces[k];
        failed_errno = err;
      }
    }
  });
  if (failed_errno != 0) unreadable_pages(storages, failed, failed_errno, describe);
}

PlacedStorage host_view(const Bytes& raw) {
  PlacedStorage out;
  out.device = Device::cpu();
  out.nbytes = raw.size();
  out.data = const_cast<std::uint8_t*>(raw.data());
  out.writable = false;
  out.owner = std::const_pointer_cast<void>(raw.owner());  // the mapping's owner: no allocation per view
  return out;
}

PlacedStorage host_cow_view(const Bytes& cow, std::uint64_t file_offset, std::uint64_t nbytes) {
  PlacedStorage out = host_view(cow.slice(static_cast<std::size_t>(file_offset), static_cast<std::size_t>(nbytes)));
  out.writable = true;  // private pages: writes never reach the file
  return out;
}

Bytes host_bytes_of(const PlacedStorage& placed, const std::string& who, DeviceBackend* backend,
                    const CudaOptions& options) {
  switch (placed.device.kind) {
    case Device::Kind::kCpu:
      return Bytes(placed.owner, static_cast<const std::uint8_t*>(placed.data), placed.nbytes);
    case Device::Kind::kCuda: {
      if (backend == nullptr) {
        throw Error(ErrorCode::kRemapCudaUnavailable, Stage::kRemap, who + " lives on " + placed.device.str() +
                                                                          " but no device runtime is available");
      }
      std::vector<std::uint8_t> host(placed.nbytes);
      device_download(*backend, placed.device.index, placed.data, host.data(), placed.nbytes, who, options);
      return Bytes::owned(std::move(host));
    }
    case Device::Kind::kMeta: break;
  }
  throw Error(ErrorCode::kInvalidArgument, Stage::kRemap,
              who + " was loaded on meta: it has a shape but no bytes (load it with another --map-location)");
}

}  // namespace maploc::remap::detail
