// host_memory.h - placing a storage's bytes in host memory: views, aligned copies, pinned copies (internal).
#pragma once

#include <cstdint>
#include <string>

#include "maploc/bytes.h"
#include "maploc/remap/loaded.h"

namespace maploc::remap::detail {

/// A 64-byte-aligned private buffer holding `raw` with `swap_unit` elements
/// byte-swapped (1 = plain copy); pinned memory when `pinned`.
PlacedStorage host_copy(const Bytes& raw, std::size_t swap_unit, bool pinned, const std::string& who);

/// A read-only zero-copy view of `raw`, kept alive by the view.
PlacedStorage host_view(const Bytes& raw);

/// The view of `raw`'s bytes inside `cow`, a copy-on-write mapping of the same file.
PlacedStorage host_cow_view(const Bytes& cow, std::uint64_t file_offset, std::uint64_t nbytes);

/// The bytes of a placed storage as host Bytes: a view for CPU storages, a
/// downloaded copy for CUDA ones. Raises kInvalidArgument for meta storages.
Bytes host_bytes_of(const PlacedStorage& placed, const std::string& who);

}  // namespace maploc::remap::detail
