// host_memory.h - placing a storage's bytes in host memory: views, aligned copies, pinned copies,
// populated views (internal).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "maploc/bytes.h"
#include "maploc/remap/loaded.h"
#include "device_backend.h"
#include "support/progress_meter.h"

namespace maploc::remap::detail {

/// A 64-byte-aligned private buffer of `nbytes` bytes, not yet filled;
/// pinned memory of `pinned` when that is not null. Large buffers are
/// page-aligned anonymous mappings that may use transparent huge pages.
/// Raises kRemapOutOfMemory.
PlacedStorage host_allocate(std::uint64_t nbytes, const std::shared_ptr<DeviceBackend>& pinned,
                            const std::string& who);

/// One fresh mapping (2 MiB-aligned, in transparent huge pages where the
/// kernel has them) that the private copies of one load share: a mapping per
/// storage holds whole huge pages only where it happens to be aligned, and a
/// ResNet's 1-10 MB storages then take a fault per 4 KiB page. Each copy is a
/// 64-byte-aligned slice whose owner keeps the whole mapping alive.
struct HostArena {
  std::shared_ptr<void> owner;
  std::uint8_t* next = nullptr;
  std::uint8_t* end = nullptr;
  bool pinned = false;  ///< page-locked (pinned_arena)
};

/// An arena for `bytes` in all (slices included); raises kRemapOutOfMemory.
HostArena host_arena(std::uint64_t bytes, const std::string& who);

/// An arena of `bytes` of page-locked memory from `backend`, in one allocation; raises as
/// pinned_allocate().
HostArena pinned_arena(const std::shared_ptr<DeviceBackend>& backend, std::uint64_t bytes, const std::string& who);

/// A writable CPU storage of `nbytes` cut from `arena`, or from host_allocate()
/// when the arena has no room left.
PlacedStorage host_allocate(HostArena& arena, std::uint64_t nbytes, const std::string& who);

/// Bytes a storage of `nbytes` takes in a HostArena.
constexpr std::uint64_t host_arena_slice(std::uint64_t nbytes) { return (nbytes + 63) / 64 * 64; }

/// A 64-byte-aligned private buffer holding `raw` with `swap_unit` elements
/// byte-swapped (1 = plain copy); pinned memory of `pinned` when not null.
PlacedStorage host_copy(const Bytes& raw, std::size_t swap_unit, const std::shared_ptr<DeviceBackend>& pinned,
                        const std::string& who);

/// One destination of fill_host(): size() bytes to `dst`.
struct HostFill {
  std::uint8_t* dst = nullptr;
  Bytes src;                  ///< the bytes as on disk (a view of the mapping, or inflated)
  std::size_t swap_unit = 1;  ///< element size to byte-swap, 1 for none
  /// Offset of src's first byte in the file behind `fd`, or -1 when src is
  /// not a plain range of the file (inflated records): then it is copied.
  std::int64_t file_offset = -1;
  /// Instead of `src`: produces bytes [offset, offset + n) (of `read_size` in all) straight into
  /// the destination (a storage streamed from a URL, remote_reads.h); `swap_unit` still applies.
  std::function<void(std::uint64_t offset, std::uint64_t n, std::uint8_t* out)> read{};
  std::uint64_t read_size = 0;

  std::uint64_t size() const { return read ? read_size : src.size(); }
};

/// Fills every destination, in parallel on up to `threads` threads when
/// there is enough to do: ranges of at least 256 KiB that lie plainly in
/// the file are read with pread(fd) in 8 MiB pieces straight into their
/// destination (no page faults on the mapping, loading-performance-and-security.md
/// A.10); the rest are copied (and swapped) from `src`. A failed pread falls
/// back to copying from `src`. `fd` < 0: copies only. kIoRead, not SIGBUS, when
/// the file behind `fd` is shorter than the ranges (truncated after mapping).
/// A fill's `read` failing stops the rest and its error is raised.
void fill_host(std::span<const HostFill> fills, int fd, unsigned threads,
               maploc::detail::ProgressMeter* meter = nullptr);

/// A read-only zero-copy view of `raw`, kept alive by the view.
PlacedStorage host_view(const Bytes& raw);

/// The view of `raw`'s bytes inside `cow`, a copy-on-write mapping of the same file.
PlacedStorage host_cow_view(const Bytes& cow, std::uint64_t file_offset, std::uint64_t nbytes);

/// A page-aligned address range [begin, end).
struct PageRange {
  std::uintptr_t begin = 0, end = 0;
};

/// The ranges populate_host() hands to madvise, one call each: the CPU
/// storages' bytes rounded out to pages, sorted, merged where they touch (two
/// storages less than a page apart touch), cut into pieces of at most 64 MiB.
std::vector<PageRange> populate_pieces(std::span<const PlacedStorage> storages);

/// Makes every page of every CPU storage resident and mapped before anyone
/// reads it: madvise(MADV_POPULATE_READ), or a read of one byte per 4 KiB page
/// where the kernel (before 5.14) rejects that advice. The storages' ranges are
/// page-rounded, sorted and merged where they touch (so thousands of adjacent
/// small storages cost one call), then populated in pieces of about 64 MiB on
/// up to `threads` threads (under 16 MiB in all: the calling thread only).
/// Raises kRemapDevice naming the storage (`describe(i)` for storage i) whose
/// pages cannot be read (file truncated under the mapping, I/O error),
/// kRemapOutOfMemory when the kernel has no memory for the page tables.
void populate_host(std::span<const PlacedStorage> storages, unsigned threads,
                   const std::function<std::string(std::size_t)>& describe);

/// The bytes of a placed storage as host Bytes: a view for CPU storages, a
/// copy downloaded through `backend` for CUDA ones. Raises kInvalidArgument
/// for meta storages.
Bytes host_bytes_of(const PlacedStorage& placed, const std::string& who, DeviceBackend* backend,
                    const CudaOptions& options);

}  // namespace maploc::remap::detail
